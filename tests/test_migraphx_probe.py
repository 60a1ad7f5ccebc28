"""Asking the MIGraphX EP (pytest_aaco.measure.migraphx_probe, inference.migraphx_plan) for the builds that cannot
be downloaded here: AMD's ROCm/onnxruntime wheels (``Invalid MIGraphX EP option``) and an EP that ignores its
options (upstream 1.20-1.22 reads only device_id). Their words are stood in by session factories; the real
PyPI parsers are exercised by tests/test_migraphx_conformance.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_aaco.measure import migraphx_probe
from pytest_aaco.measure.compile_cache import CacheUse
from pytest_aaco.measure.inference import SessionError, environment, migraphx_plan
from pytest_aaco.measure.providers import parse_provider

EP = "MIGraphXExecutionProvider"


class Session:
    def __init__(self, reported: dict[str, str]) -> None:
        self.reported = reported

    def get_providers(self) -> list[str]:
        return [EP, "CPUExecutionProvider"]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return {EP: self.reported}


def fake_ort(factory: Any, version: str = "1.21.0") -> Any:
    return SimpleNamespace(__version__=version, __file__=f"/fake/{id(factory)}", InferenceSession=factory,
                           SessionOptions=lambda: SimpleNamespace(log_severity_level=0))


@pytest.fixture(autouse=True)
def fresh() -> Any:
    migraphx_probe.reset()
    yield
    migraphx_probe.reset()


def amd_fork(model: str, sess_options: Any = None, providers: Any = None) -> Session:
    """AMD's branch: refuses migraphx_model_cache_dir (1.21.1 builds lack it) with its own words."""
    options = providers[0][1]
    for key in options:
        if key not in ("device_id", "migraphx_fp16_enable"):
            raise RuntimeError(f"[ONNXRuntimeError] : 1 : FAIL : Invalid MIGraphX EP option: {key}")
    return Session(dict(options))


def env_only(model: str, sess_options: Any = None, providers: Any = None) -> Session:
    """Upstream 1.20-1.22: creates the session, reads only device_id, reports its own full list."""
    return Session({"device_id": "0", "migraphx_fp16_enable": "0", "migraphx_int8_enable": "0"})


def test_refusals_ignored_keys_and_accepted_keys_are_told_apart() -> None:
    asked = {"device_id": "0", "migraphx_model_cache_dir": "/x", "migraphx_bf16_enable": "True"}
    checks = migraphx_probe.probe(asked, fake_ort(amd_fork))
    assert checks["device_id"].state == "accepted"
    assert checks["migraphx_model_cache_dir"] == migraphx_probe.OptionCheck(
        "refused", "Invalid MIGraphX EP option: migraphx_model_cache_dir")
    assert checks["migraphx_bf16_enable"].state == "refused"  # one refusal did not hide the other
    ignored = migraphx_probe.probe({"device_id": "0", "migraphx_model_cache_dir": "/x"}, fake_ort(env_only))
    assert ignored["device_id"].state == "accepted" and ignored["migraphx_model_cache_dir"].state == "ignored"


def test_answers_are_kept_per_process() -> None:
    calls: list[dict[str, str]] = []

    def counting(model: str, sess_options: Any = None, providers: Any = None) -> Session:
        calls.append(dict(providers[0][1]))
        return Session(dict(providers[0][1]))

    ort = fake_ort(counting)
    migraphx_probe.probe({"device_id": "0", "migraphx_model_cache_dir": "/a"}, ort)
    migraphx_probe.probe({"device_id": "0", "migraphx_model_cache_dir": "/b"}, ort)  # any folder: the same answer
    assert len(calls) == 1


def test_the_cache_folder_goes_through_the_model_cache_variable_where_the_ep_ignores_the_key(tmp_path: Path) -> None:
    spec = parse_provider("migraphx")
    options = {"device_id": "0", "migraphx_model_cache_dir": str(tmp_path)}
    out, env = migraphx_plan(spec, tmp_path / "m.onnx", options, CacheUse(tmp_path), fake_ort(env_only))
    assert out == {"device_id": "0"}
    assert env == {"ORT_MIGRAPHX_MODEL_CACHE_PATH": str(tmp_path)}  # never ORT_MIGRAPHX_CACHE_PATH: the int8 table's


def test_a_build_refusing_the_cache_key_and_the_save_key_has_no_compile_cache(tmp_path: Path) -> None:
    """AMD's fork 6.1 (tests/migraphx_generations.py): no folder option, no save/load of a program."""
    found = migraphx_probe.plan({"device_id": "0", "migraphx_model_cache_dir": str(tmp_path)}, fake_ort(amd_fork),
                                plugin_cache=str(tmp_path), environ={})
    assert found.options == {"device_id": "0"} and found.env == {}
    assert found.cache == migraphx_probe.NO_CACHE == "no compile cache on this build"


def test_a_user_option_the_ep_refuses_is_one_clear_error(tmp_path: Path) -> None:
    spec = parse_provider("migraphx").with_options({"migraphx_int8_enable": "True"})
    with pytest.raises(SessionError, match=r"m\.onnx: this onnxruntime build's MIGraphXExecutionProvider \(.*\)"
                       r" refuses option\(s\) migraphx_int8_enable \(migraphx_int8_enable: Invalid MIGraphX EP option:"
                       r" migraphx_int8_enable\); it takes: device_id, migraphx_fp16_enable$"):
        migraphx_plan(spec, tmp_path / "m.onnx", {"device_id": "0", "migraphx_int8_enable": "True"},
                      CacheUse(None, reason="off"), fake_ort(amd_fork))


def test_environment_is_set_around_the_block_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("ORT_MIGRAPHX_CACHE_PATH", "/users")
    monkeypatch.delenv("ORT_MIGRAPHX_MODEL_CACHE_PATH", raising=False)
    with environment({"ORT_MIGRAPHX_CACHE_PATH": "/mine", "ORT_MIGRAPHX_MODEL_CACHE_PATH": "/mine"}):
        assert os.environ["ORT_MIGRAPHX_CACHE_PATH"] == "/mine"
    assert os.environ["ORT_MIGRAPHX_CACHE_PATH"] == "/users" and "ORT_MIGRAPHX_MODEL_CACHE_PATH" not in os.environ
