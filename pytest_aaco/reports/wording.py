"""The words every report shares: what a per cent is, what failed, and how an item is named.

* :func:`series_word`: the label of a verdict's change: ``adjusted`` (for the reference
  workload, a fitted slope), ``normalized`` (divided by it), ``raw``, or ``paired`` (measured side
  by side, per-cycle ratios). :func:`change_text` is the change with that label, its 95% CI and,
  when the tested series is not the raw one, the raw change next to it.
* :func:`verdict_cell`: the table's verdict with the metrics that failed, read from the one rule,
  :attr:`pytest_aaco.records.item.ItemRecord.failed_metrics`.
* :func:`headline`: the first line of a failing item's failure (pytest's short summary shows
  it), at most 160 characters: ``OUTCOME item: metric +x.x% [bound compared] (series) vs what``, e.g.
  ``REGRESSION mlp[cpu]: latency +10.2% [lower bound +5.0% > 0, +10.2% >= 5%] (adjusted; raw +9.8%) vs baseline``.
* :func:`measured_summary`: the summary figures of the measurement the verdict was computed
  on (the confirmation's when a fresh session confirmed the regression), so the table's mean
  and the message's agree.
* :func:`row_names`: the model cell of result tables, with the test name added where two rows
  would read the same; :func:`junit_names`: pytest's own JUnit ``classname`` and ``name``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pytest_aaco.records.base import DEVICE_TIME, Outcome
from pytest_aaco.records.device import ColdStartVerdictRecord, Figures
from pytest_aaco.records.item import ItemRecord, SessionSummary
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.verdict.blind import blind_mde
from pytest_aaco.verdict.percent import bound_text, pct

#: ``Verdict.series`` -> the label of the change
SERIES_WORDS = {"adjusted": "adjusted", "normalized": "normalized", "raw": "raw"}


def series_word(v: Verdict) -> str:
    """What the verdict's change is: ``paired`` side by side, else its series (``adjusted``,
    ``normalized``, ``raw``); ``raw`` when the verdict does not say (an older bundle)."""
    if v.side_by_side is not None:
        return "paired"
    return SERIES_WORDS.get(v.series or "", "raw")


def change_text(v: Verdict, ci: bool = True, with_raw: bool = True) -> str:
    """``+10.2% adjusted [lower bound +5.0% > 0, +10.2% >= 5%]; raw +9.8%``: the tested change with its
    label, the one-sided bound the outcome rule compared (with *ci*; :func:`pytest_aaco.verdict.percent.bound_text`;
    a record written before bounds were stored: its 95% CI ``[+5.0, +15.3]``) and the raw change (with
    *with_raw*, when another series was tested); ``-`` without a change."""
    if v.ratio is None:
        return "-"
    text = f"{pct(v.ratio)} {series_word(v)}"
    bound = bound_text(v.ratio, v.lower_bound, v.upper_bound, v.threshold)
    if ci and bound:
        text += f" [{bound}]"
    elif ci and v.ci_low is not None and v.ci_high is not None:  # a record written before bounds: its 95% CI
        text += f" [{(v.ci_low - 1) * 100:+.1f}, {(v.ci_high - 1) * 100:+.1f}]"
    if with_raw and v.series in ("adjusted", "normalized") and v.raw_ratio is not None and v.side_by_side is None:
        text += f"; raw {pct(v.raw_ratio)}"
    return text


def verdict_cell(record: ItemRecord) -> str:
    """The verdict column: the outcome, the metrics that failed (``regression (cold start)``,
    ``regression (device time; confirmed)``) or the one that decided the word (``no-regression
    (device time)``), ``confirmed`` for a regression a fresh session confirmed, ``withheld`` for one
    withheld for CPU contention, and ``unstable``; for an item without a verdict, pytest's outcome
    and the start of the error."""
    v = record.verdict
    if record.error and v is None:
        return f"{record.outcome}: {record.error[:60]}"
    outcome = record.effective_outcome
    metrics = record.failed_metrics
    extras = []
    # "regression" alone means a latency regression without device time; anything else names its metrics
    if v is not None and not metrics and v.decided_by is not None:
        extras.append(v.decided_by)
    elif metrics and (metrics != ["latency"] or outcome != Outcome.REGRESSION or (v is not None and v.device)):
        extras.append(", ".join(v.metric_word(m) if v is not None else m for m in metrics))
    if v is not None and v.confirmed and outcome == Outcome.REGRESSION:
        extras.append("confirmed")
    if (v is not None and v.contention is not None) or record.cold_start_withheld:
        extras.append("withheld: CPU contention")
    if v is not None and v.unstable:
        extras.append("unstable")
    return str(outcome) + (f" ({'; '.join(extras)})" if extras else "")


def measured_summary(record: ItemRecord) -> Figures:
    """The summary figures (``mean_ms``, ``p50_ms``, ``p99_ms``, ``throughput`` ...) of the
    measurement the verdict's change was computed on: the confirmation measurement's when a
    fresh session confirmed a regression, else the item's own; empty without a result."""
    v = record.verdict
    result = record.result_record
    if result is None:
        return Figures()
    if v is not None and v.confirmed and v.side_by_side is None and result.confirmation is not None:
        return result.confirmation
    return result.summary


#: the most characters a headline takes (pytest's short summary, JUnit's failure message, GitHub's title)
HEADLINE_LIMIT = 160


def _cold_start_part(record: ItemRecord) -> str:
    cold = record.cold_start_record
    verdict = cold.verdict if cold is not None and cold.verdict is not None else ColdStartVerdictRecord()
    where = f"(paired) vs {verdict.ref}" if verdict.method == "side-by-side" else "vs history"
    shown = []
    for key, words in (("first_run_ms", "first run"), ("session_create_ms", "session creation")):
        figures = verdict.figures(key)
        if figures.outcome == str(Outcome.REGRESSION) and figures.ratio is not None:
            shown.append(f"{words} {pct(figures.ratio, 0)}")
    return f"cold start {', '.join(shown) or 'regression'} {where}"


def _timed_part(metric: str, ratio: float, bound: str, series: str, vs: str, bounds: bool) -> str:
    """``wall time +10.2% [lower bound +5.0% > 0, +10.2% >= 5%] (adjusted) vs baseline``."""
    return f"{metric} {pct(ratio)}{f' [{bound}]' if bounds and bound else ''} ({series}) vs {vs}"


def _parts(record: ItemRecord, bounds: bool) -> list[str]:
    v = record.verdict
    parts = []
    for metric in record.failed_metrics:
        if metric == "latency" and v is not None:
            name = v.metric_word(metric)
            why = {Outcome.IMPROVEMENT: " (fails with --aaco-fail-on-improvement)",
                   Outcome.INCONCLUSIVE: " (fails with --aaco-strict-inconclusive)"}.get(v.wall_outcome, "")
            if v.wall_outcome == Outcome.INCONCLUSIVE and (mde := blind_mde(v)) is not None:  # verdict/blind.py
                why = (" (fails with --aaco-fail-blind or --aaco-strict-inconclusive: minimum detectable effect"
                       f" {mde:.0%})")
            if v.ratio is None:
                parts.append(f"{name}{why}")
                continue
            series = series_word(v)
            if v.series in ("adjusted", "normalized") and v.raw_ratio is not None and v.side_by_side is None:
                series += f"; raw {pct(v.raw_ratio)}"
            vs = v.side_by_side.ref if v.side_by_side is not None else "baseline"
            bound = bound_text(v.ratio, v.lower_bound, v.upper_bound, v.threshold)
            parts.append(_timed_part(name, v.ratio, bound, series, str(vs), bounds) + why)
        elif metric == "device time" and v is not None and (dev := v.judgements.get(DEVICE_TIME)) is not None:
            series = dev.series or ("paired" if v.side_by_side is not None else "raw")
            vs = v.side_by_side.ref if v.side_by_side is not None else "baseline"
            bound = bound_text(dev.ratio, dev.lower_bound, dev.upper_bound, dev.threshold)
            parts.append(_timed_part("device time", dev.ratio, bound, series, str(vs), bounds))
        elif metric == "p99" and v is not None and v.p99 is not None:
            parts.append(f"p99 {pct(v.p99.ratio)} vs the latest baseline run")
        elif metric == "memory" and v is not None and v.memory:
            parts.append(f"memory: {v.memory[0]}")
        elif metric == "cold start":
            parts.append(_cold_start_part(record))
    return parts


def headline(record: ItemRecord) -> str:
    """The first line of a failing item's failure, at most :data:`HEADLINE_LIMIT` characters:
    ``OUTCOME item: metric +x.x% [bound compared] (series) vs what``, e.g.
    ``REGRESSION mlp[cpu]: latency +10.2% [lower bound +5.0% > 0, +10.2% >= 5%] (adjusted; raw +9.8%) vs baseline``,
    ``REGRESSION resnet50[cuda]: cold start first run +73% (paired) vs origin/main``; several failed
    metrics are joined with ``; `` (the bounds left out, then the line cut, where it would not fit).
    OUTCOME is ``REGRESSION`` when a metric regressed, else the failing wall-time outcome. An item
    that failed without a metric (an error, a provider that failed) gets the first line of its message.
    Method notes are never in it: they are the report's (:attr:`pytest_aaco.records.verdict.Verdict.report_notes`).
    """
    v = record.verdict
    if not record.failed_metrics:
        line = record.message.splitlines()[0] if record.message else str(record.effective_outcome)
        return line if len(line) <= HEADLINE_LIMIT else line[:HEADLINE_LIMIT - 1] + "\u2026"
    word = "REGRESSION"
    if not record.is_regression and v is not None:
        word = {Outcome.IMPROVEMENT: "IMPROVEMENT"}.get(v.wall_outcome, "INCONCLUSIVE")
    line = ""
    for bounds in (True, False):
        line = f"{word} {record.label}: " + "; ".join(_parts(record, bounds))
        if len(line) <= HEADLINE_LIMIT:
            return line
    return line[:HEADLINE_LIMIT - 1] + "\u2026"


def failure_text(record: ItemRecord) -> str:
    """What ``pytest.fail`` says for a failing item: :func:`headline`, then the whole
    :meth:`~pytest_aaco.records.item.ItemRecord.explanation` (without what to try) on the next lines."""
    return headline(record) + "\n" + record.explanation(with_recommendation=False)


# ---------------------------------------------------------------- names


def nodeid_test(nodeid: str) -> str:
    """The test of a node id without its file and parameters: ``perf/test_x.py::TestA::test_b[p]``
    -> ``TestA::test_b``."""
    parts = nodeid.split("::")[1:] or [nodeid]
    parts[-1] = parts[-1].split("[", 1)[0]
    return "::".join(parts)


def row_names(records: Sequence[ItemRecord]) -> list[str]:
    """The model cell of each row: the model, with the test name added (``tiny test_other``)
    when another row has the same model and provider; with the whole node id (parameters
    left out) when the test names do not tell them apart either."""
    keys = Counter((r.model, r.provider) for r in records)
    tests = Counter((r.model, r.provider, nodeid_test(r.nodeid)) for r in records)
    names = []
    for r in records:
        if keys[(r.model, r.provider)] == 1:
            names.append(r.model)
        elif tests[(r.model, r.provider, nodeid_test(r.nodeid))] == 1:
            names.append(f"{r.model} {nodeid_test(r.nodeid)}")
        else:
            names.append(f"{r.model} {r.nodeid.split('[', 1)[0]}")
    return names


def row_labels(records: Sequence[ItemRecord]) -> list[str]:
    """As :func:`row_names`, for tables that name the item by its label (``tiny[cpu]``)."""
    keys = Counter(r.label for r in records)
    tests = Counter((r.label, nodeid_test(r.nodeid)) for r in records)
    names = []
    for r in records:
        if keys[r.label] == 1:
            names.append(r.label)
        elif tests[(r.label, nodeid_test(r.nodeid))] == 1:
            names.append(f"{r.label} {nodeid_test(r.nodeid)}")
        else:
            names.append(f"{r.label} {r.nodeid.split('[', 1)[0]}")
    return names


def junit_names(nodeid: str) -> tuple[str, str]:
    """``(classname, name)`` as pytest's own ``--junitxml`` writes them (``_pytest/junitxml.py``,
    ``mangle_test_address``): ``tests/perf/test_models.py::TestA::test_x[a-b]`` ->
    ``("tests.perf.test_models.TestA", "test_x[a-b]")``."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = names[0].replace("\\", "/").replace("/", ".").removesuffix(".py")
    names[-1] += bracket + params
    if len(names) == 1:
        return names[0], names[0]
    return ".".join(names[:-1]), names[-1]


def num(value: object, fmt: str) -> str:
    """*value* formatted with *fmt*, or ``-`` for anything but a number."""
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def fdr_sentence(summary: SessionSummary, regressions: int | None = None) -> str | None:
    """``LOND at FDR 0.05 over 3 items; 2 gated, 1 regression(s).``, or None without LOND.
    *regressions*: the items that regressed on any metric, as the terminal counts them
    (:func:`pytest_aaco.reports.terminal.lond_line`); without it, LOND's discoveries."""
    fdr = summary.fdr
    if fdr is None or not fdr.method:
        return None
    count = fdr.discoveries if regressions is None else regressions
    return f"{fdr.method} at FDR {fdr.alpha} over {fdr.m} items; {fdr.tests} gated, {count} regression(s)."
