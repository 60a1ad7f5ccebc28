"""``--aaco-html PATH``: one self-contained HTML file (inline CSS and SVG, no script, no network).

Per item: the verdict and its message, a table of this run's figures against the baseline's,
four plots (the latency distribution as histogram and ECDF against the latest baseline run's
raw iterations; every iteration in time order, warmup included; the round means of this run
beside those of the baseline history), the telemetry over the measured phase, the bottleneck
diagnosis with its evidence, and the fingerprint. Then the machine's environment record.

Where the item recorded them, the operator profile, the GPU kernel figures and the cold start
over its history follow (:mod:`pytest_aaco.reports.breakdown`).

Plots are drawn with matplotlib (the ``[plots]`` extra: ``pip install pytest-aaco[plots]``), imported only
when a report is written, through ``matplotlib.figure.Figure`` (no pyplot, no
global backend state) and ``savefig(format="svg")``. Without matplotlib the page has every table
and, where each plot would be, a note saying how to get it (:func:`plot_placeholder`). Every text from
records, messages and the environment is HTML-escaped.

:func:`render_html` is shared with ``aaco report BUNDLE --html OUT``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes

from pytest_aaco.jsonio import JSONDict, atomic_write_text
from pytest_aaco.measure.commit import commit_text
from pytest_aaco.records import (
    DEVICE_TIME,
    BaselineRecord,
    DiagnosisRecord,
    Figures,
    HistoryRun,
    ItemRecord,
    Outcome,
    ResultRecord,
    RoundFigures,
    SessionSummary,
    TelemetryRecord,
    Verdict,
    several_gpus,
)
from pytest_aaco.reports import ReportContext
from pytest_aaco.reports.breakdown import cold_start_block, kernels_block, profile_block
from pytest_aaco.reports.markup import (
    BASELINE_COLOR,
    CURRENT_COLOR,
    PANEL_MARGINS_IN,
    WARMUP_COLOR,
    e,
    figure_svg,
    fmt,
    fraction_pct,
    is_num,
    new_figure,
    plot_or_note,
    table_rows,
)
from pytest_aaco.reports.wording import (
    change_text,
    fdr_sentence,
    measured_summary,
    row_labels,
    series_word,
    verdict_cell,
)
from pytest_aaco.verdict.percent import bound_text, kept_text, pct
from pytest_aaco.verdict.pooling import pooled_pairs

INSTALL_HINT = "pip install pytest-aaco[plots]"
#: from this many items on, the session says it is drawing the HTML report before it starts
PROGRESS_ITEMS = 20
#: telemetry fields plotted first, in this order (others follow until MAX_TELEMETRY_PANELS)
TELEMETRY_PREFERRED = (
    "process_cpu_percent", "system_cpu_percent", "cpu_freq_mhz", "rss_mb", "gpu_util_percent", "gfx_clock_mhz",
    "vram_used_mb", "power_w", "temp_junction_c", "temp_edge_c", "mem_clock_mhz",
)
#: cumulative counters: plotted as a rate per second
TELEMETRY_COUNTERS = ("ctx_switches_voluntary", "ctx_switches_involuntary", "page_faults_minor", "page_faults_major")
MAX_TELEMETRY_PANELS = 6
#: histogram range: these percentiles of all latencies shown (outliers are counted, not drawn)
CLIP_PERCENTILES = (0.5, 99.5)
OUTCOME_CLASS = {
    Outcome.REGRESSION: "bad", Outcome.ERROR: "bad", Outcome.FAILED: "bad", Outcome.IMPROVEMENT: "good",
    Outcome.NO_REGRESSION: "good", Outcome.PASSED: "good", Outcome.INCONCLUSIVE: "warn", Outcome.MISMATCH: "warn",
    Outcome.NO_BASELINE: "neutral", Outcome.SAVED: "info", Outcome.SKIPPED: "neutral",
}
#: environment sections in reading order (others follow)
ENVIRONMENT_ORDER = ("collected_at", "python", "platform", "cpu", "onnxruntime", "gpu", "clocks", "env", "env_redacted")

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
main{max-width:1280px;margin:0 auto;padding:16px 24px}
h1{font-size:1.5em;margin:.4em 0}h2{font-size:1.2em;margin:0 0 .3em}h3{font-size:1em;margin:1em 0 .3em}
section.item,section.block{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:14px 18px;margin:16px 0}
table{border-collapse:collapse;font-size:.88em;margin:.3em 0;display:block;overflow-x:auto;max-width:100%}
th,td{border-bottom:1px solid #e6e9ee;padding:3px 10px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;border-radius:10px;padding:1px 9px;font-size:.85em;font-weight:600;color:#fff}
.bad{background:#c62828}.good{background:#2e7d32}.warn{background:#ef8f00}.neutral{background:#78909c}
.info{background:#1565c0}
.message{white-space:pre-wrap;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em;
 background:#f6f7f9;border-left:4px solid #b0bec5;padding:6px 10px;margin:.5em 0}
.message.bad{border-left-color:#c62828;background:#fdecea;color:inherit}
.message.warn{border-left-color:#ef8f00;background:#fff6e5;color:inherit}
.grid{display:flex;flex-wrap:wrap;gap:18px}.grid>div{flex:1 1 380px;min-width:0}
.scroll{overflow-x:auto;max-width:100%}.scroll>table{margin:0}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,520px),1fr));gap:12px}
.plots.small{grid-template-columns:repeat(auto-fill,minmax(min(100%,340px),1fr))}
.plot{min-width:0}.plot svg{width:100%;height:auto;display:block}.muted{color:#607080;font-size:.88em}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.92em;word-break:break-all}
h2,.message{overflow-wrap:anywhere}td.verdict,td.num{white-space:nowrap}
@media (max-width:600px){main{padding:8px 10px}section.item,section.block{padding:10px 10px}}
details>summary{cursor:pointer;font-weight:600;margin:.4em 0}
"""


def _ref(verdict: Verdict | None) -> str | None:
    """The compared revision's name of a verdict gated side by side; None otherwise."""
    return verdict.side_by_side.ref if verdict is not None and verdict.side_by_side is not None else None


def _anchor(nodeid: str) -> str:
    return "item-" + re.sub(r"[^A-Za-z0-9_-]+", "-", nodeid).strip("-")


def _badge(outcome: Outcome) -> str:
    return f'<span class="badge {OUTCOME_CLASS.get(outcome, "neutral")}">{e(outcome)}</span>'


# ---------------------------------------------------------------- baselines


def _history(record: ItemRecord, baseline: BaselineRecord | None) -> list[HistoryRun]:
    """Earlier runs of the baseline; the run this session just saved is not one of them."""
    history = list(baseline.history) if baseline is not None else []
    if record.effective_outcome == Outcome.SAVED and history:
        history = history[:-1]
    return history


def _baseline_latencies(record: ItemRecord, baseline: BaselineRecord | None) -> list[float]:
    if baseline is None or record.effective_outcome == Outcome.SAVED:
        return []
    return [x for run in baseline.latest_latencies_ms for x in run]


# ---------------------------------------------------------------- plots (matplotlib)


def _matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


#: one plot panel (inches at 100 dpi): panels sit side by side on a wide page and stack on a narrow one
PANEL_SIZE = (5.6, 3.4)


def _other_side(record: ItemRecord, baseline: BaselineRecord | None) -> tuple[np.ndarray, str]:
    """The latencies (ms) the page compares this run with, and their name: the baseline side's
    blocks when the item was measured side by side (``--aaco-compare``), else the baseline's
    latest run's raw iterations."""
    side = record.baseline_side
    if side is not None and side.latencies_ms:
        return (np.array([x for block in side.latencies_ms for x in block], dtype=float),
                f"baseline side ({_ref(record.verdict)})")
    return np.array(_baseline_latencies(record, baseline), dtype=float), "baseline latest run"


def _this_side(record: ItemRecord) -> str:
    return "this side" if record.verdict is not None and record.verdict.side_by_side else "this run"


def _plain_log_axis(ax: Axes) -> None:
    """Tick labels on a log axis as plain numbers (``6``, ``20``), not ``6×10^0``."""
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda y, _pos: f"{y:.3g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)


#: above this many iterations the iterations plot's dots are one embedded bitmap, not one SVG
#: element each (drawing 10,000 markers as SVG took most of the 1.3 s CPU per item of the report:
#: the html_report_cost.py study, studies/RESULTS.md)
RASTER_POINTS = 2000
#: the ECDF is drawn through at most this many points (a step per iteration cost as much as the markers)
ECDF_POINTS = 512


def ecdf_points(values: np.ndarray, most: int = ECDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of *values* as step points ``(x, fraction <= x)``: every value when there
    are at most *most*, else *most* evenly spaced order statistics (first and last kept), which
    draws the same curve at report size."""
    xs = np.sort(values)
    fractions = np.arange(1, xs.size + 1) / xs.size
    if xs.size <= most:
        return xs, fractions
    keep = np.unique(np.linspace(0, xs.size - 1, most).round().astype(int))
    return xs[keep], fractions[keep]


def plot_latency(record: ItemRecord, baseline: BaselineRecord | None) -> list[tuple[str, Callable[[], str | None]]]:
    """The latency plots of one item as ``(what, draw)`` pairs, each *draw* returning one SVG
    panel: histogram and ECDF against the baseline's latencies (the baseline side's blocks side
    by side, else the latest baseline run's raw iterations), every iteration in time order
    (warmup grey, rounds alternating), and the round means against the history's (or the
    baseline side's blocks). Empty without measured latencies."""
    result = record.result_record or ResultRecord()
    rounds = result.latencies_ms
    current = np.array([x for r in rounds for x in r], dtype=float)
    if current.size == 0:
        return []
    past, past_label = _other_side(record, baseline)
    now_label = _this_side(record)
    both = np.concatenate([current, past]) if past.size else current
    lo, hi = np.percentile(both, CLIP_PERCENTILES)
    if not hi > lo:
        lo, hi = lo * 0.95 - 1e-6, hi * 1.05 + 1e-6

    def histogram() -> str:
        fig = new_figure(*PANEL_SIZE, PANEL_MARGINS_IN)
        ax = fig.subplots()
        found = np.histogram_bin_edges(both[(both >= lo) & (both <= hi)], bins="auto", range=(lo, hi))
        edges = [float(x) for x in (found if found.size <= 61 else np.linspace(lo, hi, 61))]
        ax.hist(current, bins=edges, density=True, alpha=0.55, color=CURRENT_COLOR,
                label=f"{now_label} (n={current.size})")
        if past.size:
            ax.hist(past, bins=edges, density=True, histtype="step", linewidth=1.6, color=BASELINE_COLOR,
                    label=f"{past_label} (n={past.size})")
        outside = int(np.sum((both < lo) | (both > hi)))
        ax.set_title("latency distribution" + (f" ({outside} outliers not shown)" if outside else ""), fontsize=10)
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("density")
        ax.legend(fontsize=8)
        return figure_svg(fig)

    def ecdf() -> str:
        fig = new_figure(*PANEL_SIZE, PANEL_MARGINS_IN)
        ax = fig.subplots()
        for values, color, label in ((current, CURRENT_COLOR, now_label), (past, BASELINE_COLOR, past_label)):
            if values.size:
                xs, ys = ecdf_points(values)
                ax.step(xs, ys, where="post", color=color, label=label)
        ax.set_xlim(lo, hi)
        ax.set_title("ECDF", fontsize=10)
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("fraction of iterations")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        return figure_svg(fig)

    def iterations() -> str:
        fig = new_figure(*PANEL_SIZE, PANEL_MARGINS_IN)
        ax = fig.subplots()
        warm = np.array(result.warmup_latencies_ms, dtype=float)
        start = 0
        if warm.size:
            ax.plot(np.arange(warm.size), warm, ".", markersize=2, color=WARMUP_COLOR, label="warmup",
                    rasterized=warm.size > RASTER_POINTS)
            start = warm.size
        for i, round_ms in enumerate(rounds):
            ax.plot(np.arange(start, start + len(round_ms)), round_ms, ".", markersize=2.5,
                    color=CURRENT_COLOR if i % 2 == 0 else "#ff9896", label="measured rounds" if i == 0 else None,
                    rasterized=current.size > RASTER_POINTS)  # thousands of SVG markers cost seconds per item
            start += len(round_ms)
        # the first warmup runs can be 100x the steady state: scale to the measured tail and the settled warmup
        top = float(np.percentile(current, 99.5))
        if warm.size:
            top = max(top, float(np.percentile(warm, 90)))
        ax.set_ylim(bottom=0, top=max(top * 1.2, 1e-6))
        ax.set_title(f"iterations of {now_label} in time order (slowest clipped)", fontsize=10)
        ax.set_xlabel("iteration")
        ax.set_ylabel("latency (ms)")
        ax.legend(fontsize=8, markerscale=4)
        return figure_svg(fig)

    def round_means() -> str:
        fig = new_figure(*PANEL_SIZE, PANEL_MARGINS_IN)
        _plot_rounds(fig.subplots(), record, result, _history(record, baseline))
        return figure_svg(fig)

    return [("latency histogram", histogram), ("ECDF", ecdf), ("iterations plot", iterations),
            ("round-means plot", round_means)]


def run_label(index: int, run: HistoryRun) -> str:
    """The x label of history run *index* (from 0): ``#3 11-24 20:03`` (its number and time,
    UTC), ``#3`` without a time, ``#3 11-24 20:03 abc1234`` with a commit (:attr:`HistoryRun.commit`)."""
    text = f"#{index + 1}"
    stamp = run.timestamp or ""
    if len(stamp) >= 16:
        text += f" {stamp[5:10]} {stamp[11:16]}"
    if run.commit:
        text += f" {run.commit[:7]}"
    return text


def baseline_line_ms(verdict: Verdict | None, run_means: list[float]) -> float:
    """Where the round-means plot draws the baseline (ms): the figure the verdict table prints as the
    baseline's geometric mean (stored: :attr:`Verdict.baseline_geomean_ms`, whose ratio the raw per cent
    is; side by side: the baseline side's geometric block mean), else, for a record without it, the
    geometric mean of *run_means* (each run's geometric round mean, ms)."""
    if verdict is not None and verdict.side_by_side is not None and is_num(verdict.baseline_mean_ms):
        return float(verdict.baseline_mean_ms or 0.0)
    if verdict is not None and is_num(verdict.baseline_geomean_ms):
        return float(verdict.baseline_geomean_ms or 0.0)
    return float(np.exp(np.mean(np.log(run_means))))


def _means(rounds: Sequence[RoundFigures]) -> tuple[list[float], float | None]:
    """The round means (ms) and their geometric mean (ms, from the rounds' log-means; None without)."""
    means = [r.mean_ms for r in rounds if r.mean_ms is not None and is_num(r.mean_ms)]
    logs = [r.log_mean for r in rounds if r.log_mean is not None]
    return means, float(np.exp(np.mean(logs))) if logs else None


def _plot_rounds(ax: Axes, record: ItemRecord, result: ResultRecord, history: list[HistoryRun]) -> None:
    """Round means (ms) of every baseline run and of this run, with the baseline mean and the
    threshold above it; side by side, the block means of both sides."""
    side = record.baseline_side
    runs: list[tuple[str | None, tuple[RoundFigures, ...], HistoryRun]] = [(None, run.rounds, run) for run in history]
    if side is not None and side.rounds:
        runs = [(f"baseline side ({_ref(record.verdict)})", side.rounds, HistoryRun())]
    labels = []
    run_means = []
    for i, (label, rounds, run) in enumerate(runs):
        means, geo = _means(rounds)
        if means and geo is not None:
            jitter = np.linspace(-0.15, 0.15, len(means)) if len(means) > 1 else np.zeros(1)
            ax.plot(i + jitter, means, "o", markersize=3, color=BASELINE_COLOR, alpha=0.6)
            run_means.append(geo)
            ax.plot([i - 0.25, i + 0.25], [run_means[-1]] * 2, color=BASELINE_COLOR, linewidth=2)
        labels.append(label or run_label(i, run))
    x_now = len(runs)
    now, now_geo = _means(result.rounds)
    verdict = record.verdict
    if verdict is not None and verdict.side_by_side is None and is_num(verdict.current_geomean_ms):
        now_geo = float(verdict.current_geomean_ms or 0.0)  # the level the verdict compared (its kept rounds)
    kept = (f" of the {kept_text(verdict.rounds_kept).removesuffix(' of rounds')}"
            if verdict is not None and verdict.rounds_kept else "")
    now_label = _this_side(record)
    if now and now_geo is not None:
        jitter = np.linspace(-0.15, 0.15, len(now)) if len(now) > 1 else np.zeros(1)
        ax.plot(x_now + jitter, now, "o", markersize=4, color=CURRENT_COLOR, label=f"{now_label}: round means")
        ax.plot([x_now - 0.25, x_now + 0.25], [now_geo] * 2, color=CURRENT_COLOR, linewidth=2.5)
    labels.append(now_label)
    if run_means:
        reference = baseline_line_ms(record.verdict, run_means)
        threshold = record.verdict.threshold if record.verdict is not None else None
        ax.axhline(reference, color=BASELINE_COLOR, linestyle="--", linewidth=1,
                   label=f"baseline geometric mean{kept} {fmt(reference, '.3f')} ms")
        if isinstance(threshold, (int, float)) and is_num(threshold):
            ax.axhline(reference * (1 + threshold), color="#ef8f00", linestyle=":", linewidth=1.2,
                       label=f"+{threshold:.0%} threshold")
    everything = [v for line in ax.get_lines() for v in np.asarray(line.get_ydata(), dtype=float) if v > 0]
    if everything and max(everything) / min(everything) > 4:
        ax.set_yscale("log")  # one slow round must not flatten the others
    if ax.get_yscale() == "log":
        _plain_log_axis(ax)
    ax.set_xticks(range(len(labels)))
    step = max(1, len(labels) // 8)
    ax.set_xticklabels([lab if (i % step == 0 or i == len(labels) - 1) else "" for i, lab in enumerate(labels)],
                       fontsize=7, rotation=30, ha="right")
    what = "the baseline side's blocks" if side is not None and side.rounds else f"{len(history)} baseline run(s)"
    ax.set_title(f"round means: {what} and {now_label}", fontsize=10)
    ax.set_ylabel("round mean (ms)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)


def _drop_first_outlier(ys: list[float]) -> tuple[int, float | None]:
    """``(1, value)`` when the first sample lies far from the others (more than 3x their range,
    or 10% of their median when they are flat, from their median): a sampler's first reading
    covers the time before the phase (``process_cpu_percent`` 5515% on 2 cores); ``(0, None)``
    otherwise, and for fewer than 4 samples."""
    if len(ys) < 4:
        return 0, None
    rest = np.asarray(ys[1:], dtype=float)
    mid = float(np.median(rest))
    spread = max(float(rest.max() - rest.min()), 0.1 * abs(mid), 1e-9)
    return (1, ys[0]) if abs(ys[0] - mid) > 3 * spread else (0, None)


def _telemetry_series(telemetry: TelemetryRecord) -> tuple[list[tuple[str, list[float], list[float]]], float]:
    """``(label, seconds since the phase start, values)`` per plotted field, counters as rates, and
    the phase start (``perf_counter_ns``); a first sample far off the others is left out
    (:func:`_drop_first_outlier`) and its label says so."""
    columns: dict[str, tuple[list[float], list[float]]] = {}
    starts: list[float] = [telemetry.start_ns] if telemetry.start_ns is not None and is_num(telemetry.start_ns) else []
    samples = [s for sampler in telemetry.samplers for s in sampler.samples if is_num(s["t_ns"])]
    starts += [s["t_ns"] for s in samples]
    if not starts:
        return [], 0.0
    t0 = min(starts)
    for sample in samples:
        for key, value in sample.items():
            if key != "t_ns" and is_num(value):
                xs, ys = columns.setdefault(key, ([], []))
                xs.append((sample["t_ns"] - t0) / 1e9)
                ys.append(float(value))
    series = []
    order = [k for k in TELEMETRY_PREFERRED if k in columns]
    order += [k for k in TELEMETRY_COUNTERS if k in columns]
    order += sorted(k for k in columns if k not in order)
    for key in order:
        xs, ys = columns[key]
        if len(xs) < 2:
            continue
        if key in TELEMETRY_COUNTERS:
            rates = [(ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1]) for i in range(1, len(xs)) if xs[i] > xs[i - 1]]
            mids = [xs[i] for i in range(1, len(xs)) if xs[i] > xs[i - 1]]
            if len(rates) < 1 or not any(rates):
                continue
            series.append((f"{key} per s", mids, rates))
        else:
            skip, dropped = _drop_first_outlier(ys)
            label = key + (f" (first sample {dropped:.4g} not shown)" if dropped is not None else "")
            series.append((label, xs[skip:], ys[skip:]))
        if len(series) >= MAX_TELEMETRY_PANELS:
            break
    return series, t0


#: one telemetry panel (inches at 100 dpi)
TELEMETRY_PANEL_SIZE = (3.8, 2.4)


def _side_windows(record: ItemRecord) -> dict[str, list[tuple[float, float]]]:
    """Side by side: ``{"baseline": [(start_ns, end_ns), ...], "candidate": [...]}`` of both
    sides' blocks (``perf_counter_ns``, the telemetry's clock); {} otherwise."""
    side = record.baseline_side
    return {name: list(spans) for name, spans in side.windows.items()} if side is not None else {}


def plot_telemetry(record: ItemRecord) -> list[tuple[str, Callable[[], str | None]]]:
    """The telemetry over the measured phase, one small panel per field (x: seconds since it
    started), as ``(what, draw)`` pairs; side by side, each sample is coloured by the side whose
    block was running when it was taken (grey between blocks). Empty without telemetry."""
    result = record.result_record
    series, t0 = _telemetry_series(result.telemetry if result is not None else TelemetryRecord())
    windows = _side_windows(record)
    ref = _ref(record.verdict)

    def side_of(t_s: float) -> str | None:
        t_ns = t0 + t_s * 1e9
        for side, spans in windows.items():
            if any(a <= t_ns <= b for a, b in spans):
                return side
        return None

    def panel(label: str, xs: list[float], ys: list[float]) -> Callable[[], str]:
        def draw() -> str:
            fig = new_figure(*TELEMETRY_PANEL_SIZE, PANEL_MARGINS_IN)
            ax = fig.subplots()
            ax.plot(xs, ys, "-", linewidth=1.0, color="#90a4ae")
            if windows:
                for side, color, name in (("candidate", CURRENT_COLOR, "this side"),
                                          ("baseline", BASELINE_COLOR, f"baseline side ({ref})")):
                    picked = [(x, y) for x, y in zip(xs, ys, strict=True) if side_of(x) == side]
                    if picked:
                        ax.plot(*zip(*picked, strict=True), "o", markersize=2.5, color=color, label=name)
                ax.legend(fontsize=6)
            else:
                ax.plot(xs, ys, "o", markersize=2.5, color="#455a64")
            ax.set_title(label, fontsize=9)
            ax.ticklabel_format(axis="y", useOffset=False)  # show 142.004, not +1.42e2 and 0.004
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            ax.set_xlabel("seconds into the measured phase", fontsize=8)
            return figure_svg(fig)
        return draw

    return [(f"telemetry plot {label}", panel(label, xs, ys)) for label, xs, ys in series]


def plot_panels(panels: list[tuple[str, Callable[[], str | None]]], what: str, css: str = "plots") -> str:
    """The panels in one ``<div class="plots">`` (side by side on a wide page, stacked on a narrow
    one), each drawn by :func:`~pytest_aaco.reports.markup.plot_or_note`; a note when there are none."""
    if not panels:
        return f'<p class="muted">no data for the {e(what)}.</p>'
    return f'<div class="{css}">' + "".join(plot_or_note(draw, name) for name, draw in panels) + "</div>"


def plot_cycle_ratios(record: ItemRecord) -> str | None:
    """A side-by-side item's per-cycle ratios candidate / baseline (one series per fresh session
    pair), with the estimate, the band between the one-sided bounds the outcome rule compared (an older
    record: its 95% CI) and the threshold; None for other items."""
    verdict = record.verdict
    sbs = verdict.side_by_side if verdict is not None else None
    if not sbs or not sbs.figures.get("ratios") or verdict is None:
        return None
    fig = new_figure(*PANEL_SIZE, PANEL_MARGINS_IN)
    ax = fig.subplots()
    start = 0
    for index, ratios in enumerate(sbs.figures["ratios"]):
        xs = list(range(start, start + len(ratios)))
        ax.plot(xs, [(r - 1) * 100 for r in ratios], "o", markersize=3.5, label=f"session pair {index + 1}")
        start += len(ratios)
    if verdict.ratio is not None:
        ax.axhline((verdict.ratio - 1) * 100, color="#263238", linewidth=1.2, label="estimate")
    # the interval between the one-sided bounds the outcome rule compared (the table's bound); a record
    # written before bounds were stored: its 95% CI
    low, high, band = verdict.lower_bound, verdict.upper_bound, "bounds compared"
    if low is None or high is None:
        low, high, band = verdict.ci_low, verdict.ci_high, "95% CI"
    if low is not None and high is not None:
        ax.axhspan((low - 1) * 100, (high - 1) * 100, color="#90a4ae", alpha=0.3, label=band)
    ax.axhline(verdict.threshold * 100, color="#c62828", linestyle="--", linewidth=1, label="threshold")
    ax.axhline(0, color="#607080", linewidth=0.6)
    ax.set_xlabel(f"cycle (one block of each side; vs {sbs.ref})", fontsize=8)
    ax.set_ylabel("candidate / baseline - 1 (%)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return figure_svg(fig)



# ---------------------------------------------------------------- tables


def stats_table(record: ItemRecord, baseline: BaselineRecord | None) -> str:
    """This run against the baseline: latencies in ms, throughput in samples/s. This run is the
    measurement the verdict's change was computed on (the confirmation's when a fresh session
    confirmed a regression); the baseline is the baseline side's blocks when the item was
    measured side by side, else the baseline's latest run. The change column is the plain ratio
    of the two figures shown, and says so."""
    summary = measured_summary(record)
    side = record.baseline_side
    if side is not None and side.summary:
        past, then_name, vs = side.summary, f"baseline side ({_ref(record.verdict)})", "vs baseline side"
    else:
        history = _history(record, baseline)
        past = history[-1].summary if history else Figures()
        then_name, vs = "baseline, latest run", "vs latest run"
    now_name = _this_side(record)
    result = record.result_record
    if (record.verdict is not None and record.verdict.confirmed and side is None and result is not None
            and result.confirmation is not None):
        now_name += " (confirmation)"
    rows = [("mean", "mean_ms", " ms", ".3f"), ("std", "std_ms", " ms", ".3f"), ("p50", "p50_ms", " ms", ".3f"),
            ("p90", "p90_ms", " ms", ".3f"), ("p99", "p99_ms", " ms", ".3f"),
            ("throughput", "throughput", " /s", ".1f"), ("rounds", "rounds", "", "d"),
            ("measured iterations", "measure_iterations", "", "d"), ("warmup iterations", "warmup_iterations", "", "d"),
            ("session creation", "session_create_ms", " ms", ".1f"), ("first run", "first_run_ms", " ms", ".3f")]
    body = []
    for name, key, unit, spec in rows:
        now, then = summary.of(key), past.of(key)
        change = f"{(now / then - 1) * 100:+.1f}%" if now is not None and then and is_num(now) and is_num(then) else ""
        body.append(f"<tr><th>{e(name)}</th><td class=\"num\">{e(fmt(now, spec, unit))}</td>"
                    f"<td class=\"num\">{e(fmt(then, spec, unit))}</td><td class=\"num\">{e(change)}</td></tr>")
    head = f"<tr><th></th><th>{e(now_name)}</th><th>{e(then_name)}</th><th>change ({e(vs)})</th></tr>"
    return f'<div class="scroll"><table>{head}{"".join(body)}</table></div>'


def verdict_table(verdict: Verdict) -> str:
    """The figures behind the verdict: method, the tested change labelled with its series and its
    CI, the raw change, p-value and level, MDE, threshold, and the means the change compares
    (side by side: both sides' geometric means over their blocks, and the cycles)."""
    ci = f"{pct(verdict.ci_low)} .. {pct(verdict.ci_high)}" if is_num(verdict.ci_low) else "-"
    word = series_word(verdict) if verdict.ratio is not None else "-"
    sbs = verdict.side_by_side
    pairs = [
        ("method", e(verdict.method or "-")),
        (f"change ({word})", e(pct(verdict.ratio))),
    ]
    bound = bound_text(verdict.ratio, verdict.lower_bound, verdict.upper_bound,
                       verdict.threshold) if verdict.ratio is not None else ""
    # the interval the outcome rule compared, one-sided; a record written before bounds: its 95% CI
    pairs.append((f"bound compared ({word})", e(bound)) if bound else (f"95% CI ({word})", e(ci)))
    if verdict.series in ("adjusted", "normalized") and not sbs:
        pairs.append(("change (raw)", e(pct(verdict.raw_ratio))))
    pairs += [
        ("one-sided p (slower)", e(fmt(verdict.p_value, ".3g"))),
        ("level (item's alpha)", e(fmt(verdict.level, ".3g"))),
        ("minimum detectable effect", e(fraction_pct(verdict.mde))),
        ("threshold", e(fraction_pct(verdict.threshold))),
    ]
    if sbs:
        pairs += [
            ("this side mean (geometric, over its blocks)", e(fmt(verdict.current_mean_ms, ".3f", " ms"))),
            (f"baseline side mean ({sbs.ref}, geometric, over its blocks)",
             e(fmt(verdict.baseline_mean_ms, ".3f", " ms"))),
            ("cycles", e(sbs.cycles)),
        ]
    else:
        which = " (confirmation)" if verdict.confirmed else ""
        kept = f" of the {kept_text(verdict.rounds_kept).removesuffix(' of rounds')}" if verdict.rounds_kept else ""
        pairs += [
            (f"this run mean{which}", e(fmt(verdict.current_mean_ms, ".3f", " ms"))),
            (f"baseline mean (of {verdict.baseline_runs} run(s))", e(fmt(verdict.baseline_mean_ms, ".3f", " ms"))),
            # the means whose ratio the raw change is (the round-means plot draws the baseline's)
            (f"this run geometric mean{kept}{which}", e(fmt(verdict.current_geomean_ms, ".3f", " ms"))),
            (f"baseline geometric mean{kept}", e(fmt(verdict.baseline_geomean_ms, ".3f", " ms"))),
            ("baseline file", f"<code>{e(verdict.baseline_path or '-')}</code>"),
        ]
    pairs.append(("fingerprint id", f"<code>{e(verdict.fingerprint_id or '-')}</code>"))
    if verdict.fingerprint_diff:
        pairs.append(("fingerprint fields that differ", e(", ".join(map(str, verdict.fingerprint_diff)))))
    if verdict.confirmed is not None:
        pairs.append(("confirmed by a second measurement", e("yes" if verdict.confirmed else "no")))
    # the pooled run-to-run variance and this GPU's fitted offset (verdict/pooling.py)
    pairs += [(k, e(v)) for k, v in pooled_pairs(None if verdict.device_time is None else verdict.device_time.figures)]
    p99 = verdict.p99
    if p99 is not None:
        pairs.append(("p99 change vs latest run (bootstrap CI)",
                      e(f"{pct(p99.ratio)} ({pct(p99.ci_low)} .. {pct(p99.ci_high)})"
                        + (" REGRESSED" if p99.regression else ""))))
    return f'<div class="scroll"><table>{table_rows(pairs)}</table></div>'


def _list(title: str, lines: list[str]) -> str:
    if not lines:
        return ""
    return f"<h3>{e(title)}</h3><ul>" + "".join(f"<li>{e(x)}</li>" for x in lines) + "</ul>"


def diagnosis_block(diagnosis: DiagnosisRecord | None) -> str:
    """The likeliest bottleneck: category, score, evidence sentences, what to try."""
    if diagnosis is None:
        return ""
    scores = diagnosis.scores
    others = ", ".join(f"{k} {v:.2f}" for k, v in sorted(scores.items(), key=lambda kv: -kv[1]) if is_num(v))
    score = fmt(diagnosis.score, ".2f")
    return (f"<h3>Likely bottleneck: {e(diagnosis.category)} (score {e(score)})</h3>"
            + "<ul>" + "".join(f"<li>{e(x)}</li>" for x in diagnosis.evidence) + "</ul>"
            + (f"<p><b>Try:</b> {e(diagnosis.recommendation)}</p>" if diagnosis.recommendation else "")
            + (f'<p class="muted">scores: {e(others)}</p>' if others else ""))


def _value_html(value: object, depth: int = 0) -> str:
    """A JSON value as nested tables (dicts), comma lists (short lists) or escaped text."""
    if isinstance(value, dict):
        if not value:
            return '<span class="muted">(empty)</span>'
        if depth >= 3:
            return f"<code>{e(value)}</code>"
        return "<table>" + "".join(f"<tr><th>{e(k)}</th><td>{_value_html(v, depth + 1)}</td></tr>"
                                   for k, v in value.items()) + "</table>"
    if isinstance(value, list):
        return e(", ".join(map(str, value))) if value else '<span class="muted">(none)</span>'
    return e(value) if value is not None else '<span class="muted">-</span>'


def plot_placeholder(what: str) -> str:
    """The note standing where the plot *what* would be when matplotlib is not installed."""
    return f'<p class="muted plot-missing">The {e(what)} would be here: <code>{e(INSTALL_HINT)}</code></p>'


def item_section(record: ItemRecord, baseline: BaselineRecord | None, plots: bool) -> str:
    """The whole section of one item."""
    verdict = record.verdict
    outcome = record.effective_outcome
    nodeid = record.nodeid
    parts = [f'<section class="item" id="{e(_anchor(nodeid))}">',
             f"<h2>{e(record.label or nodeid)} {_badge(outcome)}</h2>",
             f'<div class="muted"><code>{e(nodeid)}</code></div>']
    message = verdict.message if verdict is not None and verdict.message else record.error
    if message:
        cls = "bad" if record.fails else ("warn" if record.is_warning else "")
        parts.append(f'<div class="message {cls}">{e(message)}</div>')
    if record.result:
        parts.append('<div class="grid"><div><h3>Figures</h3>' + stats_table(record, baseline) + "</div>")
        parts.append("<div><h3>Verdict</h3>" + verdict_table(verdict) + "</div></div>" if verdict else "</div>")
        if baseline is None and verdict is not None and verdict.baseline_path and outcome != Outcome.SAVED:
            parts.append(f'<p class="muted">baseline file {e(verdict.baseline_path)} not found here: plots show'
                         " this run only.</p>")
        if plots and verdict is not None and verdict.side_by_side:
            parts.append("<h3>Side by side: per-cycle ratios</h3>"
                         + plot_panels([("per-cycle ratios", lambda: plot_cycle_ratios(record))], "per-cycle ratios"))
        if not plots and verdict is not None and verdict.side_by_side:
            parts.append("<h3>Side by side: per-cycle ratios</h3>" + plot_placeholder("per-cycle ratios"))
        where = " (both sides' blocks, interleaved)" if verdict is not None and verdict.side_by_side else ""
        if plots:
            parts.append("<h3>Latency</h3>"
                         + plot_panels(plot_latency(record, baseline), "latency plots", "plots latency"))
            parts.append(f"<h3>Telemetry over the measured phase{e(where)}</h3>"
                         + plot_panels(plot_telemetry(record), "telemetry plot", "plots small"))
        else:
            parts.append("<h3>Latency</h3>" + plot_placeholder("latency plots (histogram, ECDF, rounds)"))
            parts.append(f"<h3>Telemetry over the measured phase{e(where)}</h3>" + plot_placeholder("telemetry plot"))
        telemetry = (record.result_record or ResultRecord()).telemetry
        tsum = telemetry.summary
        if tsum:
            rows = "".join(f"<tr><th>{e(k)}</th><td class=\"num\">{e(fmt(v.mean, '.4g'))}</td>"
                           f"<td class=\"num\">{e(fmt(v.max, '.4g'))}</td></tr>" for k, v in sorted(tsum.items()))
            parts.append(f'<details><summary>Telemetry summary</summary><div class="scroll"><table><tr><th>field</th>'
                         f"<th>mean</th><th>max</th></tr>{rows}</table></div></details>")
        errors = {sampler.name: sampler.error for sampler in telemetry.samplers if sampler.error}
        if errors:
            parts.append(_list("Telemetry notes", [f"{k}: {v}" for k, v in errors.items()]))
    history = _history(record, baseline)
    profiles = [run.profile for run in history if run.profile is not None]
    parts.append(profile_block(record.profile_record, profiles[-1] if profiles else None, plots))
    parts.append(kernels_block(record.kernels_record))
    cold_history = [run.cold_start.labelled(timestamp=run.timestamp) for run in history if run.cold_start is not None]
    parts.append(cold_start_block(record.cold_start_record, cold_history, plots))
    parts.append(_list("Extra passes", record.insight_notes))
    if verdict is not None:
        parts.append(_list("Unstable", verdict.unstable))
        parts.append(_list("Memory", verdict.memory))
        parts.append(_list("Notes", [n for n in verdict.report_notes if not n.startswith("unstable: ")]))
    parts.append(diagnosis_block(record.diagnosis_record))
    if record.fingerprint:
        parts.append('<details><summary>Fingerprint</summary><div class="scroll">' + _value_html(record.fingerprint)
                     + "</div></details>")
    parts.append("</section>")
    return "".join(p for p in parts if p)


def _device_cell(record: ItemRecord) -> str:
    """``+6.4% paired (lower bound +5.9% > 0, +6.4% >= 5%), kernels 219 -> 227`` (a record written before
    bounds: its 95% CI ``(+5.9% .. +6.9%)``), or ``-`` when device time was not compared."""
    v = record.verdict
    dev, facts = (None, None) if v is None else (v.judgements.get(DEVICE_TIME), record.device_record)
    if dev is None or facts is None:
        return "-"
    series = dev.series or "paired"
    bound = bound_text(dev.ratio, dev.lower_bound, dev.upper_bound, dev.threshold)
    text = (f"{pct(dev.ratio)} {series} ({bound})" if bound else
            f"{pct(dev.ratio)} {series} ({pct(dev.ci_low)} .. {pct(dev.ci_high)})")
    kernels = facts.kernels
    if kernels is not None and is_num(kernels.baseline) and is_num(kernels.candidate):
        text += f", kernels {kernels.baseline:g} -> {kernels.candidate:g}"
    return text


def failing_first(records: Sequence[ItemRecord]) -> list[ItemRecord]:
    """*records* with the failing items first, then the inconclusive or unstable ones, then the
    rest, each group in run order."""
    return sorted(records, key=lambda r: (not r.fails, not r.is_warning))


def overview_table(records: Sequence[ItemRecord]) -> str:
    """One row per item, linking to its section: the verdict (with the metrics that failed) and
    the change labelled with its series first, so a narrow screen shows them without scrolling;
    then the device-time change (change, 95% CI, kernels per run) when some item's device time was
    compared, p and the figures of the measurement the change was computed on; a GPU column after
    the item when the items ran on several GPUs."""
    gpu = several_gpus(list(records))
    with_device = any(r.verdict is not None and r.verdict.device is not None for r in records)
    head = ("<tr><th>item</th>" + ("<th>GPU</th>" if gpu else "")
            + "<th>verdict</th><th>change vs baseline [bound compared]</th>"
            + ("<th>device time (bound compared)</th>" if with_device else "")
            + "<th>p (slower)</th><th>mean ms</th><th>p50 ms</th><th>p99 ms</th><th>throughput/s</th></tr>")
    body = []
    for record, name in zip(records, row_labels(records), strict=True):
        summary = measured_summary(record)
        v = record.verdict
        change = change_text(v) if v is not None else "-"
        cell = verdict_cell(record)
        flags = cell[len(str(record.effective_outcome)):].strip()
        body.append(
            f"<tr><td><a href=\"#{e(_anchor(record.nodeid))}\">{e(name)}</a></td>"
            + (f"<td><code>{e(record.gpu_label)}</code></td>" if gpu else "")
            + f'<td class="verdict">{_badge(record.effective_outcome)} {e(flags)}</td>'
            f'<td class="num">{e(change)}</td>'
            + (f'<td class="num">{e(_device_cell(record))}</td>' if with_device and v is not None else
               ('<td class="num">-</td>' if with_device else ""))
            + f'<td class="num">{e(fmt(v.p_value if v else None, ".2g"))}</td>'
            + "".join(f'<td class="num">{e(fmt(summary.of(k), s))}</td>'
                      for k, s in (("mean_ms", ".3f"), ("p50_ms", ".3f"), ("p99_ms", ".3f"), ("throughput", ".1f")))
            + "</tr>")
    return f'<div class="scroll"><table class="overview">{head}{"".join(body)}</table></div>'


def render_html(records: Sequence[ItemRecord], summary: SessionSummary, environment: JSONDict | None = None,
                *, baselines: Mapping[str, BaselineRecord] | None = None, title: str = "pytest-aaco report",
                commit: JSONDict | None = None) -> str:
    """The whole report page as a string.

    *records*: the items (of a session, or read back from a bundle); *summary*: their counts and
    the LOND state; *environment*: the lockbox of
    :func:`pytest_aaco.measure.environment.collect_environment` or None; *baselines*: ``{nodeid:
    baseline}`` (the caller reads them, :func:`pytest_aaco.history.store.report_baselines`; None or a
    missing item: the page says the baseline file was not found); *commit*: the
    project's git commit (:func:`pytest_aaco.measure.commit.commit_info`), shown under the title
    when given. Never raises for missing fields; plots that fail become notes.
    """
    baselines = baselines or {}
    plots = _matplotlib_available()
    counts = summary.counts_text
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{e(title)}</title><style>{CSS}</style></head><body><main>",
             f"<h1>{e(title)}</h1>",
             f'<p class="muted">{e(len(records))} item(s): {e(counts)}. Generated {e(generated)}.</p>']
    if commit is not None:
        parts.append(f'<p class="muted commit">Project commit: {e(commit_text(commit))}.</p>')
    sentence = fdr_sentence(summary, sum(r.is_regression for r in records))
    if sentence:
        parts.append(f'<p class="muted">False-alarm control: {e(sentence)}</p>')
    if not plots:
        parts.append(f'<p class="message warn">Plots need matplotlib: <code>{e(INSTALL_HINT)}</code></p>')
    ordered = failing_first(records)
    parts.append('<section class="block"><h2>Items</h2>' + overview_table(ordered) + "</section>")
    for record in ordered:
        parts.append(item_section(record, baselines.get(record.nodeid), plots))
    if environment:
        env = {k: environment[k] for k in ENVIRONMENT_ORDER if k in environment}
        env.update({k: v for k, v in environment.items() if k not in env and k != "packages"})
        found = environment.get("packages")
        packages = found if isinstance(found, dict) else {}
        parts.append('<section class="block"><h2>Environment</h2><div class="scroll">' + _value_html(env) + "</div>")
        if packages:
            parts.append(f'<details><summary>Installed packages ({len(packages)})</summary><div class="scroll">'
                         + _value_html(packages) + "</div></details>")
        parts.append("</section>")
    parts.append("</main></body></html>\n")
    return "\n".join(parts)


def write(records: Sequence[ItemRecord], context: ReportContext) -> None:
    """Session-end writer: ``--aaco-html PATH`` (nothing when the option is not given).

    Written atomically; an unwritable path is reported on the terminal, never raised.
    """
    path = context.html_path
    if path is None:
        return
    if len(records) >= PROGRESS_ITEMS:  # a few seconds per 10 items: say what the wait is for
        context.say(f"pytest-aaco: drawing the HTML report of {len(records)} items ...")
    text = render_html(records, context.summary, context.environment, baselines=context.baselines,
                       commit=context.commit_info)
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        context.say(f"pytest-aaco: --aaco-html: cannot write {path}: {exc.strerror or exc}", yellow=True)
        return
    context.say(f"pytest-aaco: HTML report: {path}")
