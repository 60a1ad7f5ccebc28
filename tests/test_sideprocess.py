"""The baseline side in another interpreter: sideworker.py driven by WorkerSide, with a real second venv.

The "other environment" is a virtualenv made here, without system site packages, whose only
packages are numpy and onnxruntime (a ``.pth`` file points at a folder of links to this
environment's copies: no network, no pip). So these tests also prove that the worker needs
nothing else: pytest, scipy and pytest_aaco cannot be imported there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import venv
from pathlib import Path

import numpy as np
import pytest

from pytest_aaco.config import parse_compare_python
from pytest_aaco.measure.inference import SessionError, bind_run, build_session
from pytest_aaco.measure.interleave import LocalSide, paired_log_ratios, run_cycles
from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.sidebyside.worker_client import (
    MARKER,
    WORKER_SCRIPT,
    WorkerEnvironmentError,
    WorkerError,
    WorkerSessions,
    WorkerSide,
    find_interpreter,
)

CPU = parse_provider("cpu")
WIDTH = 256


def make_env(root: Path, packages: bool = True, startup: str = "") -> Path:
    """A virtualenv at *root* (no pip, no system site packages); its python's path.

    *packages*: numpy and onnxruntime only, linked from this environment. *startup*: a line of
    Python run at every interpreter start (a ``.pth`` import line), e.g. to print noise.
    """
    venv.EnvBuilder(with_pip=False, system_site_packages=False, symlinks=True).create(root)
    python = root / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    if packages:
        import numpy
        import onnxruntime

        only = root / "only-numpy-and-onnxruntime"
        only.mkdir()
        for module in (numpy, onnxruntime):
            source = Path(module.__file__).parent
            (only / source.name).symlink_to(source)
            libs = source.with_name(source.name + ".libs")  # numpy's vendored BLAS on Linux wheels
            if libs.exists():
                (only / libs.name).symlink_to(libs)
        (site / "aaco_test_packages.pth").write_text(f"{only}\n")
    if startup:
        (site / "aaco_test_startup.pth").write_text(f"import os; {startup}\n")
    return python


def pids_alive(pid: int) -> bool:
    """Whether *pid* still exists, zombie included (a zombie keeps its /proc entry until reaped)."""
    return Path(f"/proc/{pid}").exists()


@pytest.fixture(scope="module")
def other_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_env(tmp_path_factory.mktemp("other-env") / "venv")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, make_model) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("side-models")
    return {"small": make_model(folder / "small.onnx", layers=4, width=WIDTH, seed=1),
            "large": make_model(folder / "large.onnx", layers=32, width=WIDTH, seed=2)}


@pytest.fixture(scope="module")
def feeds() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).standard_normal((1, WIDTH)).astype(np.float32)}


@pytest.fixture(scope="module")
def side(other_python: Path):
    """One started worker in the other environment, shared by the tests that leave it usable."""
    with WorkerSide(other_python, name="baseline") as worker:
        yield worker
    assert not worker.running


# ---------------------------------------------------------------- the option's parser


def test_parse_compare_python_keeps_the_venv_path_and_refuses_what_cannot_run(other_python, tmp_path):
    assert parse_compare_python("--aaco-compare-python", "") is None
    assert parse_compare_python("--aaco-compare-python", "  ") is None
    # a venv's python is a symlink to the base interpreter: resolving it would lose the venv
    assert other_python.is_symlink()
    assert parse_compare_python("--aaco-compare-python", str(other_python)) == str(other_python)
    assert parse_compare_python("--aaco-compare-python", "sh") == find_interpreter("sh")
    plain = tmp_path / "python-not-executable"
    plain.write_text("")
    for value, fragment in [(str(tmp_path / "nope" / "python"), "no such file"), ("no-such-python-here", "on PATH"),
                            (str(tmp_path), "is a folder"), (str(plain), "is not executable")]:
        with pytest.raises(pytest.UsageError) as info:
            parse_compare_python("--aaco-compare-python", value)
        assert str(info.value).startswith("--aaco-compare-python: "), info.value
        assert fragment in str(info.value), info.value


# ---------------------------------------------------------------- a real second interpreter


def test_the_other_environment_has_only_numpy_and_onnxruntime(other_python, tmp_path):
    probe = ("import importlib.util as u, sys; print(sys.prefix,"
             " [m for m in ('numpy', 'onnxruntime', 'pytest', 'scipy', 'pytest_aaco') if u.find_spec(m)])")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # what that environment has of its own
    out = subprocess.run([str(other_python), "-c", probe], capture_output=True, text=True, check=True,
                         cwd=tmp_path, env=env).stdout.split()  # not here: -c puts the current folder on sys.path
    assert out[0] != sys.prefix
    assert out[1:] == ["['numpy',", "'onnxruntime']"]


def test_a_worker_side_interleaves_with_a_local_side(side, other_python, models, feeds):
    info = side.info
    assert info is not None and info.pid == side.pid != os.getpid()
    assert info.executable == str(other_python)
    assert "CPUExecutionProvider" in info.providers and info.ort_version
    session = side.load(models["small"], CPU, feeds, iobinding="auto", intra_op_threads=1,
                        config_entries={"session.intra_op.allow_spinning": "0"})
    assert session.providers_used == ("CPUExecutionProvider",) and session.iobinding == "none"
    assert session.create_ms > 0
    first_ms, warm_ms = side.warmup(5)
    assert first_ms > 0 and warm_ms.dtype == np.float64 and warm_ms.size >= 5

    # the candidate, in this process, runs 8x the layers: every cycle must see it much slower
    handle = build_session(models["large"], CPU, intra_op_threads=1)
    local = LocalSide("candidate", bind_run(handle, feeds, "none", 0))
    cycles = run_cycles([side, local], {"baseline": 40, "candidate": 40}, cycles=4, discard=2)
    for cycle in cycles:
        block = cycle.block("baseline")
        assert block.n == 40 and block.discarded_ms.shape == (2,) and (block.latencies_ms > 0).all()
    assert sorted(c.order for c in cycles) == [("baseline", "candidate")] * 2 + [("candidate", "baseline")] * 2
    blocks = sorted((b for c in cycles for b in c.blocks), key=lambda b: b.start_ns)
    assert all(a.end_ns <= b.start_ns for a, b in zip(blocks, blocks[1:], strict=False))  # never at once
    assert (paired_log_ratios(cycles, "baseline", "candidate") > np.log(2)).all()

    memory = side.memory()
    assert memory.rss_mb is not None and memory.rss_mb > 10 and memory.peak_rss_mb >= memory.rss_mb
    assert memory.gpu_mb is None and "NVIDIA" in memory.gpu_source


def test_io_binding_runs_in_the_worker(side, models, feeds):
    session = side.load(models["small"], CPU, feeds, iobinding="inputs")
    assert session.iobinding == "inputs"
    lat = side.block(7)
    assert lat.dtype == np.int64 and lat.shape == (7,) and (lat > 0).all()


def test_what_ort_refuses_in_the_worker_is_a_session_error_and_the_worker_lives_on(side, models, feeds, tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx model")
    with pytest.raises(SessionError, match=r"baseline side \(onnxruntime .*could not create an InferenceSession"
                                           r" for broken.onnx on CPUExecutionProvider"):
        side.load(broken, CPU, feeds)
    with pytest.raises(SessionError, match="CUDAExecutionProvider"):  # not in this build: placement refuses it
        side.load(models["small"], parse_provider("cuda"), feeds, iobinding="none")
    with pytest.raises(WorkerError, match="block before a session was loaded"):  # the CPU fallback is not measured
        side.block(3)
    with pytest.raises(SessionError, match="enable_cuda_graph=1 needs device inputs"):
        side.load(models["small"], parse_provider("cuda").with_options({"enable_cuda_graph": 1}), feeds,
                  iobinding="none")
    side.load(models["small"], CPU, feeds)
    assert side.block(3).shape == (3,)


def test_noise_on_the_workers_stdout_does_not_corrupt_the_protocol(tmp_path, models, feeds):
    # a .pth line that prints at start-up and keeps writing to fd 1 from a thread, as C code might
    noisy = ("os.write(1, b'startup noise without newline'); import threading, time; "
             "threading.Thread(target=lambda: [os.write(1, b'@aaco-side noise {\\n') or time.sleep(0.002)"
             " for _ in range(1000)], daemon=True).start()")
    python = make_env(tmp_path / "noisy", startup=noisy)
    with WorkerSide(python) as worker:
        worker.load(models["small"], CPU, feeds)
        for _ in range(5):
            assert worker.block(50).shape == (50,)


def test_the_protocol_line_by_line(tmp_path):
    # noise printed at start-up reaches stdout before the worker claims it; noise printed later
    # (atexit: after the last reply), by C code on fd 1 or by Python's print, must go to stderr
    python = make_env(tmp_path / "noisy", startup=(
        "os.write(1, b'startup noise, no newline'); import atexit; "
        "atexit.register(os.write, 1, b'fd noise\\n'); atexit.register(print, 'print noise')"))
    proc = subprocess.Popen([str(python), str(WORKER_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    lines = b"".join(json.dumps(r).encode() + b"\n" for r in [
        {"id": 1, "op": "block", "iterations": 3}, {"id": 2, "op": "hello"}, {"id": 3, "op": "block", "iterations": 3},
        {"id": 4, "op": "warp"}]) + b"not json\n" + json.dumps({"id": 5, "op": "close"}).encode() + b"\n"
    out, err = proc.communicate(lines, timeout=60)
    assert proc.returncode == 0, err
    replies = [json.loads(line[len(MARKER):]) for line in out.splitlines() if line.startswith(MARKER)]
    assert [r["id"] for r in replies] == [1, 2, 3, 4, None, 5]
    assert [r["ok"] for r in replies] == [False, True, False, False, False, True]
    assert replies[0]["error"] == {"type": "request", "message": "send hello before 'block'"}
    assert replies[1]["protocol"] == 2 and replies[1]["pid"] == proc.pid
    assert replies[2]["error"]["message"] == "send load before block"
    assert replies[3]["error"]["message"] == "unknown op 'warp'"
    assert replies[4]["error"]["type"] == "request"
    noise, _, rest = out.partition(b"\n")  # (a venv's lib64 link runs the .pth twice)
    assert noise.startswith(b"startup noise") and noise.replace(b"startup noise, no newline", b"") == b""
    assert rest.startswith(MARKER) and rest.count(b"\n") == 2 * len(replies) - 1  # nothing else came
    assert b"fd noise\n" in err and b"print noise\n" in err


@pytest.mark.parametrize("name", ["sidebyside/worker.py", "measure/timedloop.py", "measure/migraphx_probe.py"])
def test_the_worker_files_parse_as_python_3_8(name):
    # older onnxruntime wheels exist only for older Pythons (1.19.2 on 3.8 was run by hand with
    # AACO_TEST_COMPARE_PYTHON below); this catches new syntax, not new library calls
    import ast

    ast.parse((WORKER_SCRIPT.parent.parent / name).read_text(), feature_version=(3, 8))


@pytest.mark.skipif(not os.environ.get("AACO_TEST_COMPARE_PYTHON"),
                    reason="set AACO_TEST_COMPARE_PYTHON to an interpreter with another numpy and onnxruntime")
def test_an_interpreter_given_by_the_environment(models, feeds):
    # e.g. AACO_TEST_COMPARE_PYTHON=/tmp/py38/bin/python after `python3.8 -m venv /tmp/py38 &&
    # /tmp/py38/bin/python -m pip install "onnxruntime<1.20" numpy`
    with WorkerSide(os.environ["AACO_TEST_COMPARE_PYTHON"]) as worker:
        for mode in ("none", "inputs", "all"):
            worker.load(models["small"], CPU, feeds, iobinding=mode)
            worker.warmup(3)
            assert worker.block(5).shape == (5,)
        handle = build_session(models["large"], CPU, intra_op_threads=1)
        local = LocalSide("candidate", bind_run(handle, feeds, "none", 0))
        worker.load(models["small"], CPU, feeds, intra_op_threads=1)
        cycles = run_cycles([worker, local], {"baseline": 40, "candidate": 40}, cycles=2, discard=2)
        assert (paired_log_ratios(cycles, "baseline", "candidate") > np.log(2)).all()


# ---------------------------------------------------------------- failures: clear errors, no hang, no zombie


def test_a_worker_killed_mid_block_is_reported_reaped_and_restartable(other_python, models, feeds):
    with WorkerSide(other_python) as worker:
        worker.load(models["small"], CPU, feeds)
        pid = worker.pid
        assert pid is not None
        threading.Timer(0.5, os.kill, (pid, 9)).start()
        with pytest.raises(WorkerError, match="the worker was killed by SIGKILL during block"):
            worker.block(5_000_000)  # the kill is reported, not the block's end awaited (no clock: the words say it)
        assert not worker.running and worker.pid is None and not pids_alive(pid)
        with pytest.raises(WorkerError, match="not running"):
            worker.block(3)
        worker.start()
        worker.load(models["small"], CPU, feeds)
        assert worker.block(3).shape == (3,) and worker.pid != pid
        second = worker.pid
    assert second is not None and not pids_alive(second)


def test_a_worker_that_does_not_answer_in_time_is_stopped(other_python, models, feeds):
    worker = WorkerSide(other_python)
    worker.start()
    worker.load(models["small"], CPU, feeds)
    pid = worker.pid
    assert pid is not None
    worker.timeout_s = 0.3
    with pytest.raises(WorkerError, match=r"no reply to block within 0.3 s; the worker was stopped"):
        worker.block(5_000_000)
    assert not pids_alive(pid)
    worker.close()


def test_an_interpreter_without_numpy_and_onnxruntime_is_named_with_the_fix(tmp_path):
    bare = make_env(tmp_path / "bare", packages=False)
    worker = WorkerSide(bare)
    with pytest.raises(WorkerEnvironmentError) as info:
        worker.start()
    message = str(info.value)
    assert message.startswith(f"--aaco-compare-python={bare}: that interpreter lacks numpy, onnxruntime")
    assert f"{bare} -m pip install onnxruntime numpy" in message
    assert not worker.running


def test_what_is_not_a_python_is_refused_with_its_stderr(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'fake: cannot start' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(WorkerEnvironmentError, match=r"(?s)could not run the side worker .*exited with status 3"
                                                     r" during hello; its stderr ended with:\nfake: cannot start"):
        WorkerSide(fake).start()
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x7fELF not really")
    garbage.chmod(0o755)
    with pytest.raises(WorkerEnvironmentError, match="cannot run"):
        WorkerSide(garbage).start()
    with pytest.raises(WorkerEnvironmentError, match=r"--aaco-compare-python=.*no such file"):
        WorkerSide(tmp_path / "missing" / "python").start()


# ---------------------------------------------------------------- compared side by side


def test_compare_with_the_baseline_in_another_interpreter(other_python, models):
    """--aaco-compare-python's measurement: a worker baseline against a local candidate, the same
    model (an unchanged ORT: no regression), then a model 8x the work (a regression)."""
    from pytest_aaco.measure.registry import ModelSpec
    from pytest_aaco.sidebyside.cycles import compare_sides
    from pytest_aaco.sidebyside.sides import CompareSettings, LocalFactory
    from pytest_aaco.sidebyside.workers import WorkerFactory

    spec = ModelSpec("small", f"path:{models['small']}", models["small"])
    settings = CompareSettings(block_s=0.03, threshold=0.50, confirm=False)  # wide: never flips
    candidate = LocalFactory(models["small"], spec, CPU, warmup=3, intra_op_threads=1)
    baseline = WorkerFactory(str(other_python), models["small"], CPU, candidate.shared_feeds, warmup=3,
                             intra_op_threads=1)
    same = compare_sides(baseline, candidate, settings, alpha=0.05, baseline_label="onnxruntime (other env)")
    assert same.outcome != "regression" and same.memory == []
    sides = same.to_dict()["sides"]
    assert sides["baseline"]["executable"] == str(other_python) and sides["baseline"]["memory_source"] == "worker rss"
    assert same.measurement.footprints["baseline"] and same.measurement.footprints["candidate"]
    slow = LocalFactory(models["large"], spec, CPU, warmup=3, intra_op_threads=1)
    result = compare_sides(baseline, slow, settings, alpha=0.05, baseline_label="onnxruntime (other env)")
    assert result.outcome == "regression" and result.comparison.ratio > 2


def test_cold_start_of_the_baseline_side_in_the_worker(other_python, models, feeds, tmp_path):
    """Cold start side by side with ``--aaco-compare-python``: one worker loads a fresh session per
    cycle; a candidate whose creation folds ~3 GFLOP of constant MatMuls is caught. 8 cycles: with 4, a
    29x slower creation read inconclusive (p=0.005 at level 0.005) when 4 busy processes made the
    baseline side's creations swing between 2 and 15 ms."""
    import onnx

    from pytest_aaco.measure.modelgen import add_folding_work, save_model_atomic
    from pytest_aaco.passes.coldstart import LocalSessions, compare_cold_start

    folded = save_model_atomic(add_folding_work(onnx.load(str(models["small"])), 12, 512), tmp_path / "folded.onnx")
    worker = WorkerSide(other_python, name="baseline")
    try:
        found = compare_cold_start(WorkerSessions(worker, models["small"], CPU, feeds, intra_op_threads=1),
                                   LocalSessions(folded, CPU, feeds, intra_op_threads=1), "small[cpu]",
                                   str(other_python), cycles=8, confirm=False)
        assert worker.running  # one worker for every cycle
    finally:
        worker.close()
    assert found.verdict.fails, found.verdict.message
    assert len(found.baseline.session_create_ms) == 8 and min(found.baseline.first_run_ms) > 0
    assert found.verdict.judgements["session_create_ms"].ratio > 2


# ---------------------------------------------------------------- on a CUDA GPU (skipped elsewhere)


def _has_cuda() -> bool:
    import onnxruntime

    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_cuda(), reason="needs CUDAExecutionProvider: onnxruntime-gpu on a CUDA machine")
@pytest.mark.parametrize("graph", [False, True])
def test_a_cuda_session_in_the_worker(models, feeds, graph):
    # the worker runs this interpreter: onnxruntime-gpu's CUDA libraries come from its site-packages
    cuda = parse_provider("cuda").with_options({"enable_cuda_graph": 1} if graph else {})
    with WorkerSide(sys.executable) as worker:
        session = worker.load(models["large"], cuda, feeds, iobinding="auto")
        assert session.providers_used[0] == "CUDAExecutionProvider" and session.iobinding == "all"
        worker.warmup(5)
        lat = worker.block(50)
        assert lat.shape == (50,) and (lat > 0).all()
        memory = worker.memory()
        assert "nvidia-smi" in memory.gpu_source
        assert memory.gpu_mb is None or memory.gpu_mb > 0  # None where nvidia-smi shows host pids


def test_compare_python_through_the_plugin(aaco_project, other_python):
    """``pytest --aaco-compare-python=PATH`` as a user runs it: the item is measured against itself in
    the other environment (the same onnxruntime here), so it must not regress, and the verdict says
    it was measured side by side against that interpreter."""
    result = aaco_project.run_subprocess(f"--aaco-compare-python={other_python}", "--aaco-threshold=90%",
                                         "--aaco-intra-op-threads=1", "--aaco-junit=perf.xml", "-v", timeout=300)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["tiny*cpu*no-regression", "false-alarm control: LOND*1 gated, 0 regression(s)"])
    junit = (aaco_project.pytester.path / "perf.xml").read_text()
    assert f"vs {other_python}" in junit and "measured side by side" in junit


def test_compare_python_runs_both_sides_in_fresh_worker_processes(aaco_project, other_python):
    """Under ``--aaco-compare-python`` both sides run in workers (the candidate in pytest's own
    interpreter), ``--aaco-compare-processes`` pairs of fresh processes at the first look, and the
    paired test has the process pair as its level (a per-process offset widens the interval)."""
    fast = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(
        *fast, f"--aaco-compare-python={other_python}", "--aaco-compare-processes=2", "--aaco-threshold=90%",
        "--aaco-intra-op-threads=1", "--aaco-cold-start=0", "-v", timeout=300)
    assert result.ret == 0, result.stdout.str()
    record = json.loads(next(aaco_project.pytester.path.glob(".aaco/sessions/*/items/*.json")).read_text())
    sbs = record["verdict"]["side_by_side"]
    assert sbs["session_pairs"] == 2 and sbs["test"] == "paired-t, session level"
    sides = sbs["sides"]
    assert sides["baseline"]["executable"] == str(other_python)
    assert sides["candidate"]["executable"] == sys.executable and sides["candidate"]["memory_source"] == "worker rss"
    assert len(sides["candidate"]["create_ms"]) == len(sides["baseline"]["create_ms"]) == 2


def test_compare_python_compares_cold_start_side_by_side(aaco_project, other_python):
    """With ``--aaco-cold-start``, the unchanged item's cold start is compared with the other
    interpreter's fresh sessions (not with a stored history), and it must not fail."""
    fast = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(
        *fast, f"--aaco-compare-python={other_python}", "--aaco-cold-start=4", "--aaco-threshold=90%",
        "--aaco-intra-op-threads=1", "-v", timeout=300)
    assert result.ret == 0, result.stdout.str()
    record = json.loads(next(aaco_project.pytester.path.glob(".aaco/sessions/*/items/*.json")).read_text())
    verdict = record["cold_start"]["verdict"]
    assert verdict["method"] == "side-by-side" and verdict["ref"] == str(other_python) and not verdict["fails"]
    assert len(record["cold_start"]["baseline_side"]["session_create_ms"]) == 4


#: a start-up line for the other environment: its InferenceSession.run refuses a call without a RunOptions
STRICT_RUN = (
    "import onnxruntime as _ort; _ort.InferenceSession.run = lambda self, names, feeds, run_options=None,"
    " _run=_ort.InferenceSession.run: _run(self, names, feeds, run_options) if run_options is not None"
    " else (_ for _ in ()).throw(RuntimeError('aaco-test: run without a RunOptions'))")


def test_both_sides_time_runs_that_carry_a_runoptions(aaco_project, tmp_path, monkeypatch):
    """The two sides of ``--aaco-compare-python`` time the same work per iteration. Given
    ``run_options=None``, ORT's binding builds a default RunOptions inside every run (about 0.9 us, 15-20%
    of a 5 us model: an A/A read as an improvement, studies/sbs_overhead.py); the plugin's own sessions
    always pass one. Here the worker's interpreter refuses a run without one, so the item passes only
    when the worker's timed runs carry a RunOptions too; in process, the runner built from no RunOptions
    gets one as well."""
    import onnxruntime as ort

    from pytest_aaco.measure.timedloop import bound_runner

    strict = make_env(tmp_path / "strict", startup=STRICT_RUN)
    result = aaco_project.run_subprocess(f"--aaco-compare-python={strict}", "--aaco-threshold=90%",
                                         "--aaco-intra-op-threads=1", "-v", timeout=300)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["tiny*cpu*no-regression"])

    seen: list[object] = []
    original = ort.InferenceSession.run

    def recording(self, names, feeds, run_options=None):
        seen.append(run_options)
        return original(self, names, feeds, run_options)

    monkeypatch.setattr(ort.InferenceSession, "run", recording)
    session = ort.InferenceSession(str(aaco_project.model), providers=["CPUExecutionProvider"])
    feeds = {i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
             for i in session.get_inputs()}
    bound_runner(session, feeds, "none", "cpu", 0)()
    assert len(seen) == 1 and isinstance(seen[0], ort.RunOptions)
