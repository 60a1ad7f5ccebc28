"""GPU execution providers: node placement, provider options, IO binding, CUDA graphs.

The tests marked ``gpu`` need ``CUDAExecutionProvider`` (onnxruntime-gpu on a CUDA machine) and are
skipped elsewhere, so CI stays CPU-only. The rest run anywhere: :func:`profile_details` on a profile
recorded on an H100 (``tests/data/ort_profile_cuda.json``, trimmed), the measure module's option and
fallback checks with a stand-in ``InferenceSession``, and IO binding on the CPU EP.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_aaco.measure import inference as measure
from pytest_aaco.measure.inference import SessionError, bind_run, build_session
from pytest_aaco.measure.ortprofile import read_events
from pytest_aaco.measure.placement import (
    CPU_EP,
    Placement,
    PlacementError,
    describe_placement,
    fallback_problem,
    placement_report,
    profile_details,
)
from pytest_aaco.measure.providers import parse_provider

CUDA_EP = "CUDAExecutionProvider"
DATA = Path(__file__).parent / "data"
#: recorded by studies/gpu_check.py (in git history at commit af54b7b; placement phase) on an NVIDIA H200,
#: driver 580.159.04, CUDA 13.0, onnxruntime-gpu 1.31.1, 2026-11-21: three runs of x[1,3,112,112] -> Conv ->
#: Relu -> Celu -> Conv (64 channels) on the CUDA EP, which has no Celu kernel, so ORT put Celu on the CPU EP
#: between two copies. Trimmed: node events keep op_name, provider, node_index and output_type_shape only.
RECORDED = DATA / "ort_profile_cuda.json"


def _cuda_available() -> bool:
    try:
        import onnxruntime as ort
    except ImportError:
        return False
    return CUDA_EP in ort.get_available_providers()


gpu = pytest.mark.skipif(not _cuda_available(),
                         reason="needs CUDAExecutionProvider: install onnxruntime-gpu on a machine with a CUDA GPU")


def node(name: str, op: str, provider: str, ts: int, dur: int = 10) -> dict:
    return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur, "ph": "X",
            "args": {"op_name": op, "provider": provider}}


def fence(name: str, ts: int) -> dict:
    return {"cat": "Node", "name": f"{name}_fence_before", "ts": ts, "dur": 0, "ph": "X", "args": {"op_name": "Conv"}}


def run_event(ts: int, dur: int) -> dict:
    return {"cat": "Session", "name": "model_run", "ts": ts, "dur": dur, "ph": "X", "args": {}}


# ------------------------------------------------------------------ profile_details: recorded profile


@pytest.fixture(scope="module")
def recorded_events() -> list:
    return json.loads(RECORDED.read_text(encoding="utf-8"))


def test_recorded_profile_counts_nodes_per_execution_provider(recorded_events):
    # three runs in the file, each node counted once
    assert profile_details(recorded_events).nodes == {CUDA_EP: 5, CPU_EP: 1}


def test_recorded_profile_names_the_op_that_fell_to_the_cpu(recorded_events):
    placement = profile_details(recorded_events)
    assert placement.ops[CPU_EP] == {"Celu": 1}
    assert placement.ops[CUDA_EP] == {"Conv": 2, "Relu": 1, "MemcpyToHost": 1, "MemcpyFromHost": 1}


def test_recorded_profile_times_come_from_the_last_warm_run(recorded_events):
    placement = profile_details(recorded_events)
    # the first run took 16.9 ms (cuDNN's algorithm search in conv1); the last one 1.08 ms
    assert placement.run_us == 1081
    assert placement.time_us == {CUDA_EP: 37 + 15 + 10 + 258 + 52, CPU_EP: 167}
    assert placement.copy_us == 10 + 258
    assert placement.cpu_time_share == pytest.approx((167 + 10 + 258) / 1081)


def test_recorded_profile_is_refused_as_a_cuda_result(recorded_events):
    problem = fallback_problem(profile_details(recorded_events), parse_provider("cuda"))
    assert problem is not None
    assert "1 of 6 nodes ran on CPUExecutionProvider (Celu×1)" in problem
    assert "40% of the run's wall time" in problem
    assert "not recorded as a cuda result" in problem
    assert "Celu" in describe_placement(profile_details(recorded_events))


def test_read_events_reads_the_file():
    assert profile_details(read_events(RECORDED)).nodes == {CUDA_EP: 5, CPU_EP: 1}


# ------------------------------------------------------------------ profile_details: synthetic events


def test_only_kernel_events_with_a_provider_count():
    events = [run_event(0, 100), fence("a", 1), node("a", "Conv", CUDA_EP, 2),
              {"cat": "Node", "name": "b_kernel_time", "ts": 3, "dur": 1, "args": {}},
              {"cat": "Session", "name": "session_initialization", "ts": 0, "dur": 5, "args": {}}]
    assert profile_details(events).nodes == {CUDA_EP: 1}


def test_only_the_first_run_is_counted():
    first = [run_event(0, 100), node("a", "Conv", CUDA_EP, 10), node("b", "Celu", CPU_EP, 20, dur=50)]
    second = [run_event(200, 100), node("a", "Conv", CUDA_EP, 210), node("b", "Celu", CPU_EP, 220, dur=50)]
    placement = profile_details(second + first)  # order in the file does not matter
    assert placement.nodes == {CUDA_EP: 1, CPU_EP: 1}
    assert placement.run_us == 100
    assert placement.cpu_time_share == pytest.approx(0.5)


def test_without_run_events_every_kernel_event_counts():
    events = [node("a", "Conv", CUDA_EP, 1, dur=30), node("b", "Relu", CPU_EP, 2, dur=10)]
    placement = profile_details({"traceEvents": events})
    assert placement.nodes == {CUDA_EP: 1, CPU_EP: 1}
    assert placement.cpu_time_share == pytest.approx(0.25)


@pytest.mark.parametrize("bad", [{"no": "events"}, "text", 3])
def test_a_profile_that_is_not_a_list_of_events_is_an_error(bad):
    with pytest.raises(PlacementError, match="list of events"):
        profile_details(bad)


def test_unreadable_profile_file_is_an_error(tmp_path):
    path = tmp_path / "p.json"
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(PlacementError, match="cannot read the ORT profile"):
        read_events(path)


# ------------------------------------------------------------------ fallback_problem


def test_no_problem_for_cpu_items_or_all_gpu_placements():
    all_gpu = Placement(nodes={CUDA_EP: 3}, time_us={CUDA_EP: 30}, ops={CUDA_EP: {"Conv": 3}}, run_us=500)
    assert fallback_problem(all_gpu, parse_provider("cuda")) is None
    on_cpu = Placement(nodes={CPU_EP: 3}, time_us={CPU_EP: 300}, ops={CPU_EP: {"Conv": 3}}, run_us=400)
    assert fallback_problem(on_cpu, parse_provider("cpu")) is None


def test_whole_graph_on_cpu_is_a_problem():
    placement = Placement(nodes={CPU_EP: 3}, time_us={CPU_EP: 300}, ops={CPU_EP: {"Conv": 3}}, run_us=400)
    assert "no node ran on CUDAExecutionProvider" in fallback_problem(placement, parse_provider("cuda"))


def test_shape_ops_and_cheap_cpu_nodes_are_not_a_problem():
    shape_only = Placement(nodes={CUDA_EP: 9, CPU_EP: 2}, time_us={CUDA_EP: 90, CPU_EP: 900},
                           ops={CUDA_EP: {"MatMul": 9}, CPU_EP: {"Shape": 1, "Size": 1}}, run_us=1000)
    assert fallback_problem(shape_only, parse_provider("cuda")) is None
    cheap = Placement(nodes={CUDA_EP: 9, CPU_EP: 1}, time_us={CUDA_EP: 90, CPU_EP: 10},
                      ops={CUDA_EP: {"MatMul": 9}, CPU_EP: {"Gather": 1}}, run_us=1000)
    assert fallback_problem(cheap, parse_provider("cuda")) is None
    assert fallback_problem(cheap, parse_provider("cuda"), max_cpu_time_share=0.001) is not None
    assert "Gather" in describe_placement(cheap)


def test_placement_report_on_the_cpu_ep(tiny_model_path):
    assert placement_report(tiny_model_path, parse_provider("cpu")).nodes == {CPU_EP: 6}


def test_placement_report_keeps_the_profile_when_asked(tiny_model_path, tmp_path):
    kept = tmp_path / "profile.json"
    report = placement_report(tiny_model_path, parse_provider("cpu"), keep_profile=kept)
    assert profile_details(read_events(kept)).nodes == report.nodes == {CPU_EP: 6}
    assert report.ops[CPU_EP] == {"MatMul": 3, "Relu": 3}


# ------------------------------------------------------------------ measure: option and fallback checks


class FakeSession:
    """Stands in for ort.InferenceSession: what ORT's Python layer does after an EP error."""

    printed = ""
    providers = ["CPUExecutionProvider"]
    options: dict = {}

    def __init__(self, path, sess_options=None, providers=None):
        print(self.printed)

    def get_providers(self):
        return list(self.providers)

    def get_provider_options(self):
        return self.options


def test_ep_error_text_is_taken_from_orts_printed_fallback_notice():
    printed = ("*************** EP Error ***************\n"
               "EP Error Unknown provider option: \"bogus\". when using [('CUDAExecutionProvider', {})]\n"
               "Falling back to ['CPUExecutionProvider'] and retrying.\n")
    assert measure._ep_error(printed) == 'Unknown provider option: "bogus".'
    assert measure._ep_error("nothing here") == ""


def test_a_printed_ep_error_with_fallback_is_a_session_error(monkeypatch, tiny_model_path):
    import onnxruntime as ort

    class Fell(FakeSession):
        printed = "EP Error CUDA failure 101: invalid device ordinal when using ['CUDAExecutionProvider']"

    monkeypatch.setattr(ort, "InferenceSession", Fell)
    spec = parse_provider("cuda").with_options({"device_id": 7})
    with pytest.raises(SessionError, match="invalid device ordinal.*fell back to CPUExecutionProvider"):
        build_session(tiny_model_path, spec)


def test_an_option_the_cuda_ep_does_not_report_is_refused(monkeypatch, tiny_model_path):
    import onnxruntime as ort

    class Ignored(FakeSession):
        providers = [CUDA_EP, "CPUExecutionProvider"]
        options = {CUDA_EP: {"device_id": "0", "cudnn_conv_algo_search": "EXHAUSTIVE"}}

    monkeypatch.setattr(ort, "InferenceSession", Ignored)
    spec = parse_provider("cuda").with_options({"cudnn_conv_algo_search": "HEURISTIC", "bogus_option": 1})
    with pytest.raises(SessionError, match="unknown CUDAExecutionProvider option.*bogus_option"):
        build_session(tiny_model_path, spec)
    assert build_session(tiny_model_path, parse_provider("cuda").with_options({"cudnn_conv_algo_search": "X"}))


def test_options_of_other_eps_are_not_checked(monkeypatch, tiny_model_path):
    import onnxruntime as ort

    class Migraphx(FakeSession):
        providers = ["MIGraphXExecutionProvider", "CPUExecutionProvider"]
        options = {"MIGraphXExecutionProvider": {"device_id": "0"}}

    monkeypatch.setattr(ort, "InferenceSession", Migraphx)
    assert build_session(tiny_model_path, parse_provider("migraphx").with_options({"migraphx_fp16_enable": "1"}))


# ------------------------------------------------------------------ measure: IO binding on the CPU EP


@pytest.mark.parametrize("mode", ["none", "inputs", "all"])
def test_every_binding_mode_gives_the_model_output(tiny_model_path, mode):
    handle = build_session(tiny_model_path, parse_provider("cpu"))
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)}
    expected = handle.session.run(None, feeds)[0]
    run = bind_run(handle, feeds, mode, 0)
    for _ in range(3):
        result = run()
    got = result[0] if mode == "none" else run.binding.copy_outputs_to_cpu()[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_all_binding_reuses_one_output_buffer_after_the_first_run(tiny_model_path):
    handle = build_session(tiny_model_path, parse_provider("cpu"))
    feeds = {"x": np.ones((1, 64), np.float32)}
    run = bind_run(handle, feeds, "all", 0)
    run()
    first = run.binding.get_outputs()[0].data_ptr()
    run()
    run()
    assert run.binding.get_outputs()[0].data_ptr() == first


def test_a_run_function_is_built_once_per_session_mode_and_feeds(tiny_model_path):
    handle = build_session(tiny_model_path, parse_provider("cpu"))
    feeds = {"x": np.ones((1, 64), np.float32)}
    run = bind_run(handle, feeds, "inputs", 0)
    assert bind_run(handle, feeds, "inputs", 0) is run
    assert bind_run(handle, feeds, "all", 0) is not run
    assert bind_run(handle, {"x": np.zeros((1, 64), np.float32)}, "inputs", 0) is not run


def test_auto_binding_per_provider():
    assert measure.resolve_iobinding("auto", parse_provider("cpu")) == "none"
    assert measure.resolve_iobinding("auto", parse_provider("cuda")) == "all"  # measured: docs/gpu.md
    assert measure.resolve_iobinding("auto", parse_provider("migraphx")) == "inputs"
    assert measure.resolve_iobinding("inputs", parse_provider("cpu")) == "inputs"


# ------------------------------------------------------------------ on a CUDA GPU


def cpu_op_model(path: Path, size: int = 112, channels: int = 64) -> Path:
    """x -> Conv -> Relu -> Celu -> Conv: Celu has no CUDA kernel in ORT 1.31."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((channels, 3, 3, 3)) * 0.1).astype(np.float32), "w1"),
             numpy_helper.from_array((rng.standard_normal((channels, channels, 3, 3)) * 0.05).astype(np.float32),
                                     "w2")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Celu", ["r1"], ["m"], alpha=1.0, name="odd_op"),
             helper.make_node("Conv", ["m", "w2"], ["y"], pads=[1, 1, 1, 1], name="conv2")]
    graph = helper.make_graph(nodes, "cpu_op", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                               [1, 3, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, size, size])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, str(path))
    return path


@pytest.mark.gpu
@gpu
def test_cuda_provider_options_reach_the_ep(tiny_model_path):
    spec = parse_provider("cuda").with_options({"cudnn_conv_algo_search": "HEURISTIC", "use_tf32": 0})
    handle = build_session(tiny_model_path, spec)
    reported = handle.session.get_provider_options()[CUDA_EP]
    assert reported["cudnn_conv_algo_search"] == "HEURISTIC"
    assert reported["use_tf32"] == "0"
    assert reported["device_id"] == "0"
    assert handle.session.get_providers()[0] == CUDA_EP


@pytest.mark.gpu
@gpu
def test_cuda_unknown_option_is_refused_with_its_name(tiny_model_path):
    with pytest.raises(SessionError, match="bogus_option"):
        build_session(tiny_model_path, parse_provider("cuda").with_options({"bogus_option": 1}))


@pytest.mark.gpu
@gpu
def test_cuda_bad_device_id_is_refused(tiny_model_path):
    with pytest.raises(SessionError, match="not recorded as a cuda result|device"):
        build_session(tiny_model_path, parse_provider("cuda").with_options({"device_id": 97}))


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("graph", [False, True], ids=["plain", "cuda-graph"])
@pytest.mark.parametrize("mode", ["none", "inputs", "all"])
def test_cuda_binding_modes_match_the_cpu_output(tiny_model_path, mode, graph):
    if graph and mode == "none":
        pytest.skip("CUDA graphs need device inputs: --aaco-iobinding=inputs or all")
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)}
    expected = build_session(tiny_model_path, parse_provider("cpu")).session.run(None, feeds)[0]
    spec = parse_provider("cuda").with_options({"enable_cuda_graph": 1} if graph else {})
    handle = build_session(tiny_model_path, spec)
    run = bind_run(handle, feeds, mode, 0)
    for _ in range(5):  # regular run, capture, replays
        result = run()
    got = result[0] if mode == "none" else run.binding.copy_outputs_to_cpu()[0]
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.gpu
@gpu
def test_cuda_placement_report_of_a_model_the_ep_fully_supports(tiny_model_path):
    counts = placement_report(tiny_model_path, parse_provider("cuda")).nodes
    assert counts.get(CUDA_EP, 0) >= 6
    assert counts.get(CPU_EP, 0) == 0


@pytest.mark.gpu
@gpu
def test_cuda_op_without_kernel_is_caught(tmp_path):
    report = placement_report(cpu_op_model(tmp_path / "celu.onnx"), parse_provider("cuda"))
    assert report.ops[CPU_EP] == {"Celu": 1}
    assert "not recorded as a cuda result" in fallback_problem(report, parse_provider("cuda"))


@pytest.mark.gpu
@gpu
def test_cuda_items_through_the_plugin(aaco_project):
    aaco_project.registry("""
        models:
          tiny:
            path: tiny.onnx
          tiny_bogus:
            path: tiny.onnx
            providers:
              cuda: {bogus_option: 1}
    """)
    result = aaco_project.run_subprocess("--aaco-provider=cuda", "-rA")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_latency[[]tiny_bogus-cuda[]]*",
                                 '*Unknown provider option: "bogus_option"*not recorded as a cuda result*'])


@pytest.mark.gpu
@gpu
def test_cuda_graph_items_through_the_plugin_measure_twice(aaco_project):
    aaco_project.tests("""
        def test_latency(benchmark_model):
            first = benchmark_model()
            second = benchmark_model()
            assert first.iobinding == second.iobinding == "all"
            assert second.p50_ms > 0
    """)
    result = aaco_project.run_subprocess("--aaco-provider=cuda", "--aaco-provider-option=enable_cuda_graph=1")
    result.assert_outcomes(passed=1)


@pytest.mark.gpu
@gpu
def test_cuda_graph_refuses_host_feeds_and_a_second_binding(tiny_model_path):
    handle = build_session(tiny_model_path, parse_provider("cuda").with_options({"enable_cuda_graph": 1}))
    feeds = {"x": np.ones((1, 64), np.float32)}
    with pytest.raises(SessionError, match="needs device inputs"):
        bind_run(handle, feeds, "none", 0)
    run = bind_run(handle, feeds, "all", 0)
    assert bind_run(handle, feeds, "all", 0) is run
    with pytest.raises(SessionError, match="one IO binding"):
        bind_run(handle, {"x": np.zeros((1, 64), np.float32)}, "all", 0)



# ---------------------------------------------------------------- the plugin's placement wiring (CPU-runnable)


def _fake_run(placement_obj):
    from types import SimpleNamespace

    from pytest_aaco.measure.providers import parse_provider

    class Plugin:
        def placement(self, handle, feeds):
            return placement_obj

    run = SimpleNamespace(handle=None, feeds={}, model=SimpleNamespace(name="m"), provider=parse_provider("cuda"),
                          placement=None)
    return Plugin(), run


def test_plugin_refuses_a_cuda_result_whose_compute_fell_to_the_cpu():
    from pytest_aaco.extra_passes import node_placement_problem
    from pytest_aaco.measure.placement import Placement

    fell = Placement(nodes={"CUDAExecutionProvider": 5, "CPUExecutionProvider": 1},
                     time_us={"CUDAExecutionProvider": 100, "CPUExecutionProvider": 900},
                     ops={"CPUExecutionProvider": {"Celu": 1}}, run_us=1000)
    plugin, run = _fake_run(fell)
    problem = node_placement_problem(run, plugin.placement)
    assert problem is not None and "Celu" in problem and "not recorded as a cuda result" in problem
    assert run.placement["cpu_nodes"] == 1  # recorded for the bundle either way


def test_plugin_warns_about_cheap_cpu_nodes_and_records_them():
    from pytest_aaco.extra_passes import node_placement_problem
    from pytest_aaco.measure.placement import Placement
    from pytest_aaco.warnings import AacoProviderWarning

    cheap = Placement(nodes={"CUDAExecutionProvider": 50, "CPUExecutionProvider": 1},
                      time_us={"CUDAExecutionProvider": 1000, "CPUExecutionProvider": 2},
                      ops={"CPUExecutionProvider": {"Celu": 1}}, run_us=10000)
    plugin, run = _fake_run(cheap)
    with pytest.warns(AacoProviderWarning, match="CPUExecutionProvider 1 node"):
        assert node_placement_problem(run, plugin.placement) is None
    assert run.placement["nodes"]["CPUExecutionProvider"] == 1
