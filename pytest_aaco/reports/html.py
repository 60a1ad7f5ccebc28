"""``--aaco-html PATH``: one self-contained HTML file (inline CSS and SVG, no script, no network).

Per item: the verdict and its message, a table of this run's figures against the baseline's,
four plots (the latency distribution as histogram and ECDF against the latest baseline run's
raw iterations; every iteration in time order, warmup included; the round means of this run
beside those of the baseline history), the telemetry over the measured phase, the bottleneck
diagnosis with its evidence, and the fingerprint. Then the machine's environment record.

Where the item recorded them, the operator profile, the GPU kernel figures and the cold start
over its history follow (:mod:`pytest_aaco.reports.breakdown`).

Plots are drawn (:mod:`pytest_aaco.reports.html_plots`) with matplotlib (the ``[plots]`` extra:
``pip install pytest-aaco[plots]``), imported only when a report is written, through
``matplotlib.figure.Figure`` (no pyplot, no
global backend state) and ``savefig(format="svg")``. Without matplotlib the page has every table
and, where each plot would be, a note saying how to get it (:func:`plot_placeholder`). Every text from
records, messages and the environment is HTML-escaped.

:func:`render_html` is shared with ``aaco report BUNDLE --html OUT``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from pytest_aaco.jsonio import JSONDict, atomic_write_text
from pytest_aaco.measure.commit import commit_text
from pytest_aaco.records.base import DEVICE_TIME, Outcome
from pytest_aaco.records.device import (
    BaselineRecord,
    DiagnosisRecord,
    Figures,
    ResultRecord,
)
from pytest_aaco.records.item import ItemRecord, SessionSummary, several_gpus
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.reports import ReportContext
from pytest_aaco.reports.breakdown import cold_start_block, kernels_block, profile_block
from pytest_aaco.reports.html_plots import (
    _history,
    _ref,
    _this_side,
    plot_cycle_ratios,
    plot_latency,
    plot_panels,
    plot_telemetry,
)
from pytest_aaco.reports.markup import (
    e,
    fmt,
    fraction_pct,
    is_num,
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


def _anchor(nodeid: str) -> str:
    return "item-" + re.sub(r"[^A-Za-z0-9_-]+", "-", nodeid).strip("-")


def _badge(outcome: Outcome) -> str:
    return f'<span class="badge {OUTCOME_CLASS.get(outcome, "neutral")}">{e(outcome)}</span>'


# ---------------------------------------------------------------- plots (matplotlib)


def _matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True



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
