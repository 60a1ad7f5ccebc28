"""HTML blocks and plots for where the time goes: operators, GPU kernels, cold start.

Each block takes the typed records of :mod:`pytest_aaco.records` (:class:`~pytest_aaco.records.device.ProfileRecord`,
:class:`~pytest_aaco.records.device.KernelsRecord`, :class:`~pytest_aaco.records.device.ColdStartRecord` with its
verdict) and returns escaped HTML, ``""`` when there is nothing to show.
Plots go through :mod:`pytest_aaco.reports.markup` (matplotlib ``Figure`` objects, inline SVG).

* :func:`plot_operators`: horizontal bars of the slowest op types, ms per run, this run beside the baseline;
* :func:`plot_cold_start`: session creation and first run of every fresh session, history runs then this run;
* :func:`profile_block`, :func:`kernels_block`, :func:`cold_start_block`: the sections of an item.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_aaco.records.device import COLD_START_METRICS as METRICS
from pytest_aaco.records.device import COLD_START_PHASES as PHASES
from pytest_aaco.records.device import ColdStartRecord, KernelsRecord, OpTime, ProfileRecord
from pytest_aaco.reports import markup as mk
from pytest_aaco.reports.markup import e, fmt, fraction_pct
from pytest_aaco.verdict.percent import pct

#: op types drawn in the operator chart
MAX_OPS_PLOTTED = 12


def _ep(op: OpTime) -> str:
    return op.ep.removesuffix("ExecutionProvider")


def plot_operators(profile: ProfileRecord, baseline: ProfileRecord | None = None) -> str | None:
    """Bars of the slowest op types of *profile* (ms per run, profiled), with *baseline*'s beside
    them when given; labels carry the share of the run. None without ops."""
    import numpy as np

    ops = [o for o in profile.ops if o.time_us is not None][:MAX_OPS_PLOTTED]
    if not ops:
        return None
    several = len({o.ep for o in profile.ops}) > 1
    past = {o.key: o.time_us for o in (baseline.ops if baseline is not None else ()) if o.time_us is not None}
    labels = [o.op + (f" ({_ep(o)})" if several else "") + f"  {o.share or 0:.0%}" for o in ops]
    now = np.array([(o.time_us or 0.0) / 1000 for o in ops])
    fig = mk.new_figure(8.5, 0.35 * len(ops) + 1.2)
    ax = fig.subplots()
    y = np.arange(len(ops))[::-1]
    if past:
        then = np.array([(past.get(o.key) or 0.0) / 1000 for o in ops])
        ax.barh(y + 0.2, then, height=0.4, color=mk.BASELINE_COLOR, label="baseline")
        ax.barh(y - 0.2, now, height=0.4, color=mk.CURRENT_COLOR, label="this run")
        ax.legend(fontsize=8, loc="lower right")
    else:
        ax.barh(y, now, height=0.6, color=mk.CURRENT_COLOR)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("ms per run (ORT profiler, profiled session)")
    ax.set_title("time by operator type (label: share of this run)", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    return mk.figure_svg(fig)


def plot_cold_start(current: ColdStartRecord, history: Sequence[ColdStartRecord] = ()) -> str | None:
    """Two panels (session creation, first run): every fresh session's ms per run, history runs
    in the baseline colour, this run last in the current colour, a bar at each run's median. A
    history run is labelled by its ``label`` (the baseline side's name) or its ``timestamp``."""
    import numpy as np

    runs = [*history, current]
    if not any(current.values(key) for key, _ in METRICS):
        return None
    fig = mk.new_figure(11.5, 2.8)
    axes = fig.subplots(1, len(METRICS))
    for ax, (key, words) in zip(axes, METRICS, strict=True):
        for i, run in enumerate(runs):
            values = run.values(key)
            if not values:
                continue
            color = mk.CURRENT_COLOR if i == len(runs) - 1 else mk.BASELINE_COLOR
            jitter = np.linspace(-0.15, 0.15, len(values)) if len(values) > 1 else np.zeros(1)
            ax.plot(i + jitter, values, "o", markersize=3.5, color=color, alpha=0.8)
            ax.plot([i - 0.25, i + 0.25], [float(np.median(values))] * 2, color=color, linewidth=2)
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels([r.label or (r.timestamp or "")[5:10] or str(i + 1) for i, r in enumerate(runs[:-1])]
                           + ["this run"], fontsize=7, rotation=30)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("ms")
        ax.set_title(f"{words}, per fresh session", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    return mk.figure_svg(fig)


def profile_block(profile: ProfileRecord | None, baseline: ProfileRecord | None = None, plots: bool = True) -> str:
    """The operator section: the comparison's message, the bar chart, a table of op types (this
    run's ms and share, the baseline's share, change) and the slowest nodes; ``""`` without a profile."""
    if profile is None or not profile.ops:
        return ""
    parts = ["<h3>Where the time goes: operators</h3>"]
    if profile.comparison_message:
        parts.append(f'<div class="message">{e(profile.comparison_message)}</div>')
    if plots:
        parts.append(mk.plot_or_note(lambda: plot_operators(profile, baseline), "operator chart"))
    past = {o.key: o for o in (baseline.ops if baseline is not None else ())}
    rows = []
    for op in profile.ops[:15]:
        then = past.get(op.key)
        change = ""
        if then is not None and then.time_us and op.time_us is not None:
            change = f"{op.time_us / then.time_us - 1:+.0%}"
        rows.append(f"<tr><td>{e(op.op)}</td><td>{e(_ep(op))}</td><td class=\"num\">{e(fmt(op.nodes, '.0f'))}</td>"
                    f"<td class=\"num\">{e(fmt((op.time_us or 0) / 1000, '.3f'))}</td>"
                    f"<td class=\"num\">{e(fraction_pct(op.share))}</td>"
                    f"<td class=\"num\">{e(fraction_pct(then.share if then is not None else None))}</td>"
                    f"<td class=\"num\">{e(change)}</td></tr>")
    parts.append("<table><tr><th>op type</th><th>EP</th><th>nodes</th><th>ms per run</th><th>share</th>"
                 f"<th>baseline share</th><th>change</th></tr>{''.join(rows)}</table>")
    if profile.nodes:
        parts.append("<details><summary>Slowest nodes</summary><table><tr><th>node</th><th>op type</th><th>EP</th>"
                     "<th>ms per run</th></tr>" + "".join(
                         f"<tr><td><code>{e(n.node)}</code></td><td>{e(n.op)}</td><td>{e(_ep(n))}</td>"
                         f"<td class=\"num\">{e(fmt((n.time_us or 0) / 1000, '.3f'))}</td></tr>"
                         for n in profile.nodes) + "</table></details>")
    cpu = profile.cpu_nodes
    if cpu:
        parts.append(f'<p class="muted">{len(cpu)} node(s) ran on the CPU EP: {e(", ".join(cpu[:20]))}'
                     + (" ..." if len(cpu) > 20 else "") + "</p>")
    parts.append(f'<p class="muted">{e(fmt(profile.runs, ".0f"))} profiled run(s) in a separate session; times include'
                 " ORT's profiling overhead.</p>")
    return "".join(parts)


def kernels_block(metrics: KernelsRecord | None) -> str:
    """GPU kernel figures (CUPTI or rocprof): kernels per run, KAR, active ratio, microkernels, top kernels."""
    if metrics is None:
        return ""
    pairs = [("tracer", e(metrics.source)), ("traced runs", e(fmt(metrics.runs, ".0f"))),
             ("kernels per run", e(fmt(metrics.kernels_per_run, ".1f"))),
             ("KAR (kernels per ONNX node)", e(fmt(metrics.kar, ".2f"))),
             ("GPU active ratio", e(fraction_pct(metrics.active_ratio))),
             ("microkernels (< 10 µs)", e(fraction_pct(metrics.microkernel_share))),
             ("kernel time per run", e(fmt(metrics.kernel_ms, ".3f", " ms"))),
             ("wall time per run", e(fmt(metrics.wall_ms, ".3f", " ms")))]
    top = "".join(f"<tr><td><code>{e(t.name[:120])}</code></td><td class=\"num\">{e(fmt(t.count, '.0f'))}</td>"
                  f"<td class=\"num\">{e(fmt(t.total_ms, '.3f'))}</td>"
                  f"<td class=\"num\">{e(fraction_pct(t.share))}</td></tr>" for t in metrics.top)
    return ("<h3>GPU kernels</h3><div class=\"grid\"><div>" + f"<table>{mk.table_rows(pairs)}</table></div>"
            + (f"<div><table><tr><th>kernel</th><th>count</th><th>ms</th><th>share</th></tr>{top}</table></div>"
               if top else "") + "</div>")


def cold_start_block(cold: ColdStartRecord | None, history: Sequence[ColdStartRecord] = (), plots: bool = True) -> str:
    """Cold start: its verdict's message, this run's fastest session against the earlier runs'
    (or, compared side by side, against the baseline side's fastest: ``cold.baseline_side``,
    then plotted in place of *history*), and the plot."""
    if cold is None:
        return ""
    verdict = cold.verdict
    side = cold.baseline_side
    if side is not None:
        history = [side.labelled((verdict.ref if verdict is not None else None) or "baseline side")]
    parts = ["<h3>Cold start</h3>"]
    if verdict is not None and verdict.message:
        cls = "bad" if verdict.fails else ("warn" if verdict.outcome == "inconclusive" else "")
        parts.append(f'<div class="message {cls}">{e(verdict.message)}</div>')
    rows = []
    for key, words in METRICS:
        figures = verdict.figures(key) if verdict is not None else None
        then, ratio = (figures.baseline_ms, figures.ratio) if figures is not None else (None, None)
        cells = [fmt(cold.minimum(key), ".1f", " ms"), fmt(then, ".1f", " ms"), pct(ratio)]
        if figures is not None and figures.geomean_current_ms is not None:  # paired: the geometric means' ratio
            cells = [f"{fmt(figures.geomean_current_ms, '.4g', ' ms')} (fastest {cells[0]})",
                     f"{fmt(figures.geomean_baseline_ms, '.4g', ' ms')} (fastest {cells[1]})", cells[2]]
        rows.append(f"<tr><th>{e(words)}</th>" + "".join(f'<td class="num">{e(c)}</td>' for c in cells)
                    + f"<td>{e((figures.outcome if figures is not None else None) or '')}</td></tr>")
    split = verdict.figures("session_create_ms").phases if verdict is not None else {}
    for key, words in PHASES:
        now = cold.minimum(key)
        if now is not None:
            then = split.get(key)
            ratio = now / then if then is not None and then > 0 else None
            cells = [fmt(now, ".1f", " ms"), fmt(then, ".1f", " ms"), pct(ratio)]
            rows.append(f"<tr><td>&nbsp;&nbsp;of it: {e(words)} (ORT profiler)</td>"
                        + "".join(f'<td class="num">{e(c)}</td>' for c in cells) + "<td>not gated</td></tr>")
    against, change = (("baseline side (fastest session)", "change (paired)") if side is not None
                       else ("baseline (earlier runs' fastest)", "change"))
    parts.append(f"<table><tr><th></th><th>this run (fastest session)</th><th>{e(against)}</th><th>{e(change)}</th>"
                 f"<th>verdict</th></tr>{''.join(rows)}</table>")
    if plots:
        parts.append(mk.plot_or_note(lambda: plot_cold_start(cold, history), "cold-start plot"))
    if cold.compiles:
        parts.append(f'<p class="muted">These figures include {e(cold.compiles)}.</p>')
    return "".join(parts)
