"""HTML blocks and plots for where the time goes: operators, GPU kernels, cold start.

Each block takes the JSON records the session writes (``OpProfile.to_dict()``,
``ProfileComparison.to_dict()``, ``KernelMetrics.to_dict()``, ``ColdStart.to_dict()``,
``ColdStartVerdict.to_dict()``) and returns escaped HTML, ``""`` when there is nothing to show.
Plots go through :mod:`pytest_aaco.reports.markup` (matplotlib ``Figure`` objects, inline SVG).

* :func:`plot_operators`: horizontal bars of the slowest op types, ms per run, this run beside the baseline;
* :func:`plot_cold_start`: session creation and first run of every fresh session, history runs then this run;
* :func:`profile_block`, :func:`kernels_block`, :func:`cold_start_block`: the sections of an item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_aaco.passes.coldstart import METRICS, PHASES
from pytest_aaco.reports import markup as mk
from pytest_aaco.reports.markup import e, fmt, fraction_pct, is_num
from pytest_aaco.verdict.percent import pct

#: op types drawn in the operator chart
MAX_OPS_PLOTTED = 12


def _op_key(op: Mapping[str, object]) -> tuple[str, str]:
    return str(op.get("op")), str(op.get("ep"))


def plot_operators(profile: Mapping[str, Any], baseline: Mapping[str, Any] | None = None) -> str | None:
    """Bars of the slowest op types of *profile* (ms per run, profiled), with *baseline*'s beside
    them when given; labels carry the share of the run. None without ops."""
    import numpy as np

    ops = [o for o in profile.get("ops") or [] if is_num(o.get("time_us"))][:MAX_OPS_PLOTTED]
    if not ops:
        return None
    several = len({o.get("ep") for o in profile.get("ops") or []}) > 1
    past = {_op_key(o): float(o["time_us"]) for o in (baseline or {}).get("ops") or [] if is_num(o.get("time_us"))}
    labels = [f"{o['op']}" + (f" ({str(o['ep']).removesuffix('ExecutionProvider')})" if several else "")
              + f"  {float(o.get('share') or 0):.0%}" for o in ops]
    now = np.array([float(o["time_us"]) / 1000 for o in ops])
    fig = mk.new_figure(8.5, 0.35 * len(ops) + 1.2)
    ax = fig.subplots()
    y = np.arange(len(ops))[::-1]
    if past:
        then = np.array([past.get(_op_key(o), 0.0) / 1000 for o in ops])
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


def plot_cold_start(current: Mapping[str, Any], history: Sequence[Mapping[str, Any]] = ()) -> str | None:
    """Two panels (session creation, first run): every fresh session's ms per run, history runs
    in the baseline colour, this run last in the current colour, a bar at each run's median. A
    history run is labelled by its ``label`` (the baseline side's name) or its ``timestamp``."""
    import numpy as np

    runs = [*history, current]
    if not any(current.get(key) for key, _ in METRICS):
        return None
    fig = mk.new_figure(11.5, 2.8)
    axes = fig.subplots(1, len(METRICS))
    for ax, (key, words) in zip(axes, METRICS, strict=True):
        for i, run in enumerate(runs):
            values = [float(v) for v in run.get(key) or [] if is_num(v)]
            if not values:
                continue
            color = mk.CURRENT_COLOR if i == len(runs) - 1 else mk.BASELINE_COLOR
            jitter = np.linspace(-0.15, 0.15, len(values)) if len(values) > 1 else np.zeros(1)
            ax.plot(i + jitter, values, "o", markersize=3.5, color=color, alpha=0.8)
            ax.plot([i - 0.25, i + 0.25], [float(np.median(values))] * 2, color=color, linewidth=2)
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels([str(r.get("label") or str(r.get("timestamp", ""))[5:10] or i + 1)
                            for i, r in enumerate(runs[:-1])]
                           + ["this run"], fontsize=7, rotation=30)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("ms")
        ax.set_title(f"{words}, per fresh session", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    return mk.figure_svg(fig)


def profile_block(profile: Mapping[str, Any] | None, comparison: Mapping[str, object] | None = None,
                  baseline: Mapping[str, Any] | None = None, plots: bool = True) -> str:
    """The operator section: the comparison's message, the bar chart, a table of op types (this
    run's ms and share, the baseline's share, change) and the slowest nodes; ``""`` without a profile."""
    if not profile or not profile.get("ops"):
        return ""
    parts = ["<h3>Where the time goes: operators</h3>"]
    if comparison and comparison.get("message"):
        parts.append(f'<div class="message">{e(comparison["message"])}</div>')
    if plots:
        parts.append(mk.plot_or_note(lambda: plot_operators(profile, baseline), "operator chart"))
    past = {_op_key(o): o for o in (baseline or {}).get("ops") or []}
    rows = []
    for op in (profile.get("ops") or [])[:15]:
        then = past.get(_op_key(op))
        change = ""
        if then and is_num(then.get("time_us")) and float(then["time_us"]) > 0:
            change = f"{float(op['time_us']) / float(then['time_us']) - 1:+.0%}"
        rows.append(f"<tr><td>{e(op.get('op'))}</td><td>{e(str(op.get('ep', '')).removesuffix('ExecutionProvider'))}"
                    f"</td><td class=\"num\">{e(op.get('nodes'))}</td>"
                    f"<td class=\"num\">{e(fmt(float(op.get('time_us') or 0) / 1000, '.3f'))}</td>"
                    f"<td class=\"num\">{e(fraction_pct(op.get('share')))}</td>"
                    f"<td class=\"num\">{e(fraction_pct((then or {}).get('share')))}</td>"
                    f"<td class=\"num\">{e(change)}</td></tr>")
    parts.append("<table><tr><th>op type</th><th>EP</th><th>nodes</th><th>ms per run</th><th>share</th>"
                 f"<th>baseline share</th><th>change</th></tr>{''.join(rows)}</table>")
    nodes = profile.get("nodes") or []
    if nodes:
        parts.append("<details><summary>Slowest nodes</summary><table><tr><th>node</th><th>op type</th><th>EP</th>"
                     "<th>ms per run</th></tr>" + "".join(
                         f"<tr><td><code>{e(n.get('node'))}</code></td><td>{e(n.get('op'))}</td>"
                         f"<td>{e(str(n.get('ep', '')).removesuffix('ExecutionProvider'))}</td>"
                         f"<td class=\"num\">{e(fmt(float(n.get('time_us') or 0) / 1000, '.3f'))}</td></tr>"
                         for n in nodes) + "</table></details>")
    cpu = profile.get("cpu_nodes") or []
    if cpu:
        parts.append(f'<p class="muted">{len(cpu)} node(s) ran on the CPU EP: {e(", ".join(map(str, cpu[:20])))}'
                     + (" ..." if len(cpu) > 20 else "") + "</p>")
    parts.append(f'<p class="muted">{e(profile.get("runs"))} profiled run(s) in a separate session; times include'
                 " ORT's profiling overhead.</p>")
    return "".join(parts)


def kernels_block(metrics: Mapping[str, Any] | None) -> str:
    """GPU kernel figures (CUPTI or rocprof): kernels per run, KAR, active ratio, microkernels, top kernels."""
    if not metrics:
        return ""
    pairs = [("tracer", e(metrics.get("source"))), ("traced runs", e(metrics.get("runs"))),
             ("kernels per run", e(fmt(metrics.get("kernels_per_run"), ".1f"))),
             ("KAR (kernels per ONNX node)", e(fmt(metrics.get("kar"), ".2f"))),
             ("GPU active ratio", e(fraction_pct(metrics.get("active_ratio")))),
             ("microkernels (< 10 µs)", e(fraction_pct(metrics.get("microkernel_share")))),
             ("kernel time per run", e(fmt(metrics.get("kernel_ms"), ".3f", " ms"))),
             ("wall time per run", e(fmt(metrics.get("wall_ms"), ".3f", " ms")))]
    top = "".join(f"<tr><td><code>{e(str(t.get('name'))[:120])}</code></td><td class=\"num\">{e(t.get('count'))}</td>"
                  f"<td class=\"num\">{e(fmt(t.get('total_ms'), '.3f'))}</td>"
                  f"<td class=\"num\">{e(fraction_pct(t.get('share')))}</td></tr>" for t in metrics.get("top") or [])
    return ("<h3>GPU kernels</h3><div class=\"grid\"><div>" + f"<table>{mk.table_rows(pairs)}</table></div>"
            + (f"<div><table><tr><th>kernel</th><th>count</th><th>ms</th><th>share</th></tr>{top}</table></div>"
               if top else "") + "</div>")


def cold_start_block(cold: Mapping[str, Any] | None, verdict: Mapping[str, Any] | None = None,
                     history: Sequence[Mapping[str, object]] = (), plots: bool = True) -> str:
    """Cold start: the verdict's message, this run's fastest session against the earlier runs'
    (or, compared side by side, against the baseline side's fastest: ``cold["baseline_side"]``,
    then plotted in place of *history*), and the plot."""
    if not cold:
        return ""
    side = cold.get("baseline_side")
    if isinstance(side, Mapping):
        history = [{**side, "label": (verdict or {}).get("ref") or "baseline side"}]
    parts = ["<h3>Cold start</h3>"]
    if verdict and verdict.get("message"):
        cls = "bad" if verdict.get("fails") else ("warn" if verdict.get("outcome") == "inconclusive" else "")
        parts.append(f'<div class="message {cls}">{e(verdict["message"])}</div>')
    rows = []
    for key, words in METRICS:
        figures = ((verdict or {}).get("metrics") or {}).get(key) or {}
        cells = [fmt(cold.get(f"min_{key}"), ".1f", " ms"), fmt(figures.get("baseline_ms"), ".1f", " ms"),
                 pct(figures.get("ratio"))]
        if is_num(figures.get("geomean_current_ms")):  # paired: the per cent is the geometric means' ratio
            cells = [f"{fmt(figures.get('geomean_current_ms'), '.4g', ' ms')} (fastest {cells[0]})",
                     f"{fmt(figures.get('geomean_baseline_ms'), '.4g', ' ms')} (fastest {cells[1]})", cells[2]]
        rows.append(f"<tr><th>{e(words)}</th>" + "".join(f'<td class="num">{e(c)}</td>' for c in cells)
                    + f"<td>{e(figures.get('outcome') or '')}</td></tr>")
    split = ((verdict or {}).get("metrics") or {}).get("session_create_ms", {}).get("phases") or {}
    for key, words in PHASES:
        if is_num(cold.get(f"min_{key}")):
            then = (split.get(key) or {}).get("baseline_ms")
            ratio = float(cold[f"min_{key}"]) / then if isinstance(then, (int, float)) and then > 0 else None
            cells = [fmt(cold.get(f"min_{key}"), ".1f", " ms"), fmt(then, ".1f", " ms"), pct(ratio)]
            rows.append(f"<tr><td>&nbsp;&nbsp;of it: {e(words)} (ORT profiler)</td>"
                        + "".join(f'<td class="num">{e(c)}</td>' for c in cells) + "<td>not gated</td></tr>")
    against, change = (("baseline side (fastest session)", "change (paired)") if isinstance(side, Mapping)
                       else ("baseline (earlier runs' fastest)", "change"))
    parts.append(f"<table><tr><th></th><th>this run (fastest session)</th><th>{e(against)}</th><th>{e(change)}</th>"
                 f"<th>verdict</th></tr>{''.join(rows)}</table>")
    if plots:
        parts.append(mk.plot_or_note(lambda: plot_cold_start(cold, history), "cold-start plot"))
    if cold.get("compiles"):
        parts.append(f'<p class="muted">These figures include {e(cold["compiles"])}.</p>')
    return "".join(parts)
