"""Kernel metrics, the rocprof CSV parser and wrapper, the CUPTI tracer (with a stand-in module),
and the launch-bound / compute-bound diagnoses on recorded traces."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.measure.traced_child import PASS_GAP_S as GAP_S
from pytest_aaco.passes.kernels import (
    after_last_gap,
    busy_ns,
    cupti_pass,
    kernel_metrics,
    onnx_node_count,
    rocprof_pass,
)
from pytest_aaco.tracers import cupti as cuptitrace
from pytest_aaco.tracers.base import KernelSpan, TracerError
from pytest_aaco.tracers.rocprof import rocprof_command
from pytest_aaco.tracers.rocprof_trace import read_kernel_csv
from pytest_aaco.verdict.diagnosis import classify_bottleneck

DATA = Path(__file__).parent / "data" / "rocprof"


def k(start_us: float, end_us: float, name: str = "k") -> KernelSpan:
    return KernelSpan(name, int(start_us * 1000), int(end_us * 1000))


# ---------------------------------------------------------------- metrics


def test_busy_time_counts_overlapping_kernels_once():
    records = [k(0, 10), k(5, 15), k(20, 30), k(22, 25), k(40, 40)]
    assert busy_ns(records) == 25_000
    assert busy_ns([]) == 0


def test_kernels_after_the_last_pause_are_the_runs():
    records = [k(0, 5), k(10, 12), k(1000, 1001), k(1003, 1004), k(5000, 5002), k(5003, 5010)]
    assert after_last_gap(records, 500_000) == [k(5000, 5002), k(5003, 5010)]
    assert after_last_gap(records[:2], 500_000) == records[:2]  # no pause: everything


def test_metrics_of_two_runs():
    # two runs of 100 µs wall each: kernels of 5, 5 and 40 µs, one 5 µs pair overlapping by 2 µs
    run = [k(0, 5, "a"), k(3, 8, "a"), k(50, 90, "gemm")]
    records = run + [KernelSpan(r.name, r.start_ns + 100_000, r.end_ns + 100_000) for r in run]
    metrics = kernel_metrics(records, runs=2, wall_ns=200_000, node_count=2, source="test")
    assert metrics.kernels == 6 and metrics.kernels_per_run == 3
    assert metrics.kar == pytest.approx(1.5)
    assert metrics.kernel_ms == pytest.approx(0.050)
    assert metrics.busy_ms == pytest.approx(0.048)
    assert metrics.wall_ms == pytest.approx(0.100)
    assert metrics.active_ratio == pytest.approx(0.48)
    assert metrics.microkernel_share == pytest.approx(4 / 6)
    assert [t["name"] for t in metrics.top] == ["gemm", "a"]
    assert metrics.top[0] == {"name": "gemm", "count": 2, "total_ms": 0.08, "share": 0.8}
    assert metrics.to_diagnosis()["busy_ms"] == pytest.approx(0.048)
    assert "3 kernels/run (KAR 1.50), GPU active 48%, 67% under 10 µs; top: gemm 80%" in metrics.describe()
    assert json.loads(json.dumps(metrics.to_dict()))["kar"] == 1.5


def test_metrics_refuse_a_run_without_wall_time():
    with pytest.raises(ValueError, match="positive wall time"):
        kernel_metrics([], runs=1, wall_ns=0)
    assert kernel_metrics([], runs=1, wall_ns=10).active_ratio == 0.0


def test_node_count_is_read_from_the_onnx_file(tiny_model_path, tmp_path):
    assert onnx_node_count(tiny_model_path) == 6
    (tmp_path / "bad.onnx").write_bytes(b"not onnx")
    assert onnx_node_count(tmp_path / "bad.onnx") is None


# ---------------------------------------------------------------- recorded traces


def recorded(name: str, scenario: str):
    layout, records = read_kernel_csv(DATA / name)
    run = json.loads((DATA / f"{scenario}.pass.json").read_text())
    traced = after_last_gap(records, int(GAP_S * 1e9 / 2))
    return layout, records, kernel_metrics(traced, run["runs"], run["wall_ns"], node_count=16, source=layout)


@pytest.mark.parametrize(("name", "layout"), [("rocprofv3_launch_bound_kernel_trace.csv", "rocprofv3"),
                                              ("rocprof_v1_launch_bound_results.csv", "rocprof-v1")])
def test_launch_bound_traces_in_both_layouts_read_alike(name, layout):
    found, records, metrics = recorded(name, "launch_bound")
    assert found == layout
    assert len(records) == 13 * 40  # 3 warmup + 10 traced runs of 40 kernels
    assert metrics.kernels == 400 and metrics.kernels_per_run == 40 and metrics.kar == 2.5
    assert 0.2 < metrics.active_ratio < 0.35
    assert metrics.microkernel_share == pytest.approx(0.9)
    assert records[0].name == "mlir_convolution_add" and records[0].device in ("2", "0")


def test_compute_bound_traces_in_v3_and_v2_layouts_read_alike():
    _, _, v3 = recorded("rocprofv3_compute_bound_kernel_trace.csv", "compute_bound")
    layout, _, v2 = recorded("rocprof_v2_compute_bound_results.csv", "compute_bound")
    assert layout == "rocprof-v2"
    assert v3.to_dict() | {"source": ""} == v2.to_dict() | {"source": ""}
    assert v3.kernels_per_run == 6 and v3.active_ratio > 0.97 and v3.microkernel_share == 0


def test_launch_bound_rule_on_a_recorded_trace():
    _, _, metrics = recorded("rocprofv3_launch_bound_kernel_trace.csv", "launch_bound")
    diagnosis = classify_bottleneck(None, None, 8, kernel_data=metrics.to_diagnosis())
    assert diagnosis is not None and diagnosis.category == "launch_bound"
    assert diagnosis.evidence[0].startswith("kernels kept the GPU busy 2")
    assert any("90% of 40 kernels per run ran under 10 µs" in e for e in diagnosis.evidence)
    assert any("2.5 kernels per ONNX node" in e for e in diagnosis.evidence)
    assert "compute_bound" not in diagnosis.scores


def test_compute_bound_rule_on_a_recorded_trace():
    _, _, metrics = recorded("rocprof_v2_compute_bound_results.csv", "compute_bound")
    diagnosis = classify_bottleneck(None, None, 8, kernel_data=metrics.to_diagnosis())
    assert diagnosis is not None and diagnosis.category == "compute_bound"
    assert "launch_bound" not in diagnosis.scores


def test_unknown_csv_and_bad_rows_name_the_file(tmp_path):
    other = tmp_path / "stats.csv"
    other.write_text("Name,Calls,TotalDurationNs\nk,3,100\n")
    with pytest.raises(TracerError, match="stats.csv: not a kernel trace.*Name, Calls"):
        read_kernel_csv(other)
    bad = tmp_path / "x_kernel_trace.csv"
    bad.write_text("Kind,Kernel_Name,Start_Timestamp,End_Timestamp\nKERNEL_DISPATCH,k,12,oops\n")
    with pytest.raises(TracerError, match="line 2: Start_Timestamp/End_Timestamp must be integers"):
        read_kernel_csv(bad)
    with pytest.raises(TracerError, match="cannot read the kernel trace"):
        read_kernel_csv(tmp_path / "missing.csv")


# ---------------------------------------------------------------- the rocprofv3 wrapper


def test_the_pass_runs_the_one_traced_child_of_device_time(tmp_path):
    command = rocprof_command("/opt/rocm/bin/rocprofv3", tmp_path / "out", tmp_path / "spec.json")
    assert command[:2] == ["/opt/rocm/bin/rocprofv3", "--kernel-trace"]
    assert command[command.index("--output-format") + 1] == "csv"
    assert command[command.index("--") + 1:] == [sys.executable, "-m", "pytest_aaco.measure.traced_child",
                                                 str(tmp_path / "spec.json")]


def fake_rocprof(folder: Path, body: str) -> str:
    """An executable ``rocprofv3`` on a private PATH that runs *body* (Python, with ``args``)."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "rocprofv3"
    exe.write_text(f"#!{sys.executable}\nimport os, subprocess, sys\nargs = sys.argv[1:]\n"
                   + textwrap.dedent(body))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(folder)


def tiny_feeds():
    return {"x": np.ones((1, 64), np.float32)}


def test_missing_rocprof_says_how_to_get_it(monkeypatch, tiny_model_path, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TracerError, match="rocprofv3 is not on PATH: install ROCm's rocprofiler-sdk"):
        rocprof_pass(tiny_model_path, parse_provider("cpu"), tiny_feeds())


def test_failing_rocprof_is_quoted(monkeypatch, tiny_model_path, tmp_path):
    path = fake_rocprof(tmp_path / "bin", 'print("ROCPROFILER_STATUS_ERROR: no GPU agents", file=sys.stderr)\n'
                                          "sys.exit(3)\n")
    monkeypatch.setenv("PATH", path + os.pathsep + os.environ["PATH"])
    with pytest.raises(TracerError, match="exited with status 3.*\n.*no GPU agents"):
        rocprof_pass(tiny_model_path, parse_provider("cpu"), tiny_feeds())


def test_rocprof_that_writes_no_trace_is_an_error(monkeypatch, tiny_model_path, tmp_path):
    path = fake_rocprof(tmp_path / "bin", 'sys.exit(subprocess.call(args[args.index("--") + 1:]))\n')
    monkeypatch.setenv("PATH", path + os.pathsep + os.environ["PATH"])
    with pytest.raises(TracerError, match="wrote no (csv|rocpd) kernel trace"):
        rocprof_pass(tiny_model_path, parse_provider("cpu"), tiny_feeds())


def test_the_real_pass_runs_under_a_stand_in_rocprof(monkeypatch, tiny_model_path, tmp_path):
    """The wrapper end to end: the child really builds a CPU session and times its runs; the
    stand-in writes a rocprofv3 CSV with warmup kernels, the pass's pause, then 4 kernels per run."""
    body = '''
    out = args[args.index("-d") + 1]
    rc = subprocess.call(args[args.index("--") + 1:])
    os.makedirs(os.path.join(out, "host", "42"))
    rows = ["Kind,Agent_Id,Queue_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp"]
    t = 10**15
    for i in range(5):  # warmup kernels
        rows.append(f"KERNEL_DISPATCH,1,0,warm,{i},{t},{t + 3000}"); t += 5000
    t += 10**9  # the pause
    for run in range(10):
        for j in range(4):
            rows.append(f"KERNEL_DISPATCH,1,0,k{j},{j},{t},{t + 4000}"); t += 6000
    open(os.path.join(out, "host", "42", "aaco_kernel_trace.csv"), "w").write("\\n".join(rows) + "\\n")
    sys.exit(rc)
    '''
    path = fake_rocprof(tmp_path / "bin", body)
    monkeypatch.setenv("PATH", path + os.pathsep + os.environ["PATH"])
    metrics = rocprof_pass(tiny_model_path, parse_provider("cpu"), tiny_feeds(), node_count=6)
    assert metrics.source == "rocprofv3"
    assert metrics.runs == 10 and metrics.kernels == 40 and metrics.kar == pytest.approx(4 / 6)
    assert metrics.wall_ms > 0 and metrics.microkernel_share == 1.0


# ---------------------------------------------------------------- CUPTI (stand-in module)


class FakeCupti:
    """The parts of ``cupti.cupti`` the tracer uses, delivering *kernels* (start/end µs relative to
    the first timestamp) on flush."""

    class ActivityKind:
        CONCURRENT_KERNEL = 10
        MEMCPY = 1

    def __init__(self, kernels: list[tuple[str, float, float]]) -> None:
        self.kernels, self.enabled, self.now = kernels, set(), 1_000_000
        self.callbacks = None

    def activity_register_callbacks(self, requested, completed):
        self.callbacks = (requested, completed)

    def activity_enable(self, kind):
        self.enabled.add(kind)

    def activity_disable(self, kind):
        self.enabled.discard(kind)

    def get_timestamp(self):
        self.now += 100_000
        return self.now

    def activity_flush_all(self, flag):
        assert self.callbacks[0]() == (cuptitrace.BUFFER_BYTES, 0)
        base = 1_000_000 + 100_000
        acts = [types.SimpleNamespace(kind=10, name=n, start=base + int(s * 1000), end=base + int(e * 1000),
                                      device_id=0, stream_id=7) for n, s, e in self.kernels]
        acts.append(types.SimpleNamespace(kind=1, name="memcpy", start=base, end=base + 5))
        self.callbacks[1](acts)


def install_fake(monkeypatch, fake) -> None:
    package = types.ModuleType("cupti")
    package.cupti = fake
    monkeypatch.setitem(sys.modules, "cupti", package)
    monkeypatch.setitem(sys.modules, "cupti.cupti", fake)


def test_cupti_traces_only_the_kernels_of_the_runs(monkeypatch):
    fake = FakeCupti([("gemm", 10, 40), ("relu", 45, 48), ("late", 500, 510)])  # "late" is after the window
    install_fake(monkeypatch, fake)
    calls = []
    metrics = cupti_pass(lambda: calls.append(1), runs=2, node_count=2, sync=lambda: calls.append("s"))
    assert calls == [1, 1, "s"]
    assert fake.enabled == set()  # disabled again after the phase
    assert metrics.source == "cupti" and metrics.kernels == 2 and metrics.kar == 0.5
    assert metrics.wall_ms == pytest.approx(0.05)  # 100 µs between the two timestamps, over 2 runs
    assert metrics.active_ratio == pytest.approx(0.33)


def test_cupti_without_kernels_says_why(monkeypatch):
    install_fake(monkeypatch, FakeCupti([("late", 500, 510)]))
    with pytest.raises(TracerError, match="recorded no GPU kernel in 1 runs"):
        cupti_pass(lambda: None, runs=1)


def test_cupti_is_disabled_even_when_a_run_fails(monkeypatch):
    fake = FakeCupti([])
    install_fake(monkeypatch, fake)

    def boom():
        raise RuntimeError("CUDA failure 700")

    with pytest.raises(RuntimeError, match="CUDA failure"):
        cupti_pass(boom, runs=1)
    assert fake.enabled == set()


def test_missing_cupti_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)
    with pytest.raises(TracerError, match=r"pytest-aaco\[cuda\]"):
        cupti_pass(lambda: None)


def test_the_cupti_pass_and_a_device_time_block_are_made_of_the_same_spans(monkeypatch):
    kernels = [("gemm", 10, 40), ("relu", 45, 48), ("gemm", 60, 90)]
    install_fake(monkeypatch, FakeCupti(kernels))
    block = cuptitrace.CuptiTracer().trace(lambda: None, 2)  # device time's traced block
    install_fake(monkeypatch, FakeCupti(kernels))
    metrics = cupti_pass(lambda: None, runs=2)  # the kernel pass
    assert metrics.source == cuptitrace.CuptiTracer.source == "cupti"
    assert block.kernels == metrics.kernels_per_run == 1.5
    assert block.kernel_ms == pytest.approx(metrics.kernel_ms) and block.busy_ms == pytest.approx(metrics.busy_ms)
