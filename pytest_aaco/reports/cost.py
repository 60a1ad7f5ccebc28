"""What a run costs: shards, and the wall-time ledger of the session bundle.

* ``--aaco-shard K/N`` keeps the items whose node id hashes to shard K (:func:`shard_of`: SHA-256 of
  the node id, modulo N), so N jobs of one runner kind together run every item exactly once, and an
  item keeps its shard when others are added. Each item's stored baseline is its own file
  (one per node id), so shards never write the same baseline.
* Under ``--aaco-compare=REF`` unchanged items are skipped before anything is built
  (:func:`pytest_aaco.sidebyside.unchanged.skip_unchanged`); the ledger counts them.
* :class:`CostClock` keeps the session's ledger: items measured and skipped as unchanged, and the
  seconds of each phase (collection, the items' setup, call and teardown as pytest times them, the
  check at REF, the rest). The bundle's ``session_meta.json`` holds it under ``cost``
  (:meth:`CostClock.to_dict`), and ``aaco report`` prints where the minutes went.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from typing import Any

import pytest

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.records import TRIAGE_KEY as EXTRA_KEY
from pytest_aaco.records import TRIAGE_SAME_COMPUTE as SAME_COMPUTE
from pytest_aaco.records import ItemRecord, Outcome

#: name under which the ledger is registered with pytest's plugin manager
COST_PLUGIN_NAME = "aaco-cost"
#: ``session_meta.json``'s key of the ledger
META_KEY = "cost"


# ---------------------------------------------------------------- shards


def shard_of(nodeid: str, shards: int) -> int:
    """The shard (1..*shards*) of the item *nodeid*: SHA-256 of its UTF-8 bytes, modulo *shards*, plus 1.
    Depends on nothing but the node id: the same on every machine, pytest-xdist worker and run."""
    data = nodeid.encode("utf-8", "surrogateescape")  # a file name that is not UTF-8: its own bytes
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") % shards + 1


def select_shard(config: pytest.Config, items: list[pytest.Item], shard: tuple[int, int]) -> None:
    """Keep in *items* (in place) those of shard K of N (*shard*); the others are deselected through
    pytest's ``pytest_deselected`` hook, so ``-v`` counts them as deselected."""
    k, n = shard
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (kept if shard_of(item.nodeid, n) == k else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


# ---------------------------------------------------------------- the ledger

PHASES = ("setup", "call", "teardown")


class CostClock:
    """The session's wall-time ledger, registered as :data:`COST_PLUGIN_NAME`. Seconds by phase from
    pytest's own reports (on a pytest-xdist controller, the workers' reports), so it holds under xdist."""

    def __init__(self, shard: tuple[int, int] | None = None) -> None:
        self.started = time.perf_counter()
        self.shard = shard
        self.collected_at: float | None = None
        self.phases: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.by_item: dict[str, float] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if self.shard is not None:
            select_shard(config, items, self.shard)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected_at = time.perf_counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        seconds = float(report.duration or 0.0)
        self.phases[report.when] = self.phases.get(report.when, 0.0) + seconds
        self.by_item[report.nodeid] = self.by_item.get(report.nodeid, 0.0) + seconds

    def to_dict(self, records: Iterable[ItemRecord]) -> JSONDict:
        """The ledger for ``session_meta.json``: ``wall_s`` (from the plugin's start to now),
        ``phases_s`` (collection, setup, call, teardown, check_at_ref, other), ``items`` (measured,
        unchanged, same_compute, new, other), ``item_s`` (seconds by kind of item) and ``shard``."""
        wall = time.perf_counter() - self.started
        counts = {"measured": 0, "unchanged": 0, "same_compute": 0, "new": 0, "other": 0}
        item_s = dict.fromkeys(counts, 0.0)
        check_s = 0.0
        for record in records:
            found = record.extra.get(EXTRA_KEY) if isinstance(record.extra, dict) else None
            triage: dict[str, Any] = dict(found) if isinstance(found, dict) else {}
            check_s += float(triage.get("seconds") or 0.0)
            if record.result is not None:
                kind = "measured"
            elif record.effective_outcome == Outcome.UNCHANGED:
                kind = "same_compute" if triage.get("status") == SAME_COMPUTE else "unchanged"
            elif record.effective_outcome == Outcome.NEW:
                kind = "new"
            else:
                kind = "other"
            counts[kind] += 1
            item_s[kind] += self.by_item.get(record.nodeid, 0.0)
        collection = None if self.collected_at is None else self.collected_at - self.started
        phases = {"collection": collection, **self.phases, "check_at_ref": check_s}
        accounted = sum(v for k, v in phases.items() if v is not None and k != "check_at_ref")  # inside setup
        phases["other"] = max(wall - accounted, 0.0)
        return {"wall_s": round(wall, 3), "shard": None if self.shard is None else f"{self.shard[0]}/{self.shard[1]}",
                "phases_s": {k: None if v is None else round(v, 3) for k, v in phases.items()},
                "items": counts, "item_s": {k: round(v, 3) for k, v in item_s.items()}}


def ledger_lines(cost: object) -> list[str]:
    """``where the time went`` lines of a ledger (:meth:`CostClock.to_dict`) for ``aaco report``."""
    if not isinstance(cost, dict) or not cost:
        return []
    items = cost.get("items") or {}
    item_s = cost.get("item_s") or {}
    phases = cost.get("phases_s") or {}
    wall = cost.get("wall_s")
    def seconds(key: str) -> str | None:
        value = phases.get(key)
        return f"{float(value):.1f} s" if isinstance(value, (int, float)) else None

    parts = [f"{key} {seconds(key)}" for key in ("collection", "setup", "call", "teardown", "other") if seconds(key)]
    if float(phases.get("check_at_ref") or 0.0) > 0 and seconds("setup"):  # they run inside the items' setup
        at = [p.split()[0] for p in parts].index("setup")
        parts[at] += f" (checks at REF {seconds('check_at_ref')})"
    kinds = [f"{items.get(k, 0)} {k.replace('_', ' ')} ({float(item_s.get(k) or 0.0):.1f} s)"
             for k in ("measured", "unchanged", "same_compute", "new", "other") if items.get(k)]
    shard = f", shard {cost['shard']}" if cost.get("shard") else ""
    return [f"where the time went: {float(wall or 0.0):.1f} s wall{shard}; " + ", ".join(parts),
            "  items: " + (", ".join(kinds) or "none")]


__all__ = ["COST_PLUGIN_NAME", "META_KEY", "CostClock", "ledger_lines", "select_shard", "shard_of"]
