"""Side-by-side measurement: the baseline side and the candidate interleaved in one job.

Measured minutes apart, two runs differ by the machine's drift (2% between processes on a quiet
CPU, 8 to 16% on an H100); measured in alternating blocks, the paired log-ratio of the same two
sessions varied 0.85% on CPU and 1.5 to 3.6% on the H100 (studies/RESULTS.md). So:

1. **Open** each side (:class:`~pytest_aaco.sidebyside.sides.SideFactory`): build a fresh
   InferenceSession, warm it up, and record its own memory footprint, session creation and first-run time. On device EPs
   ``session_pairs`` (default 2) fresh pairs are opened, since each session makes its own
   algorithm choices (cuDNN/MIOpen search, TensorRT tactics, the MIGraphX compile), and each
   later look runs its cycles on one more fresh pair: more cycles on the same pairs cannot shrink
   the spread between pairs. With a side in another interpreter (``--aaco-compare-python``) both
   sides run in worker processes and each pair is a pair of fresh processes, ``--aaco-compare-processes``
   (default 3) of them at the first look and as many more at each later look, up to
   :data:`~pytest_aaco.sidebyside.sides.MAX_PROCESS_PAIRS`: a process's own offset (memory layout, CPU placement,
   allocator state) then widens the interval through the between-pair term instead of reading as a
   change (the process as the unit: pyperf; Kalibera & Jones, ISMM 2013).
2. **Cycles** (:func:`pytest_aaco.measure.interleave.run_cycles`): one block of each side per cycle, in
   balanced random AB/BA order; a block lasts about :data:`~pytest_aaco.measure.interleave.BLOCK_TARGET_S`
   at that side's warmup latency; its first ``discard`` iterations are timed but not measured
   (intra-op spinning and caches of the other side's block bleed into them), and
   :func:`~pytest_aaco.measure.interleave.spin_bleed` records how much.
   Both sides run with ``session.intra_op.allow_spinning=0`` unless ``spinning`` is set
   (:meth:`~pytest_aaco.sidebyside.sides.CompareSettings.session_config`: spinning threads of one
   side took 35% from the other side's first iterations on the shared test machine).
3. **Looks** (:class:`pytest_aaco.verdict.paired.SequentialPlan`): at ``first_cycles`` cycles, then every
   ``step_cycles`` up to ``max_cycles`` while the result is inconclusive and the time budget
   allows, the per-cycle ``d = mean ln(candidate) - mean ln(baseline)`` are tested
   (:func:`pytest_aaco.verdict.paired.paired_t`, the session pair as a level; or the signed-rank test) at
   the look's share of the item's alpha. The outcome rule is the gate's
   (:func:`pytest_aaco.verdict.outcome.outcome_of`): regression needs significance **and** an estimate
   >= the threshold; no-regression needs the upper bound below it; else inconclusive with the MDE.
4. **Confirmation**: a regression is measured again with fresh sessions and fresh cycles; only
   two regressions fail the item (intersection-union, as for stored baselines).
5. **Memory**: each side's own footprint (RSS growth over its session creation and warmup on
   CPU EPs; on GPU EPs this process's device memory from NVML or amdsmi, its change around the
   side's creation and warmup), compared by a fraction **and** a slack of at least the spread of
   one side's sessions, on the median over session pairs: device-wide use is never judged.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.device_time import TracedSide
from pytest_aaco.measure.interleave import (
    Cycle,
    block_iterations,
    paired_log_ratios,
    run_cycles,
    spin_bleed,
)
from pytest_aaco.measure.results import BenchmarkResult, RoundResult
from pytest_aaco.records.base import DEVICE_TIME, LATENCY, Judgement, Outcome
from pytest_aaco.records.verdict import SideBySideSummary, Verdict
from pytest_aaco.sidebyside.sides import (
    BASELINE,
    CANDIDATE,
    DEFAULT_DISCARD,
    DEVICE_TIME_SESSION_DF,
    MAX_PROCESS_PAIRS,
    METHODS,
    CompareSettings,
    OpenedSide,
    SideFactory,
    _open_pair,
)
from pytest_aaco.tracers.base import DeviceBlock, InProcessTracer
from pytest_aaco.verdict.metrics import kernel_changes
from pytest_aaco.verdict.outcome import NO_REGRESSION_ALPHA, confirmed_outcome, judgement_of, outcome_of
from pytest_aaco.verdict.paired import SequentialPlan, SignedRank, paired_t, signed_rank
from pytest_aaco.verdict.stats import Comparison

REGRESSION, NO_REGRESSION, INCONCLUSIVE = Outcome.REGRESSION, Outcome.NO_REGRESSION, Outcome.INCONCLUSIVE


def close_sides(sides: list[Any]) -> None:
    """Close *sides* (:class:`OpenedSide` s) at once: a worker's
    exit takes about 0.1 s, and one pair of processes need not wait for the next."""
    closers = [s.close for s in sides]
    if len(closers) < 2:
        for close in closers:
            close()
        return
    with ThreadPoolExecutor(len(closers)) as pool:
        list(pool.map(lambda close: close(), closers))



@dataclass(frozen=True)
class Look:
    """One test of the cycles so far: cycles, the look's levels, the outcome and the figures."""

    cycles: int
    level: float
    upper_alpha: float
    outcome: str
    ratio: float
    p_slower: float
    elapsed_s: float


@dataclass
class Measurement:
    """One set of cycles on fresh session pairs, with its looks; the last look decides."""

    cycles_by_pair: list[list[Cycle]]
    looks: list[Look]
    comparison: Comparison | SignedRank
    companion: Comparison | SignedRank | None
    iterations: dict[str, int]
    footprints: dict[str, list[float]]
    sides_info: dict[str, dict[str, Any]]
    duration_s: float
    #: device time of the last look, when both sides were traced
    device: DeviceLook | None = None
    #: why device time was not judged although a tracer was given (the tracer refused)
    device_note: str | None = None

    @property
    def outcome(self) -> str:
        return self.looks[-1].outcome

    @property
    def regressed(self) -> bool:
        """Wall time or device time regressed."""
        return self.outcome == REGRESSION or (self.device is not None and self.device.outcome == REGRESSION)

    @property
    def cycles(self) -> int:
        return sum(len(c) for c in self.cycles_by_pair)

    def device_log_ratios(self) -> list[list[float]]:
        """Per-cycle ln(candidate/baseline kernel time per run) per traced session pair."""
        return [] if self.device is None else self.device.log_ratios

    def log_ratios(self) -> list[np.ndarray]:
        """Per-cycle ``d`` per session pair (ln units)."""
        return [paired_log_ratios(c, BASELINE, CANDIDATE) for c in self.cycles_by_pair]


def _test(d_by_pair: list[np.ndarray], settings: CompareSettings,
          device: bool) -> tuple[Comparison | SignedRank, Comparison | SignedRank | None]:
    """(the test the look decides on, the other test as a companion or None).

    ``method="t"``: the paired t-test (with the session level) decides, the signed-rank test is
    the companion (one session pair only). ``"wilcoxon"``: the reverse; with several session pairs
    the t-test decides anyway, since the signed-rank test has no session level.
    """
    comp = paired_t(d_by_pair, settings.session_sd_for(device))
    rank = signed_rank(np.concatenate(d_by_pair)) if len(d_by_pair) == 1 else None
    if settings.method == "wilcoxon" and rank is not None:
        return rank, comp
    return comp, rank


def measure(baseline: SideFactory, candidate: SideFactory, settings: CompareSettings, alpha: float,
            device: bool = False, clock: Callable[[], float] = time.monotonic,
            tracer: InProcessTracer | None = None) -> Measurement:
    """Open fresh session pairs of both sides and run looks of cycles until a decision, the last
    look, or the time budget (``settings.budget_s``, counted from the start; a look is skipped when
    the cycles it adds would not fit). Building the sessions (creation and first run: a compiling EP's
    compile) is not counted against the budget: it is measuring time the budget buys, not setup
    (``setup_s`` in the sides' info). *alpha* is the item's level (its LOND level).

    With a *tracer* (device time, :mod:`pytest_aaco.measure.device_time`), every wall-time block
    of an in-process side is followed by one traced block, so each cycle has one device-time figure
    per side; device time is tested with the same paired test on its own per-cycle log-ratios, the
    first look comes after ``traced_first_cycles`` cycles (then every ``step_cycles``), and the looks
    stop once either metric is decided.

    Raises what the factories or the runners raise (a broken side), ValueError for bad settings.
    """
    if settings.method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {settings.method!r}")
    start = clock()
    first = min(settings.first_cycles, settings.traced_first_cycles) if tracer is not None else settings.first_cycles
    pairs: list[tuple[OpenedSide, OpenedSide]] = []
    # sides in fresh processes (workers.WorkerFactory): process pairs, the first look's started at once
    processes: list[Any] = [f for f in (baseline, candidate) if getattr(f, "fresh_processes", False)]
    first_pairs = settings.pairs_for(device, bool(processes))
    plan = SequentialPlan.steps(first, settings.step_cycles, max(settings.max_cycles_for(first_pairs, bool(processes)),
                                                                 first))
    try:
        if processes and hasattr(processes[0], "start_spares"):
            processes[0].start_spares(processes, first_pairs)
        for _ in range(first_pairs):
            pairs.append(_open_pair(baseline, candidate, len(pairs), tracer))
        iterations = {BASELINE: block_iterations(pairs[0][0].per_iteration_ms, settings.block_s),
                      CANDIDATE: block_iterations(pairs[0][1].per_iteration_ms, settings.block_s)}
        rng = np.random.default_rng(settings.seed)
        cycles_by_pair: list[list[Cycle]] = [[] for _ in pairs]
        looks: list[Look] = []
        cycle_s = 0.0
        comp: Comparison | SignedRank  # set by the first look (SequentialPlan.steps has at least one)
        rank: Comparison | SignedRank | None = None
        device_look: DeviceLook | None = None
        for k, target in enumerate(plan.looks):
            done = sum(len(c) for c in cycles_by_pair)
            if looks and clock() - start - _setup_seconds(pairs) + cycle_s * (target - done) > settings.budget_s:
                break
            if looks and len(pairs) > 1:
                # more cycles cannot shrink the spread between session pairs: add a fresh pair; process pairs
                # (whose offsets are the larger) add --aaco-compare-processes pairs, up to MAX_PROCESS_PAIRS
                new = max(1, min(settings.processes, MAX_PROCESS_PAIRS - len(pairs))) if processes else 1
                if processes and new > 1 and hasattr(processes[0], "start_spares"):
                    processes[0].start_spares(processes, new)
                for _ in range(new):
                    pairs.append(_open_pair(baseline, candidate, len(pairs), tracer))
                    cycles_by_pair.append([])
                share = max(target - done, 2 * new)  # at least 2 cycles a pair (the paired test's within term)
                wants = [len(c) for c in cycles_by_pair[:-new]] + [share // new + (i < share % new) for i in range(new)]
            else:
                wants = [target // len(pairs) + (1 if i < target % len(pairs) else 0) for i in range(len(pairs))]
            for (a, b), want, have in zip(pairs, wants, cycles_by_pair, strict=True):
                if want > len(have):
                    last = have[-1].blocks[-1].side if have else None
                    have.extend(run_cycles([a.runner, b.runner], iterations, want - len(have),
                                           discard=settings.discard, rng=rng, first_index=len(have), after=last))
            cycle_s = _cycle_seconds(cycles_by_pair)
            d_by_pair = [np.array([c.log_ratio(BASELINE, CANDIDATE) for c in cs]) for cs in cycles_by_pair]
            comp, rank = _test(d_by_pair, settings, device)
            level = plan.level(k, alpha)
            upper_alpha = plan.level(k, NO_REGRESSION_ALPHA)
            outcome = str(outcome_of(comp, settings.threshold, level, upper_alpha=upper_alpha))
            looks.append(Look(target, level, upper_alpha, outcome, float(comp.ratio), float(comp.p_slower),
                              clock() - start))
            device_look = _device_look(pairs, settings, device, level, upper_alpha)
            if outcome != "inconclusive" or (device_look is not None and device_look.outcome != "inconclusive"):
                break
        footprints = {BASELINE: [p[0].footprint_mb for p in pairs if p[0].footprint_mb is not None],
                      CANDIDATE: [p[1].footprint_mb for p in pairs if p[1].footprint_mb is not None]}
        info = {BASELINE: _side_info(pairs, 0), CANDIDATE: _side_info(pairs, 1)}
        refused = next((side.runner.failed for pair in pairs for side in pair
                        if isinstance(side.runner, TracedSide) and side.runner.failed), None)
        return Measurement(cycles_by_pair, looks, comp, rank, iterations, footprints, info, clock() - start,
                           device_look, refused)
    finally:
        if processes and hasattr(processes[0], "close_spares"):
            processes[0].close_spares(processes)
        close_sides([side for pair in pairs for side in pair])


@dataclass(frozen=True)
class DeviceLook:
    """Device time of one look: the paired test of per-cycle ln(candidate/baseline kernel time per
    run), its outcome at the look's levels, and each side's median kernels per run and kernel time
    per run (ms). ``added``/``removed``: kernel names whose launches per run grew or shrank, with
    the change (top entries)."""

    outcome: str
    comparison: Comparison
    level: float
    cycles: int
    kernels: dict[str, float]
    kernel_ms: dict[str, float]
    busy_ms: dict[str, float]
    added: list[tuple[str, float]]
    removed: list[tuple[str, float]]
    log_ratios: list[list[float]] = field(default_factory=list)
    #: the device-time threshold the outcome was judged at (fraction)
    threshold: float | None = None
    #: seconds spent in the traced blocks of both sides so far (the overhead of device time)
    traced_s: float = 0.0
    #: side-cycles left untraced (a side with many kernel records traces every other cycle)
    skipped: int = 0
    #: the level of the no-regression bound at this look (None in looks made before it was kept)
    upper_alpha: float | None = None

    def judgement(self) -> Judgement:
        """This look's device-time test as a :class:`~pytest_aaco.records.base.Judgement` (the one constructor,
        :func:`pytest_aaco.verdict.outcome.judgement_of`), with the outcome decided at this look."""
        return judgement_of(DEVICE_TIME, self.comparison, self.threshold or 0.0, self.level, series="paired",
                            upper_alpha=self.upper_alpha, outcome=Outcome(self.outcome))

    def to_dict(self) -> JSONDict:
        """JSON-ready figures: the :meth:`judgement`'s, then the look's own; ``skipped`` only when some cycle
        was left untraced; no bounds for a look made before the no-regression level was kept."""
        judged = self.judgement().to_dict()
        judged["threshold"] = self.threshold
        if self.upper_alpha is None:
            del judged["lower_bound"], judged["upper_bound"]
        extra: JSONDict = {"skipped": self.skipped} if self.skipped else {}
        return {**extra, **judged, "cycles": self.cycles, "kernels": self.kernels, "kernel_ms": self.kernel_ms,
                "busy_ms": self.busy_ms, "kernels_added": [[n, c] for n, c in self.added],
                "kernels_removed": [[n, c] for n, c in self.removed], "traced_s": self.traced_s}


def _device_look(pairs: list[tuple[OpenedSide, OpenedSide]], settings: CompareSettings, device: bool,
                 level: float, upper_alpha: float) -> DeviceLook | None:
    """The device-time test over the traced blocks so far; None without traced sides."""
    sides = [(a.runner, b.runner) for a, b in pairs
             if isinstance(a.runner, TracedSide) and isinstance(b.runner, TracedSide)]
    if any(side.failed for pair in sides for side in pair):
        return None  # one side's blocks stopped: its cycles no longer pair with the other's
    look = device_look_of([(a.blocks, b.blocks) for a, b in sides], settings, device, level, upper_alpha)
    if look is None:
        return None
    return replace(look, traced_s=sum(side.traced_ns for pair in sides for side in pair) / 1e9,
                   skipped=sum(side.skipped for pair in sides for side in pair))


def device_look_of(traced: list[tuple[list[DeviceBlock], list[DeviceBlock]]], settings: CompareSettings,
                   device: bool, level: float, upper_alpha: float) -> DeviceLook | None:
    """The device-time test of traced blocks: *traced* holds, per session pair, the baseline's and
    the candidate's :class:`~pytest_aaco.measure.device_time.DeviceBlock` s in cycle order. Blocks are
    paired by the cycle they followed (``DeviceBlock.cycle``; by position where it is None): only
    cycles traced on both sides count, so a side that traced every other cycle
    (:class:`~pytest_aaco.measure.device_time.TracedSide`) pairs with one that traced every cycle.
    The paired test (:func:`paired_t`, the session pair as a level) runs on per-cycle ln(candidate /
    baseline kernel time per run) and is judged at *level* (one-sided) with the no-regression bound
    at *upper_alpha*, as wall time is. None when a pair has fewer than 2 cycles traced on both sides
    (or there is no pair)."""
    paired = [_paired_by_cycle(a, b) for a, b in traced]
    if not paired or any(len(p) < 2 for p in paired):
        return None
    d_by_pair = [np.log([cb.kernel_ms / ab.kernel_ms for ab, cb in p]) for p in paired]
    comp = paired_t(d_by_pair, settings.device_time_session_sd(), DEVICE_TIME_SESSION_DF)
    outcome = str(outcome_of(comp, settings.device_threshold, level, upper_alpha=upper_alpha))
    side_blocks = {BASELINE: [blk for a, _ in traced for blk in a], CANDIDATE: [blk for _, b in traced for blk in b]}
    runs = {side: sum(blk.runs for blk in blocks) for side, blocks in side_blocks.items()}
    names: dict[str, Counter[str]] = {side: Counter() for side in side_blocks}
    for side, blocks in side_blocks.items():
        for blk in blocks:
            names[side].update(blk.names)
    per_run = {side: {n: c / runs[side] for n, c in names[side].items()} for side in names}
    added, removed = kernel_changes(per_run[BASELINE], per_run[CANDIDATE])
    return DeviceLook(outcome, comp, level, sum(len(d) for d in d_by_pair),
                      {s: float(np.median([blk.kernels for blk in b])) for s, b in side_blocks.items()},
                      {s: float(np.median([blk.kernel_ms for blk in b])) for s, b in side_blocks.items()},
                      {s: float(np.median([blk.busy_ms for blk in b])) for s, b in side_blocks.items()},
                      added, removed, [[float(x) for x in d] for d in d_by_pair], settings.device_threshold,
                      upper_alpha=upper_alpha)


def _paired_by_cycle(a: list[DeviceBlock], b: list[DeviceBlock]) -> list[tuple[DeviceBlock, DeviceBlock]]:
    """The (baseline, candidate) blocks of the cycles both sides traced, in cycle order; a block
    without a cycle index stands at its position in its list."""
    by_a = {blk.cycle if blk.cycle is not None else i: blk for i, blk in enumerate(a)}
    by_b = {blk.cycle if blk.cycle is not None else i: blk for i, blk in enumerate(b)}
    return [(by_a[c], by_b[c]) for c in sorted(by_a.keys() & by_b.keys())]


def _setup_seconds(pairs: list[tuple[OpenedSide, OpenedSide]]) -> float:
    """Seconds spent creating the sessions of *pairs* and running them once (compiles included)."""
    return sum(s.create_ms + s.first_run_ms for pair in pairs for s in pair) / 1000.0


def child_device_look(looks: list[DeviceLook]) -> DeviceLook:
    """One verdict from the device-time looks of separate traced child processes (AMD,
    :mod:`pytest_aaco.measure.traced_child`): the first, or with a confirmation the second, whose
    regression counts only when the first found one too (intersection-union, as for wall time:
    a regression not confirmed is inconclusive). Raises ValueError for no look."""
    if not looks:
        raise ValueError("no device-time look")
    last = looks[-1]
    if len(looks) > 1:
        return replace(last, outcome=str(confirmed_outcome(looks[0].outcome, last.outcome)))
    return last


def attach_child_device_time(result: SideBySide, looks: list[DeviceLook]) -> None:
    """Put the device time of traced child processes (*looks*: the first, then the confirmation's)
    into *result*: the deciding look on its measurement, the first on its first measurement when
    wall time was confirmed too, so :attr:`SideBySide.device_outcome` reads them as it reads
    in-process traced blocks."""
    result.measurement.device = child_device_look(looks)
    if result.first is not None:
        result.first.device = looks[0]
    if len(looks) > 1:
        result.confirmed = bool(result.confirmed) or result.measurement.device.outcome == REGRESSION


def child_device_time(trace: Callable[[int], dict[str, list[DeviceBlock]]], settings: CompareSettings,
                      alpha: float, device: bool = True) -> list[DeviceLook]:
    """Device-time looks from traced child processes: ``trace(seed)`` runs one child (fresh sessions
    of both sides, :func:`pytest_aaco.measure.traced_child.trace_sides`) and returns its blocks per
    side (:data:`BASELINE`, :data:`CANDIDATE`). One look at the item's level *alpha*; a regression is
    traced again with a fresh child (seed + 1) when ``settings.confirm``. Returns the looks (1 or 2),
    for :func:`attach_child_device_time`; [] when a child gave fewer than 2 cycles. Raises what
    *trace* raises."""
    looks: list[DeviceLook] = []
    for attempt in range(2):
        blocks = trace(settings.seed + attempt)
        look = device_look_of([(blocks.get(BASELINE, []), blocks.get(CANDIDATE, []))], settings, device, alpha,
                              NO_REGRESSION_ALPHA)
        if look is None:
            return looks
        looks.append(look)
        if look.outcome != REGRESSION or not settings.confirm:
            break
    return looks


def _cycle_seconds(cycles_by_pair: list[list[Cycle]]) -> float:
    """Median wall time of one cycle (s), from the blocks' clocks."""
    spans = [(c.blocks[-1].end_ns - c.blocks[0].start_ns) / 1e9 for cs in cycles_by_pair for c in cs]
    return float(np.median(spans)) if spans else 0.0


def _side_info(pairs: list[tuple[OpenedSide, OpenedSide]], which: int) -> JSONDict:
    sides = [p[which] for p in pairs]
    info = {**sides[0].info, "create_ms": [s.create_ms for s in sides], "first_run_ms": [s.first_run_ms for s in sides],
            "per_iteration_ms": [s.per_iteration_ms for s in sides]}
    if any("compile_cache" in s.info for s in sides):
        info["compile_cache"] = [s.info.get("compile_cache") for s in sides]
    return info


@dataclass
class SideBySide:
    """The outcome for one item compared side by side, with everything the reports show.

    ``outcome``: regression / improvement / no-regression / inconclusive (the gate's words);
    ``measurement``: the deciding set of cycles (the confirmation when there was one);
    ``first``: the first measurement when a confirmation ran; ``confirmed``: None without one;
    ``memory``: memory regressions, in words; ``baseline_label``: the baseline side's name (``origin/main``,
    or the other interpreter's ``onnxruntime 1.20.1``); ``alpha``: the item's level.
    """

    outcome: str
    measurement: Measurement
    baseline_label: str
    alpha: float
    threshold: float
    first: Measurement | None = None
    confirmed: bool | None = None
    memory: list[str] = field(default_factory=list)
    #: each side's own footprint per fresh session (MB) that memory was judged on
    footprints: dict[str, list[float]] = field(default_factory=dict)
    discard: int = DEFAULT_DISCARD

    @property
    def comparison(self) -> Comparison | SignedRank:
        return self.measurement.comparison

    @property
    def device_outcome(self) -> str | None:
        """Device time's outcome (None when not traced): a regression counts only when the first
        look and the confirmation both found it (as for wall time)."""
        dev = self.measurement.device
        if dev is None:
            return None
        if self.first is not None and self.first.device is not None:  # the one rule, as for wall time
            return str(confirmed_outcome(self.first.device.outcome, dev.outcome))
        if dev.outcome == REGRESSION and self.first is not None:  # the first look was not traced
            return str(INCONCLUSIVE)
        return dev.outcome  # with confirmation off, the first look decides (as for wall time)

    @property
    def verdict_outcome(self) -> Outcome:
        """The outcome word of the verdict (:func:`to_verdict`): a regression when wall time or device
        time regressed; ``no-regression`` when wall time is inconclusive and device time is no
        regression (device time is what the GPU did); else wall time's outcome. Which metrics failed
        is the verdict's one rule, :attr:`pytest_aaco.records.verdict.Verdict.failed_metrics`."""
        if REGRESSION in (self.outcome, self.device_outcome):
            return Outcome.REGRESSION
        if self.outcome == INCONCLUSIVE and self.device_outcome == NO_REGRESSION:
            return Outcome.NO_REGRESSION
        return Outcome(self.outcome)

    @property
    def level(self) -> float:
        return self.measurement.looks[-1].level

    @property
    def duration_s(self) -> float:
        return self.measurement.duration_s + (self.first.duration_s if self.first else 0.0)

    def ci(self) -> tuple[float, float]:
        """95% two-sided interval of the ratio candidate / baseline."""
        comp = self.comparison
        if hasattr(comp, "ci"):
            return comp.ci(0.95)
        return math.exp(comp.ci_low), math.exp(comp.ci_high)

    def mde(self) -> float:
        """Minimum detectable slowdown (fraction, power 0.8) at the last look's level (t-based)."""
        comp = self.comparison if hasattr(self.comparison, "mde") else self.measurement.companion
        return float(cast(Comparison, comp).mde(self.level))

    def to_dict(self) -> JSONDict:
        """JSON-ready figures: per-cycle ratios per session pair, looks, memory, spin bleed, sides."""
        m = self.measurement
        lo, hi = self.ci()
        cycles = [c for cs in m.cycles_by_pair for c in cs]
        data: JSONDict = {
            "ref": self.baseline_label, "outcome": self.outcome, "ratio": float(self.comparison.ratio), "ci_low": lo,
            "ci_high": hi, "p_slower": float(self.comparison.p_slower), "level": self.level, "alpha": self.alpha,
            "threshold": self.threshold, "mde": self.mde(), "cycles": m.cycles,
            "session_pairs": len(m.cycles_by_pair), "iterations": m.iterations, "discard": self.discard,
            "ratios": [[float(math.exp(x)) for x in d] for d in m.log_ratios()],
            "looks": [vars(look) for look in m.looks], "spin_bleed": spin_bleed(cycles).to_dict(),
            "footprint_mb": self.footprints or m.footprints, "memory": self.memory, "sides": m.sides_info,
            "duration_s": self.duration_s, "confirmed": self.confirmed,
            "test": getattr(self.comparison, "method", "wilcoxon signed-rank, Hodges-Lehmann"),
        }
        if m.companion is not None:
            data["companion"] = m.companion.to_dict()
        if m.device is not None:
            first_traced = self.first.device.traced_s if self.first is not None and self.first.device else 0.0
            data["device_time"] = {**m.device.to_dict(), "outcome": self.device_outcome,
                                   "per_cycle": [[float(math.exp(x)) for x in d] for d in m.device_log_ratios()],
                                   "traced_s": m.device.traced_s + first_traced}  # both looks, as duration_s
        if self.first is not None:
            data["first_look"] = {"ratio": float(self.first.comparison.ratio), "cycles": self.first.cycles,
                                  "p_slower": float(self.first.comparison.p_slower)}
        return data


def side_memory_growth(footprints: dict[str, list[float]], settings: CompareSettings) -> list[str]:
    """The candidate's own footprint beyond the baseline's (MB); [] when either side has no figure.

    *footprints*: each side's own footprint per fresh session (MB). A growth is reported when the
    candidate's **smallest** session footprint exceeds the baseline's **largest** by both
    ``memory_threshold`` (fraction) and ``memory_slack_mb``: allocators reserve memory in chunks,
    so one model's footprint is not one number, and only a candidate that needs more in every
    session than the baseline side needed in any session shows growth. On the H100 an unchanged
    ResNet-50 held about 275 MB in some CUDA sessions and 405 MB in others, at random; compared
    by medians over 2 to 3 sessions per side, an A/A run failed with 404 MB vs 284 MB
    (studies/RESULTS.md, H100, 2026-11-24).
    A growth smaller than the gap between such modes is not seen side by side.
    """
    base, cand = footprints.get(BASELINE) or [], footprints.get(CANDIDATE) or []
    if not base or not cand:
        return []
    b, c = float(max(base)), float(min(cand))
    if c > max(b, 0.0) * (1 + settings.memory_threshold) and c - b > settings.memory_slack_mb:
        return [f"own footprint {c:.0f} MB (the smallest of {len(cand)} fresh sessions) vs {b:.0f} MB (the largest of"
                f" {len(base)}) at the baseline side (+{c - b:.0f} MB, limit +{settings.memory_threshold:.0%} and"
                f" +{settings.memory_slack_mb:.0f} MB)"]
    return []


#: fresh sessions per side a suspected memory growth rests on before it is reported
MEMORY_SESSIONS = 5


def more_footprints(baseline: SideFactory, candidate: SideFactory, footprints: dict[str, list[float]],
                    sessions: int = MEMORY_SESSIONS) -> dict[str, list[float]]:
    """*footprints* (MB per fresh session, by side) with fresh session pairs opened and closed until
    each side has *sessions* figures (or a side reports none). Raises what the factories raise."""
    merged = {side: list(footprints.get(side) or []) for side in (BASELINE, CANDIDATE)}
    index = 0
    while min(len(v) for v in merged.values()) < sessions:
        a, b = _open_pair(baseline, candidate, index)
        index += 1
        try:
            if a.footprint_mb is None or b.footprint_mb is None:
                break
            merged[BASELINE].append(a.footprint_mb)
            merged[CANDIDATE].append(b.footprint_mb)
        finally:
            a.close()
            b.close()
    return merged


def compare_sides(baseline: SideFactory, candidate: SideFactory, settings: CompareSettings, alpha: float,
                  baseline_label: str, device: bool = False, clock: Callable[[], float] = time.monotonic,
                  tracer: InProcessTracer | None = None) -> SideBySide:
    """Measure side by side, confirm a regression with fresh sessions, judge memory.

    Returns a :class:`SideBySide`. Raises what the sides raise. See the module docstring.
    """
    first = measure(baseline, candidate, settings, alpha, device, clock, tracer)
    result = SideBySide(first.outcome, first, baseline_label, alpha, settings.threshold, discard=settings.discard)
    if first.regressed and settings.confirm:
        second = measure(baseline, candidate, replace(settings, seed=settings.seed + 1), alpha, device, clock, tracer)
        wall = str(confirmed_outcome(first.outcome, second.outcome))  # the one rule (intersection-union)
        result = SideBySide(wall, second, baseline_label, alpha, settings.threshold, first=first,
                            discard=settings.discard)
        result.confirmed = wall == REGRESSION or result.device_outcome == REGRESSION
    footprints = {side: first.footprints[side] + (result.measurement.footprints[side] if result.first else [])
                  for side in (BASELINE, CANDIDATE)}
    result.memory = side_memory_growth(footprints, settings)
    if result.memory:
        # a growth seen on 1 to 3 sessions per side may be the allocator's modes: more fresh sessions
        footprints = more_footprints(baseline, candidate, footprints)
        result.memory = side_memory_growth(footprints, settings)
    result.footprints = footprints
    return result


def to_verdict(result: SideBySide, label: str) -> Verdict:
    """The :class:`~pytest_aaco.records.verdict.Verdict` the reports show (``method="side-by-side"``), *unfinished*:
    the item pipeline (:func:`pytest_aaco.gate.judge`) finishes it once
    (:func:`pytest_aaco.verdict.finish.settle`: which outcomes fail under the item's settings, and the
    message, e.g. ``REGRESSION resnet50[cpu]: latency +9.4% paired vs origin/main (lower bound +7.1% > 0,
    +9.4% >= 5%); ...``)."""
    comp, m = result.comparison, result.measurement
    means = {side: float(np.exp(np.mean([c.block(side).log_mean for cs in m.cycles_by_pair for c in cs])))
             for side in (BASELINE, CANDIDATE)}
    # wall time's own test: its outcome decided over the sequential looks and the confirmation (result.outcome)
    wall = judgement_of(LATENCY, comp, result.threshold, result.level, series=None, method="side-by-side",
                        ci=result.ci(), mde=result.mde(), upper_alpha=m.looks[-1].upper_alpha,
                        outcome=Outcome(result.outcome))
    verdict = Verdict.judged(wall, label, current_mean_ms=means[CANDIDATE], baseline_mean_ms=means[BASELINE],
                             memory=list(result.memory), confirmed=result.confirmed,
                             side_by_side=SideBySideSummary.from_dict(result.to_dict()))
    verdict.outcome = result.verdict_outcome  # wall time or device time: the word of the whole verdict
    return verdict


def side_figures(result: SideBySide, side: str = BASELINE, batch_size: int = 1) -> JSONDict:
    """One side's blocks of the deciding measurement, for the reports (``verdict.side_by_side``'s
    ``baseline_side``): ``summary`` (as :meth:`BenchmarkResult.summary`: mean / p50 / p99 ms,
    throughput in samples/s at that side's own *batch_size* ...), ``rounds`` (one per block),
    ``latencies_ms`` (per block, ms) and
    ``windows`` (``{side: [[start_ns, end_ns], ...]}`` of both sides' blocks on the
    ``perf_counter_ns`` clock, which the telemetry samplers use), so a report can show both sides'
    distributions and tell which side a telemetry sample was taken during."""
    m = result.measurement
    cycles = [c for cs in m.cycles_by_pair for c in cs]
    blocks = sorted((c.block(side) for c in cycles), key=lambda b: b.start_ns)
    rounds = [RoundResult(i, b.latencies_ms, b.start_ns, b.end_ns) for i, b in enumerate(blocks)]
    bench = BenchmarkResult(model="", provider="", rounds=rounds, warmup_iterations=0, warmup_latencies_ms=np.empty(0),
                            session_create_ms=float(m.sides_info[side]["create_ms"][0]),
                            first_run_ms=float(m.sides_info[side]["first_run_ms"][0]), providers_used=[],
                            batch_size=batch_size)
    data = bench.to_dict(raw=True)
    windows = {name: [[int(c.block(name).start_ns), int(c.block(name).end_ns)] for c in cycles]
               for name in (BASELINE, CANDIDATE)}
    return {"summary": data["summary"], "rounds": data["rounds"], "latencies_ms": data["latencies_ms"],
            "windows": windows}


def candidate_result(result: SideBySide, model: str, provider: str, batch_size: int = 1,
                     iobinding: str = "none") -> BenchmarkResult:
    """The candidate's blocks of the deciding measurement as a
    :class:`~pytest_aaco.measure.results.BenchmarkResult` (one round per block, ms), so the table, the
    percentiles and the user's own asserts see what the comparison measured, without a second
    measurement. Session creation and first-run times are the first candidate session's."""
    m = result.measurement
    blocks = sorted((c.block(CANDIDATE) for cs in m.cycles_by_pair for c in cs), key=lambda b: b.start_ns)
    rounds = [RoundResult(i, b.latencies_ms, b.start_ns, b.end_ns) for i, b in enumerate(blocks)]
    info = m.sides_info[CANDIDATE]
    return BenchmarkResult(model=model, provider=provider, rounds=rounds, warmup_iterations=0,
                           warmup_latencies_ms=np.empty(0), session_create_ms=float(info["create_ms"][0]),
                           first_run_ms=float(info["first_run_ms"][0]), providers_used=[],
                           batch_size=batch_size, iobinding=iobinding)
