"""The results table at the end of the pytest run, through pytest's terminal reporter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..gate import AacoPlugin, ItemRecord

COLUMNS = ("model", "provider", "mean ms", "p50 ms", "p99 ms", "throughput/s", "vs baseline", "verdict")


def _num(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "-"


def row(record: ItemRecord) -> tuple[str, ...]:
    """One table row: figures in ms and samples/s, change in % with its 95% CI."""
    summary = (record.result or {}).get("summary", {})
    verdict = record.verdict or {}
    change = "-"
    if verdict.get("ratio") is not None:
        change = f"{(verdict['ratio'] - 1) * 100:+.1f}%"
        if verdict.get("ci_low") is not None:
            change += f" [{(verdict['ci_low'] - 1) * 100:+.1f},{(verdict['ci_high'] - 1) * 100:+.1f}]"
    outcome = verdict.get("outcome") or record.outcome
    if verdict.get("unstable"):
        outcome += " (unstable)"
    if verdict.get("memory"):
        outcome += " (memory)"
    if record.error and not verdict:
        outcome = f"{record.outcome}: {record.error[:60]}"
    return (
        record.model,
        record.provider,
        _num(summary.get("mean_ms"), ".2f"),
        _num(summary.get("p50_ms"), ".2f"),
        _num(summary.get("p99_ms"), ".2f"),
        _num(summary.get("throughput"), ".1f"),
        change,
        outcome,
    )


def format_table(records: list[ItemRecord]) -> list[str]:
    """Aligned text lines: header, rule, one row per item in run order."""
    rows = [COLUMNS] + [row(r) for r in records]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    numeric = {2, 3, 4, 5}

    def fmt(cells: tuple[str, ...]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        padded = (c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in pairs)
        return "  ".join(padded).rstrip()

    return [fmt(rows[0]), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows[1:]]


def write_summary(terminalreporter: Any, plugin: AacoPlugin) -> None:
    """Write the table and the session-wide error-control line; never raises."""
    if not plugin.records:
        return
    tr = terminalreporter
    tr.write_sep("=", "pytest-aaco results")
    for line in format_table(plugin.records):
        tr.write_line(line)
    lond = plugin._lond
    if lond is not None:
        tr.write_line(f"false-alarm control: LOND at FDR {plugin.config.fdr:g} over {lond.m} benchmark items;"
                      f" {lond.tests} gated, {lond.discoveries} regression(s)")
    for record in plugin.records:
        verdict = record.verdict or {}
        if verdict.get("outcome") in ("regression", "improvement", "inconclusive", "fingerprint-mismatch") \
                or verdict.get("fails") or verdict.get("unstable"):
            tr.write_line(f"  {verdict.get('message')}")
        if record.diagnosis:
            d = record.diagnosis
            tr.write_line(f"    likely cause: {d.get('category')} ({'; '.join(d.get('evidence', []))})"
                          f" -> {d.get('recommendation')}")
    if plugin.bundle is not None:
        tr.write_line(f"session bundle: {plugin.bundle.path}")
