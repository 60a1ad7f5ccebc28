"""The compile cache pytest-aaco owns (``--aaco-compile-cache``), with a simulated compiling EP.

The simulated EP (tests/fake_compiling_ep.py) sleeps at session creation unless its program is in the
folder the plugin's options name; the tests count its compiles, they do not time them.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_compiling_ep import CompilingEP, install, read_log

from pytest_aaco.measure import compile_cache as cc
from pytest_aaco.measure.inference import build_session, effective_options, with_compile_cache
from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.measure.registry import ModelSpec, load_registry
from pytest_aaco.options import GateSettings, ep_libraries
from pytest_aaco.passes.coldstart import ColdStart, side_by_side_verdict
from pytest_aaco.sidebyside.cycles import CompareSettings, OpenedSide, compare_sides
from pytest_aaco.sidebyside.gate import ItemMeasure, SideBySideGate

MIGX = parse_provider("migraphx")


@pytest.fixture
def cache_root(tmp_path: Path) -> Any:
    old = cc.set_compile_cache(tmp_path / "compile-cache")
    yield tmp_path / "compile-cache"
    cc.set_compile_cache(old)


# ------------------------------------------------------------------ keys, folders, options


def test_auto_is_a_per_runner_folder_under_the_user_cache(tmp_path: Path) -> None:
    root = cc.resolve_compile_cache("auto", {"RUNNER_NAME": "gpu 3/mi300x"}, user_cache=lambda: tmp_path / "u")
    assert root == tmp_path / "u" / "compile" / "gpu_3_mi300x"
    assert cc.resolve_compile_cache("off") is None and cc.resolve_compile_cache("OFF") is None
    assert cc.resolve_compile_cache(str(tmp_path / "mine"), {}) == tmp_path / "mine" and (tmp_path / "mine").is_dir()
    # a folder given on a CI runner gets a folder per runner too: runners of one host never share one
    assert cc.resolve_compile_cache(str(tmp_path / "mine"), {"RUNNER_NAME": "r2"}) == tmp_path / "mine" / "r2"
    (tmp_path / "file").write_text("x")
    with pytest.raises(cc.CompileCacheError, match=r"--aaco-compile-cache=.*file.*writable folder, auto or off"):
        cc.resolve_compile_cache(str(tmp_path / "file" / "sub"), {})


def test_the_folder_is_keyed_by_side_model_bytes_and_program_options(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "net.onnx", tmp_path / "b" / "net.onnx"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_bytes(b"weights one")
    b.write_bytes(b"weights two")  # same file name, other weights: MIGraphX's own .mxr name would collide
    opts = {"device_id": "0", "migraphx_fp16_enable": "False"}
    base = cc.keyed_folder(tmp_path, "baseline", "migraphx", a, opts, "1.24.0")
    assert base.parent == tmp_path / "baseline"
    assert cc.keyed_folder(tmp_path, "candidate", "migraphx", a, opts, "1.24.0") != base
    assert cc.keyed_folder(tmp_path, "baseline", "migraphx", b, opts, "1.24.0") != base
    assert cc.keyed_folder(tmp_path, "baseline", "migraphx", a, {**opts, "migraphx_fp16_enable": "True"},
                           "1.24.0") != base
    assert cc.keyed_folder(tmp_path, "baseline", "migraphx", a, opts, "1.25.0") != base
    # the device and the cache options themselves do not change the program
    assert cc.keyed_folder(tmp_path, "baseline", "migraphx", a, {**opts, "device_id": "3",
                           "migraphx_model_cache_dir": "/x"}, "1.24.0") == base


def test_the_folder_is_keyed_by_rocm_migraphx_runtime_and_gpu_arch(tmp_path: Path, monkeypatch) -> None:
    """A runner upgraded to another MIGraphX (or ROCm, or moved to another GPU) never loads the old program:
    MIGraphX would load an older .mxr with only a warning."""
    from pytest_aaco.samplers import rocm_install as rocm_stack

    model = tmp_path / "net.onnx"
    model.write_bytes(b"weights")
    stack = {"rocm": "6.4.1-120", "migraphx": "2.12.0", "gfx": "gfx942"}
    monkeypatch.setattr(rocm_stack, "stack_key", lambda environ=None: dict(stack))
    base = cc.keyed_folder(tmp_path, "baseline", "migraphx", model, {}, "1.27.1")
    for field, other in (("rocm", "7.0.1-42"), ("migraphx", "2.13.0"), ("gfx", "gfx90a")):
        assert cc.keyed_folder(tmp_path, "baseline", "migraphx", model, {}, "1.27.1",
                               {**stack, field: other}) != base
    assert cc.keyed_folder(tmp_path, "baseline", "migraphx", model, {}, "1.27.1", dict(stack)) == base
    assert cc.stack_for("tensorrt") is None and cc.stack_for("migraphx") == stack


def test_a_lock_per_keyed_folder_serialises_compile_and_save(tmp_path: Path) -> None:
    import filelock

    folder = tmp_path / "k"
    with cc.folder_lock(folder):
        with pytest.raises(filelock.Timeout):
            with cc.folder_lock(folder, timeout=0.05):
                pass
    with cc.folder_lock(folder, timeout=0.05):
        pass
    assert cc.snapshot(folder) == ()  # the lock file is not a program


def test_a_session_holds_its_folder_from_creation_until_its_first_run(cache_root: Path, tiny_model_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    import filelock

    install(monkeypatch, CompilingEP(compile_s=0.0, compile_at="first_run"))
    handle = build_session(tiny_model_path, MIGX)
    folder = handle.cache.folder
    assert folder is not None
    with pytest.raises(filelock.Timeout):  # another runner waits while the first run (the compile) is ahead
        with cc.folder_lock(folder, timeout=0.05):
            pass
    second = build_session(tiny_model_path, MIGX)  # this process takes its own lock again at once
    x = handle.session.get_inputs()[0]
    handle.session.run(None, {x.name: np.zeros([d if isinstance(d, int) else 1 for d in x.shape], np.float32)})
    assert handle.settle_cache(1.0) == "miss"
    with pytest.raises(filelock.Timeout):  # the second session's share is still held
        with cc.folder_lock(folder, timeout=0.05):
            pass
    del second  # a session dropped before its first run gives its share back
    gc.collect()
    with cc.folder_lock(folder, timeout=0.05):
        pass
    assert cc.CompileHold.nothing().acquire().held is False


def test_cache_options_per_ep_never_a_save_or_load_key(tmp_path: Path) -> None:
    assert cc.cache_options("migraphx", tmp_path) == {"migraphx_model_cache_dir": str(tmp_path)}
    # ORT_MIGRAPHX_CACHE_PATH is the int8 calibration-table folder in every generation, never a compile cache
    assert cc.cache_env(tmp_path) == {"ORT_MIGRAPHX_MODEL_CACHE_PATH": str(tmp_path)}
    assert cc.cache_options("tensorrt", tmp_path) == {"trt_engine_cache_enable": "1",
                                                      "trt_engine_cache_path": str(tmp_path)}
    assert cc.cache_options("openvino", tmp_path) == {"cache_dir": str(tmp_path)}
    assert cc.cache_options("cuda", tmp_path) == {}


def test_options_passed_with_the_cache_on(cache_root: Path, tiny_model_path: Path) -> None:
    for version in ("1.22.0", "1.24.1"):  # no version cut-off
        options, use = with_compile_cache(MIGX, tiny_model_path, effective_options(MIGX, 0, version), version)
        assert use.folder is not None and use.folder.is_dir() and use.folder.parent == cache_root / "candidate"
        assert options == {"device_id": "0", "migraphx_model_cache_dir": str(use.folder)}
    # the user's own cache wins and is recorded as such; the cache off changes nothing
    mine = MIGX.with_options({"migraphx_model_cache_dir": "/mine"})
    options, use = with_compile_cache(mine, tiny_model_path, effective_options(mine, 0, "1.24.1"), "1.24.1")
    assert options["migraphx_model_cache_dir"] == "/mine" and use.status() == "user"
    cc.set_compile_cache("off")
    options, use = with_compile_cache(MIGX, tiny_model_path, {"device_id": "0"}, "1.24.1")
    assert options == {"device_id": "0"} and use.folder is None and use.status() is None
    cpu = parse_provider("cpu")
    assert with_compile_cache(cpu, tiny_model_path, {}, "1.24.1")[1].reason == "not compiling"


def test_hit_and_miss_are_read_from_the_folder(tmp_path: Path) -> None:
    use = cc.CacheUse.start(tmp_path / "f")
    assert use.status() == "empty"
    (tmp_path / "f" / "p.mxr").write_bytes(b"x")
    assert use.status() == "miss"
    use.record(30000.0, 12.0, ep="migraphx")
    again = cc.CacheUse.start(tmp_path / "f")
    assert again.status() == "hit"  # the record itself is not a program
    assert cc.recorded_compile_ms(tmp_path / "f") == pytest.approx(30012.0)


def test_migraphx_cache_path_variable_is_named_in_the_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_aaco.measure.inference import warn_migraphx_env
    from pytest_aaco.warnings import AacoProviderWarning

    with pytest.warns(AacoProviderWarning, match="ORT_MIGRAPHX_MODEL_CACHE_PATH replaces the compile-cache folder"):
        warn_migraphx_env(MIGX, {"ORT_MIGRAPHX_MODEL_CACHE_PATH": "/tmp/x"})


def test_ep_library_values() -> None:
    assert ep_libraries(["/opt/lib/libonnxruntime_ep_amdgpu.so", "AMDGPU=/x/y.so"]) == (
        ("onnxruntime_ep_amdgpu", "/opt/lib/libonnxruntime_ep_amdgpu.so"), ("AMDGPU", "/x/y.so"))
    assert ep_libraries("") == ()
    with pytest.raises(ValueError, match="NAME=PATH"):
        ep_libraries(["NAME="])


# ------------------------------------------------------------------ the simulated compiling EP


def test_in_process_sessions_compile_once_and_record_hit_or_miss(cache_root: Path, tiny_model_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ep = CompilingEP(compile_s=0.05)
    install(monkeypatch, ep)
    handles = [build_session(tiny_model_path, MIGX) for _ in range(3)]
    assert [h.compile_cache for h in handles] == ["miss", "hit", "hit"]
    assert [e["event"] for e in ep.events] == ["compile", "load", "load"]
    assert handles[0].create_ms >= 50 and cc.recorded_compile_ms(handles[0].cache.folder) is not None
    # the folder is passed to the EP but is not part of what the fingerprint records (it differs per runner)
    assert any(str(handles[0].cache.folder) in str(v) for v in handles[0].options.values())
    assert not any(str(cache_root) in str(v) for v in handles[0].recorded_options.values())
    assert handles[0].recorded_options["device_id"] == "0"
    cc.set_compile_cache("off")  # without the cache, every fresh session compiles again (the finding 1)
    build_session(tiny_model_path, MIGX)
    build_session(tiny_model_path, MIGX)
    assert [e["event"] for e in ep.events][3:] == ["compile", "compile"]


def symbolic_model(path: Path) -> Path:
    """Y = X + X with X float32 [N, 4]: a model MIGraphX compiles at its first run (symbolic N)."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Add", ["X", "X"], ["Y"])], "symbolic", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("mode", ["benchmark", "coldstart", "sidebyside", "worker"])
def test_two_runners_on_one_folder_compile_a_symbolic_model_once(tmp_path: Path, mode: str) -> None:
    """Two processes start together on one keyed folder; the simulated EP compiles at the first run (1 s).
    The lock is held from creation until the first run has finished, so the second runner waits and loads
    the first one's program; held around creation only, both would compile (each finds no program)."""
    import subprocess
    import sys
    import time

    model, log, root = symbolic_model(tmp_path / "sym.onnx"), tmp_path / "ep.log", tmp_path / "cache"
    request = {"mode": mode, "root": str(root), "model": str(model), "log": str(log), "compile_s": 1.0,
               "start_at": time.time() + 4.0}
    child = Path(__file__).with_name("compile_race_child.py")
    procs = [subprocess.Popen([sys.executable, str(child), json.dumps(request)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    statuses = sorted(json.loads(out.strip().splitlines()[-1])["status"] for out, _ in outs)
    events = [e for e in read_log(log) if e["folder"].startswith(str(root))]  # not the worker's probe
    assert len({e["folder"] for e in events}) == 1, events  # both runners used one keyed folder
    assert sorted(e["event"] for e in events) == ["compile", "load"], events
    assert statuses == ["hit", "miss"]
    # neither lock is held any more: a third session takes it at once
    with cc.folder_lock(Path(events[0]["folder"]), timeout=0.1):
        pass


def _migx_provider_for(spec: ModelSpec) -> Any:
    return MIGX.with_options(spec.options_for("migraphx"))


def test_a_side_by_side_item_compiles_at_most_twice_per_side_and_never_shares(
        model_repo: Path, git: Any, cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import onnx

    from pytest_aaco.measure.modelgen import add_extra_work
    from tests.conftest import squeezenet_file

    # the candidate changes the model's bytes but keeps its file name, as a retrained model does
    onnx.save(add_extra_work(onnx.load(str(squeezenet_file())), matmuls=1, size=32),
              str(model_repo / "models" / "net.onnx"))
    git(model_repo, "commit", "-qam", "retrained")
    ep = CompilingEP(compile_s=0.2)
    install(monkeypatch, ep)
    gate = SideBySideGate("HEAD~1", None, CompareSettings(block_s=0.01, threshold=0.5, confirm=False), model_repo)
    spec = load_registry(model_repo / "models.yaml")[0]
    item = ItemMeasure(warmup=2, iobinding="none", intra_op_threads=1, device_time="off")
    try:
        side = gate.baseline_for_item(spec, "migraphx")
        _, _, result = gate.measure(spec, side, _migx_provider_for, item, GateSettings(threshold=0.5), 0.05,
                                    "net[migraphx]")
        feeds = {i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
                 for i in _inputs(model_repo)}
        cold = gate.cold_start(spec, side, _migx_provider_for, item, feeds, 3, "net[migraphx]", 0.2)
    finally:
        gate.close()
    compiles = [e for e in ep.events if e["event"] == "compile"]
    by_side = {s: [e for e in compiles if f"{Path(str(cache_root))}/{s}/" in e["folder"] + "/"]
               for s in ("baseline", "candidate")}
    assert len(compiles) == len(by_side["baseline"]) + len(by_side["candidate"])  # every compile in a side folder
    assert 1 <= len(by_side["baseline"]) <= 2 and 1 <= len(by_side["candidate"]) <= 2, compiles
    sessions = len(ep.events)
    assert sessions >= 2 + 2 * 3  # the measurement's pair(s) and the cold start's fresh sessions all ran
    base_folders = {e["folder"] for e in ep.events if "/baseline/" in e["folder"]}
    cand_folders = {e["folder"] for e in ep.events if "/candidate/" in e["folder"]}
    assert base_folders and cand_folders and not base_folders & cand_folders
    sides = result.to_dict()["sides"]
    assert sides["baseline"]["compile_cache"][0] == "miss" and sides["candidate"]["compile_cache"][0] == "miss"
    record = cold.record()
    assert set(record["compile_cache"]) == {"hit"} and set(record["baseline_side"]["compile_cache"]) == {"hit"}
    assert record["compile_ms"] >= 200 and record["baseline_side"]["compile_ms"] >= 200
    assert "compile_ms" in record["verdict"]["metrics"]


def _inputs(repo: Path) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(str(repo / "models" / "net.onnx"), providers=["CPUExecutionProvider"]).get_inputs()


def test_a_tenfold_compile_regression_fails_the_cold_start() -> None:
    def cold(compile_ms: float) -> ColdStart:
        return ColdStart([50.0, 51.0, 49.0], [5.0, 5.1, 4.9], "the MIGraphX compile", compile_cache=["hit"] * 3,
                         compile_ms=compile_ms)

    verdict = side_by_side_verdict(cold(30_000.0), cold(300_000.0), "m[migraphx]", "HEAD~1")
    assert verdict.fails and verdict.metrics["compile_ms"]["ratio"] == pytest.approx(10.0)
    assert "(compile)" in verdict.message and "300.0 s vs 30.0 s at HEAD~1 (10.00x, limit 2x)" in verdict.message
    same = side_by_side_verdict(cold(30_000.0), cold(33_000.0), "m[migraphx]", "HEAD~1")
    assert not same.fails and same.metrics["compile_ms"]["outcome"] == "no-regression"
    assert ColdStart.from_dict(cold(1.0).to_dict()).compile_ms == 1.0
    assert "compile_ms" not in ColdStart([1.0], [1.0]).to_dict()  # old records keep their shape


def test_compile_time_is_not_spent_from_the_compare_budget() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    class Compiling:
        def __init__(self, seed: int) -> None:
            self.rng = np.random.default_rng(seed)

        def open(self, name: str) -> OpenedSide:
            now[0] += 30.0  # a 30 s compile
            rng = self.rng

            class Side:
                def block(self, iterations: int) -> np.ndarray:
                    return (2e6 * np.exp(rng.normal(0, 0.4, iterations))).astype(np.int64)

            side = Side()
            side.name = name  # type: ignore[attr-defined]
            return OpenedSide(side, 2.0, None, 30_000.0, 1.0, {})

    settings = CompareSettings(block_s=0.0, discard=1, budget_s=20.0, confirm=False)
    result = compare_sides(Compiling(1), Compiling(2), settings, alpha=0.001, baseline_label="HEAD~1", clock=clock)
    assert len(result.measurement.looks) > 1  # the 60 s of compiles did not use up the 20 s budget


# ------------------------------------------------------------------ through pytest, stored baselines

CONFTEST = '''
import pytest
from fake_compiling_ep import CompilingEP, install

@pytest.fixture(autouse=True, scope="session")
def _simulated_migraphx():
    mp = pytest.MonkeyPatch()
    install(mp, CompilingEP(compile_s=0.3, log=__import__("pathlib").Path({log!r})))
    yield
    mp.undo()
'''


def test_a_stored_baseline_item_compiles_once_per_pytest_session(aaco_project: Any, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "events.jsonl"
    monkeypatch.setenv("AACO_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.setenv("RUNNER_NAME", "runner-1")
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    aaco_project.pytester.makeconftest(CONFTEST.format(log=str(log)))
    args = ("--aaco-provider=migraphx", "--aaco-iobinding=none", "--aaco-placement=off", "--aaco-reference=none",
            "--aaco-save-baseline")
    result = aaco_project.run(*args)
    assert result.ret == 0, result.stdout.str()[-3000:]
    events = read_log(log)
    assert [e["event"] for e in events].count("compile") == 1, events
    folder = Path(events[0]["folder"])
    assert folder.parent == tmp_path / "user-cache" / "compile" / "runner-1" / "candidate"
    assert cc.compile_record(folder) is not None
    # the next pytest session on this runner loads the program
    result = aaco_project.run(*args)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert [e["event"] for e in read_log(log)].count("compile") == 1


def test_the_bundle_records_hit_or_miss(aaco_project: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "events.jsonl"
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    aaco_project.pytester.makeconftest(CONFTEST.format(log=str(log)))
    cache = tmp_path / "mine"
    args = [a for a in aaco_project.args("--aaco-provider=migraphx", "--aaco-iobinding=none", "--aaco-placement=off",
                                         "--aaco-reference=none", f"--aaco-compile-cache={cache}",
                                         f"--aaco-session-dir={tmp_path / 'sessions'}") if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest(*args)
    assert result.ret == 0, result.stdout.str()[-3000:]
    found = [json.loads(p.read_text()) for p in (tmp_path / "sessions").rglob("*.json")]
    records = [r for data in found for r in _walk(data) if isinstance(r, dict) and "compile_cache" in r]
    assert records and records[0]["compile_cache"] == "miss", [p.name for p in (tmp_path / "sessions").rglob("*")]
    assert (cache / "candidate").is_dir()


def _walk(data: Any) -> Any:
    yield data
    if isinstance(data, dict):
        for value in data.values():
            yield from _walk(value)
    elif isinstance(data, list):
        for value in data:
            yield from _walk(value)


__all__ = ["itertools"]


def test_the_amd_workflow_runs_in_a_rocm_container_with_a_kept_compile_cache() -> None:
    import yaml

    workflow = yaml.safe_load((Path(__file__).parent.parent / ".github" / "workflows" / "perf-amd.yml").read_text())
    for name, job in workflow["jobs"].items():
        container = job["container"]
        assert "rocm/onnxruntime" in container["image"], name
        for flag in ("--device=/dev/kfd", "--device=/dev/dri", "--group-add video",
                     "--group-add ${{ vars.AMD_RENDER_GID"):
            assert flag in container["options"], (name, flag)
        assert "/var/cache/aaco-compile:/aaco-compile" in container["volumes"]
        steps = "\n".join(str(step.get("run", "")) for step in job["steps"])
        assert "rocminfo" in steps and "amd-smi list" in steps and "ROCR_VISIBLE_DEVICES" in steps
        # the container's own ONNX Runtime (built for its ROCm): a venv that sees the system site packages, and
        # no onnxruntime-migraphx from PyPI unless a pinned one is asked for
        assert "--system-site-packages" in steps, name
        assert workflow["env"]["ORT_MIGRAPHX_PACKAGE"] == "${{ vars.ORT_MIGRAPHX_PACKAGE || '' }}"
        assert "pip install onnxruntime-migraphx" not in steps, name
        assert "--aaco-compile-cache=/aaco-compile" in workflow["env"]["AACO_ARGS"] + steps


def test_the_traced_child_loads_each_sides_program_from_the_plugins_cache(
        cache_root: Path, tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_aaco.measure import traced_child
    from pytest_aaco.measure.traced_child import ChildSide, Roctx
    from pytest_aaco.tracers import rocprof

    ep = CompilingEP(compile_s=0.05)
    install(monkeypatch, ep)
    for side in ("baseline", "candidate"):  # what the side-by-side measurement compiled in this process
        build_session(tiny_model_path, MIGX.for_side(side))
    sides = [ChildSide(s, tiny_model_path, MIGX.for_side(s), {"x": np.ones((1, 64), np.float32)})
             for s in ("baseline", "candidate")]
    captured: dict[str, Any] = {}

    def fake_run(command: list[str], **kwargs: Any) -> Any:  # run the child in this process, not under rocprofv3
        captured["spec"] = json.loads(Path(command[-1]).read_text())
        traced_child.run_child(command[-1], Roctx(lambda text: None, lambda: None, "test"))
        raise RuntimeError("stop after the child")

    monkeypatch.setattr(rocprof.shutil, "which", lambda exe: "/usr/bin/rocprofv3")
    monkeypatch.setattr(rocprof.subprocess, "run", fake_run)
    with pytest.raises(RuntimeError, match="stop after the child"):
        traced_child.trace_sides(sides, cycles=1, runs=1)
    assert captured["spec"]["compile_cache"] == str(cache_root)
    assert [e["event"] for e in ep.events] == ["compile", "compile", "load", "load"]
    assert "/baseline/" in ep.events[2]["folder"] and "/candidate/" in ep.events[3]["folder"]
    assert cc.compile_cache_root() == cache_root  # the child's setting did not leak
