"""The per-item gate: fingerprint, baseline, verdict, confirmation look, contention, the extra
passes (cold start, GPU kernels, operator profile: :mod:`pytest_aaco.extra_passes`), diagnosis.

One finished :class:`~pytest_aaco.benchmark.BenchmarkRun` becomes an
:class:`~pytest_aaco.records.item.ItemRecord` with its :class:`~pytest_aaco.records.verdict.Verdict` in
three steps, none of which needs pytest; the session object (:mod:`pytest_aaco.session`) calls them after
the test body returned, and does the side effects (the item's stash, ``pytest.fail``, hooks, the bundle):

1. :func:`gather` reads what the decision needs: the physical GPU, the fingerprint, the baseline file and
   the fingerprint compared with it, the runner's variance priors and pooled variances, the item's LOND
   level, the session's machine offset, the gate settings (an :class:`ItemCase`);
2. :func:`judge` decides on that case alone: statistics and rules, no file, option or device read;
3. :func:`conclude` records the LOND test and the machine offset, runs the extra passes and builds the record.

The item pipeline (:func:`judge`): a :class:`Gate` (the stored baselines' :class:`~pytest_aaco.history.judge.StoredGate`
or the side-by-side :class:`~pytest_aaco.sidebyside.gate.SideBySideLook`, peers) gives the first look as
an *unfinished* verdict; the pipeline applies the confirmation look
(:func:`pytest_aaco.verdict.finish.confirm`, stored only: side by side confirms with fresh sessions
inside its measurement, by the same rule), CPU contention (stored only: paired sides ran under the
same load), the notes, then finishes the verdict once (:func:`pytest_aaco.verdict.finish.finish`);
:func:`conclude` records the LOND test.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Protocol

from pytest_aaco.benchmark import BenchmarkRun
from pytest_aaco.config import AacoConfig
from pytest_aaco.extra_passes import Insight, judge_insight, kernel_data, measure_insight
from pytest_aaco.history.fingerprint import Fingerprint, build_fingerprint
from pytest_aaco.history.judge import MachineOffset, StoredGate
from pytest_aaco.history.pooled import item_pools
from pytest_aaco.history.store import Baseline, RunnerPriors, baseline_path, other_runners, read_baseline, save_run
from pytest_aaco.jsonio import AacoFileError, JSONDict
from pytest_aaco.measure.inference import MeasureSettings
from pytest_aaco.measure.registry import content_hash
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.options import GateSettings
from pytest_aaco.records.base import Outcome
from pytest_aaco.records.item import ItemRecord
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.samplers.gpus import physical_gpu
from pytest_aaco.sidebyside.gate import SideBySideLook
from pytest_aaco.verdict.diagnosis import change_first, classify_bottleneck
from pytest_aaco.verdict.finish import contention_explains, settle
from pytest_aaco.verdict.metrics import derived_metrics, other_processes_cores
from pytest_aaco.verdict.multiplicity import LondFdr


class Gate(Protocol):
    """One item's gate. Its peers: :class:`~pytest_aaco.history.judge.StoredGate` (against the stored
    history), :class:`~pytest_aaco.sidebyside.gate.SideBySideLook` (against the item at REF, measured
    side by side) and :class:`SaveLook` (``--aaco-save-baseline``). :meth:`look` returns the verdict of
    one look *unfinished* (outcome and figures, no ``fails``, no ``message``); the item pipeline
    (:func:`judge`) finishes it once."""

    @property
    def stored(self) -> bool:
        """Judged against the stored history: the pipeline takes the confirmation look with it and withholds
        a regression measured under CPU contention. Not so side by side (both sides ran alternately under
        the same load, and fresh sessions confirmed inside the gate) nor when saving (nothing is tested)."""
        ...

    @property
    def gated(self) -> bool:
        """The item was tested against something (a LOND test spent): the outcome is recorded with the LOND."""
        ...

    def look(self, result: BenchmarkResult) -> Verdict:
        """The unfinished verdict of *result* (ms figures of one measurement of the item)."""
        ...


@dataclass(frozen=True)
class SaveLook:
    """``--aaco-save-baseline`` (a :class:`Gate`): :meth:`look` saves the measurement into the item's
    history and returns the ``saved`` verdict, unfinished. Nothing is tested: no confirmation, no
    contention, no LOND test."""

    save: Callable[[BenchmarkResult], Verdict]
    stored: bool = False
    gated: bool = False

    def look(self, result: BenchmarkResult) -> Verdict:
        return self.save(result)


@dataclass(frozen=True)
class GateContext:
    """What the gate needs from the session: the settings, the session's LOND procedure, the
    machine's variance prior per baseline folder, a way to say a confirmation look starts, and
    the session's shared raw change (a machine speed change that moves every item)."""

    config: AacoConfig
    lond: LondFdr
    variance_priors: Callable[[Path], RunnerPriors]
    announce: Callable[[str, MeasureSettings], None]
    machine_offset: MachineOffset = field(default_factory=MachineOffset)
    #: the project's git commit, recorded in each history run (:func:`pytest_aaco.measure.commit.commit_info`)
    commit_info: JSONDict | None = None
    #: the gate against another runner's history (``--aaco-baseline-runner``):
    #: :func:`pytest_aaco.history.across.other_runner_gate`, handed in by the session
    other_runner: Callable[[Path, str, str, Fingerprint, GateSettings, str, LondFdr, float],
                           tuple[Gate, Baseline | None]] | None = None


def item_label(run: BenchmarkRun) -> str:
    """``model[provider]``, as in the regression message."""
    return f"{run.model.name}[{run.provider.label}]"


def item_fingerprint(run: BenchmarkRun, extra: JSONDict) -> Fingerprint:
    """The item's fingerprint, with *extra* fields (from ``pytest_aaco_fingerprint`` implementations)."""
    feeds = run.feeds
    return build_fingerprint(
        model_sha256=content_hash(run.handle.model_path),
        input_shapes={k: list(v.shape) for k, v in feeds.items()},
        input_dtypes={k: str(v.dtype) for k, v in feeds.items()},
        provider=run.provider.short,
        ep_name=run.provider.ep_name,
        provider_options=run.handle.recorded_options,
        iobinding=run.settings.iobinding,
        intra_op_threads=run.config.intra_op_threads,
        extra=extra,
        reference=run.reference.id if run.reference is not None else None,
        graph=str((run.handle.graph or {}).get("state") or "off"),
        device_id=run.config.device_id,
    )


def _saved(nodeid: str, run: BenchmarkRun, fp: Fingerprint, ctx: GateContext, record: ItemRecord,
           insight: Insight, result: BenchmarkResult) -> Verdict:
    """Save *result* into the item's baseline (``--aaco-save-baseline``); the ``saved`` verdict, unfinished."""
    c = ctx.config
    label = item_label(run)
    settings = run.gate_settings()
    path = baseline_path(c.baseline_dir, fp.machine_key, nodeid)
    extra = insight.baseline_extra()
    if record.gpu is not None:  # which of identical GPUs ran this history run (docs/gpu.md, per-GPU baselines)
        extra["gpu"] = {k: record.gpu.get(k) for k in ("uuid", "pci_bus_id", "name")}
    if ctx.commit_info is not None:  # which commit of the project this history run measured
        extra["commit_info"] = ctx.commit_info
    saved = save_run(path, nodeid, fp, result, c.history, c.baseline_reset, extra)
    record.warnings.extend(saved.warnings)  # a file moved aside, a history archived: the terminal says so
    why_not = run.no_tracer or result.device_note  # no device time saved: say which package (or why)
    return Verdict(Outcome.SAVED, label, settings.threshold,
                   reason=f"{label}: {saved.note}" + (f"; {why_not}" if why_not else ""),
                   current_mean_ms=result.mean_ms, baseline_runs=saved.baseline.runs,
                   baseline_path=str(path), fingerprint_id=fp.id)


def item_gate(nodeid: str, run: BenchmarkRun, fp: Fingerprint, ctx: GateContext) -> tuple[Gate, Baseline | None]:
    """The item's gate: side by side when it was measured so (``--aaco-compare``: its look was taken while
    measuring), else the stored history's at the item's LOND level (drawn only when a baseline gates it);
    with the baseline read (None side by side, or when there is none)."""
    if run.side_verdict is not None:  # judged side by side while measuring (--aaco-compare)
        return SideBySideLook(run.side_verdict), None
    c = ctx.config
    if c.baseline_runner is not None and c.baseline_runner != fp.machine_key and ctx.other_runner is not None:
        # --aaco-baseline-runner: another runner's history, read from its folder, never written
        return ctx.other_runner(c.baseline_dir, c.baseline_runner, nodeid, fp, run.gate_settings(), item_label(run),
                                ctx.lond, c.fdr)
    path = baseline_path(c.baseline_dir, fp.machine_key, nodeid)
    baseline = read_baseline(path, nodeid)  # parsed once: the priors and the pooled variance read it too
    match = fp.against(baseline.fingerprint) if baseline is not None else None  # compared once, here
    # a fingerprint differing only in versions (an ORT or driver upgrade) is gated too, on raw figures
    gated = match is not None and match.gates
    level = ctx.lond.next_level() if gated else c.fdr
    others = other_runners(c.baseline_dir, fp.machine_key, nodeid) if baseline is None else None
    priors = ctx.variance_priors(path.parent) if gated else RunnerPriors()
    pools = item_pools(path.parent, run.results[-1]) if gated else None  # the folder's pooled variances
    return StoredGate(baseline, fp, run.gate_settings(), level, item_label(run), others, priors.raw,
                      ctx.machine_offset.current(), priors.adjusted, gated=gated, stored=True, match=match,
                      pools=pools), baseline


@dataclass(frozen=True)
class ItemCase:
    """What :func:`judge` decides one item on, all gathered before it (:func:`gather`): no file, option,
    provider or GPU is read while judging.

    *label*: ``model[provider]``; *settings*: the item's gate settings; *result*: the measurement judged
    (ms figures); *gate*: the :class:`Gate` that looks at it, its baseline and LOND level already drawn
    (None when gathering failed); *history*: the gating baseline's runs, oldest first (the contention
    bound reads them; empty without one); *again*: takes the confirmation look (a fresh measurement,
    judged by the same gate; None when not asked for or not a stored gate); *cpus*: the machine's logical
    CPUs; *max_contention*: cores (``--aaco-max-contention``; None: not checked); *notes*: lines added to
    the verdict; *also_saved*: what saving the run said where a nightly job also stored it; *error*: why
    gathering failed (a baseline file that cannot be read): the verdict is then an ``error`` that fails."""

    label: str
    settings: GateSettings
    result: BenchmarkResult
    gate: Gate | None
    history: list[JSONDict] = field(default_factory=list)
    again: Callable[[], Verdict] | None = None
    cpus: int = 1
    max_contention: float | None = None
    notes: tuple[str, ...] = ()
    also_saved: str | None = None
    error: str | None = None


@dataclass
class Gathered:
    """:func:`gather`'s answer: the :class:`ItemCase` :func:`judge` decides on, and what the record
    needs besides (:func:`conclude`): the record begun (GPU, graph, provider chain, fingerprint), the
    fingerprint (None when it could not be built), the baseline read (None when there is none or side
    by side) and the extra passes measured before saving (``--aaco-save-baseline``)."""

    case: ItemCase
    record: ItemRecord
    fingerprint: Fingerprint | None = None
    baseline: Baseline | None = None
    insight: Insight = field(default_factory=Insight)


def gather(nodeid: str, run: BenchmarkRun, extra_fingerprint: JSONDict, ctx: GateContext) -> Gathered:
    """Everything judging the item *nodeid* needs, read before :func:`judge`: the record begun (the
    physical GPU, the CUDA graph, the provider chain), the fingerprint (*extra_fingerprint*: fields added
    by ``pytest_aaco_fingerprint`` hooks), the baseline read from disk, the machine's variance priors,
    the item's LOND level and the session's machine offset (in the :class:`Gate`), the gate settings.
    With ``--aaco-save-baseline`` the extra passes run first (the saved run keeps them) and a nightly
    job's run is stored here. A baseline file that cannot be read makes the case an error
    (:attr:`ItemCase.error`), never an exception."""
    result = run.results[-1]
    c = ctx.config
    label, settings = item_label(run), run.gate_settings()
    record = ItemRecord(nodeid, run.model.name, run.provider.short, label, placement=run.placement)
    gpu = physical_gpu(run.provider.short, c.device_id)
    record.gpu = None if gpu is None else gpu.to_dict()
    result.gpu = record.gpu  # the pooled test takes this GPU's offset out (verdict/pooling.py)
    if run.handle.graph and run.provider.is_gpu:
        record.extra["graph"] = dict(run.handle.graph)
    if run.provider.chain:  # --aaco-provider=vitisai|dml|cpu: the chain asked for, and the EP that ran
        record.extra["provider_chain"] = {"requested": run.provider.test_id, "ran": run.provider.short,
                                          "reason": run.provider.chain_reason}
    gathered = Gathered(ItemCase(label, settings, result, None), record)
    also_saved: str | None = None
    try:
        fp = gathered.fingerprint = item_fingerprint(run, extra_fingerprint)
        record.fingerprint = fp.fields
        gate: Gate
        if c.save_baseline:
            gathered.insight = measure_insight(run, profile=c.profile != "off")
            gate = SaveLook(partial(_saved, nodeid, run, fp, ctx, record, gathered.insight))
            if run.side_verdict is not None:  # a nightly job: gated side by side, the run stored for trends
                also_saved = gate.look(result).reason
                gate = SideBySideLook(run.side_verdict)
        else:
            gate, gathered.baseline = item_gate(nodeid, run, fp, ctx)
    except AacoFileError as exc:
        gathered.case = replace(gathered.case, error=str(exc))
        return gathered
    baseline = gathered.baseline

    def again() -> Verdict:
        ctx.announce(f"{label} again (confirmation)", run.settings)
        result.confirmation = run.remeasure()
        result.confirmation.gpu = result.gpu  # the pooled test takes this GPU's offset out
        return gate.look(result.confirmation)

    gathered.case = ItemCase(label, settings, result, gate, baseline.history if baseline is not None else [],
                             again=again if c.confirm and gate.stored else None, cpus=os.cpu_count() or 1,
                             max_contention=c.max_contention,
                             notes=(run.no_tracer,) if run.no_tracer and baseline is not None else (),
                             also_saved=also_saved)
    return gathered


def judge(case: ItemCase) -> Verdict:
    """The item's verdict, decided on *case* alone (the item pipeline of the module docstring): the gate's
    first look at the result, the confirmation look and CPU contention (stored gates only), the notes,
    then the verdict finished once (:func:`pytest_aaco.verdict.finish.settle`). It reads no file, option
    or device (only *case.again* measures, when a regression needs confirming) and records nothing in the
    session (:func:`conclude` does). A baseline file that cannot be read or written gives an ``error``
    verdict that fails the item (never an exception)."""
    if case.error is not None or case.gate is None:
        return error_verdict(case.label, case.error or "the item's gate was not gathered", case.settings)
    result, gate = case.result, case.gate

    def busy() -> float:
        looks = [result] + ([result.confirmation] if result.confirmation is not None else [])
        found = [other_processes_cores(r.telemetry, case.cpus) for r in looks]
        return max((b for b in found if b is not None), default=0.0)

    def explained(v: Verdict) -> float | None:
        """What contention did to the run the verdict stands on (the confirmation's when it was taken)."""
        look = result.confirmation if v.confirmed and result.confirmation is not None else result
        return contention_explains(v, look.telemetry, case.cpus, case.history)

    try:
        verdict = settle(gate.look(result), case.settings, again=case.again, busy=busy if gate.stored else None,
                         max_contention=case.max_contention, explained=explained, notes=case.notes)
    except AacoFileError as exc:  # --aaco-save-baseline: the history could not be written
        return error_verdict(case.label, str(exc), case.settings)
    if case.also_saved:
        verdict.notes.append(f"also saved: {case.also_saved}")
    return verdict


def error_verdict(label: str, reason: str, settings: GateSettings) -> Verdict:
    """The finished ``error`` verdict of an item whose own work inside pytest-aaco failed: it fails the item."""
    return settle(Verdict(Outcome.ERROR, label, settings.threshold, reason=reason), settings)


def diagnose(result: BenchmarkResult, verdict: Verdict, metrics: JSONDict,
             kernels: JSONDict | None = None) -> JSONDict | None:
    """The bottleneck diagnosis, for failing, unstable and inconclusive items only; *kernels*
    (``KernelMetrics.to_diagnosis()``) lets it call a run launch- or compute-bound."""
    if not (verdict.fails or verdict.unstable or verdict.outcome == Outcome.INCONCLUSIVE):
        return None
    found = classify_bottleneck(result.telemetry or {}, metrics, os.cpu_count() or 1, kernels,
                                provider=result.provider)
    if verdict.changed and verdict.regressions:  # the item changed: that is the first suspect, not the machine
        found = change_first(verdict.changed, verdict.changed_since or "the baseline", found)
    return found.to_dict() if found is not None else None


def conclude(gathered: Gathered, verdict: Verdict, run: BenchmarkRun, ctx: GateContext) -> ItemRecord:
    """The record of the item, from what :func:`gather` read and the *verdict* :func:`judge` decided: the
    session's LOND test and machine offset recorded (a gated item), the extra passes run (the operator
    profile with ``--aaco-profile failing`` only when the verdict fails) and judged against the baseline
    that gated, the derived metrics and the diagnosis. The record's ``outcome`` is ``failed`` when it fails."""
    c, case, record = ctx.config, gathered.case, gathered.record
    result, insight, baseline = case.result, gathered.insight, None
    gate = case.gate
    if gate is not None and verdict.outcome != Outcome.ERROR:  # judged: an error verdict tested nothing
        if gate.gated:
            ctx.lond.record(verdict.outcome == Outcome.REGRESSION and verdict.fails)
            if gate.stored:
                ctx.machine_offset.record(verdict)
        fp = gathered.fingerprint
        if verdict.outcome == Outcome.NO_BASELINE and verdict.baseline_path is None and fp is not None:
            verdict.baseline_path = str(baseline_path(c.baseline_dir, verdict.baseline_runner or fp.machine_key,
                                                      record.nodeid))  # the file searched
        baseline = gathered.baseline if gate.gated and gate.stored else None  # the one that gated, for the passes
        if not c.save_baseline:
            insight = measure_insight(run, profile=c.profile == "on" or (c.profile == "failing" and verdict.fails))
    judged = judge_insight(insight, baseline, record.label, c, gated=not c.save_baseline)
    record.cold_start, record.profile, record.kernels = judged.cold_start, judged.profile, judged.kernels
    record.insight_notes = judged.notes
    record.result = result.to_dict(raw=True)  # after the confirmation look, which the result carries
    record.verdict = verdict
    record.derived = derived_metrics(result.latencies_ms, result.warmup_latencies_ms, result.first_run_ms,
                                     result.batch_size)
    record.diagnosis = diagnose(result, verdict, record.derived, kernel_data(insight))
    record.outcome = Outcome.FAILED if record.fails else Outcome.PASSED  # record.outcome was PASSED
    return record


def error_record(nodeid: str, model: str, provider: str, message: str, outcome: Outcome) -> ItemRecord:
    """The record of an item that failed or was skipped before it was measured (a provider error)."""
    return ItemRecord(nodeid, model, provider, f"{model}[{provider}]", outcome=outcome, error=message)


def cause_and_fix(exc: BaseException, doing: str) -> str:
    """One line for an exception inside pytest-aaco's own per-item work: what failed, and what to do.

    ``OSError``: the path and the system's reason, and to check the path, its permissions and the
    free space. Anything else: the exception, and to re-run with ``--full-trace`` and report it.
    """
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return (f"pytest-aaco could not {doing}: {exc.strerror or exc}{where}; check that path, its permissions"
                " and the free space, then re-run")
    return (f"pytest-aaco could not {doing}: {type(exc).__name__}: {exc}; re-run with --full-trace to see where,"
            " and report it if the cause is not yours")


def mark_error(record: ItemRecord, message: str) -> ItemRecord:
    """Make *record* an ``error`` row (a failing ``error`` verdict, outcome failed) that says *message*;
    what it holds besides (the measurement) stays. Returns *record*."""
    record.verdict = error_verdict(record.label, f"{record.label}: {message}", GateSettings())
    record.outcome = Outcome.FAILED
    record.error = message
    return record


def crash_record(nodeid: str, model: str, provider: str, message: str, result: BenchmarkResult | None = None
                 ) -> ItemRecord:
    """An ``error`` row: the item's own work inside pytest-aaco raised (*message* says what and the fix).
    The measurement, when there was one, is kept in the record."""
    record = ItemRecord(nodeid, model, provider, f"{model}[{provider}]",
                        result=None if result is None else result.to_dict(raw=True))
    return mark_error(record, message)
