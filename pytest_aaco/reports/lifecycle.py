"""When each report is opened and closed during a pytest session.

Nothing heavy happens at configure time: the session bundle, the environment record and the
clock check start with the first benchmark, so ``pytest --help`` and unrelated runs stay fast.
"""

from __future__ import annotations

import sys
import warnings
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..gate import WORKER_BUNDLE
from ..redact import redact_argv

if TYPE_CHECKING:
    from ..gate import AacoPlugin


def start_reports(plugin: AacoPlugin) -> None:
    """Configure-time hook point: records the start time only."""
    plugin.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")


def _meta(plugin: AacoPlugin) -> dict[str, Any]:
    c = plugin.config
    return {
        "started_at": plugin.started_at,
        "argv": redact_argv(sys.argv[1:]),
        "providers": [p.short for p in c.providers],
        "settings": {
            "warmup": c.warmup, "rounds": c.rounds, "iterations": c.iterations or "auto",
            "threshold": c.threshold, "fdr": c.fdr, "confirm": c.confirm, "iobinding": c.iobinding,
            "save_baseline": c.save_baseline, "sample_interval_s": c.sample_interval_s,
        },
        "gated_items": plugin.gated_items,
    }


def first_benchmark(plugin: AacoPlugin) -> None:
    """Called before the first measurement: open the bundle, record the environment, check clocks."""
    if plugin._first_done:
        return
    plugin._first_done = True
    from ..samplers.clocks import clock_warnings, read_clock_state
    from ..warnings import AacoClockWarning

    for message in clock_warnings(read_clock_state()):
        warnings.warn(AacoClockWarning(message), stacklevel=2)
    if not plugin.config.bundle:
        return
    from .bundle import SessionBundle

    shared = getattr(plugin.pytest_config, "workerinput", {}).get(WORKER_BUNDLE)
    if shared:  # a pytest-xdist worker writes into its controller's bundle
        plugin.bundle = SessionBundle.attach(shared)
        return
    plugin.bundle = SessionBundle(plugin.config.session_dir)
    write_head(plugin)


def write_head(plugin: AacoPlugin) -> None:
    """``session_meta.json`` and ``environment.json`` of the bundle."""
    from ..environment import collect_environment

    plugin.bundle.write_meta(_meta(plugin))
    plugin.bundle.write_environment(collect_environment())


def session_summary(plugin: AacoPlugin) -> dict[str, Any]:
    """Counts of verdicts and the LOND state, for session_meta.json and the reports."""
    counts: dict[str, int] = {}
    for record in plugin.records:
        outcome = (record.verdict or {}).get("outcome") or record.outcome
        counts[outcome] = counts.get(outcome, 0) + 1
    lond = plugin._lond.to_dict() if plugin._lond is not None else None
    return {"items": len(plugin.records), "verdicts": counts, "fdr_control": lond}


def finish_reports(plugin: AacoPlugin) -> None:
    """Session end: close the bundle and write the requested reports (JUnit, HTML, GitHub)."""
    if not plugin.records:
        return
    summary = session_summary(plugin)
    if plugin.bundle is not None:
        if not (plugin.bundle.path / "environment.json").exists():  # made for xdist workers
            write_head(plugin)
        meta = _meta(plugin)
        meta["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        meta["summary"] = summary
        plugin.bundle.finish(meta)
    from . import github, html, junit

    for writer in (junit.write, github.write, html.write):
        writer(plugin, summary)
