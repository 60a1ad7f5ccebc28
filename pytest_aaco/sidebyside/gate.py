"""The side-by-side gate of one item: ``--aaco-compare=REF`` and ``--aaco-compare-python=PATH``.

The plugin shell calls :class:`SideBySideGate` once per session and, per item,
:meth:`SideBySideGate.baseline_for_item` (what the item was at REF: unchanged, new or changed) and
:meth:`SideBySideGate.measure` (the comparison, which returns the candidate's result and the
:class:`~pytest_aaco.history.judge.Verdict`). It needs no pytest: errors are :class:`GitRefError` /
ValueError with messages naming the option, for the shell to turn into ``pytest.UsageError``.

* ``--aaco-compare=REF`` alone: the baseline side is the item as it was at REF, in this process.
* ``--aaco-compare-python=PATH`` alone: the baseline side is the same item in another
  interpreter (an ONNX Runtime upgrade); the fingerprint difference is the subject, not a reason
  to skip.
* both: the item at REF, in the other interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_aaco.history.judge import finish
from pytest_aaco.measure.device_time import tracer_for
from pytest_aaco.measure.inputs import batch_size
from pytest_aaco.measure.providers import ProviderSpec
from pytest_aaco.measure.registry import ModelSpec, model_path
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.options import GateSettings, setting
from pytest_aaco.passes.coldstart import LocalSessions, SideBySideColdStart, compare_cold_start, compiles_for
from pytest_aaco.records import Outcome, Verdict
from pytest_aaco.sidebyside.cycles import (
    BASELINE,
    CompareSettings,
    LocalFactory,
    SideBySide,
    WorkerFactory,
    candidate_result,
    compare_sides,
    to_verdict,
)
from pytest_aaco.sidebyside.revision import CHANGED, NEW, UNCHANGED, BaselineSide, GitRef, RefTree, resolve_ref
from pytest_aaco.sidebyside.worker_client import WorkerSessions, WorkerSide

if TYPE_CHECKING:
    import numpy as np


#: outcomes of items that were not measured side by side (they never fail)
UNCHANGED_OUTCOME, NEW_OUTCOME = Outcome.UNCHANGED, Outcome.NEW


@dataclass(frozen=True)
class ItemMeasure:
    """How the item's sessions are built and warmed: warmup iterations, IO binding (resolved:
    ``none``/``inputs``/``all``, not ``auto``), device, intra-op threads (0: ORT's default)."""

    warmup: int = setting("warmup")
    iobinding: str = "none"
    device_id: int = 0
    intra_op_threads: int = 0
    #: ``--aaco-device-time``: auto, on or off
    device_time: str = "auto"


@dataclass
class SideBySideGate:
    """Session-wide state of the side-by-side gate: the revision (resolved once), the other
    interpreter, the temporary tree of files at REF. Call :meth:`close` at the session's end."""

    ref: str | None
    python: str | None
    settings: CompareSettings = field(default_factory=CompareSettings)
    where: Path = field(default_factory=Path.cwd)
    gitref: GitRef | None = field(init=False, default=None)
    tree: RefTree | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.ref:
            self.gitref = resolve_ref(self.ref, self.where)
            self.tree = RefTree(self.gitref)

    @property
    def name(self) -> str:
        """What the baseline side is, for messages: ``origin/main``, ``onnxruntime at PATH``, or both."""
        if self.ref and self.python:
            return f"{self.ref} in {self.python}"
        return self.ref or f"{self.python}"

    def close(self) -> None:
        if self.tree is not None:
            self.tree.close()

    def baseline_for_item(self, spec: ModelSpec, provider_short: str) -> BaselineSide:
        """The item at REF (see :meth:`pytest_aaco.sidebyside.revision.RefTree.side_at_revision`); with only
        ``--aaco-compare-python`` the same item, always measured (CHANGED: the environment differs)."""
        if self.tree is not None:
            side = self.tree.side_at_revision(spec, provider_short)
            if side.status == UNCHANGED and self.python:
                side.status, side.changes = CHANGED, ["environment"]
            return side
        return BaselineSide(CHANGED, spec, model_path(spec), ["environment"])

    def static_verdict(self, side: BaselineSide, label: str, threshold: float, mean_ms: float | None) -> Verdict:
        """The verdict of an item that is not measured side by side: ``unchanged`` or ``new``. The
        item itself is still measured once (its warmup and rounds, as without ``--aaco-compare``): the
        test body gets a result to assert on, and ``--aaco-save-baseline`` saves it; only the side at
        REF and the side-by-side cycles are left out."""
        outcome = UNCHANGED_OUTCOME if side.status == UNCHANGED else NEW_OUTCOME
        text = f"{label}: {side.describe(self.ref or '')}" + (
            "; its side at REF is not measured (this side is measured once, as without a comparison)"
            if outcome == UNCHANGED_OUTCOME else "; nothing to compare with")
        return Verdict(outcome=outcome, label=label, threshold=threshold, current_mean_ms=mean_ms, reason=text,
                       message=text)

    def measure(self, spec: ModelSpec, side: BaselineSide, provider_for: Callable[[ModelSpec], ProviderSpec],
                item: ItemMeasure, gate: GateSettings, alpha: float, label: str,
                lock: Callable[[], AbstractContextManager[object]] | None = None,
                ) -> tuple[BenchmarkResult, Verdict, SideBySide]:
        """Compare the item with its baseline side; returns (candidate BenchmarkResult, Verdict, SideBySide).

        *provider_for(spec)* gives the EP with that spec's registry options and the command line's
        merged in (the baseline side gets the options it had at REF). *lock* is a context-manager
        factory held while measuring (the device lock). Raises what the sides raise
        (:class:`~pytest_aaco.measure.inference.SessionError`,
        :class:`~pytest_aaco.sidebyside.worker_client.WorkerError`).
        """
        assert side.spec is not None and side.model_file is not None  # CHANGED sides carry both
        provider = provider_for(spec)
        entries = self.settings.session_config()
        candidate = LocalFactory(model_path(spec), spec, provider, item.warmup, item.iobinding, item.device_id,
                                 item.intra_op_threads, entries)
        base_provider = provider_for(side.spec)
        baseline: Any
        if self.python:
            baseline = WorkerFactory(self.python, side.model_file, base_provider, candidate.shared_feeds, item.warmup,
                                     item.iobinding, item.device_id, item.intra_op_threads, entries)
        else:
            baseline = LocalFactory(side.model_file, side.spec, base_provider, item.warmup, item.iobinding,
                                    item.device_id, item.intra_op_threads, entries)
        settings = replace(self.settings, threshold=gate.threshold, memory_threshold=gate.memory_threshold,
                           memory_slack_mb=gate.memory_slack_mb)
        device = bool(provider.is_gpu)
        tracer, no_tracer = tracer_for(provider.short, item.device_time)
        if tracer is not None and self.python:
            tracer, no_tracer = None, "device time: the baseline side runs in another interpreter, which has no tracer"
        if lock is None:
            result = compare_sides(baseline, candidate, settings, alpha, self.name, device, tracer=tracer)
        else:
            with lock():
                result = compare_sides(baseline, candidate, settings, alpha, self.name, device, tracer=tracer)
        verdict = to_verdict(result, label, gate)
        if side.changes or no_tracer:
            if side.changes:
                verdict.notes.append("changed since the baseline side: " + ", ".join(side.changes))
            if no_tracer:
                verdict.notes.append(no_tracer)
            verdict = finish(verdict, gate)
        bench = candidate_result(result, spec.name, provider.short, batch_size(candidate.feeds or {}) or 1,
                                 item.iobinding)
        return bench, verdict, result

    def cold_start(self, spec: ModelSpec, side: BaselineSide, provider_for: Callable[[ModelSpec], ProviderSpec],
                   item: ItemMeasure, feeds: dict[str, np.ndarray], sessions: int, label: str, threshold: float,
                   max_contention: float | None = None) -> SideBySideColdStart:
        """Compare the item's cold start with its baseline side's: *sessions* fresh sessions of each
        side, alternating (:func:`pytest_aaco.passes.coldstart.compare_cold_start`, confirmed with fresh
        cycles when the comparison confirms), at *threshold* (fraction).

        The candidate runs in this process on *feeds* (the item's inputs); the baseline side too,
        or with ``--aaco-compare-python`` in one worker of the other interpreter that loads a fresh
        session per cycle (:class:`~pytest_aaco.sidebyside.worker_client.WorkerSessions`) on the same *feeds*.
        Both sides get the comparison's session configuration entries. Raises
        :class:`~pytest_aaco.measure.inference.SessionError` /
        :class:`~pytest_aaco.sidebyside.worker_client.WorkerError`.
        """
        assert side.spec is not None and side.model_file is not None  # CHANGED sides carry both
        provider, base_provider = provider_for(spec), provider_for(side.spec)
        entries = self.settings.session_config()
        candidate = LocalSessions(model_path(spec), provider, feeds, spec, item.device_id, item.intra_op_threads,
                                  entries)
        worker = WorkerSide(self.python, name=BASELINE) if self.python else None
        baseline: Any = (WorkerSessions(worker, side.model_file, base_provider, feeds, item.device_id,
                                        item.intra_op_threads, entries) if worker is not None
                         else LocalSessions(side.model_file, base_provider, None, side.spec, item.device_id,
                                            item.intra_op_threads, entries))
        try:
            return compare_cold_start(baseline, candidate, label, self.name, cycles=sessions,
                                      confirm=self.settings.confirm, seed=self.settings.seed,
                                      compiles=compiles_for(provider), threshold=threshold,
                                      max_contention=max_contention)
        finally:
            if worker is not None:
                worker.close()


__all__ = ["CHANGED", "NEW", "NEW_OUTCOME", "UNCHANGED", "UNCHANGED_OUTCOME", "ItemMeasure", "SideBySideGate"]
