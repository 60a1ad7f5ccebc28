"""The results table at the end of the pytest run, through pytest's terminal reporter; the same
table for ``aaco report``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.records import DEVICE_TIME, FdrRecord, ItemRecord, Outcome, ResultRecord, several_gpus
from pytest_aaco.reports import ReportContext
from pytest_aaco.reports.markup import terminal_line
from pytest_aaco.reports.wording import change_text, headline, measured_summary, num, row_names, verdict_cell
from pytest_aaco.verdict.blind import not_judged_line
from pytest_aaco.verdict.blind import summary_line as blind_line
from pytest_aaco.verdict.percent import bound_text, kept_text, pct

if TYPE_CHECKING:
    import pytest

#: "machine" is the reference workload's change against the history: how much slower (+) or faster
#: (-) the machine ran than when the baseline was recorded (:mod:`pytest_aaco.measure.reference_workload`)
COLUMNS = ("model", "provider", "mean ms", "p50 ms", "p99 ms", "throughput/s", "change vs baseline [bound compared]",
           "machine", "verdict")
#: right-aligned columns of :data:`COLUMNS`
NUMERIC = frozenset({2, 3, 4, 5})




def format_rows(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: frozenset[int] = frozenset()
                ) -> list[str]:
    """Aligned text table: header, a rule, the rows; columns in *numeric* are right-aligned."""
    table = [list(header)] + [[terminal_line(c) for c in r] for r in rows]  # cells from user files escaped
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [fmt(table[0]), "  ".join("-" * w for w in widths)] + [fmt(r) for r in table[1:]]


def row(record: ItemRecord, name: str | None = None) -> tuple[str, ...]:
    """One table row: figures in ms and samples/s of the measurement the change was computed on
    (:func:`~pytest_aaco.reports.wording.measured_summary`), the change in % labelled with the
    series tested (``adjusted``, ``normalized``, ``raw``, ``paired``), its 95% CI and the raw
    change next to it (:func:`~pytest_aaco.reports.wording.change_text`), the machine's own change,
    the verdict with the metrics that failed. *name* is the model cell (the model by default)."""
    summary = measured_summary(record)
    verdict = record.verdict
    change = change_text(verdict) if verdict is not None else "-"
    return (name or record.model, record.provider, num(summary.of("mean_ms"), ".2f"),
            num(summary.of("p50_ms"), ".2f"), num(summary.of("p99_ms"), ".2f"), num(summary.of("throughput"), ".1f"),
            change, machine(verdict.reference_drift if verdict is not None else None), verdict_cell(record))


def machine(drift: float | None) -> str:
    """The reference workload's drift as a change in % (``0.18`` -> ``+18%``), ``-`` for None."""
    return "-" if drift is None else f"{drift * 100:+.0f}%"


def device_change(record: ItemRecord) -> str:
    """Device time's change in % labelled with its series, with the one-sided bound its outcome rule
    compared (``+6.4% paired [lower bound +5.9% > 0, +6.4% >= 5%]``; a record written before bounds:
    its 95% CI ``[+5.9,+6.9]``), ``-`` when not compared."""
    v = record.verdict
    dev = None if v is None else v.judgements.get(DEVICE_TIME)
    if dev is None:
        return "-"
    text = f"{pct(dev.ratio)} {dev.series or 'paired'}"
    bound = bound_text(dev.ratio, dev.lower_bound, dev.upper_bound, dev.threshold)
    if bound:
        text += f" [{bound}]"
    elif dev.ci_low is not None and dev.ci_high is not None:
        text += f" [{(dev.ci_low - 1) * 100:+.1f},{(dev.ci_high - 1) * 100:+.1f}]"
    return text


def format_table(records: Sequence[ItemRecord]) -> list[str]:
    """Aligned text lines: header, rule, one row per item in run order; with a ``gpu`` column after
    the provider when the items ran on more than one physical GPU (pytest-xdist workers on
    ``--aaco-device-id 0,1``), and a ``device time`` column after the change vs baseline when some item's
    device time was compared (GPU items with a tracer)."""
    columns: tuple[str, ...] = COLUMNS
    rows = [row(r, name) for r, name in zip(records, row_names(records), strict=True)]
    numeric = NUMERIC
    if any(r.verdict is not None and r.verdict.device is not None for r in records):
        at = columns.index("change vs baseline [bound compared]") + 1
        rows = [(*cells[:at], device_change(r), *cells[at:]) for r, cells in zip(records, rows, strict=True)]
        columns = (*columns[:at], "device time", *columns[at:])
    if several_gpus(list(records)):
        rows = [(*cells[:2], rec.gpu_label, *cells[2:]) for cells, rec in zip(rows, records, strict=True)]
        columns = (*columns[:2], "gpu", *columns[2:])
        numeric = frozenset(i + 1 for i in numeric)
    return format_rows(columns, rows, numeric)


def confirmed_line(records: Sequence[ItemRecord]) -> str | None:
    """Which rows show a confirmation measurement's figures (a regression a fresh session
    confirmed), None when none does."""
    found = [name for r, name in zip(records, row_names(records), strict=True)
             if r.verdict is not None and r.verdict.confirmed and r.verdict.side_by_side is None
             and (r.result_record or ResultRecord()).confirmation is not None]
    if not found:
        return None
    return ("confirmed: these rows show the confirmation measurement (a fresh session), the one the change was"
            f" computed on: {', '.join(found)}")


def levels_line(records: Sequence[ItemRecord]) -> str | None:
    """What a stored row's wall-time change is over: ``change vs baseline: stored wall time compares each run's
    fastest quarter of rounds (its level), ...``, None when no row's does (:attr:`Verdict.rounds_kept`)."""
    kept = sorted({r.verdict.rounds_kept for r in records if r.verdict is not None and r.verdict.rounds_kept
                   and r.verdict.side_by_side is None})
    if not kept:
        return None
    return (f"change vs baseline: stored wall time compares each run's {kept_text(kept[0])} (its level); the mean"
            " ms column is every round's")


def detail_lines(records: Sequence[ItemRecord]) -> list[str]:
    """The message of every item worth a line (:attr:`ItemRecord.worth_a_line`), its cold-start
    regression and the operator types that grew (:meth:`ItemRecord.insight_lines`), its likely cause,
    and every warning about the item's baseline file (moved aside, history archived)."""
    lines = []
    for record in records:
        if record.worth_a_line:
            lines.append(f"  {record.message}")
            lines += [f"    {line}" for line in record.insight_lines()]
            if record.verdict is not None:  # how it was tested, on lines of their own
                lines += [f"    note: {note}" for note in record.verdict.report_notes]
        lines += [f"  warning: {text}" for text in record.warnings]
        d = record.diagnosis_record
        if d is not None:
            lines.append(f"    likely cause: {d.category} ({'; '.join(d.evidence)}) -> {d.recommendation}")
    return lines


def other_runners_line(records: Sequence[ItemRecord]) -> str | None:
    """One line, leading the summary, on the items without a baseline for this runner: their count, the
    baseline folder searched, the other runners' histories for the same items (a runner key that changed, or
    baselines recorded elsewhere) and what to do; None when every item had one."""
    missing = [r for r in records if r.verdict is not None and r.verdict.outcome == Outcome.NO_BASELINE]
    if not missing:
        return None
    folders = sorted({str(Path(r.verdict.baseline_path).parent) for r in missing
                      if r.verdict is not None and r.verdict.baseline_path})
    others = [f"{r.label} ({', '.join(r.verdict.other_runners)})" for r in missing
              if r.verdict is not None and r.verdict.other_runners]
    failed = all(r.fails for r in missing)
    return (f"no baseline for this runner: {len(missing)} of {len(records)} item(s), searched in"
            f" {', '.join(folders) or 'the baseline folder'}"
            + (f"; other runners' histories: {'; '.join(others)}" if others else "; no other runner has one either")
            + ("; they failed (--aaco-require-baseline)" if failed
               else "; not judged, passed (--aaco-require-baseline fails them)")
            + ". Baselines are kept per machine (CPU model, cores, GPU): record this one's with --aaco-save-baseline")


#: a wait for the device lock longer than this (s) gets a line of its own in the results
LOCK_WAIT_LINE_S = 1.0


def _waits(records: Sequence[ItemRecord]) -> list[tuple[str, float]]:
    """(label, ``lock_wait_s`` of the item's result, s) of each item that recorded a wait."""
    return [(r.label, float(w)) for r in records
            if isinstance(w := (r.result or {}).get("lock_wait_s"), (int, float)) and not isinstance(w, bool)]


def lock_waits(records: Sequence[ItemRecord]) -> JSONDict:
    """The session's waits for the device lock (``lock_wait_s`` of each item's result, s): ``total_s``,
    ``items`` that waited more than :data:`LOCK_WAIT_LINE_S`, and the ``longest`` (``{"label", "wait_s"}``)."""
    waits = _waits(records)
    longest = max(waits, key=lambda pair: pair[1], default=None)
    return {"total_s": round(sum(w for _, w in waits), 3),
            "items": sum(1 for _, w in waits if w > LOCK_WAIT_LINE_S),
            "longest": None if longest is None else {"label": longest[0], "wait_s": round(longest[1], 3)}}


def lock_wait_line(records: Sequence[ItemRecord]) -> str | None:
    """``device lock: 2 item(s) waited 93.1 s in all for another benchmark on the device (longest: ...)``, None
    when no item waited more than :data:`LOCK_WAIT_LINE_S`."""
    waits = _waits(records)
    long = [pair for pair in waits if pair[1] > LOCK_WAIT_LINE_S]
    if not long:
        return None
    label, most = max(long, key=lambda pair: pair[1])
    return (f"device lock: {len(long)} item(s) waited {sum(w for _, w in waits):.1f} s in all for another benchmark"
            f" on the device (longest: {label}, {most:.1f} s); their figures were measured after the wait")


def write_interrupted(config: pytest.Config, records: Sequence[ItemRecord]) -> None:
    """The results table of the items finished so far, written straight to the terminal when a second
    signal ends the process inside a run (:mod:`pytest_aaco.measure.stopping`), with pytest's output capture
    put aside for what follows; no table without items."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    if capman is not None:
        capman.suspend_global_capture(in_=False)
    if not records:
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    lines = ["", "pytest-aaco results (the items finished before the process was ended)", *format_table(records)]
    for line in lines:
        if tr is not None:
            tr.write_line(line)
        else:
            print(line, flush=True)
    if tr is not None:
        tr.flush()


def lond_line(fdr: FdrRecord | None, regressions: int | None = None) -> str | None:
    """``false-alarm control: LOND at FDR 0.05 over 3 benchmark items; 2 gated, 1 regression(s)``.

    *regressions*: the items that regressed on any metric (:attr:`ItemRecord.is_regression`, the
    count the table's rows give); without it, LOND's own discoveries (wall and device time only)."""
    if fdr is None:
        return None
    count = fdr.discoveries if regressions is None else regressions
    return (f"false-alarm control: LOND at FDR {fdr.alpha:g} over {fdr.m} benchmark"
            f" items; {fdr.tests} gated, {count} regression(s)")


def chain_lines(records: Sequence[ItemRecord]) -> list[str]:
    """One line per fallback chain (``--aaco-provider=vitisai|dml|cpu``) that ran on a later EP, with why
    the earlier ones were passed over (the item records' ``provider_chain``); the chain is the user's
    choice, so this is said here and in the bundle rather than raised as a warning."""
    seen: dict[str, str] = {}
    for record in records:
        chain = record.extra.get("provider_chain")
        if isinstance(chain, dict) and chain.get("reason"):
            seen.setdefault(str(chain.get("requested")), str(chain["reason"]))
    return [f"provider chain {requested}: {reason}" for requested, reason in seen.items()]


def summary_lines(records: Sequence[ItemRecord], context: ReportContext, verbosity: int = 0) -> list[str]:
    """The lines of the results section for pytest's *verbosity*.

    * 0 and above: the table, the session-wide error-control line, every item worth a line with
      its likely cause, the other-runners line, the bundle.
    * ``-q`` (-1): the table, the :func:`~pytest_aaco.reports.wording.headline` of each failing item
      (its whole message is in pytest's FAILURES section) and the message of the other items
      worth a line, without likely causes.
    * ``-qq`` (-2 and below): only the failing items, node id and headline, one line each.
    """
    # what was not judged leads (issue 43): items withheld or blind, then items without a baseline
    leading = [line for line in (not_judged_line([(r.label, r.verdict) for r in records]),
                                 other_runners_line(records)) if line]
    if verbosity <= -2:
        return [f"  {r.nodeid}: {headline(r)}" for r in records if r.fails]
    lines = leading + format_table(records)
    for extra in (confirmed_line(records), levels_line(records)):
        if extra:
            lines.append(extra)
    blind = blind_line([r.verdict for r in records])  # a gate that cannot see says so (verdict/blind.py)
    if blind:
        lines.append(blind)
    if verbosity < 0:  # a failing item's whole message is in pytest's FAILURES section already
        for record in records:
            if record.fails:
                lines.append(f"  {headline(record)}")
            elif record.worth_a_line:
                lines.append(f"  {record.message}")
                lines += [f"    {line}" for line in record.insight_lines()]
            lines += [f"  warning: {text}" for text in record.warnings]
        return lines
    lines += chain_lines(records)
    lond = lond_line(context.summary.fdr, sum(r.is_regression for r in records))
    if lond:
        lines.append(lond)
    lines += detail_lines(records)
    waited = lock_wait_line(records)
    if waited:
        lines.append(waited)
    if context.bundle_path is not None:
        lines.append(f"session bundle: {context.bundle_path}")
    return lines


def write_summary(terminalreporter: pytest.TerminalReporter, records: Sequence[ItemRecord],
                  context: ReportContext) -> None:
    """Write the results section (:func:`summary_lines` at the reporter's verbosity); nothing at
    all when there is nothing to say (``-qq`` and no item failed); never raises."""
    tr = terminalreporter
    lines = summary_lines(records, context, int(getattr(tr, "verbosity", 0)))
    if not lines:
        return
    tr.write_sep("=", "pytest-aaco results")
    for line in lines:
        tr.write_line(terminal_line(line))
