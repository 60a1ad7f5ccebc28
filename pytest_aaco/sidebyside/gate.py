"""The side-by-side gate of one item: ``--aaco-compare=REF`` and ``--aaco-compare-python=PATH``.

The plugin shell makes one :class:`SideBySideGate` per session; each item's run
(:class:`~pytest_aaco.benchmark.BenchmarkRun`) holds it and calls :meth:`SideBySideGate.judge_item`
when it measures: what the item was at REF (:meth:`SideBySideGate.baseline_for_item`: unchanged,
new or changed), then for a changed item the comparison (:meth:`SideBySideGate.measure`), which
returns the candidate's result and the :class:`~pytest_aaco.records.verdict.Verdict`. It needs no pytest:
errors are :class:`GitRefError` / ValueError with messages naming the option, for the shell to
turn into ``pytest.UsageError``.

* ``--aaco-compare=REF`` alone: the baseline side is the item as it was at REF, in this process.
* ``--aaco-compare-python=PATH`` alone: the baseline side is the same item in another
  interpreter (an ONNX Runtime upgrade); the fingerprint difference is the subject, not a reason
  to skip.
* both: the item at REF, in the other interpreter.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.device_time import DEVICE_RUNS
from pytest_aaco.measure.graph import GraphChoice, with_graph
from pytest_aaco.measure.inference import MIN_WARMUP_S, MeasureSettings, SessionError, SessionHandle
from pytest_aaco.measure.inputs import batch_size
from pytest_aaco.measure.providers import ProviderSpec
from pytest_aaco.measure.registry import ModelSpec, item_provider, model_path
from pytest_aaco.measure.results import BenchmarkResult, FreshSample
from pytest_aaco.measure.traced_child import ChildSide, trace_sides
from pytest_aaco.options import GateSettings, setting
from pytest_aaco.passes.coldstart import LocalSessions, SideBySideColdStart, compare_cold_start, compiles_for
from pytest_aaco.records.base import Outcome
from pytest_aaco.records.device import ColdStartComparison
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.samplers import TelemetrySession
from pytest_aaco.samplers.rocm_install import rocm_version
from pytest_aaco.sidebyside.compute import ComputeCheck
from pytest_aaco.sidebyside.cycles import (
    SideBySide,
    attach_child_device_time,
    candidate_result,
    child_device_time,
    compare_sides,
    side_figures,
    to_verdict,
)
from pytest_aaco.sidebyside.revision import CHANGED, NEW, UNCHANGED, BaselineSide, GitRef, RefTree, resolve_ref
from pytest_aaco.sidebyside.sides import (
    BASELINE,
    CANDIDATE,
    TRACED_MIN_WARMUP_S,
    CompareSettings,
    LocalFactory,
)
from pytest_aaco.sidebyside.unchanged import Triage, triage
from pytest_aaco.sidebyside.worker_client import WorkerSessions, WorkerSide
from pytest_aaco.sidebyside.workers import WorkerFactory, plugin_python_env
from pytest_aaco.tracers import rocprof
from pytest_aaco.tracers.base import TracerError, TracerMissing
from pytest_aaco.tracers.rocprof_trace import default_output_format
from pytest_aaco.tracers.select import tracer_for
from pytest_aaco.warnings import AacoDeviceTimeWarning

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
    device_time: str = setting("device-time")


@dataclass(frozen=True)
class ItemOptions:
    """The command line's options the gate applies to every item: ``--aaco-provider-option``
    (*provider_options*, merged over the registry's), ``--aaco-intra-op-threads`` (0: ORT's default),
    ``--aaco-device-time`` (auto, on or off), and the cold-start pass (``--aaco-cold-start``:
    *cold_start* fresh sessions of each side, 0 for none; its threshold, a fraction; and
    ``--aaco-max-contention``, cores)."""

    provider_options: JSONDict = field(default_factory=dict)
    intra_op_threads: int = setting("intra-op-threads")
    device_time: str = setting("device-time")
    cold_start: int = 0
    cold_start_threshold: float = setting("cold-start-threshold")
    max_contention: float | None = setting("max-contention")


class SideBySideRun(Protocol):
    """What :meth:`SideBySideGate.judge_item` reads of an item's run
    (:class:`~pytest_aaco.benchmark.BenchmarkRun`), and ``compare_cold_start``, which it sets."""

    model: ModelSpec
    provider: ProviderSpec
    handle: SessionHandle
    compare_cold_start: Callable[[], ColdStartComparison] | None

    @property
    def feeds(self) -> dict[str, np.ndarray]: ...

    def measure(self, handle: SessionHandle, settings: MeasureSettings) -> BenchmarkResult: ...

    def telemetry_session(self) -> TelemetrySession: ...


def wall_time_only(label: str, reason: str) -> str:
    """The verdict note for an item whose device time could not be measured (``device time: <reason>;
    gated on wall time only``), after warning the same on one line as
    :class:`~pytest_aaco.warnings.AacoDeviceTimeWarning`, naming the item (*label*) and how to
    silence it or make it an error."""
    reason = " ".join(reason.split())
    warnings.warn(AacoDeviceTimeWarning(
        f"{label or 'item'}: device time could not be measured, gated on wall time only: {reason}"
        " (--aaco-device-time=on makes this an error, =off skips device time)"), stacklevel=3)
    return f"device time: {reason}; gated on wall time only"


@dataclass(frozen=True)
class SideBySideLook:
    """The side-by-side gate's look at one item (a :class:`pytest_aaco.gate.Gate`), taken while the item was
    measured (:meth:`SideBySideGate.judge_item`): *verdict*, unfinished. Not ``stored``: both sides ran
    alternately under the same load (paired), and fresh sessions already confirmed a regression
    (:func:`pytest_aaco.sidebyside.cycles.compare_sides`, by the one rule
    :func:`pytest_aaco.verdict.outcome.confirmed_outcome`), so the pipeline neither confirms again nor
    withholds for CPU contention. ``gated``: measured against a baseline side (not ``unchanged``/``new``)."""

    verdict: Verdict
    stored: bool = False

    @property
    def gated(self) -> bool:
        return self.verdict.side_by_side is not None

    def look(self, result: BenchmarkResult) -> Verdict:
        """The verdict measured side by side (*result* is the candidate's side of that measurement)."""
        return self.verdict


@dataclass
class SideBySideGate:
    """Session-wide state of the side-by-side gate: the revision (resolved once), the other
    interpreter, the temporary tree of files at REF, the options for every item. Call
    :meth:`close` at the session's end."""

    ref: str | None
    python: str | None
    settings: CompareSettings = field(default_factory=CompareSettings)
    where: Path = field(default_factory=Path.cwd)
    options: ItemOptions = field(default_factory=ItemOptions)
    gitref: GitRef | None = field(init=False, default=None)
    tree: RefTree | None = field(init=False, default=None)
    #: each item's triage (:meth:`triage`), by (registry, model, EP)
    triaged: dict[tuple[str, str, str], Triage] = field(init=False, default_factory=dict)
    #: compute checks by (REF file, candidate file), shared by a model's EPs
    compute_checks: dict[tuple[Path, Path], ComputeCheck] = field(init=False, default_factory=dict)

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

    def triage(self, spec: ModelSpec, provider_short: str) -> Triage:
        """The item's triage (:func:`pytest_aaco.sidebyside.unchanged.triage`: unchanged, the same
        compute, or to measure), found once per (registry, model, EP). Raises what
        :meth:`baseline_for_item` raises."""
        key = (str(spec.registry_path), spec.name, provider_short)
        if key not in self.triaged:
            start = time.perf_counter()
            side = self.baseline_for_item(spec, provider_short)
            self.triaged[key] = triage(side, not self.python, model_path(spec), start, self.compute_checks)
        return self.triaged[key]

    def static_verdict(self, side: BaselineSide, label: str, threshold: float, mean_ms: float | None) -> Verdict:
        """The verdict of an item that is not measured side by side: ``unchanged`` or ``new``. The
        item itself is still measured once (its warmup and rounds, as without ``--aaco-compare``): the
        test body gets a result to assert on, and ``--aaco-save-baseline`` saves it; only the side at
        REF and the side-by-side cycles are left out."""
        outcome = UNCHANGED_OUTCOME if side.status == UNCHANGED else NEW_OUTCOME
        text = f"{label}: {side.describe(self.ref or '')}" + (
            "; its side at REF is not measured (this side is measured once, as without a comparison)"
            if outcome == UNCHANGED_OUTCOME else "; nothing to compare with")
        return Verdict(outcome=outcome, label=label, threshold=threshold, current_mean_ms=mean_ms, reason=text)

    def judge_item(self, run: SideBySideRun, settings: MeasureSettings, gate: GateSettings,
                   level: Callable[[], float], lock: Callable[[], AbstractContextManager[object]]
                   ) -> tuple[BenchmarkResult, Verdict]:
        """Measure *run*'s item side by side with its baseline side (``--aaco-compare``,
        ``--aaco-compare-python``) with *settings*, and judge it with *gate* (the item's threshold,
        memory limits) at the item's LOND level, *level()*, drawn only for an item measured side by
        side. *lock* is held while measuring (the device lock). Returns the candidate's result and
        the Verdict.

        An item unchanged at REF, or new there, is measured once as usual (``run.measure``) and
        gets that verdict. With ``--aaco-cold-start N`` an item measured side by side also gets its
        cold-start comparison (``run.compare_cold_start``: :meth:`cold_start`), which the extra
        passes run after the rounds. Raises :class:`~pytest_aaco.measure.inference.SessionError` /
        :class:`~pytest_aaco.sidebyside.worker_client.WorkerError` from either side,
        :class:`~pytest_aaco.sidebyside.revision.GitRefError` for a file git cannot give.
        """
        label = f"{run.model.name}[{run.provider.short}]"
        found = self.triage(run.model, run.provider.short)
        side = found.side
        if side.status in (UNCHANGED, NEW):
            result = run.measure(run.handle, settings)
            return result, self.static_verdict(side, label, gate.threshold, result.mean_ms)
        raw = ProviderSpec(run.provider.short, run.provider.ep_name)
        o = self.options
        graph = GraphChoice.from_dict(run.handle.graph) if run.handle.graph else None

        def provider_for(model: ModelSpec) -> ProviderSpec:
            # both sides take the candidate's graph decision: one measured quantity on both sides
            provider = item_provider(model, raw, o.provider_options)
            return with_graph(provider, graph) if graph is not None else provider

        item = ItemMeasure(settings.warmup, settings.iobinding, settings.device_id, o.intra_op_threads, o.device_time)
        telemetry = run.telemetry_session()  # over both sides' blocks: the reports split it by side
        telemetry.start()
        try:
            result, verdict, compared = self.measure(run.model, side, provider_for, item, gate, level(), label,
                                                     lock=lock)
        finally:
            telemetry.stop()
        result.telemetry = telemetry.to_dict()
        note = found.note()
        if note:  # a compute check that did not prove the item unchanged says why
            verdict.notes.append(str(note))
        if o.cold_start:  # measured by the cold-start pass after the rounds (extra_passes.measure_insight)
            run.compare_cold_start = partial(self.cold_start, run.model, side, provider_for, item, run.feeds,
                                             o.cold_start, label, o.cold_start_threshold,
                                             reused=None if self.python else reused_samples(compared))
        return result, verdict

    def measure(self, spec: ModelSpec, side: BaselineSide, provider_for: Callable[[ModelSpec], ProviderSpec],
                item: ItemMeasure, gate: GateSettings, alpha: float, label: str,
                lock: Callable[[], AbstractContextManager[object]] | None = None,
                ) -> tuple[BenchmarkResult, Verdict, SideBySide]:
        """Compare the item with its baseline side; returns (candidate BenchmarkResult, Verdict, SideBySide).

        *provider_for(spec)* gives the EP with that spec's registry options and the command line's
        merged in (the baseline side gets the options it had at REF). *lock* is a context-manager
        factory held while measuring (the device lock). With both sides traced in this process
        (device time decides), their fresh sessions warm up for ``item.warmup`` iterations without the
        0.25 s extension (:data:`~pytest_aaco.sidebyside.sides.TRACED_MIN_WARMUP_S`). Raises what the
        sides raise (:class:`~pytest_aaco.measure.inference.SessionError`,
        :class:`~pytest_aaco.sidebyside.worker_client.WorkerError`).
        """
        assert side.spec is not None and side.model_file is not None  # CHANGED sides carry both
        provider = provider_for(spec)
        tracer, no_tracer = tracer_for(provider.short, item.device_time)
        if self.python and (tracer is not None or (no_tracer is None and provider.ep.tracer == eps.ROCPROFV3
                                                   and item.device_time != "off")):
            tracer, no_tracer = None, "device time: the baseline side runs in another interpreter, which has no tracer"
        entries = self.settings.session_config()
        min_warmup_s = TRACED_MIN_WARMUP_S if tracer is not None else MIN_WARMUP_S
        candidate = LocalFactory(model_path(spec), spec, provider, item.warmup, item.iobinding, item.device_id,
                                 item.intra_op_threads, entries, min_warmup_s=min_warmup_s)
        base_provider = provider_for(side.spec).for_side(BASELINE)  # its own compile-cache folder
        baseline: Any
        measured: Any = candidate  # the candidate's side as measured
        if self.python:
            baseline = WorkerFactory(self.python, side.model_file, base_provider, candidate.shared_feeds, item.warmup,
                                     item.iobinding, item.device_id, item.intra_op_threads, entries)
            # the candidate in fresh workers of this interpreter too: the same overhead, and the process
            # pair as the test's session level (cycles.measure opens settings.processes pairs)
            measured = WorkerFactory(sys.executable, model_path(spec), provider, candidate.shared_feeds, item.warmup,
                                     item.iobinding, item.device_id, item.intra_op_threads, entries,
                                     env=plugin_python_env())
        else:
            baseline = LocalFactory(side.model_file, side.spec, base_provider, item.warmup, item.iobinding,
                                    item.device_id, item.intra_op_threads, entries, min_warmup_s=min_warmup_s)
        settings = replace(self.settings, threshold=gate.threshold, device_threshold=gate.device_threshold,
                           memory_threshold=gate.memory_threshold,
                           memory_slack_mb=gate.memory_slack_mb)
        device = bool(provider.is_gpu)
        if lock is None:
            result = compare_sides(baseline, measured, settings, alpha, self.name, device, tracer=tracer)
        else:
            with lock():
                result = compare_sides(baseline, measured, settings, alpha, self.name, device, tracer=tracer)
        if tracer is not None and result.measurement.device is None and result.measurement.device_note:
            no_tracer = f"device time: {result.measurement.device_note}"  # the tracer refused on this GPU
        if tracer is None and no_tracer is None and provider.ep.tracer == eps.ROCPROFV3 and not self.python:
            no_tracer = _child_device_time(result, baseline, candidate, base_provider, provider, item, settings,
                                           alpha, device, lock, label=label)
        verdict = to_verdict(result, label)
        if verdict.side_by_side is not None:  # both sides' figures and distributions, for the reports
            # the baseline side's throughput at its own batch size (issue 43: 392.5/s against 8221.6/s
            # for one unchanged model when the baseline side's was taken as 1)
            base_feeds = getattr(baseline, "feeds", None)
            base_batch = batch_size(base_feeds if isinstance(base_feeds, dict) else candidate.feeds or {}) or 1
            verdict.side_by_side.figures["baseline_side"] = side_figures(result, BASELINE, base_batch)
        if side.changes or no_tracer:
            if side.changes:
                verdict.notes.append("changed since the baseline side: " + ", ".join(side.changes))
                verdict.changed, verdict.changed_since = list(side.changes), self.ref or "the baseline side"
            if no_tracer:
                verdict.notes.append(no_tracer)
        bench = candidate_result(result, spec.name, provider.short, batch_size(candidate.feeds or {}) or 1,
                                 item.iobinding)
        return bench, verdict, result

    def cold_start(self, spec: ModelSpec, side: BaselineSide, provider_for: Callable[[ModelSpec], ProviderSpec],
                   item: ItemMeasure, feeds: dict[str, np.ndarray], sessions: int, label: str, threshold: float,
                   reused: tuple[list[FreshSample], list[FreshSample]] | None = None) -> SideBySideColdStart:
        """Compare the item's cold start with its baseline side's: *sessions* fresh sessions of each
        side, alternating (:func:`pytest_aaco.passes.coldstart.compare_cold_start`, confirmed with fresh
        cycles when the comparison confirms), at *threshold* (fraction). Never withheld for CPU
        contention: both sides run alternately under the same load.

        *reused*: ``(baseline, candidate)`` samples of the fresh sessions the side-by-side measurement
        opened in this process (:func:`reused_samples`); they are the first look's first cycles, and
        only the sessions still missing to reach *sessions* per side are built, the way that
        measurement built them (:class:`FactorySessions`). None (``--aaco-compare-python``, whose
        sides run in another interpreter): every session is built for the cold start.

        The candidate runs in this process on *feeds* (the item's inputs); the baseline side too,
        or with ``--aaco-compare-python`` in one worker of the other interpreter that loads a fresh
        session per cycle (:class:`~pytest_aaco.sidebyside.worker_client.WorkerSessions`) on the same *feeds*.
        Both sides get the comparison's session configuration entries. Raises
        :class:`~pytest_aaco.measure.inference.SessionError` /
        :class:`~pytest_aaco.sidebyside.worker_client.WorkerError`.
        """
        assert side.spec is not None and side.model_file is not None  # CHANGED sides carry both
        provider, base_provider = provider_for(spec), provider_for(side.spec).for_side(BASELINE)
        entries = self.settings.session_config()
        candidate = LocalSessions(model_path(spec), provider, feeds, spec, item.device_id, item.intra_op_threads,
                                  entries)
        worker = WorkerSide(self.python, name=BASELINE) if self.python else None
        baseline: Any = (WorkerSessions(worker, side.model_file, base_provider, feeds, item.device_id,
                                        item.intra_op_threads, entries) if worker is not None
                         else LocalSessions(side.model_file, base_provider, None, side.spec, item.device_id,
                                            item.intra_op_threads, entries))
        fill = None
        if reused is not None and worker is None:
            fill = (FactorySessions(LocalFactory(side.model_file, side.spec, base_provider, 0, item.iobinding,
                                                 item.device_id, item.intra_op_threads, entries, False), BASELINE),
                    FactorySessions(LocalFactory(model_path(spec), spec, provider, 0, item.iobinding,
                                                 item.device_id, item.intra_op_threads, entries, False), CANDIDATE))
        try:
            return compare_cold_start(baseline, candidate, label, self.name, cycles=sessions,
                                      confirm=self.settings.confirm, seed=self.settings.seed,
                                      compiles=compiles_for(provider), threshold=threshold,
                                      reused=reused or ((), ()), fill=fill)
        finally:
            if worker is not None:
                worker.close()


def _child_device_time(result: SideBySide, baseline: Any, candidate: LocalFactory,
                       base_provider: ProviderSpec, provider: ProviderSpec, item: ItemMeasure,
                       settings: CompareSettings, alpha: float, device: bool,
                       lock: Callable[[], AbstractContextManager[object]] | None,
                       label: str = "") -> str | None:
    """Device time on AMD GPUs: both sides traced in one rocprofv3 child per look
    (:func:`pytest_aaco.measure.traced_child.trace_sides`,
    :func:`~pytest_aaco.sidebyside.cycles.child_device_time`), put into *result*. Returns None, or
    the note saying why device time is missing (the item is then gated on wall time); where rocprofv3
    is installed but its trace failed, :func:`wall_time_only` has warned it with the item's *label*
    first, so the terminal says it too (rocprofv3 not installed is a note only, as CUPTI's absence is); with
    ``--aaco-device-time=on`` a failure is raised as
    :class:`~pytest_aaco.measure.inference.SessionError`."""
    create_ms = [float(x) for info in result.measurement.sides_info.values() for x in info.get("create_ms", [])]
    sides = [ChildSide(BASELINE, baseline.model_file, base_provider, baseline.shared_feeds(), item.iobinding),
             ChildSide(CANDIDATE, candidate.model_file, provider, candidate.shared_feeds(), item.iobinding)]
    timeout = rocprof.timeout_s(max(create_ms, default=0.0) / 1000, len(sides))
    fmt = default_output_format(rocm_version())

    def trace(seed: int) -> dict[str, Any]:
        return trace_sides(sides, cycles=settings.first_cycles, runs=DEVICE_RUNS, device_id=item.device_id,
                           seed=seed, output_format=fmt, timeout_s=timeout).blocks

    try:
        if lock is None:
            looks = child_device_time(trace, settings, alpha, device)
        else:
            with lock():
                looks = child_device_time(trace, settings, alpha, device)
    except (TracerError, SessionError) as exc:
        if item.device_time == "on":
            raise SessionError(f"--aaco-device-time=on: {exc}") from None
        if isinstance(exc, TracerMissing):  # not installed: a note, as a missing CUPTI is (tracer_for)
            return f"device time: {exc}; gated on wall time only"
        return wall_time_only(label, str(exc))
    if not looks:
        return wall_time_only(label, "the traced child gave fewer than 2 cycles per side")
    attach_child_device_time(result, looks)
    return None


@dataclass
class FactorySessions:
    """Fresh sessions of one side built as the side-by-side measurement builds them:
    :meth:`LocalFactory.open` (the own-memory probe's start, creation, placement check, first run;
    best with the factory's warmup 0 and ``footprint`` False: neither is timed) then ``close``. Its
    :class:`FreshSample` has no ORT-profiler split of creation (None), as the samples of
    :func:`reused_samples`. Raises what the factory raises."""

    factory: LocalFactory
    name: str

    def fresh(self) -> FreshSample:
        opened = self.factory.open(self.name)
        try:
            cache = opened.info.get("compile_cache")
            return FreshSample(opened.create_ms, opened.first_run_ms, compile_cache=cache,
                               compile_ms=opened.info.get("compile_ms"))
        finally:
            opened.close()  # dropped here, as the side-by-side measurement drops its pairs


def reused_samples(result: SideBySide) -> tuple[list[FreshSample], list[FreshSample]]:
    """``(baseline, candidate)``: creation and first run (ms) of every fresh session the side-by-side
    measurement *result* opened, its first look's then its confirmation's, the i-th of each side from
    the i-th session pair (``sides_info[side]["create_ms"/"first_run_ms"]``), for the cold-start pass
    to reuse (:meth:`SideBySideGate.cold_start`). Each pair built its sides in alternating order (odd
    pairs the candidate first, :func:`~pytest_aaco.sidebyside.cycles.measure`). A sample carries the
    side's compile-cache status and "with compile" figure when the measurement recorded them."""
    found: tuple[list[FreshSample], list[FreshSample]] = ([], [])
    for m in (result.first, result.measurement):
        if m is None:
            continue
        for i, side in enumerate((BASELINE, CANDIDATE)):
            info = m.sides_info.get(side) or {}
            create, first = info.get("create_ms") or [], info.get("first_run_ms") or []
            caches = info.get("compile_cache") or []
            compiled = info.get("compile_ms")
            for k, (c, f) in enumerate(zip(create, first, strict=False)):
                cache = caches[k] if isinstance(caches, list) and k < len(caches) else None
                found[i].append(FreshSample(float(c), float(f), compile_cache=cache if isinstance(cache, str) else None,
                                            compile_ms=float(compiled) if isinstance(compiled, (int, float)) else None))
    return found


__all__ = ["CHANGED", "NEW", "NEW_OUTCOME", "UNCHANGED", "UNCHANGED_OUTCOME", "FactorySessions", "ItemMeasure",
           "ItemOptions", "SideBySideGate", "SideBySideLook", "SideBySideRun", "reused_samples"]
