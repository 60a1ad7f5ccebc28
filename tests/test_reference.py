"""The reference workload with real ONNX Runtime on CPU: the generated model, the interleaved
measurement, and the memory gate on a real +100 MB allocation (issue 11)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from finished import judge_history

from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.judge import history_memory_growth
from pytest_aaco.history.store import Baseline, run_record
from pytest_aaco.measure.inference import MeasureSettings, build_session
from pytest_aaco.measure.inputs import make_inputs
from pytest_aaco.measure.modelgen import reference_mix
from pytest_aaco.measure.providers import available_providers, parse_provider
from pytest_aaco.measure.reference_workload import (
    ReferenceError,
    build_reference,
    check_reference,
    reference_id,
    reference_path,
)
from pytest_aaco.measure.rounds import run_benchmark
from pytest_aaco.options import GateSettings

CPU = parse_provider("cpu")


def test_reference_mix_is_deterministic():
    first, second = reference_mix().SerializeToString(), reference_mix().SerializeToString()
    assert first == second
    assert reference_mix(seed=1).SerializeToString() != first
    with pytest.raises(ValueError, match="divisible by 4"):
        reference_mix(size=54)


@pytest.mark.parametrize(("per_iteration_ms", "expected"), [(0.01, 200), (1.0, 2), (25.0, 1), (1e-9, 1000)])
def test_discard_covers_the_spin_guard(per_iteration_ms, expected):
    from pytest_aaco.measure.reference_workload import discard_for

    assert discard_for(per_iteration_ms) == expected


def test_reference_names():
    assert check_reference(" MIX ") == "mix" and check_reference("none") is None
    assert check_reference("squeezenet") == "squeezenet"
    with pytest.raises(ReferenceError, match=r"'alexnet': expected one of mix, mix-small, squeezenet, .*, none"):
        check_reference("alexnet")


def test_reference_path_is_cached_and_identified(isolated_cache):
    path = reference_path("mix")
    assert path.is_file() and path.is_relative_to(isolated_cache)
    mtime = path.stat().st_mtime_ns
    assert reference_path("mix") == path and path.stat().st_mtime_ns == mtime
    assert reference_id("mix", path).startswith("mix:") and len(reference_id("mix", path)) == 20
    assert reference_path("squeezenet").name.startswith("zoo-squeezenet-")  # generated (pytest_aaco/measure/zoogen.py)


def test_measurement_pairs_every_round_with_a_reference_block(isolated_cache, tiny_model_path):
    ref = build_reference("mix", CPU, 0, 1, "none", warmup_s=0.05)
    handle = build_session(tiny_model_path, CPU, 0, 1)
    feeds = make_inputs("tiny", handle.session.get_inputs(), {}, {})
    result = run_benchmark(handle, feeds, MeasureSettings(warmup=2, rounds=4, iterations=50), "tiny", 1,
                           reference=ref)
    series = result.reference
    assert series is not None and series.id == ref.id
    assert len(result.rounds) == 4 and all(r.n == 50 for r in result.rounds)  # rounds = item blocks
    assert series.log_means.shape == series.normalized.shape == (4,)
    np.testing.assert_allclose(series.normalized, result.round_log_means - series.log_means)
    assert series.log_means.mean() > result.round_log_means.mean()  # the reference is the heavier model here
    assert 0.0 < series.share < 1.0 and series.iterations >= 3
    assert result.to_dict(raw=False)["reference"]["id"] == ref.id
    assert result.mean_ms > 0 and result.p99_ms >= result.p50_ms  # classic fields unchanged


# ---------------------------------------------------------------- memory on the item's own footprint


def gather_model(path: Path, floats: int) -> Path:
    """``y = Gather(W, idx)`` with an initializer W of *floats* float32 values: ORT keeps W resident."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.arange(floats, dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["W", "idx"], ["y"], axis=0)], "g",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], initializer=[weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, str(path))
    return path


def measured_footprint(model: Path):
    """One item as benchmark_model measures it: RSS around session creation and the measured rounds."""
    from pytest_aaco.benchmark import add_rss_growth, build_tracked, rss_mb
    from pytest_aaco.samplers import TelemetrySession, build_samplers

    handle = build_tracked(model, CPU, 0, 1)
    start = rss_mb()
    feeds = {"idx": np.array([3], dtype=np.int64)}
    result = run_benchmark(handle, feeds, MeasureSettings(warmup=2, rounds=3, iterations=20), "g", 1,
                           telemetry=TelemetrySession(build_samplers("cpu", 0, 0.02)))
    add_rss_growth(result, handle.build_rss_mb, start)
    del handle
    return result


@pytest.mark.slow
def test_memory_gate_real_allocation(tmp_path):
    small = gather_model(tmp_path / "small.onnx", 1000)
    big = gather_model(tmp_path / "big.onnx", 100 * 1024 * 1024 // 4 + 1000)  # +100 MB initializer
    history = [run_record(measured_footprint(small)) for _ in range(3)]
    fp = Fingerprint({"provider": "CPUExecutionProvider"})
    baseline = Baseline(tmp_path / "b.json", "t::g", fp.fields, fp.id, history, [])
    settings = GateSettings()
    for _ in range(3):  # unchanged: no memory failure, ever
        assert history_memory_growth(measured_footprint(small), baseline, settings) == []
    found = history_memory_growth(measured_footprint(big), baseline, settings)
    assert len(found) == 1 and found[0].startswith("RSS growth")
    grown = float(found[0].split("(+")[1].split(" MB")[0])
    assert 90 <= grown <= 250
    v = judge_history(measured_footprint(big), baseline, fp, settings, 0.05, "g[cpu]")
    assert v.fails and "MEMORY REGRESSION RSS growth" in v.message


def test_reference_cache_builds_once_and_can_be_off(isolated_cache):
    from pytest_aaco.measure.reference_workload import ReferenceCache

    cache = ReferenceCache("mix")
    first = cache.get(CPU, 0, 1, "none")
    assert first is not None and cache.get(CPU, 0, 1, "none") is first
    assert cache.get(CPU, 0, 2, "none") is not first  # other thread settings: another reference
    cache.close()
    assert cache.built == {}
    assert ReferenceCache("none").get(CPU, 0, 1, "none") is None


def test_reference_cache_remembers_an_ep_it_cannot_run_on(isolated_cache):
    """Raised once (the session turns it into a warning), then None without retrying."""
    from pytest_aaco.measure.inference import SessionError
    from pytest_aaco.measure.reference_workload import ReferenceCache

    if "MIGraphXExecutionProvider" in available_providers():
        pytest.skip("this ORT build has MIGraphX")
    cache = ReferenceCache("mix")
    missing = parse_provider("migraphx")  # not in this ORT build: the session falls back to the CPU
    with pytest.raises(SessionError):
        cache.get(missing, 0, 1, "none")
    assert cache.get(missing, 0, 1, "none") is None and len(cache.errors) == 1
