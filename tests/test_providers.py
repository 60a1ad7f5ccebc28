"""Execution-provider honesty: names, availability, and never recording a CPU fallback as a GPU result."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_aaco import eps
from pytest_aaco.measure.inference import (
    MeasureSettings,
    SessionError,
    SessionHandle,
    build_session,
    check_placement,
    effective_options,
    resolve_iobinding,
)
from pytest_aaco.measure.providers import (
    ProviderError,
    ProviderSpec,
    available_providers,
    migraphx_bool,
    migraphx_env_overrides,
    parse_provider,
    parse_provider_list,
    session_fallback_problem,
    unavailable_reason,
)
from pytest_aaco.measure.rounds import run_benchmark

CPU_ONLY = ["AzureExecutionProvider", "CPUExecutionProvider"]


@pytest.mark.parametrize(("name", "short", "ep"), [
    ("cpu", "cpu", "CPUExecutionProvider"),
    (" MIGraphX ", "migraphx", "MIGraphXExecutionProvider"),
    ("MIGraphXExecutionProvider", "migraphx", "MIGraphXExecutionProvider"),
    ("cudaexecutionprovider", "cuda", "CUDAExecutionProvider"),
    ("trt", "tensorrt", "TensorrtExecutionProvider"),
    ("directml", "dml", "DmlExecutionProvider"),
    ("ov", "openvino", "OpenVINOExecutionProvider"),
    ("rocm", "rocm", "ROCMExecutionProvider"),
])
def test_parse_provider(name, short, ep):
    spec = parse_provider(name)
    assert (spec.short, spec.ep_name) == (short, ep)


def test_unknown_provider_lists_valid_names():
    with pytest.raises(ProviderError) as info:
        parse_provider("vulkan")
    message = str(info.value)
    assert message.startswith("unknown execution provider 'vulkan'; valid: ")
    for short in (ep.short for ep in eps.ALL):
        assert short in message
    assert "MIGraphXExecutionProvider" in message


def test_parse_provider_list_keeps_order_and_drops_repeats():
    specs = parse_provider_list(["cuda,cpu", "CUDAExecutionProvider", "", "migraphx"])
    assert [s.short for s in specs] == ["cuda", "cpu", "migraphx"]
    with pytest.raises(ProviderError, match="no execution provider given"):
        parse_provider_list([",", ""])


def test_provider_spec():
    spec = parse_provider("migraphx")
    assert spec.is_gpu and not parse_provider("cpu").is_gpu and not parse_provider("openvino").is_gpu
    merged = spec.with_options({"a": "1"}).with_options({"b": 2, "a": "3"})
    assert merged.options == {"a": "3", "b": 2} and spec.options == {}
    assert merged == spec  # options do not change which EP it is


def test_effective_options():
    cuda = ProviderSpec("cuda", "CUDAExecutionProvider", {"arena_extend_strategy": "kSameAsRequested", "x": 1})
    assert effective_options(cuda, 2) == {"arena_extend_strategy": "kSameAsRequested", "x": "1", "device_id": "2"}
    assert effective_options(cuda.with_options({"device_id": 1}), 2)["device_id"] == "1"
    assert effective_options(parse_provider("cpu"), 3) == {}
    assert "device_id" not in effective_options(parse_provider("dml"), 3)


@pytest.mark.parametrize(("mode", "short", "expected"), [
    ("auto", "cpu", "none"), ("auto", "openvino", "none"), ("auto", "cuda", "all"), ("auto", "migraphx", "inputs"),
    ("all", "cpu", "all"), ("none", "cuda", "none"),
])
def test_resolve_iobinding(mode, short, expected):
    assert resolve_iobinding(mode, parse_provider(short)) == expected


# ---------------------------------------------------------------- availability


def test_this_build_is_cpu_only():
    available = available_providers()
    assert "CPUExecutionProvider" in available
    assert "MIGraphXExecutionProvider" not in available  # the tests below assume a CPU-only build


def test_unavailable_reason_lists_what_is_available():
    assert unavailable_reason(parse_provider("cpu"), CPU_ONLY, "1.31.1") is None
    assert unavailable_reason(parse_provider("migraphx"), CPU_ONLY, "1.31.1") == (
        "MIGraphXExecutionProvider not available (available: AzureExecutionProvider, CPUExecutionProvider)")


@pytest.mark.parametrize(("version", "removed"), [
    ("1.23.0", True), ("1.31.1", True), ("1.23.0.dev20250601", True), ("2.0.0", True),
    ("1.22.1", False), ("1.9.0", False), ("1.17.3", False),
])
def test_rocm_removed_in_1_23(version, removed):
    reason = unavailable_reason(parse_provider("rocm"), CPU_ONLY, version)
    assert reason is not None and reason.startswith("ROCMExecutionProvider not available (available: ")
    note = f"ROCMExecutionProvider was removed in onnxruntime 1.23 and this is {version}"
    assert (note in reason) is removed, reason
    if removed:
        assert "use --aaco-provider=migraphx" in reason


def test_rocm_available_on_an_old_build_is_fine():
    assert unavailable_reason(parse_provider("rocm"), ["ROCMExecutionProvider", "CPUExecutionProvider"], "1.22.0") \
        is None


# ---------------------------------------------------------------- placement: ORT's silent CPU fallback


def test_placement_problem():
    migraphx = parse_provider("migraphx")
    assert session_fallback_problem(migraphx, ["MIGraphXExecutionProvider", "CPUExecutionProvider"]) is None
    problem = session_fallback_problem(migraphx, ["CPUExecutionProvider"])
    assert problem == ("MIGraphXExecutionProvider was requested but the session runs on CPUExecutionProvider"
                       " (ONNX Runtime fell back): not recorded as a migraphx result")
    assert "runs on nothing" in session_fallback_problem(migraphx, [])


class FakeSession:
    """Stands in for an InferenceSession: ``get_providers()`` answers from a list that tests may change."""

    def __init__(self, providers: list[str]) -> None:
        self.providers = providers
        self.calls = 0

    def get_providers(self) -> list[str]:
        return list(self.providers)

    def get_inputs(self) -> list:
        return [SimpleNamespace(name="x", shape=[1, 4], type="tensor(float)")]

    def run(self, output_names, feeds, run_options=None):
        self.calls += 1
        return [feeds["x"]]


def fake_handle(providers: list[str], short: str = "migraphx") -> SessionHandle:
    return SessionHandle(FakeSession(providers), parse_provider(short), Path("fake.onnx"), 1.0)


def test_check_placement_refuses_a_fallback():
    with pytest.raises(SessionError, match="MIGraphXExecutionProvider was requested but the session runs on"
                                           " CPUExecutionProvider"):
        check_placement(fake_handle(["CPUExecutionProvider"]))
    check_placement(fake_handle(["MIGraphXExecutionProvider", "CPUExecutionProvider"]))  # no error


FEEDS = {"x": np.zeros((1, 4), np.float32)}
SETTINGS = MeasureSettings(warmup=1, rounds=2, iterations=3, iobinding="none")


def test_run_benchmark_checks_placement_before_measuring():
    handle = fake_handle(["CPUExecutionProvider"])
    with pytest.raises(SessionError, match="fell back"):
        run_benchmark(handle, FEEDS, SETTINGS, "m", 1)
    assert handle.session.calls == 0  # nothing was measured


def test_run_benchmark_checks_placement_after_measuring():
    handle = fake_handle(["MIGraphXExecutionProvider", "CPUExecutionProvider"])

    class Dropping(FakeSession):
        def run(self, output_names, feeds, run_options=None):
            self.providers = ["CPUExecutionProvider"]  # the EP went away while measuring
            return super().run(output_names, feeds)

    handle.session = Dropping(handle.session.providers)
    with pytest.raises(SessionError, match="fell back"):
        run_benchmark(handle, FEEDS, SETTINGS, "m", 1)


def test_run_benchmark_with_a_fake_session_records_rounds():
    handle = fake_handle(["MIGraphXExecutionProvider", "CPUExecutionProvider"])
    result = run_benchmark(handle, FEEDS, SETTINGS, "m", 1)
    assert result.provider == "migraphx" and len(result.rounds) == 2
    assert [r.n for r in result.rounds] == [3, 3]
    assert result.providers_used == ["MIGraphXExecutionProvider", "CPUExecutionProvider"]
    assert result.warmup_iterations >= 1


def test_build_session_on_cpu(tiny_model_path):
    handle = build_session(tiny_model_path, parse_provider("cpu"), intra_op_threads=1)
    assert handle.create_ms > 0 and handle.options == {}
    assert handle.session.get_providers() == ["CPUExecutionProvider"]
    check_placement(handle)


def test_build_session_error_names_model_and_ep(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(SessionError, match="could not create an InferenceSession for broken.onnx on"
                                           " CPUExecutionProvider"):
        build_session(bad, parse_provider("cpu"))


# ---------------------------------------------------------------- through pytest


def test_unavailable_provider_skips_with_reason(aaco_project):
    result = aaco_project.run("--aaco-provider=migraphx,cpu", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] *: MIGraphXExecutionProvider not available (available: *CPUExecutionProvider*)",
    ])
    assert result.ret == 0


def test_strict_provider_fails_instead(aaco_project):
    result = aaco_project.run("--aaco-provider=migraphx", "--aaco-strict-provider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) + outcomes.get("errors", 0) == 1 and "skipped" not in outcomes
    result.stdout.fnmatch_lines(["*MIGraphXExecutionProvider not available (available: *) (--aaco-strict-provider)*"])


def test_rocm_skip_says_it_was_removed(aaco_project):
    result = aaco_project.run("--aaco-provider=rocm", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *ROCMExecutionProvider was removed in onnxruntime 1.23 and this is *"])


FAKE_MIGRAPHX = """
import onnxruntime
import pytest

REAL = onnxruntime.InferenceSession


def cpu_only_session(path, sess_options=None, providers=None, **kwargs):
    # what ORT does when an EP cannot take the model: a session that silently runs on the CPU
    return REAL(path, sess_options=sess_options, providers=["CPUExecutionProvider"])


@pytest.fixture(autouse=True)
def fake_migraphx_build(monkeypatch):
    monkeypatch.setattr(onnxruntime, "get_available_providers",
                        lambda: ["MIGraphXExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(onnxruntime, "InferenceSession", cpu_only_session)
"""


def test_silent_cpu_fallback_fails_the_item(aaco_project):
    """A build that claims MIGraphX but whose session runs on the CPU: the item fails, nothing is recorded."""
    aaco_project.pytester.makeconftest(FAKE_MIGRAPHX)
    result = aaco_project.run("--aaco-provider=migraphx", "--aaco-save-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) + outcomes.get("errors", 0) == 1 and "passed" not in outcomes
    result.stdout.fnmatch_lines(["*MIGraphXExecutionProvider was requested but the session runs on"
                                 " CPUExecutionProvider (ONNX Runtime fell back)*"])
    assert not list(aaco_project.pytester.path.glob("baselines/**/*.json"))  # no migraphx baseline recorded


@pytest.mark.parametrize("version", ["1.20.1", "1.22.0", "1.23.0", "1.24.0", "1.27.1"])
def test_migraphx_options_are_the_same_for_every_version(version):
    """No version cut-off: booleans in the one spelling every real parser takes, and nothing added
    (no save/load key, no default): which keys the EP takes is asked at run time."""
    spec = parse_provider("migraphx").with_options({"migraphx_fp16_enable": "1", "migraphx_int8_enable": "no",
                                                    "migraphx_int8_use_native_calibration_table": "true"})
    expected = {"migraphx_fp16_enable": "True", "migraphx_int8_enable": "False",
                "migraphx_int8_use_native_calibration_table": "True", "device_id": "3"}
    assert effective_options(spec, 3, version) == expected


def test_migraphx_options_keep_what_the_user_gave():
    spec = parse_provider("migraphx").with_options({"migraphx_exhaustive_tune": "YES", "migraphx_mem_limit": 1024,
                                                    "migraphx_load_compiled_model": True})
    options = effective_options(spec, 0)
    assert options == {"migraphx_exhaustive_tune": "True", "migraphx_load_compiled_model": "True",
                       "migraphx_mem_limit": "1024", "device_id": "0"}  # a refused key is the EP's to refuse


@pytest.mark.parametrize("value", ["1", "0", "TRUE", "false", "Yes", "no", True, False, 1, 0])
def test_migraphx_bool_accepts(value):
    assert migraphx_bool("migraphx_fp16_enable", value) in ("True", "False")


@pytest.mark.parametrize("value", ["2", "on", "", "enable"])
def test_migraphx_bool_refuses_naming_the_key(value):
    with pytest.raises(ProviderError, match="migraphx_fp8_enable"):
        effective_options(parse_provider("migraphx").with_options({"migraphx_fp8_enable": value}), 0, "1.24.0")


def test_unknown_migraphx_keys_are_left_to_the_ep():
    spec = parse_provider("migraphx").with_options({"migraphx_no_such_key": "x"})
    assert effective_options(spec, 0)["migraphx_no_such_key"] == "x"  # the probe asks the EP
    assert eps.get("migraphx").option_keys is None


def test_plugin_ep_names_parse_as_themselves_and_others_list_the_choices():
    spec = parse_provider("AMDGPUExecutionProvider")
    assert (spec.short, spec.ep_name) == ("AMDGPUExecutionProvider", "AMDGPUExecutionProvider")
    assert parse_provider(spec.short) == spec  # test ids and registry entries round-trip
    assert not spec.is_gpu  # its device is chosen through get_ep_devices (plugin_eps), not device_id
    with pytest.raises(ProviderError, match=r"unknown execution provider 'amdgpu'.*get_ep_devices"):
        parse_provider("amdgpu")
    reason = unavailable_reason(spec, ["CPUExecutionProvider", "VitisAIExecutionProvider"], "1.23.0")
    assert reason is not None and "available: CPUExecutionProvider, VitisAIExecutionProvider" in reason
    assert "--aaco-ep-library" in reason


def test_migraphx_env_overrides_warn():
    from pytest_aaco.measure.inference import warn_migraphx_env
    from pytest_aaco.warnings import AacoProviderWarning

    env = {"ORT_MIGRAPHX_FP16_ENABLE": "1", "ORT_MIGRAPHX_SAVE_COMPILED_MODEL": "0", "MIGRAPHX_TRACE": "1"}
    assert migraphx_env_overrides(env) == ["ORT_MIGRAPHX_FP16_ENABLE", "ORT_MIGRAPHX_SAVE_COMPILED_MODEL"]
    with pytest.warns(AacoProviderWarning, match="ORT_MIGRAPHX_FP16_ENABLE, ORT_MIGRAPHX_SAVE_COMPILED_MODEL"):
        warn_migraphx_env(parse_provider("migraphx"), env)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_migraphx_env(parse_provider("cuda"), env)
        warn_migraphx_env(parse_provider("migraphx"), {"MIGRAPHX_TRACE": "1"})


def test_build_session_refuses_a_migraphx_option_that_is_not_boolean(tmp_path):
    with pytest.raises(SessionError, match=r"migraphx_fp16_enable='on' is not a boolean"):
        build_session(tmp_path / "m.onnx", parse_provider("migraphx").with_options({"migraphx_fp16_enable": "on"}))
