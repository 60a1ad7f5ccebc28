"""What device time costs, bounded: fewer runs per traced block for models with many kernels
(:data:`~pytest_aaco.measure.device_time.RECORDS_PER_BLOCK`), a share budget for the traced blocks
of stored rounds, and every other cycle traced side by side when a traced block is costly.

Tracers and clocks are fakes; the real cost (CUPTI, about 70 us per kernel record on the H100) is in
docs/gpu.md.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
import pytest

from pytest_aaco.measure.device_time import (
    COSTLY_RECORDS,
    DEVICE_RUNS,
    MIN_TRACED_BLOCKS,
    RECORDS_PER_BLOCK,
    TRACED_SHARE,
    DeviceRecorder,
    TraceBudget,
    TracedSide,
    runs_for,
)
from pytest_aaco.measure.interleave import run_cycles
from pytest_aaco.measure.reference_workload import Reference
from pytest_aaco.sidebyside.cycles import compare_sides, device_look_of
from pytest_aaco.sidebyside.sides import TRACED_FIRST_CYCLES, CompareSettings, OpenedSide
from pytest_aaco.tracers.base import DeviceBlock


class KernelTracer:
    """*kernels* kernels per run, *ms* kernel time per run; keeps the runs of every block it traced."""

    source = "fake"

    def __init__(self, kernels: int, ms: float = 1.0) -> None:
        self.kernels, self.ms = kernels, ms
        self.runs: list[int] = []

    def trace(self, run, runs: int) -> DeviceBlock:
        for _ in range(runs):
            run()
        self.runs.append(runs)
        return DeviceBlock(runs, self.ms, self.ms * 0.9, float(self.kernels), Counter({"k": self.kernels * runs}))


def test_runs_per_block_are_capped_by_kernel_records():
    assert RECORDS_PER_BLOCK == 500 and DEVICE_RUNS == 2
    assert runs_for(219) == 2 and runs_for(245) == 2  # resnet50, inception_v1 keep 2 runs
    assert runs_for(702) == 1 and runs_for(5000) == 1  # densenet121: 1 run, never 0
    assert runs_for(1, most=3) == 3 and runs_for(251) == 1


@pytest.mark.parametrize(("kernels", "later"), [(219, 2), (245, 2), (702, 1)])
def test_a_recorder_traces_its_first_block_in_full_then_caps_the_runs(kernels, later):
    tracer = KernelTracer(kernels)
    recorder = DeviceRecorder(tracer, lambda: None)
    for _ in range(4):
        recorder.trace()
    assert tracer.runs == [DEVICE_RUNS] + [later] * 3
    series = recorder.series()
    assert series is not None
    # blocks of 1 and 2 runs are per run alike: kernel time, kernels and names per run
    assert series.kernel_ms == pytest.approx(1.0) and series.kernels == kernels
    assert series.log_means == pytest.approx([0.0] * 4) and series.names_per_run() == {"k": float(kernels)}
    assert series.runs == DEVICE_RUNS + 3 * later and series.to_dict()["runs"] == DEVICE_RUNS


class FakeClock:
    """A ns clock that moves only when told (:meth:`advance`, ms)."""

    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns

    def advance(self, ms: float) -> None:
        self.ns += int(ms * 1e6)


class CostlyTracer(KernelTracer):
    """A :class:`KernelTracer` whose traced blocks take *cost_ms* on *clock*."""

    def __init__(self, kernels: int, clock: FakeClock, cost_ms: float) -> None:
        super().__init__(kernels)
        self.clock, self.cost_ms = clock, cost_ms

    def trace(self, run, runs: int) -> DeviceBlock:
        self.clock.advance(self.cost_ms)
        return super().trace(run, runs)


def _stored_rounds(rounds: int, round_ms: float, cost_ms: float) -> tuple[DeviceRecorder, float]:
    """*rounds* wall-time rounds of *round_ms* on a fake clock, each followed by a budgeted traced
    block costing *cost_ms*: (the recorder, traced share of the whole measuring time)."""
    clock = FakeClock()
    recorder = DeviceRecorder(CostlyTracer(702, clock, cost_ms), lambda: None, budget=TraceBudget(clock=clock))
    for _ in range(rounds):
        clock.advance(round_ms)
        recorder.trace()
    recorder.measure_ns = clock.ns
    return recorder, recorder.traced_ns / clock.ns


@pytest.mark.parametrize("cost_ms", [40.0, 60.0, 110.0])
def test_the_budget_keeps_traced_blocks_near_a_tenth_of_stored_measuring_time(cost_ms):
    # densenet121 on the H100: ~0.25 s rounds, 60 ms (1 run) to 110 ms (2 runs) traced blocks
    assert TRACED_SHARE == 0.10 and MIN_TRACED_BLOCKS == 6
    recorder, share = _stored_rounds(30, 250.0, cost_ms)
    unbudgeted = cost_ms / (250.0 + cost_ms)
    assert share <= TRACED_SHARE + 0.01 < unbudgeted
    series = recorder.series()
    assert series is not None and len(series.blocks) + recorder.skipped == 30
    assert len(series.blocks) >= MIN_TRACED_BLOCKS and series.skipped == recorder.skipped > 0
    assert series.to_dict()["skipped"] == recorder.skipped


def test_a_cheap_traced_block_is_never_skipped_and_the_record_reads_as_before():
    recorder, share = _stored_rounds(30, 250.0, 10.0)  # resnet50-like: 4% of the time
    series = recorder.series()
    assert series is not None and len(series.blocks) == 30 and recorder.skipped == 0
    assert "skipped" not in series.to_dict() and share < TRACED_SHARE


def test_the_budget_always_keeps_the_blocks_the_history_test_needs():
    recorder, _ = _stored_rounds(30, 100.0, 1000.0)  # a traced block 10x a round
    assert len(recorder.blocks) == MIN_TRACED_BLOCKS and recorder.skipped == 30 - MIN_TRACED_BLOCKS
    recorder, share = _stored_rounds(4, 100.0, 1000.0)  # fewer rounds than the minimum: all traced
    assert len(recorder.blocks) == 4 and recorder.skipped == 0 and share > 0.5


def test_recorders_sharing_a_budget_trace_the_same_cycles():
    # the item's and the reference's blocks are paired by position (normalized device time)
    clock = FakeClock()
    budget = TraceBudget(clock=clock)
    item = DeviceRecorder(CostlyTracer(702, clock, 80.0), lambda: None, budget=budget)
    ref = DeviceRecorder(CostlyTracer(50, clock, 15.0), lambda: None, budget=budget)
    traced: list[tuple[int, int]] = []
    for cycle in range(30):
        for recorder in ((item, ref) if cycle % 2 else (ref, item)):
            clock.advance(200.0)
            recorder.trace()
        traced.append((len(item.blocks), len(ref.blocks)))
    assert all(a == b for a, b in traced) and item.skipped == ref.skipped > 0
    assert (item.traced_ns + ref.traced_ns) / clock.ns <= TRACED_SHARE + 0.01


class ClockSide:
    """A side whose wall-time block takes *block_ms* on *clock*; ``run`` is its model run."""

    def __init__(self, name: str, clock: FakeClock, block_ms: float) -> None:
        self.name, self.clock, self.block_ms = name, clock, block_ms

    def run(self) -> None:
        pass

    def block(self, iterations: int) -> np.ndarray:
        self.clock.advance(self.block_ms)
        return np.full(iterations, int(self.block_ms / iterations * 1e6), dtype=np.int64)


@pytest.mark.parametrize(("kernels", "every"), [(219, 1), (245, 1), (301, 1), (600, 1), (601, 2), (702, 2)])
def test_a_traced_side_traces_every_other_cycle_when_its_blocks_carry_many_records(kernels, every):
    # resnet50 (219 kernels per run) and inception_v1 (245): 2 runs per block, under 600 records;
    # densenet121 (702): 1 run, 702 records, ~60 ms against a 200 ms wall-time block on the H100
    assert COSTLY_RECORDS == 600
    clock = FakeClock()
    side = TracedSide(ClockSide("candidate", clock, 200.0), CostlyTracer(kernels, clock, 1.0))
    run_cycles([side], {"candidate": 5}, 6)
    assert side.every == every
    assert [b.cycle for b in side.blocks] == list(range(0, 6, every)) and side.skipped == 6 - len(side.blocks)


def _traced_sides(baseline_kernels: int, candidate_kernels: int, cycles: int,
                  candidate_ms: float = 1.0) -> tuple[TracedSide, TracedSide]:
    clock = FakeClock()
    base = TracedSide(ClockSide("baseline", clock, 200.0), CostlyTracer(baseline_kernels, clock, 1.0))
    cand = TracedSide(ClockSide("candidate", clock, 200.0), CostlyTracer(candidate_kernels, clock, 1.0))
    cand.recorder.tracer.ms = candidate_ms  # type: ignore[attr-defined]
    run_cycles([base, cand], {"baseline": 5, "candidate": 5}, cycles, rng=np.random.default_rng(1))
    return base, cand


def test_side_by_side_blocks_pair_by_cycle_when_the_sides_trace_at_different_rates():
    base, cand = _traced_sides(702, 219, 6)  # the baseline traces cycles 0, 2, 4; the candidate all
    assert (base.every, cand.every) == (2, 1) and len(base.blocks) == 3 and len(cand.blocks) == 6
    # kernel time that changes from cycle to cycle on both sides alike: paired by cycle, no change
    for side in (base, cand):
        side.recorder.blocks[:] = [replace(b, kernel_ms=1.0 + b.cycle) for b in side.blocks]
    look = device_look_of([(base.blocks, cand.blocks)], CompareSettings(), True, 0.05, 0.05)
    assert look is not None and look.cycles == 3
    assert look.log_ratios == [pytest.approx([0.0, 0.0, 0.0])]  # by position it would pair 3 with 2, 5 with 3
    # two pairs of 3 cycles (TRACED_FIRST_CYCLES = 6 on 2 session pairs): 2 traced cycles each, enough
    assert TRACED_FIRST_CYCLES == 6
    pairs = [_traced_sides(702, 714, 3) for _ in range(2)]
    look = device_look_of([(a.blocks, b.blocks) for a, b in pairs], CompareSettings(), True, 0.05, 0.05)
    assert look is not None and look.cycles == 4 and [len(d) for d in look.log_ratios] == [2, 2]


def test_blocks_without_a_cycle_index_still_pair_by_position():
    # the rocprof child's blocks (AMD) carry no cycle index
    blocks = [DeviceBlock(2, 1.0 + i, 1.0, 10.0) for i in range(3)]
    look = device_look_of([(blocks, [replace(b, kernel_ms=b.kernel_ms * 1.1) for b in blocks])], CompareSettings(),
                          True, 0.05, 0.05)
    assert look is not None and look.cycles == 3 and look.log_ratios[0] == pytest.approx([np.log(1.1)] * 3)


class SleepingSide:
    """A side whose block sleeps its wall time (1.5 ms per iteration); device time from *device_ms*."""

    def __init__(self, name: str, device_ms: float) -> None:
        self.name, self.device_ms = name, device_ms

    def run(self) -> float:
        return self.device_ms

    def block(self, iterations: int) -> np.ndarray:
        time.sleep(0.0015 * iterations)
        return np.full(iterations, 1_500_000, dtype=np.int64)


@dataclass
class SleepingFactory:
    device_ms: float

    def open(self, name: str) -> OpenedSide:
        return OpenedSide(SleepingSide(name, self.device_ms), 1.5, 100.0, 5.0, 2.0, {"ort_version": "x"})


class SlowTracer:
    """Kernel time per run from the side's run (with 0.1% noise); each traced block sleeps *cost_s*."""

    source = "fake"

    def __init__(self, cost_s: float) -> None:
        self.cost_s, self.rng, self.blocks = cost_s, np.random.default_rng(0), 0

    def trace(self, run, runs: int) -> DeviceBlock:
        time.sleep(self.cost_s)
        ms = float(run()) * float(np.exp(self.rng.normal(0, 0.001)))
        self.blocks += 1
        return DeviceBlock(runs, ms, ms, 702.0, Counter({"k": 702 * runs}))


def test_a_device_time_regression_is_still_found_when_every_other_cycle_is_traced():
    # 702 kernel records per traced block, over COSTLY_RECORDS: every = 2
    settings = CompareSettings(block_s=0.0, discard=1, budget_s=60.0)
    tracer = SlowTracer(0.005)
    result = compare_sides(SleepingFactory(1.0), SleepingFactory(1.03), settings, alpha=0.05,
                           baseline_label="HEAD~1", device=True, tracer=tracer)
    assert result.device_outcome == "regression" and result.confirmed is True
    measurements = [m for m in (result.first, result.measurement) if m is not None]
    # each side traced cycles 0, 2, 4 ... of each session pair only
    halves = sum(2 * ((len(cs) + 1) // 2) for m in measurements for cs in m.cycles_by_pair)
    assert tracer.blocks == halves < sum(2 * m.cycles for m in measurements)
    device = result.measurement.device
    assert device is not None and float(device.comparison.ratio) == pytest.approx(1.03, rel=0.005)
    # the record says how many side-cycles the deciding measurement left untraced
    deciding = result.measurement
    untraced = sum(2 * (len(cs) // 2) for cs in deciding.cycles_by_pair)
    assert device.skipped == untraced > 0 and result.to_dict()["device_time"]["skipped"] == untraced


def test_the_item_and_the_reference_trace_the_same_rounds_within_the_budget():
    # measure_alongside's two recorders share one TraceBudget: equal block counts, the same rounds
    # skipped, so ln(item) - ln(reference) per block stays a per-round pairing
    class Sleepy(KernelTracer):
        def trace(self, run, runs: int) -> DeviceBlock:
            time.sleep(0.01)
            return super().trace(run, runs)

    reference = Reference("ref", "ref-id", lambda: time.sleep(0.0005), per_iteration_ms=0.5)
    rounds, series, recorder = reference.measure_alongside(lambda: time.sleep(0.001), 16, 10, 0.01, Sleepy(702))
    assert recorder is not None and series.device is not None and len(rounds) == 16
    item = recorder.series()
    assert item is not None and len(item.blocks) == len(series.device.blocks) >= MIN_TRACED_BLOCKS
    assert item.skipped == series.device.skipped > 0 and len(item.blocks) + item.skipped == 16
