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
    RECORDS_PER_BLOCK,
    DeviceBlock,
    DeviceRecorder,
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
