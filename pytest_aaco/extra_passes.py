"""An item's extra passes after its measured rounds: cold start, GPU kernel trace, operator profile.

None of them runs during the measured rounds, and each takes the device lock the rounds take
(:func:`pytest_aaco.measure.devicelock.hold_device`), so no other benchmark shares the device with them:

* **cold start** (``--aaco-cold-start N``): N fresh InferenceSessions, creation and first run
  (:func:`pytest_aaco.passes.coldstart.measure_cold_start`); under ``--aaco-compare`` an item measured
  side by side instead compares N fresh sessions of each side alternately, the side-by-side
  measurement's own fresh sessions first (:attr:`~pytest_aaco.benchmark.BenchmarkRun.compare_cold_start`,
  :meth:`pytest_aaco.sidebyside.gate.SideBySideGate.cold_start`), and one not measured side by
  side (unchanged or new at REF) gets no cold-start pass;
* **kernels**: CUPTI on NVIDIA EPs (``--aaco-cupti on``, :func:`pytest_aaco.passes.kernels.cupti_pass`
  on the item's own session and binding) and rocprofv3 (``--aaco-rocprof``,
  :func:`pytest_aaco.passes.kernels.rocprof_pass`: the profile pass in the one traced child);
* **operator profile** (``--aaco-profile``): :func:`pytest_aaco.passes.opprofile.profile_model` in a
  separate profiling session, sized by the item's p50.

A pass that fails becomes a note on the item (``insight_notes``), never an error of the item: the
measured result stands. Then :func:`judge_insight` judges the cold start against the baseline's
cold-start history (side by side: the comparison already judged it) and compares the profile
with the baseline's latest profile.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pytest_aaco import eps
from pytest_aaco.benchmark import BenchmarkRun, LockTimeout, device_lock
from pytest_aaco.config import AacoConfig
from pytest_aaco.history.store import Baseline, history_entries
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.inference import SessionError, SessionHandle, bind_run
from pytest_aaco.measure.ortprofile import ProfileError
from pytest_aaco.measure.placement import Placement, PlacementError, describe_placement, fallback_problem
from pytest_aaco.passes.coldstart import ColdStart, cold_start_verdict, measure_cold_start
from pytest_aaco.passes.kernels import KernelMetrics, cupti_pass, onnx_node_count, rocprof_pass
from pytest_aaco.passes.opprofile import OpProfile, compare_profiles, profile_model, profile_runs
from pytest_aaco.records.device import ColdStartComparison
from pytest_aaco.sidebyside.worker_client import WorkerError
from pytest_aaco.tracers.base import TracerError
from pytest_aaco.warnings import AacoProviderWarning


@dataclass
class Insight:
    """What the extra passes of one item measured (None: not measured) and why any failed;
    ``side_cold_start``: the cold start compared side by side (then ``cold_start`` is None)."""

    cold_start: ColdStart | None = None
    side_cold_start: ColdStartComparison | None = None
    kernels: KernelMetrics | None = None
    profile: OpProfile | None = None
    notes: list[str] = field(default_factory=list)

    def baseline_extra(self) -> JSONDict:
        """The entries a saved baseline run keeps (``cold_start``, ``profile``)."""
        extra: JSONDict = {}
        if self.cold_start is not None:
            extra["cold_start"] = self.cold_start.to_dict()
        if self.profile is not None:
            extra["profile"] = self.profile.to_dict()
        return extra


def _kernels(run: BenchmarkRun, insight: Insight) -> None:
    """The kernel pass with the tracer the EP's record names, when its option is on; a failure is a note."""
    config, provider = run.config, run.provider
    kind = provider.ep.tracer
    option = {eps.CUPTI: "--aaco-cupti", eps.ROCPROFV3: "--aaco-rocprof"}.get(kind)
    if option is None or not (config.cupti if kind == eps.CUPTI else config.rocprof):
        return
    node_count = onnx_node_count(run.handle.model_path)
    try:
        if kind == eps.CUPTI:
            runner = bind_run(run.handle, run.feeds, run.settings.iobinding, config.device_id)
            binding = getattr(runner, "binding", None)
            sync = getattr(binding, "synchronize_outputs", None)
            insight.kernels = cupti_pass(runner, node_count=node_count, sync=sync)
        else:
            insight.kernels = rocprof_pass(run.handle.model_path, provider, run.feeds, device_id=config.device_id,
                                           node_count=node_count, exe=str(config.rocprof),
                                           compile_s=run.handle.create_ms / 1000)
    except (TracerError, SessionError) as exc:
        insight.notes.append(f"{option}: {exc}")


def measure_insight(run: BenchmarkRun, profile: bool) -> Insight:
    """Run the extra passes the config asks for (the operator profile only when *profile*) under
    the device lock, after the item's rounds. Never raises for a failing pass: it becomes a note, as
    does a device lock held by another benchmark past ``--aaco-lock-timeout`` (no pass runs then)."""
    insight = Insight()
    try:
        with device_lock(run.provider, run.config.device_id, f"{run.model.name}[{run.provider.short}]"):
            _run_passes(run, profile, insight)
    except LockTimeout as exc:
        insight.notes.append(f"extra passes not run: {exc}")
    return insight


def _run_passes(run: BenchmarkRun, profile: bool, insight: Insight) -> None:
    """The passes of :func:`measure_insight`, each failure a note in *insight*."""
    config = run.config
    if config.cold_start:
        try:
            if run.compare_cold_start is not None:
                insight.side_cold_start = run.compare_cold_start()
            elif run.side_gate is None:
                insight.cold_start = measure_cold_start(run.handle.model_path, run.provider, run.feeds,
                                                        device_id=config.device_id,
                                                        intra_op_threads=config.intra_op_threads,
                                                        sessions=config.cold_start)
        except (SessionError, WorkerError) as exc:
            insight.notes.append(f"--aaco-cold-start: {exc}")
    _kernels(run, insight)
    if profile:
        last = run.results[-1] if run.results else None
        try:
            insight.profile = profile_model(run.handle.model_path, run.provider, config.device_id,
                                            feeds=run.feeds, runs=profile_runs(last.p50_ms if last else None))
        except (SessionError, ProfileError) as exc:
            insight.notes.append(f"--aaco-profile: {exc}")


@dataclass
class JudgedInsight:
    """The item record's fields from its extra passes (:func:`judge_insight`), as JSON objects:
    ``cold_start`` (``ColdStart.to_dict()`` with its ``verdict``, or
    :meth:`SideBySideColdStart.record`), ``profile`` (``OpProfile.to_dict()`` with its
    ``comparison``), ``kernels`` (``KernelMetrics.to_dict()``); None for a pass that did not run.
    ``notes``: why a pass failed or a baseline entry was skipped (the record's ``insight_notes``)."""

    cold_start: JSONDict | None = None
    profile: JSONDict | None = None
    kernels: JSONDict | None = None
    notes: list[str] = field(default_factory=list)


def judge_insight(insight: Insight, baseline: Baseline | None, label: str, config: AacoConfig,
                  gated: bool = True) -> JudgedInsight:
    """The record fields of *insight* (:class:`JudgedInsight`): the cold start with its verdict
    against the baseline's cold-start history (side by side: :meth:`SideBySideColdStart.record`),
    the profile with its comparison to the baseline's latest profile, the kernels, and the notes.
    With *gated* False (a run that saves the baseline) nothing is judged or compared."""
    judged = JudgedInsight(notes=list(insight.notes))
    if insight.side_cold_start is not None:
        judged.cold_start = insight.side_cold_start.record()
    elif insight.cold_start is not None and not gated:
        judged.cold_start = insight.cold_start.to_dict()
    elif insight.cold_start is not None:
        history = []
        for entry in history_entries(baseline, "cold_start"):
            try:
                history.append(ColdStart.from_dict(entry))
            except ValueError as exc:
                judged.notes.append(f"a cold-start entry of the baseline was skipped: {exc}")
        verdict = cold_start_verdict(insight.cold_start, history, label, threshold=config.cold_start_threshold,
                                     max_contention=config.max_contention)
        judged.cold_start = {**insight.cold_start.to_dict(), "verdict": verdict.to_dict()}
    if insight.profile is not None:
        profile = insight.profile.to_dict()
        past = history_entries(baseline, "profile") if gated else []
        if past:
            try:
                profile["comparison"] = compare_profiles(OpProfile.from_dict(past[-1]), insight.profile).to_dict()
            except ValueError as exc:
                judged.notes.append(f"the baseline's operator profile was skipped: {exc}")
        judged.profile = profile
    if insight.kernels is not None:
        judged.kernels = insight.kernels.to_dict()
    return judged


def kernel_data(insight: Insight) -> JSONDict | None:
    """The diagnosis' *kernel_data* (:meth:`KernelMetrics.to_diagnosis`), or None without a trace."""
    return insight.kernels.to_diagnosis() if insight.kernels is not None else None


def node_placement_problem(run: BenchmarkRun, profile: Callable[[SessionHandle, dict[str, np.ndarray]], Placement]
                      ) -> str | None:
    """Profile where the nodes of *run* ran (*profile*: the session's cached
    :meth:`~pytest_aaco.session_parts.ItemSessions.placement`), record it on *run*, and say why the result
    must not count as the EP's, or None. Cheap CPU nodes only warn (``AacoProviderWarning``)."""
    try:
        report = profile(run.handle, run.feeds)
    except (SessionError, PlacementError) as exc:
        return f"placement check failed: {exc}"
    run.placement = report.to_dict()
    problem: str | None = fallback_problem(report, run.provider)
    if problem is None and report.cpu_nodes:
        warnings.warn(AacoProviderWarning(f"{run.model.name}[{run.provider.short}]: {describe_placement(report)}"),
                      stacklevel=3)
    return problem
