"""The side worker (``--aaco-compare-python``) builds its MIGraphX sessions by the plugin's own rules
(:func:`pytest_aaco.measure.migraphx_probe.plan`), asking *its own* onnxruntime which options the EP takes.

The worker runs in a virtualenv holding only numpy and onnxruntime (tests/test_sideprocess.py's ``make_env``:
no ``onnx``, no pytest_aaco), whose onnxruntime is replaced at start-up by the simulated compiling EP
(tests/fake_compiling_ep.py) behaving as the builds that will not take ``migraphx_model_cache_dir``; the
plugin's own onnxruntime here has no MIGraphX EP at all, so every answer below can only come from the worker.
The last tests import the real onnxruntime-migraphx wheels in the worker, over the stand-in HIP/MIGraphX
libraries (tests/migraphx_wheels.py), so the real option parser judges what the worker sends.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_compiling_ep import read_log

from pytest_aaco.measure import compile_cache as cc
from pytest_aaco.measure import migraphx_probe
from pytest_aaco.measure.inference import SessionError
from pytest_aaco.measure.providers import MIGRAPHX_KEYS, parse_provider
from pytest_aaco.sidebyside.worker_client import WorkerSide
from tests import migraphx_wheels as mw
from tests.test_sideprocess import make_env

MIGX = parse_provider("migraphx")
TESTS = Path(__file__).resolve().parent
FEEDS = {"X": np.ones((1, 4), np.float32)}


@pytest.fixture(scope="module")
def fake_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with numpy and onnxruntime only, whose onnxruntime becomes the simulated EP per ``$AACO_FAKE_EP``."""
    return make_env(tmp_path_factory.mktemp("fake-migraphx-env") / "venv", startup=(
        f"import sys; sys.path.append({str(TESTS)!r}); import fake_compiling_ep; fake_compiling_ep.patch_from_env()"))


@pytest.fixture
def cache_root(tmp_path: Path) -> Any:
    old = cc.set_compile_cache(tmp_path / "cache")
    migraphx_probe.reset()
    yield tmp_path / "cache"
    cc.set_compile_cache(old)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migraphx_probe.tiny_model(tmp_path_factory.mktemp("model") / "tiny.onnx")


def fake_side(python: Path, log: Path, cache_from: str) -> WorkerSide:
    ep = {"compile_s": 0.05, "log": str(log), "cache_from": cache_from, "compile_at": "first_run"}
    return WorkerSide(python, env={"AACO_FAKE_EP": json.dumps(ep)})


def test_the_probe_model_is_what_the_onnx_package_writes_and_it_runs() -> None:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Add", ["X", "X"], ["Y"])], "aaco_migraphx_probe", [x], [y])
    expected = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    expected.ir_version = 7
    written = onnx.ModelProto.FromString(migraphx_probe.tiny_model_bytes())
    assert written == expected
    onnx.checker.check_model(written)
    session = ort.InferenceSession(migraphx_probe.tiny_model_bytes(), providers=["CPUExecutionProvider"])
    assert session.run(None, {"X": np.full((1, 4), 1.5, np.float32)})[0].tolist() == [[3.0] * 4]


@pytest.mark.parametrize("cache_from", ["env-only", "refuses"])
def test_the_worker_asks_its_own_ep_and_sends_the_folder_through_the_environment(
        fake_python: Path, cache_root: Path, model: Path, tmp_path: Path, cache_from: str) -> None:
    log = tmp_path / "ep.log"
    with fake_side(fake_python, log, cache_from) as side:
        assert "MIGraphXExecutionProvider" in side.info.providers  # the worker's onnxruntime, not this one
        session = side.load(model, MIGX, FEEDS)
        folder = str(session.cache.folder)
        env = ({"ORT_MIGRAPHX_MODEL_CACHE_PATH": folder} if cache_from == "env-only"
               else migraphx_probe.program_file_env(folder))  # never ORT_MIGRAPHX_CACHE_PATH: the int8 table's folder
        cache = "ORT_MIGRAPHX_MODEL_CACHE_PATH" if cache_from == "env-only" else "program file"
        assert session.migraphx == {"options": {"device_id": "0"}, "refused": {}, "takes": [], "build": mock_build(),
                                    "env": env, "cache": cache}
        assert session.options == {"device_id": "0"}  # what was sent, as in process
        assert session.settle_cache(side.warmup(1)[0]) == "miss"
        again = side.load(model, MIGX, FEEDS)
        assert again.settle_cache(side.warmup(1)[0]) == "hit"
    events = [e["event"] for e in read_log(log) if e["folder"] == folder]
    assert events == ["compile", "load"]  # the EP found the keyed folder in its environment, at the first run
    assert migraphx_probe.summary() == {}  # nothing was asked in this process


def mock_build() -> str:
    import onnxruntime as ort

    return f"onnxruntime {ort.__version__}"  # the venv has no package metadata: the version alone


def test_an_ep_that_takes_the_option_gets_the_folder_there(fake_python: Path, cache_root: Path, model: Path,
                                                           tmp_path: Path) -> None:
    log = tmp_path / "ep.log"
    with fake_side(fake_python, log, "option") as side:
        session = side.load(model, MIGX, FEEDS)
        assert session.migraphx is not None and session.migraphx["env"] == {}
        assert session.options["migraphx_model_cache_dir"] == str(session.cache.folder)
        session.settle_cache(side.warmup(1)[0])
    assert [e["event"] for e in read_log(log) if e["folder"] == str(session.cache.folder)] == ["compile"]


def test_a_user_option_the_workers_ep_refuses_is_one_clear_error_and_the_worker_lives_on(
        fake_python: Path, cache_root: Path, model: Path, tmp_path: Path) -> None:
    takes = ", ".join(sorted(MIGRAPHX_KEYS - {"migraphx_model_cache_dir"} | {"migraphx_use_native_calibration_table"}))
    with fake_side(fake_python, tmp_path / "ep.log", "refuses") as side:
        with pytest.raises(SessionError, match=(
                r"tiny\.onnx: this onnxruntime build's MIGraphXExecutionProvider \(onnxruntime [\d.]+\) refuses"
                r" option\(s\) migraphx_model_cache_dir \(migraphx_model_cache_dir: Invalid MIGraphX EP option:"
                rf" migraphx_model_cache_dir\); it takes: {takes}$")):
            side.load(model, MIGX.with_options({"migraphx_model_cache_dir": str(tmp_path / "mine")}), FEEDS)
        assert side.load(model, MIGX, FEEDS).options == {"device_id": "0"}


def test_the_folder_stays_locked_from_the_workers_creation_until_its_first_run(
        fake_python: Path, cache_root: Path, model: Path, tmp_path: Path) -> None:
    import filelock

    with fake_side(fake_python, tmp_path / "ep.log", "option") as side:
        session = side.load(model, MIGX, FEEDS)
        assert session.cache.folder is not None
        with pytest.raises(filelock.Timeout):  # another runner (a lock object of its own) would wait
            with cc.folder_lock(session.cache.folder, timeout=0.05):
                pass
        session.settle_cache(side.warmup(1)[0])
        with cc.folder_lock(session.cache.folder, timeout=0.05):
            pass
        side.load(model, MIGX, FEEDS)  # a session whose first run never comes gives the lock back when dropped
        side.close()
        with cc.folder_lock(session.cache.folder, timeout=0.05):
            pass


# ------------------------------------------------------------------ the real onnxruntime-migraphx wheels


@pytest.fixture(scope="module", params=["1.23.2", "newest"])
def real_wheel(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    from tests.test_migraphx_conformance import newest_release

    version = newest_release() if request.param == "newest" else request.param
    try:
        site, standins = mw.prepare(version, tmp_path_factory.mktemp("migraphx-wheels"))
    except mw.WheelUnavailable as exc:
        pytest.skip(str(exc))
    problem = mw.glibc_problem(site)
    if problem:
        pytest.skip(f"onnxruntime-migraphx {version}: {problem}")
    return version, site, standins


def real_side(wheel: tuple[str, Path, Path], calls: Path) -> WorkerSide:
    import sys

    _, site, standins = wheel
    library = os.pathsep.join([str(standins), os.environ.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    return WorkerSide(sys.executable, env={"PYTHONPATH": str(site), "LD_LIBRARY_PATH": library,
                                           "AACO_STANDIN_LOG": str(calls)})


def test_the_real_parser_takes_what_the_worker_sends(real_wheel: tuple[str, Path, Path], cache_root: Path,
                                                     model: Path, tmp_path: Path) -> None:
    calls = tmp_path / "calls.log"
    with real_side(real_wheel, calls) as side:
        assert side.info.ort_version == real_wheel[0] and "MIGraphXExecutionProvider" in side.info.providers
        calls.write_text("")
        with pytest.raises(SessionError) as failed:  # no GPU: the EP fails in the stand-ins, past its parser
            side.load(model, MIGX.with_options({"migraphx_fp16_enable": "1"}), FEEDS)
    message = str(failed.value)
    assert mw.refusal(message) is None, message
    assert "'migraphx_model_cache_dir': " in message and "'migraphx_fp16_enable': 'True'" in message  # as sent
    past = [c for c in calls.read_text().split() if c != "hipGetDeviceCount"]
    assert past, f"the EP never got past its option parser: {message}"


def test_the_real_parser_refusing_a_user_option_is_asked_in_the_worker(
        real_wheel: tuple[str, Path, Path], cache_root: Path, model: Path, tmp_path: Path) -> None:
    version = real_wheel[0]
    with real_side(real_wheel, tmp_path / "calls.log") as side:
        with pytest.raises(SessionError) as failed:
            side.load(model, MIGX.with_options({"migraphx_save_compiled_model": "1"}), FEEDS)
    message = str(failed.value)
    assert (f"this onnxruntime build's MIGraphXExecutionProvider (onnxruntime-migraphx {version}) refuses option(s)"
            ' migraphx_save_compiled_model (migraphx_save_compiled_model: Unknown provider option:'
            ' "migraphx_save_compiled_model".)') in message
    assert "use --aaco-compile-cache (migraphx_model_cache_dir); it takes: device_id," in message
    assert migraphx_probe.summary() == {}  # this process's onnxruntime was never asked
