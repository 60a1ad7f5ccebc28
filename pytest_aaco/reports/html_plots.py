"""The HTML report's plots (matplotlib, the ``[plots]`` extra): latency (histogram, ECDF, rounds against the
history), telemetry over the measured phase and side by side the per-cycle ratios, each drawn into an inline
SVG by :func:`plot_panels`; :mod:`pytest_aaco.reports.html` lays them out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes

from pytest_aaco.records.base import Outcome
from pytest_aaco.records.device import (
    BaselineRecord,
    HistoryRun,
    ResultRecord,
    RoundFigures,
    TelemetryRecord,
)
from pytest_aaco.records.item import ItemRecord
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.reports.markup import (
    BASELINE_COLOR,
    CURRENT_COLOR,
    PANEL_MARGINS_IN,
    WARMUP_COLOR,
    e,
    figure_svg,
    fmt,
    is_num,
    new_figure,
    plot_or_note,
)
from pytest_aaco.verdict.percent import kept_text

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


def _ref(verdict: Verdict | None) -> str | None:
    """The compared revision's name of a verdict gated side by side; None otherwise."""
    return verdict.side_by_side.ref if verdict is not None and verdict.side_by_side is not None else None


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
