"""One report for a fleet of runners: the session bundles of several CI jobs merged.

``aaco report BUNDLE [BUNDLE ...]`` reads each bundle (:func:`pytest_aaco.reports.bundle.load_session`)
and gives one table, one HTML page and one GitHub job summary, and one exit status for them all.

Each row names its **runner**: the machine key of the item's fingerprint (the folder name its
stored baselines live under: CPU model, cores and GPU name,
:attr:`pytest_aaco.history.fingerprint.Fingerprint.machine_key`), else the same key computed from
the bundle's ``environment.json`` (items that were not measured: unchanged under
``--aaco-compare``, errors), and the GPU the item ran on. The same item from two bundles is two
rows, kept apart by runner; where two bundles share a runner (two jobs on runners of one kind) and
both hold the item, the rows carry ``#1``, ``#2`` in the order the bundles were given (the
report's runner lines say which bundle is which). Bundles of shards (``--aaco-shard K/N``) of one
suite on one runner kind hold disjoint items, so their rows together are the whole suite. False
alarms are controlled per job (each bundle's own LOND), and the report says so. Each bundle's cost
ledger (``session_meta.json``'s ``cost``, :mod:`pytest_aaco.reports.cost`) gives the lines saying where
its minutes went.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

from pytest_aaco.jsonio import JSONDict, JSONValue
from pytest_aaco.records.item import ItemRecord, SessionSummary
from pytest_aaco.reports.bundle import LoadedSession, load_session, missing_data, records_of
from pytest_aaco.reports.cost import ledger_lines
from pytest_aaco.reports.github import job_summary, md_text
from pytest_aaco.reports.html import render_html
from pytest_aaco.reports.markup import e
from pytest_aaco.reports.terminal import COLUMNS, NUMERIC, detail_lines, format_rows
from pytest_aaco.reports.terminal import row as table_row
from pytest_aaco.reports.wording import row_names
from pytest_aaco.verdict.comparable import Fingerprint

#: provider names of items that ran on no GPU (their runner key has no GPU name)
CPU_ONLY = ("cpu", "")


@dataclass
class RunnerBundle:
    """One job's bundle: its folder, ``session_meta.json``, ``environment.json`` and item records."""

    path: Path
    meta: JSONDict
    environment: JSONDict
    records: list[ItemRecord]
    problems: list[str] = field(default_factory=list)
    #: what the bundle lacks (:func:`pytest_aaco.reports.bundle.missing_data`): each names the file
    missing: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class MergedRow:
    """One item of one bundle: the record, the runner (machine key) and the GPU it ran on ("-": none)."""

    record: ItemRecord
    runner: str
    gpu: str
    bundle: RunnerBundle


def environment_key(environment: Mapping[str, object], gpu_name: object) -> str:
    """The machine key from a bundle's environment (CPU model and logical cores) and *gpu_name*:
    :attr:`~pytest_aaco.verdict.comparable.Fingerprint.machine_key` of those fields (a field the bundle
    lacks is left out, as a fingerprint without it would be)."""
    found = environment.get("cpu")
    cpu: Mapping[str, object] = found if isinstance(found, dict) else {}
    fields = {"cpu_model": cpu.get("model"), "cpu_cores": cpu.get("logical_cores"), "gpu_name": gpu_name}
    known: JSONDict = {k: cast("JSONValue", v) for k, v in fields.items() if v is not None}  # JSON read back
    return Fingerprint(known).machine_key


def runner_of(record: ItemRecord, environment: Mapping[str, object]) -> tuple[str, str]:
    """``(machine key, GPU name or "-")`` of *record* from a bundle with *environment*: the key of its
    fingerprint when it has one, else :func:`environment_key` (with the bundle's GPU for a non-CPU EP)."""
    gpu = (record.gpu or {}).get("name") if isinstance(record.gpu, dict) else None
    fingerprint = record.fingerprint if isinstance(record.fingerprint, dict) else {}
    if fingerprint.get("cpu_model") is not None:
        return Fingerprint(fingerprint).machine_key, str(gpu or fingerprint.get("gpu_name") or "-")
    found = environment.get("gpu")
    env_gpu: Mapping[str, object] = found if isinstance(found, dict) else {}
    on_gpu = record.provider not in CPU_ONLY
    name = gpu or (env_gpu.get("name") if on_gpu else None)
    return environment_key(environment, name), str(name or "-")


def load_bundle(path: Path, session: LoadedSession | None = None) -> RunnerBundle:
    """The bundle at *path*, from *session* (what :func:`~pytest_aaco.reports.bundle.load_session` read
    there) or read now. Raises :class:`~pytest_aaco.jsonio.AacoFileError` for a file that does not
    parse (the message names it); item files that cannot be read are listed in ``problems``, and
    everything the bundle lacks in ``missing``."""
    if session is None:
        session = load_session(path)
    records = records_of(session)
    problems = [f"{path.name}: {name} skipped: {problem}" for name, problem in session["errors"].items()]
    environment = session["environment"]
    meta = session["meta"]
    return RunnerBundle(path, meta if isinstance(meta, dict) else {},
                        environment if isinstance(environment, dict) else {}, records, problems, missing_data(session))


def merge(bundles: list[RunnerBundle]) -> list[MergedRow]:
    """The rows of every bundle, by runner then node id. Where two bundles on one runner hold the same
    node id, each such row's runner gets ``@<bundle folder>``, so no two rows share (runner, node id)."""
    rows = [MergedRow(r, *runner_of(r, b.environment), b) for b in bundles for r in b.records]
    seen = Counter((row.runner, row.record.nodeid) for row in rows)
    clashing: dict[str, list[RunnerBundle]] = {}
    for row in rows:
        if seen[(row.runner, row.record.nodeid)] > 1 and row.bundle not in clashing.setdefault(row.runner, []):
            clashing[row.runner].append(row.bundle)
    for row in rows:
        jobs = clashing.get(row.runner) or []
        if row.bundle in jobs:
            row.runner = f"{row.runner} #{jobs.index(row.bundle) + 1}"
    return sorted(rows, key=lambda row: (row.runner, row.record.nodeid))


def tagged(rows: list[MergedRow]) -> list[ItemRecord]:
    """Copies of the rows' records named for their runner (``squeezenet[cpu] @ <runner>``, node id
    ``<runner>::<node id>``), for the writers that take records (HTML, job summary), so the same
    item from two runners stays two items there."""
    out = []
    for row in rows:
        where = row.runner if row.gpu == "-" else f"{row.runner} ({row.gpu})"
        out.append(replace(row.record, label=f"{row.record.label} @ {where}", model=f"{row.record.model} @ {where}",
                           nodeid=f"{row.runner}::{row.record.nodeid}"))
    return out


def exit_status(rows: list[MergedRow]) -> int:
    """1 when any row holds a regression (as ``aaco report`` of one bundle), else 0; the ``aaco``
    command exits 2 instead when a bundle lacks data (:attr:`RunnerBundle.missing`)."""
    return 1 if any(row.record.is_regression for row in rows) else 0


def runner_lines(bundles: list[RunnerBundle], rows: list[MergedRow]) -> list[str]:
    """Per bundle: its runner(s), items, started, false-alarm control, and its cost ledger's lines."""
    lines = []
    for bundle in bundles:
        runners = sorted({row.runner for row in rows if row.bundle is bundle})
        meta = bundle.meta
        summary = meta.get("summary")
        fdr = (summary.get("fdr_control") or {}) if isinstance(summary, dict) else {}
        control = (f"; LOND at FDR {fdr.get('alpha')} over its {fdr.get('m')} items" if fdr.get("method") else "")
        lines.append(f"{bundle.name}: runner {', '.join(runners) or '-'}, {len(bundle.records)} item(s), started"
                     f" {meta.get('started_at') or meta.get('bundle_started_at') or '-'}{control}")
        lines += ["  " + line for line in ledger_lines(meta.get("cost") or {})]
    return lines


def text_lines(bundles: list[RunnerBundle], rows: list[MergedRow]) -> list[str]:
    """The merged report as text: a line per bundle with where its time went, the table (runner and
    GPU columns first), and the lines of the items a person may act on."""

    lines = [f"{len(bundles)} session bundles, {len(rows)} item(s) on"
             f" {len({r.runner for r in rows})} runner(s):"] + runner_lines(bundles, rows)
    names: dict[int, str] = {}
    for runner in {r.runner for r in rows}:
        mine = [r for r in rows if r.runner == runner]
        names.update({id(r): name for r, name in zip(mine, row_names([r.record for r in mine]), strict=True)})
    table = [(r.runner, r.gpu, *table_row(r.record, names[id(r)])) for r in rows]
    lines += format_rows(("runner", "gpu", *COLUMNS), table, frozenset(i + 2 for i in NUMERIC))
    lines += detail_lines(tagged(rows))
    lines.append("false alarms: controlled per job (each bundle's own LOND)")
    return lines


def summary_of(rows: list[MergedRow]) -> SessionSummary:
    """Counts of the merged rows' effective outcomes (no LOND state: each job controlled its own)."""
    return SessionSummary.of([row.record for row in rows])


def html_page(bundles: list[RunnerBundle], rows: list[MergedRow], title: str) -> str:
    """One HTML page for the merged rows (:func:`pytest_aaco.reports.html.render_html` on
    :func:`tagged` records), with the runners and where each job's time went under the title."""
    page = render_html(tagged(rows), summary_of(rows), None, title=title)
    block = ('<section class="block"><h2>Runners</h2><pre>' + e("\n".join(runner_lines(bundles, rows)))
             + "</pre><p class=\"muted\">False alarms are controlled per job (each bundle's own LOND).</p></section>")
    return page.replace("</h1>", "</h1>" + block, 1)


def job_summary_text(bundles: list[RunnerBundle], rows: list[MergedRow]) -> str:
    """The GitHub job summary (Markdown) of the merged rows (:func:`pytest_aaco.reports.github.job_summary`
    on :func:`tagged` records) followed by the runners and their ledgers."""
    text = job_summary(tagged(rows), summary_of(rows))
    text = text.replace("## pytest-aaco:", f"## pytest-aaco ({len(bundles)} jobs):", 1)
    missing = [m for b in bundles for m in b.missing]
    if missing:  # first, under the title: a report missing data never reads as a pass
        head, _, rest = text.partition("\n")
        head = head.replace(" jobs):", " jobs, INCOMPLETE):", 1)
        block = (["", f"### Incomplete: {len(missing)} problem(s) with the bundles, so this report cannot pass", ""]
                 + [f"- {md_text(m)}" for m in missing])
        text = head + "\n" + "\n".join(block) + "\n" + rest
    extra = ["### Runners", ""] + [f"- {md_text(line.strip())}" if not line.startswith("  ") else
                                   f"  - {md_text(line.strip())}" for line in runner_lines(bundles, rows)]
    return text + "\n".join(extra) + "\n\nFalse alarms are controlled per job (each bundle's own LOND).\n"


__all__ = ["MergedRow", "RunnerBundle", "environment_key", "exit_status", "html_page", "job_summary_text",
           "load_bundle", "merge", "runner_lines", "runner_of", "summary_of", "tagged", "text_lines"]
