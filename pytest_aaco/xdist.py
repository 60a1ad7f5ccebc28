"""pytest-xdist plumbing of pytest-aaco, as a plugin object of its own (as pytest-xdist keeps its
reporters apart from its scheduler).

The controller ships the session bundle's folder to each worker (``workerinput``); a worker
attaches each item's record to the item's teardown report, and at its end sends its records and
its LOND state (``workeroutput``). The controller keeps each record once, and sums the workers'
LOND states. Registered as ``aaco-xdist`` next to the session object (:mod:`pytest_aaco.session`),
which it reaches only through the two callables it is given, so it imports nothing above the
records.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pytest

from pytest_aaco.jsonio import JSONDict, dumps, loads_records
from pytest_aaco.records.item import FdrRecord, ItemRecord

#: name under which this object is registered with pytest's plugin manager
XDIST_PLUGIN_NAME = "aaco-xdist"
#: key of the JSON list of item records a pytest-xdist worker sends to the controller (``workeroutput``)
WORKER_RECORDS = "aaco_records"
#: key of the controller's bundle folder in a pytest-xdist worker's ``workerinput``
WORKER_BUNDLE = "aaco_bundle"
#: key of a pytest-xdist worker's LOND state (``LondFdr.to_dict()``) in its ``workeroutput``
WORKER_LOND = "aaco_lond"


def is_worker(pytest_config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker."""
    return hasattr(pytest_config, "workerinput")


#: what a worker gets for the controller's bundle folder when the controller could not open one
NO_BUNDLE = ""


def shared_bundle(pytest_config: pytest.Config) -> str | None:
    """On a worker, the folder of the controller's session bundle, or :data:`NO_BUNDLE` when the
    controller has none (None elsewhere)."""
    return getattr(pytest_config, "workerinput", {}).get(WORKER_BUNDLE)


def attach_record(report: pytest.TestReport, record: ItemRecord) -> None:
    """Worker: the record travels with the item's last report, so the controller has every finished
    item even when this worker crashes later (its ``workeroutput`` would never arrive)."""
    report.aaco_record = dumps(record.to_dict())  # type: ignore[attr-defined]


class WorkerNode(Protocol):
    """What the controller's hooks read of a pytest-xdist worker (``xdist.workermanage.WorkerController``):
    ``workerinput``, sent to the worker at its start (``workeroutput`` comes back when it ends)."""

    workerinput: dict[str, object]


def merge_lond(states: list[JSONDict]) -> JSONDict | None:
    """One LOND state from the controller's own and the workers' (``LondFdr.to_dict()`` each):
    each worker tests at ``q (D_worker + 1) / m`` with the session's ``m`` and its own
    ``D_worker <= D``, never above one LOND over the session. None when no item was gated."""
    if not states:
        return None
    if len(states) == 1:
        return states[0]
    found = [f for f in map(FdrRecord.from_dict, states) if f is not None]
    if not found:
        return None
    return {"method": "LOND", "alpha": found[0].alpha, "m": max(int(f.m or 0) for f in found),
            "tests": sum(int(f.tests or 0) for f in found), "discoveries": sum(int(f.discoveries or 0) for f in found),
            "workers": len(states)}


class XdistBridge:
    """The controller's and the workers' xdist hooks.

    *records* is the session's list of item records (the controller appends the workers' to it);
    *bundle_folder* returns the session bundle's folder, opening the bundle first if needed (None
    when bundles are off, :data:`NO_BUNDLE` when the folder could not be written); *session_dir*
    is the folder that holds the bundles (``--aaco-session-dir``), so that a run that measured
    nothing can remove what opening the bundle made (:meth:`pytest_sessionfinish`).
    """

    def __init__(self, pytest_config: pytest.Config, records: list[ItemRecord],
                 bundle_folder: Callable[[], str | None], session_dir: Path | None = None) -> None:
        self.pytest_config = pytest_config
        self.records = records
        self.bundle_folder = bundle_folder
        self.session_dir = session_dir
        #: the folders opening the bundle created (controller): the session dir and its missing parents
        self.made: list[Path] = []
        #: the bundle folder given to the workers (controller), once opened
        self.opened: Path | None = None
        #: node ids whose records a worker already sent (controller)
        self.shipped: set[str] = set()
        #: the workers' LOND states (controller)
        self.worker_londs: list[JSONDict] = []

    @property
    def is_worker(self) -> bool:
        return is_worker(self.pytest_config)

    def ship(self, records: list[ItemRecord], lond_state: JSONDict | None) -> None:
        """Worker, at its end: send the records and LOND's state to the controller."""
        output = self.pytest_config.workeroutput  # type: ignore[attr-defined]
        output[WORKER_RECORDS] = dumps([r.to_dict() for r in records])
        output[WORKER_LOND] = lond_state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Controller: keep the record a worker attached to an item's teardown report."""
        raw = getattr(report, "aaco_record", None)
        if self.is_worker or not isinstance(raw, str):
            return
        try:
            record = ItemRecord.from_dict(json.loads(raw))
        except (ValueError, TypeError):  # not ours after all: leave the report alone
            return
        if record.nodeid not in self.shipped:
            self.shipped.add(record.nodeid)
            self.records.append(record)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: WorkerNode) -> None:
        """Controller: one bundle for the whole session; workers write their items into it. When the
        controller could not open it (it said so, once), the workers get :data:`NO_BUNDLE` and
        write none either, instead of each trying and warning again."""
        if self.opened is None and self.session_dir is not None:
            self.made = [d for d in (self.session_dir, *self.session_dir.parents) if not d.exists()]
        folder = self.bundle_folder()
        if folder is not None:
            node.workerinput[WORKER_BUNDLE] = folder
            if folder != NO_BUNDLE:
                self.opened = Path(folder)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Controller: a run in which no worker measured anything (a suite without pytest-aaco
        items, distributed by pytest-xdist) leaves no trace: the empty bundle folder opened for the
        workers goes, and with it the folders that opening it created (``.aaco`` with its
        ``.gitignore``, ``.aaco/sessions``) where they are still empty. A folder that held anything
        else, or that existed before, stays."""
        if self.is_worker or self.records or self.opened is None:
            return
        remove_empty_bundle(self.opened, self.made)
        self.opened = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: WorkerNode, error: object) -> None:
        """Controller: collect a worker's records, so the summary and reports cover every item."""
        output = getattr(node, "workeroutput", {})
        raw = output.get(WORKER_RECORDS)
        if raw:  # records without a teardown report (none so far); the rest came with the reports
            fresh = [ItemRecord.from_dict(d) for d in loads_records(raw)]
            self.records.extend(r for r in fresh if r.nodeid not in self.shipped)
            self.shipped.update(r.nodeid for r in fresh)
        if isinstance(output.get(WORKER_LOND), dict):
            self.worker_londs.append(output[WORKER_LOND])


def remove_empty_bundle(bundle: Path, made: list[Path]) -> None:
    """Remove *bundle* if it holds nothing but an empty ``items`` folder, then each folder of *made*
    (deepest first) that is empty or holds only the ``.gitignore`` pytest-aaco wrote. Never raises:
    a folder that cannot be removed (another process wrote into it) stays."""
    try:
        entries = list(bundle.iterdir())
        if any(e.name != "items" or not e.is_dir() or any(e.iterdir()) for e in entries):
            return
        for entry in entries:
            entry.rmdir()
        bundle.rmdir()
        for folder in made:
            if not folder.is_dir():
                continue
            ignore = folder / ".gitignore"
            if [e.name for e in folder.iterdir()] == [".gitignore"] and ignore.read_text(
                    encoding="utf-8").startswith("# Created by pytest-aaco"):
                ignore.unlink()
            folder.rmdir()
    except OSError:
        return
