"""What device time costs, bounded: fewer runs per traced block for models with many kernels
(:data:`~pytest_aaco.measure.device_time.RECORDS_PER_BLOCK`), a share budget for the traced blocks
of stored rounds, and every other cycle traced side by side when a traced block is costly.

Tracers and clocks are fakes; the real cost (CUPTI, about 70 us per kernel record on the H100) is in
docs/gpu.md.
"""

from __future__ import annotations

from collections import Counter

import pytest

from pytest_aaco.measure.device_time import (
    DEVICE_RUNS,
    MIN_TRACED_BLOCKS,
    RECORDS_PER_BLOCK,
    TRACED_SHARE,
    DeviceBlock,
    DeviceRecorder,
    TraceBudget,
    runs_for,
)


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
