"""GitHub Actions output: a Markdown job summary and workflow-command annotations.

* ``GITHUB_STEP_SUMMARY`` set (every Actions step has it): a Markdown section is **appended**
  to that file: failed items first (regressions before other failures), then a table of every
  item, then the machine fingerprint.
* ``GITHUB_ACTIONS=true``: one ``::error`` workflow command per failed item, one ``::warning`` per
  item that was not judged (withheld for CPU contention, blind, no baseline for this runner: issue 43)
  and per other inconclusive or unstable item (``::notice`` for items not gated because the
  fingerprint differs), each with the test's file and line, written to pytest's stdout where the
  runner reads them. The job summary leads with the count of items not judged. Values are
  escaped as GitHub's toolkit does (``actions/toolkit`` ``command.ts``): in the message ``%``,
  ``\\r``, ``\\n`` become ``%25``, ``%0D``, ``%0A``; in properties ``:`` and ``,`` also become
  ``%3A`` and ``%2C``.

See https://docs.github.com/en/actions/writing-workflows/choosing-what-your-workflow-does/workflow-commands-for-github-actions
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pytest_aaco.jsonio import JSONDict, append_text
from pytest_aaco.records import ItemRecord, Outcome, SessionSummary
from pytest_aaco.reports import ReportContext
from pytest_aaco.reports.markup import md_code, md_text, workflow_data, workflow_property
from pytest_aaco.reports.wording import (
    change_text,
    failure_text,
    fdr_sentence,
    headline,
    measured_summary,
    num,
    row_labels,
    verdict_cell,
)
from pytest_aaco.verdict.blind import not_judged_reason

#: GitHub refuses job summaries above 1 MiB per step; keep well below
MAX_SUMMARY_BYTES = 900_000
#: fingerprint fields that describe the item, not the machine (left out of the machine section)
ITEM_FIELDS = frozenset({"model_sha256", "input_shapes", "input_dtypes", "provider", "provider_options"})


# ---------------------------------------------------------------- escaping (pytest_aaco.reports.markup)

escape_data = workflow_data
escape_property = workflow_property


def command(name: str, message: str, **props: str | None) -> str:
    """One workflow command line: ``::name k=v,k=v::message``, every part escaped; None properties are left out."""
    given = [f"{k}={escape_property(v)}" for k, v in props.items() if v]
    return f"::{name}{' ' + ','.join(given) if given else ''}::{escape_data(message)}"


# ---------------------------------------------------------------- classification


def _title(record: ItemRecord) -> str:
    outcome = record.effective_outcome
    verdict = record.verdict
    metrics = record.failed_metrics
    if metrics and outcome == Outcome.REGRESSION:
        head = f"{' and '.join(verdict.metric_word(m) if verdict is not None else m for m in metrics)} regression"
    elif outcome == Outcome.REGRESSION:
        head = "performance regression"
    elif verdict is not None and verdict.memory:
        head = "memory regression"
    elif outcome == Outcome.INCONCLUSIVE:
        head = "inconclusive benchmark"
    elif verdict is not None and verdict.unstable:
        head = "unstable benchmark"
    else:
        head = f"benchmark {outcome or 'failed'}"
    return f"{head}: {record.label or record.nodeid}"


#: the reason an item without a baseline was not judged (:func:`not_judged`)
NO_BASELINE_REASON = "no baseline for this runner"


def not_judged(record: ItemRecord) -> str | None:
    """Why *record* passed without being judged: :data:`NO_BASELINE_REASON`, or the verdict's own reason
    (:func:`pytest_aaco.verdict.blind.not_judged_reason`: withheld for CPU contention, blind); None when it
    was judged or it failed (a failed item gets its ``::error``)."""
    v = record.verdict
    if v is None or record.fails:
        return None
    if v.outcome == Outcome.NO_BASELINE:
        return NO_BASELINE_REASON
    return not_judged_reason(v)


def _test_line(record: ItemRecord) -> str | None:
    """The line of the item's test function (1-based, ``test_line`` of the record, from pytest's
    ``item.location``), as a workflow command's ``line``; None when unknown."""
    line = record.extra.get("test_line")
    return str(line) if isinstance(line, int) and not isinstance(line, bool) and line > 0 else None


def workflow_commands(records: Sequence[ItemRecord]) -> list[str]:
    """Workflow-command lines, each with the test's ``file`` and ``line``: ``::error`` for failed items,
    ``::warning`` for items not judged (:func:`not_judged`, titled ``not judged: <item>``) and for other
    inconclusive or unstable ones, ``::notice`` for items not gated because the fingerprint differs."""
    lines = []
    for record in records:
        where = {"file": record.nodeid.split("::", 1)[0] or None, "line": _test_line(record)}
        why = not_judged(record)
        if record.fails:
            lines.append(command("error", failure_text(record), **where, title=_title(record)))
        elif why is not None:
            lines.append(command("warning", f"not judged: {why}. {record.explanation()}", **where,
                                 title=f"not judged: {record.label or record.nodeid}"))
        elif record.is_warning:
            lines.append(command("warning", record.explanation(), **where, title=_title(record)))
        elif record.effective_outcome == Outcome.MISMATCH:
            lines.append(command("notice", record.explanation(), **where, title=f"not gated: {record.label}"))
    return lines


def not_judged_line(records: Sequence[ItemRecord]) -> str | None:
    """The job summary's first line: ``Not judged: 3 of 5 items passed without a verdict (1 withheld or
    blind, 2 with no baseline for this runner): a[cpu] (CPU contention ...); b[cpu] (no baseline for this
    runner)``, with what fails them; None when every item was judged."""
    found = [(r.label or r.nodeid, why) for r in records if (why := not_judged(r)) is not None]
    if not found:
        return None
    missing = sum(why == NO_BASELINE_REASON for _, why in found)
    return (f"Not judged: {len(found)} of {len(records)} item{'s' * (len(records) != 1)} passed without a verdict"
            f" ({len(found) - missing} withheld or blind, {missing} with no baseline for this runner): "
            + "; ".join(f"{label} ({why})" for label, why in found)
            + ". --aaco-fail-blind and --aaco-require-baseline fail them.")


# ---------------------------------------------------------------- job summary


def _change(record: ItemRecord) -> str:
    v = record.verdict
    return "-" if v is None else change_text(v)


def _verdict_cell(record: ItemRecord) -> str:
    text = verdict_cell(record)
    return f"**{md_text(text)}**" if record.fails else md_text(text)


def table(records: Sequence[ItemRecord]) -> list[str]:
    """Markdown table rows: item (with its test where two items share a label), mean / p50 / p99
    ms and throughput (samples/s) of the measurement the change was computed on, the change
    labelled with its series and its 95% CI, one-sided p, verdict with the metrics that failed,
    fingerprint id."""
    lines = [
        "| item | mean ms | p50 ms | p99 ms | throughput/s | change vs baseline [bound compared] | p (slower) | verdict"
        " | fingerprint |",
        "|---|--:|--:|--:|--:|--:|--:|---|---|",
    ]
    for record, name in zip(records, row_labels(records), strict=True):
        summary = measured_summary(record)
        v = record.verdict
        cells = [
            md_text(name or record.nodeid),
            num(summary.of("mean_ms"), ".3f"), num(summary.of("p50_ms"), ".3f"), num(summary.of("p99_ms"), ".3f"),
            num(summary.of("throughput"), ".1f"), md_text(_change(record)),
            num(v.p_value if v is not None else None, ".2g"),
            _verdict_cell(record), md_code(v.fingerprint_id) if v is not None and v.fingerprint_id else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def machine_fingerprint(records: Sequence[ItemRecord]) -> JSONDict:
    """Fingerprint fields shared by every item that has one, minus the per-item fields
    (:data:`ITEM_FIELDS`): the machine and software the session ran on."""
    prints = [r.fingerprint for r in records if isinstance(r.fingerprint, dict)]
    if not prints:
        return {}
    common = {k: v for k, v in prints[0].items() if k not in ITEM_FIELDS}
    for other in prints[1:]:
        common = {k: v for k, v in common.items() if other.get(k) == v}
    return dict(sorted(common.items()))


def compare_sentence(records: Sequence[ItemRecord]) -> str | None:
    """``Compared side by side with origin/main: 2 measured, 5 unchanged, 1 new.``, or None when
    no item was gated side by side (``--aaco-compare``)."""
    refs = sorted({str(r.verdict.side_by_side.ref) for r in records
                   if r.verdict is not None and r.verdict.side_by_side})
    unchanged = sum(r.effective_outcome == Outcome.UNCHANGED for r in records)
    new = sum(r.effective_outcome == Outcome.NEW for r in records)
    if not refs and not unchanged and not new:
        return None
    measured = sum(1 for r in records if r.verdict is not None and r.verdict.side_by_side)
    named = ", ".join(refs) if refs else "the compared revision"
    return f"Compared side by side with {named}: {measured} measured, {unchanged} unchanged, {new} new."


def job_summary(records: Sequence[ItemRecord], summary: SessionSummary) -> str:
    """The Markdown appended to ``GITHUB_STEP_SUMMARY``: failed items, the table, the fingerprint."""
    failed = sorted((r for r in records if r.fails), key=lambda r: r.effective_outcome != Outcome.REGRESSION)
    warned = [r for r in records if r.is_warning]
    lines = [f"## pytest-aaco: {md_text(summary.counts_text)}", ""]
    lead = not_judged_line(records)  # what passed unjudged leads (issue 43)
    if lead:
        lines += [f"**{md_text(lead)}**", ""]
    compared = compare_sentence(records)
    if compared:
        lines += [md_text(compared), ""]
    if failed:
        lines += [f"### Failed ({len(failed)})", ""]
        for record in failed:
            lines.append(f"- **{md_text(record.label)}** {md_code(record.nodeid)}: {md_text(headline(record))}<br>"
                         f"{md_text(record.explanation())}")
        lines.append("")
    if warned:
        lines += [f"### Inconclusive or unstable ({len(warned)})", ""]
        lines += [f"- **{md_text(r.label)}**: {md_text(r.explanation())}" for r in warned]
        lines.append("")
    lines += ["### Results", ""] + table(records) + [""]
    sentence = fdr_sentence(summary, sum(r.is_regression for r in records))
    if sentence:
        lines += [f"False-alarm control: {md_text(sentence)}", ""]
    machine = machine_fingerprint(records)
    if machine:
        lines += ["<details><summary>Machine fingerprint</summary>", "", "| field | value |", "|---|---|"]
        lines += [f"| {md_text(k)} | {md_code(v)} |" for k, v in machine.items()]
        lines += ["", "</details>", ""]
    text = "\n".join(lines) + "\n"
    if len(text.encode("utf-8")) > MAX_SUMMARY_BYTES:
        head = text.encode("utf-8")[:MAX_SUMMARY_BYTES].decode("utf-8", errors="ignore")
        text = head.rsplit("\n", 1)[0] + "\n\n_(truncated: GitHub limits a job summary to 1 MiB)_\n"
    return text


def write(records: Sequence[ItemRecord], context: ReportContext) -> None:
    """Session-end writer: the job summary when ``GITHUB_STEP_SUMMARY`` is set, the annotations
    when ``GITHUB_ACTIONS`` is ``true``. A summary file that cannot be written is reported on
    the terminal, never raised."""
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    in_actions = os.environ.get("GITHUB_ACTIONS", "").strip().lower() == "true"
    if not summary_path and not in_actions:
        return
    if summary_path:
        try:
            append_text(summary_path, job_summary(records, context.summary))  # a FIFO or device: never blocks
        except OSError as exc:
            context.say(f"pytest-aaco: cannot append the job summary to {summary_path}: {exc.strerror or exc}",
                        yellow=True)
    if in_actions:
        for line in workflow_commands(records):
            context.say(line, workflow_command=True)
