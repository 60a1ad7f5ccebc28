"""GitHub Actions output: a Markdown job summary and workflow-command annotations.

* ``GITHUB_STEP_SUMMARY`` set (every Actions step has it): a Markdown section is **appended**
  to that file: failed items first (regressions before other failures), then a table of every
  item, then the machine fingerprint.
* ``GITHUB_ACTIONS=true``: one ``::error`` workflow command per failed item and one
  ``::warning`` per inconclusive or unstable item (``::notice`` for items not gated because
  the fingerprint differs), written to pytest's stdout where the runner reads them. Values are
  escaped as GitHub's toolkit does (``actions/toolkit`` ``command.ts``): in the message ``%``,
  ``\\r``, ``\\n`` become ``%25``, ``%0D``, ``%0A``; in properties ``:`` and ``,`` also become
  ``%3A`` and ``%2C``.

See https://docs.github.com/en/actions/writing-workflows/choosing-what-your-workflow-does/workflow-commands-for-github-actions
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..gate import AacoPlugin

#: GitHub refuses job summaries above 1 MiB per step; keep well below
MAX_SUMMARY_BYTES = 900_000
#: fingerprint fields that describe the item, not the machine (left out of the machine section)
ITEM_FIELDS = frozenset({"model_sha256", "input_shapes", "input_dtypes", "provider", "provider_options"})
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


# ---------------------------------------------------------------- escaping


def escape_data(text: str) -> str:
    """Escape a workflow-command message: ``%`` -> ``%25``, CR -> ``%0D``, LF -> ``%0A``."""
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow-command property value: as :func:`escape_data`, plus ``:`` -> ``%3A``, ``,`` -> ``%2C``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str, **props: str | None) -> str:
    """One workflow command line: ``::name k=v,k=v::message``, every part escaped; None properties are left out."""
    given = [f"{k}={escape_property(v)}" for k, v in props.items() if v]
    return f"::{name}{' ' + ','.join(given) if given else ''}::{escape_data(message)}"


def md_text(text: Any) -> str:
    """Markdown-safe inline text: HTML special characters as entities, Markdown punctuation
    backslash-escaped, line breaks as ``<br>`` (so the text also stays inside a table cell)."""
    escaped = html.escape(str(text), quote=False)
    escaped = _MD_SPECIAL.sub(r"\\\1", escaped)
    return escaped.replace("\r\n", "\n").replace("\n", "<br>")


def md_code(text: Any) -> str:
    """*text* as inline ``<code>``, HTML-escaped, with ``|`` as an entity so tables are not split."""
    return "<code>" + html.escape(str(text)).replace("|", "&#124;") + "</code>"


# ---------------------------------------------------------------- classification


def _outcome(record: dict[str, Any]) -> str:
    return str((record.get("verdict") or {}).get("outcome") or record.get("outcome") or "")


def is_failure(record: dict[str, Any]) -> bool:
    """The item failed (regression, memory / p99 regression, strict inconclusive, provider error)."""
    return record.get("outcome") == "failed" or bool((record.get("verdict") or {}).get("fails"))


def is_warning(record: dict[str, Any]) -> bool:
    """Not failed, but inconclusive or flagged unstable."""
    verdict = record.get("verdict") or {}
    return not is_failure(record) and (verdict.get("outcome") == "inconclusive" or bool(verdict.get("unstable")))


def _message(record: dict[str, Any]) -> str:
    verdict = record.get("verdict") or {}
    text = str(verdict.get("message") or record.get("error") or record.get("outcome") or "")
    diagnosis = record.get("diagnosis")
    if diagnosis:
        text += f"\nlikely cause: {diagnosis.get('category')}: " + "; ".join(diagnosis.get("evidence") or [])
        if diagnosis.get("recommendation"):
            text += f"\ntry: {diagnosis['recommendation']}"
    return text


def _title(record: dict[str, Any]) -> str:
    outcome = _outcome(record)
    verdict = record.get("verdict") or {}
    if outcome == "regression":
        head = "performance regression"
    elif verdict.get("memory"):
        head = "memory regression"
    elif outcome == "inconclusive":
        head = "inconclusive benchmark"
    elif verdict.get("unstable"):
        head = "unstable benchmark"
    else:
        head = f"benchmark {outcome or 'failed'}"
    return f"{head}: {record.get('label') or record.get('nodeid')}"


def workflow_commands(records: list[dict[str, Any]]) -> list[str]:
    """Workflow-command lines: ``::error`` for failed items, ``::warning`` for inconclusive or
    unstable ones, ``::notice`` for items not gated because the fingerprint differs."""
    lines = []
    for record in records:
        path = str(record.get("nodeid", "")).split("::", 1)[0] or None
        if is_failure(record):
            lines.append(command("error", _message(record), file=path, title=_title(record)))
        elif is_warning(record):
            lines.append(command("warning", _message(record), file=path, title=_title(record)))
        elif _outcome(record) == "fingerprint-mismatch":
            lines.append(command("notice", _message(record), file=path, title=f"not gated: {record.get('label')}"))
    return lines


# ---------------------------------------------------------------- job summary


def _num(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def _change(verdict: dict[str, Any]) -> str:
    ratio = verdict.get("ratio")
    if not isinstance(ratio, (int, float)):
        return "-"
    text = f"{(ratio - 1) * 100:+.1f}%"
    lo, hi = verdict.get("ci_low"), verdict.get("ci_high")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        text += f" ({(lo - 1) * 100:+.1f} .. {(hi - 1) * 100:+.1f})"
    return text


def _verdict_cell(record: dict[str, Any]) -> str:
    verdict = record.get("verdict") or {}
    text = _outcome(record)
    if verdict.get("unstable"):
        text += " (unstable)"
    if verdict.get("memory"):
        text += " (memory)"
    if is_failure(record):
        text = f"**{md_text(text)}**"
        return text
    return md_text(text)


def table(records: list[dict[str, Any]]) -> list[str]:
    """Markdown table rows: item, mean / p50 / p99 ms, throughput (samples/s), change with its
    95% CI, one-sided p, verdict, fingerprint id."""
    lines = [
        "| item | mean ms | p50 ms | p99 ms | throughput/s | vs baseline (95% CI) | p (slower) | verdict"
        " | fingerprint |",
        "|---|--:|--:|--:|--:|--:|--:|---|---|",
    ]
    for record in records:
        summary = (record.get("result") or {}).get("summary") or {}
        verdict = record.get("verdict") or {}
        cells = [
            md_text(record.get("label") or record.get("nodeid")),
            _num(summary.get("mean_ms"), ".3f"), _num(summary.get("p50_ms"), ".3f"), _num(summary.get("p99_ms"), ".3f"),
            _num(summary.get("throughput"), ".1f"), md_text(_change(verdict)), _num(verdict.get("p_value"), ".2g"),
            _verdict_cell(record), md_code(verdict["fingerprint_id"]) if verdict.get("fingerprint_id") else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def machine_fingerprint(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Fingerprint fields shared by every item that has one, minus the per-item fields
    (:data:`ITEM_FIELDS`): the machine and software the session ran on."""
    prints = [r["fingerprint"] for r in records if isinstance(r.get("fingerprint"), dict)]
    if not prints:
        return {}
    common = {k: v for k, v in prints[0].items() if k not in ITEM_FIELDS}
    for other in prints[1:]:
        common = {k: v for k, v in common.items() if other.get(k) == v}
    return dict(sorted(common.items()))


def _counts(summary: dict[str, Any]) -> str:
    verdicts = summary.get("verdicts") or {}
    return ", ".join(f"{n} {k}" for k, n in sorted(verdicts.items())) or "no items"


def job_summary(records: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    """The Markdown appended to ``GITHUB_STEP_SUMMARY``: failed items, the table, the fingerprint."""
    failed = sorted((r for r in records if is_failure(r)), key=lambda r: _outcome(r) != "regression")
    warned = [r for r in records if is_warning(r)]
    lines = [f"## pytest-aaco: {md_text(_counts(summary))}", ""]
    if failed:
        lines += [f"### Failed ({len(failed)})", ""]
        for record in failed:
            lines.append(f"- **{md_text(record.get('label'))}** {md_code(record.get('nodeid'))}: "
                         f"{md_text(_message(record))}")
        lines.append("")
    if warned:
        lines += [f"### Inconclusive or unstable ({len(warned)})", ""]
        lines += [f"- **{md_text(r.get('label'))}**: {md_text(_message(r))}" for r in warned]
        lines.append("")
    lines += ["### Results", ""] + table(records) + [""]
    fdr = summary.get("fdr_control") or {}
    if isinstance(fdr, dict) and fdr.get("method"):
        lines += [f"False-alarm control: {md_text(fdr['method'])} at FDR {md_text(fdr.get('alpha'))} over"
                  f" {md_text(fdr.get('m'))} items; {md_text(fdr.get('tests'))} gated,"
                  f" {md_text(fdr.get('discoveries'))} regression(s).", ""]
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


def write(plugin: AacoPlugin, summary: dict[str, Any]) -> None:
    """Session-end writer: the job summary when ``GITHUB_STEP_SUMMARY`` is set, the annotations
    when ``GITHUB_ACTIONS`` is ``true``. A summary file that cannot be written is reported on
    the terminal, never raised."""
    from .progress import write_line

    summary_path = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    in_actions = os.environ.get("GITHUB_ACTIONS", "").strip().lower() == "true"
    if not summary_path and not in_actions:
        return
    records = [r.to_dict() for r in plugin.records]
    if summary_path:
        try:
            with Path(summary_path).open("a", encoding="utf-8") as handle:
                handle.write(job_summary(records, summary))
        except OSError as exc:
            write_line(plugin, f"pytest-aaco: cannot append the job summary to {summary_path}: {exc.strerror or exc}",
                       yellow=True)
    if in_actions:
        for line in workflow_commands(records):
            write_line(plugin, line)
