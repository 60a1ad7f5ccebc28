"""Device time side by side: traced blocks next to the wall-time blocks, the paired test on their
per-cycle ratios, the message that leads with the metric that failed; and the tracer's sums.

The tracer here is a fake with the documented shape (kernel spans per run); the real one, CUPTI,
runs on NVIDIA GPUs only (docs/gpu.md has the H100 figures).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from finished import to_verdict

from pytest_aaco.measure.device_time import TracedSide
from pytest_aaco.sidebyside.cycles import compare_sides as compare
from pytest_aaco.sidebyside.sides import CompareSettings, OpenedSide
from pytest_aaco.tracers import cupti
from pytest_aaco.tracers.base import DeviceBlock, KernelSpan, TracerError, TracerMissing, block_of
from pytest_aaco.tracers.select import tracer_for


def test_block_of_sums_kernel_time_unions_busy_time_and_counts_kernels():
    spans = [KernelSpan("a", 0, 100), KernelSpan("b", 50, 150), KernelSpan("a", 300, 400)]
    block = block_of(spans, runs=2)
    assert block.kernel_ms == pytest.approx((100 + 100 + 100) / 1e6 / 2)
    assert block.busy_ms == pytest.approx((150 + 100) / 1e6 / 2)  # a and b overlap for 50 ns
    assert block.kernels == 1.5 and block.names == Counter({"a": 2, "b": 1})
    with pytest.raises(ValueError, match="no kernel"):
        block_of([], 1)
    with pytest.raises(ValueError, match="runs must be"):
        block_of(spans, 0)


@dataclass
class FakeRun:
    """One model run on a fake GPU: its kernel time (ms), kernel names and wall noise."""

    device_ms: float
    names: list[str]
    calls: int = 0

    def __call__(self) -> None:
        self.calls += 1


class FakeTracer:
    """Kernel time ``device_ms * exp(N(0, sd))`` per traced block, the run's kernel names per run."""

    source = "fake"

    def __init__(self, sd: float = 0.001, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.sd = sd
        self.blocks = 0

    def trace(self, run: FakeRun, runs: int) -> DeviceBlock:
        for _ in range(runs):
            run()
        self.blocks += 1
        ms = run.device_ms * float(np.exp(self.rng.normal(0, self.sd)))
        return DeviceBlock(runs, ms, ms * 0.9, float(len(run.names)), Counter(run.names * runs))


@dataclass
class GpuSide:
    """A side whose wall time is pure host noise (launch-bound) and whose device time is fixed."""

    name: str
    run: FakeRun
    wall_ms: float
    rng: np.random.Generator

    def block(self, iterations: int) -> np.ndarray:
        latencies = (self.wall_ms * np.exp(self.rng.normal(0, 0.15, iterations)) * 1e6).astype(np.int64)
        # the block takes its time: a traced block (microseconds here) is then cheap next to it, as
        # ResNet-50's is on the H100, so each side traces every cycle (TracedSide.every)
        time.sleep(float(latencies.sum()) / 1e9)
        return latencies


@dataclass
class GpuFactory:
    device_ms: float
    names: list[str]
    seed: int = 0
    opened: int = 0
    runs: list[FakeRun] = field(default_factory=list)

    def open(self, name: str) -> OpenedSide:
        self.opened += 1
        run = FakeRun(self.device_ms, self.names)
        self.runs.append(run)
        side = GpuSide(name, run, 1.5, np.random.default_rng(self.seed + self.opened))
        return OpenedSide(side, 1.5, 100.0, 5.0, 2.0, {"ort_version": "x"})


RESNET = ["conv"] * 200 + ["relu"] * 19  # 219 kernels per run
SETTINGS = CompareSettings(block_s=0.0, discard=1, budget_s=60.0)


def test_an_unchanged_model_passes_on_device_time_while_wall_time_is_host_noise():
    a, b = GpuFactory(0.818, RESNET), GpuFactory(0.818, RESNET, seed=50)
    tracer = FakeTracer()
    result = compare(a, b, SETTINGS, alpha=0.05, baseline_label="HEAD~1", device=True, tracer=tracer)
    verdict = to_verdict(result, "resnet50[cuda]")
    assert result.device_outcome == "no-regression" and verdict.failed_metrics == []
    assert not verdict.fails
    assert re.search(r"device time [+-]0\.0% paired \(upper bound \+0\.\d% < 1%\)", verdict.message), verdict.message
    assert "kernels per run 219 -> 219" in verdict.message and "wall time " in verdict.message
    # one traced block per wall-time block of each side, and the traced runs are the model's own
    assert tracer.blocks == 2 * result.measurement.cycles
    # device time decides early: the first look comes after 6 cycles, not the wall-time plan's 10
    assert [look.cycles for look in result.measurement.looks] == [6]
    assert all(run.calls > 0 for run in a.runs + b.runs)
    assert verdict.side_by_side is not None
    dev = verdict.side_by_side.to_dict()["device_time"]
    assert dev["kernels"] == {"baseline": 219.0, "candidate": 219.0} and len(dev["per_cycle"]) == 2


def test_a_six_percent_kernel_time_growth_fails_on_device_time_and_leads_the_message():
    a = GpuFactory(0.818, RESNET)
    b = GpuFactory(0.818 * 1.065, RESNET + ["conv3x3"] * 8, seed=50)  # k4: 227 kernels
    result = compare(a, b, SETTINGS, alpha=0.05, baseline_label="HEAD~1", device=True, tracer=FakeTracer())
    assert result.device_outcome == "regression" and result.confirmed is True
    verdict = to_verdict(result, "resnet50[cuda]")
    assert verdict.failed_metrics == ["device time"]
    assert verdict.fails and verdict.outcome == "regression"
    assert verdict.message.startswith("REGRESSION resnet50[cuda]: device time +6.")
    assert "kernels per run 219 -> 227" in verdict.message and "added conv3x3 x8" in verdict.message
    assert "; wall time " in verdict.message


def test_a_two_percent_kernel_time_growth_fails_at_the_device_time_threshold_not_the_wall_one():
    # k1 on the H100: +2.1% kernel time, invisible in wall time; device time has its own threshold (1%)
    a = GpuFactory(0.818, RESNET)
    b = GpuFactory(0.818 * 1.021, RESNET + ["conv3x3"] * 5, seed=50)
    assert SETTINGS.device_threshold == 0.01 and SETTINGS.threshold == 0.05
    result = compare(a, b, SETTINGS, alpha=0.05, baseline_label="HEAD~1", device=True, tracer=FakeTracer())
    verdict = to_verdict(result, "resnet50[cuda]")
    assert verdict.failed_metrics == ["device time"] and verdict.fails
    assert verdict.message.startswith("REGRESSION resnet50[cuda]: device time +2.")
    assert ">= 1%)" in verdict.message  # the bound compared with the device-time threshold
    # at a device-time threshold of 5% the same change is not a regression
    loose = replace(SETTINGS, device_threshold=0.05)
    result = compare(a, b, loose, alpha=0.05, baseline_label="HEAD~1", device=True, tracer=FakeTracer())
    assert to_verdict(result, "resnet50[cuda]").failed_metrics == [] and not to_verdict(result, "resnet50[cuda]").fails


def test_unchanged_sessions_that_differ_by_a_tenth_of_a_percent_pass_on_device_time():
    # fresh sessions of one model differ a little in device time (H100: 0.818/0.817/0.818 ms)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        a = GpuFactory(0.818 * float(np.exp(rng.normal(0, 0.001))), RESNET, seed=seed)
        b = GpuFactory(0.818 * float(np.exp(rng.normal(0, 0.001))), RESNET, seed=seed + 50)
        result = compare(a, b, SETTINGS, alpha=0.05, baseline_label="HEAD~1", device=True,
                         tracer=FakeTracer(seed=seed))
        assert result.device_outcome == "no-regression", result.measurement.device


def test_a_tracer_that_refuses_mid_run_leaves_the_item_gated_on_wall_time_with_a_note():
    # CUPTI can refuse at the first traced block (NVreg_RestrictProfilingToAdminUsers): no error row
    class Refusing(FakeTracer):
        def trace(self, run: FakeRun, runs: int) -> DeviceBlock:
            if self.blocks >= 3:
                raise TracerError("CUPTI refused to trace kernels: not permitted")
            return super().trace(run, runs)

    a, b = GpuFactory(0.818, RESNET), GpuFactory(0.818, RESNET, seed=50)
    result = compare(a, b, SETTINGS, alpha=0.05, baseline_label="HEAD~1", device=True, tracer=Refusing())
    assert result.measurement.device is None and result.device_outcome is None
    assert "not permitted; gated on wall time only" in (result.measurement.device_note or "")


def test_a_kernel_count_change_alone_is_information_not_a_failure():
    a = GpuFactory(0.818, RESNET)
    b = GpuFactory(0.818, RESNET[:-4] + ["fused"] * 4, seed=50)  # same time, other kernels
    result = compare(a, b, SETTINGS, alpha=0.05, baseline_label="HEAD~1", device=True, tracer=FakeTracer())
    verdict = to_verdict(result, "m[cuda]")
    assert not verdict.fails and "added fused x4" in verdict.message and "removed relu x4" in verdict.message


def test_a_side_without_a_run_callable_is_not_traced():
    class WorkerLike(GpuFactory):
        def open(self, name: str) -> OpenedSide:
            opened = super().open(name)
            side = opened.runner

            class NoRun:  # a side in another interpreter: blocks only
                def __init__(self) -> None:
                    self.name = side.name

                def block(self, n: int) -> np.ndarray:
                    return side.block(n)

            return OpenedSide(NoRun(), 1.5, 100.0, 5.0, 2.0, {})

    result = compare(WorkerLike(0.8, RESNET), GpuFactory(0.8, RESNET), SETTINGS, alpha=0.05, baseline_label="x",
                     device=True, tracer=FakeTracer())
    assert result.measurement.device is None and result.device_outcome is None
    assert "device time" not in to_verdict(result, "m[cuda]").message


def test_tracer_for_names_the_package_or_stays_quiet_on_the_cpu(monkeypatch):
    assert tracer_for("cpu", "auto") == (None, None)
    assert tracer_for("cuda", "off") == (None, None)

    def missing():
        raise TracerMissing(f"CUPTI kernel tracing needs cupti-python: {cupti.INSTALL_HINT}")

    monkeypatch.setattr(cupti, "load_cupti", missing)
    tracer, why = tracer_for("cuda", "auto")
    assert tracer is None and "pytest-aaco[cuda]" in why and "gated on wall time only" in why
    with pytest.raises(TracerMissing, match=r"pytest-aaco\[cuda\]"):
        tracer_for("cuda", "on")
    tracer, why = tracer_for("migraphx", "auto")
    assert tracer is None and "migraphx" in why


def test_traced_side_keeps_the_wall_time_block_and_adds_one_traced_block():
    run = FakeRun(1.0, ["k"])
    inner = GpuSide("candidate", run, 1.0, np.random.default_rng(0))
    side = TracedSide(inner, FakeTracer(), runs=3)
    lat = side.block(5)
    side.after_block()  # what run_cycles calls once the wall-time block's clock has stopped
    assert lat.shape == (5,) and side.name == "candidate" and len(side.blocks) == 1 and run.calls == 3


def test_the_option_parses_and_refuses_other_modes(pytester):
    pytester.makepyfile(test_a="def test_a(): pass")
    result = pytester.runpytest("--aaco-device-time=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--aaco-device-time*auto, on, off*"])
    assert pytester.runpytest("--aaco-device-time=off").ret == 0
    assert pytester.runpytest("-o", "aaco_device_time=on").ret == 0
