"""A run that can always be stopped: the item timeout, and SIGTERM / Ctrl-C inside a long ``session.run``.

A model whose single run takes hours used to be stoppable only by SIGKILL: ``InferenceSession.run`` holds
the main thread in C++, where Python's signal handler cannot run, and there was no time limit per item.
Here real ONNX Runtime runs real models that never end:

* ``forever.onnx``: a Loop with a trip count of 10^12 (a MatMul and a Tanh per iteration); ORT checks
  ``RunOptions.terminate`` before each kernel of the body, so it can be stopped;
* ``onekernel.onnx``: one 5000x5000 MatMul, a single kernel that does not yield (seconds on one core).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_aaco.benchmark import item_limit, planned_runs
from pytest_aaco.measure.inference import MeasureSettings
from pytest_aaco.measure.timedloop import TERMINATED_TEXT, Deadline, RunStop, stop_all
from pytest_aaco.options import ITEM_TIMEOUT_CAP_S, ITEM_TIMEOUT_FACTOR, ITEM_TIMEOUT_FLOOR_S, item_timeout
from tests.conftest import save_test_model

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals and the wakeup descriptor as on POSIX")


def make_forever_model(path: Path, size: int = 64) -> Path:
    """``x [1, size] -> Loop(10^12 times: x = tanh(x @ W)) -> out``: a run that never ends in practice."""
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array((np.eye(size) * 0.5 + 0.5 / size).astype(np.float32), "W")
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("MatMul", ["x_in", "W"], ["y"]),
         helper.make_node("Tanh", ["y"], ["x_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [1, size])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [1, size])],
        [weight])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trip", "cond", "x"], ["out"], body=body)], "forever",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, size])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, size])],
        [numpy_helper.from_array(np.array(10**12, dtype=np.int64), "trip"),
         numpy_helper.from_array(np.array(True), "cond")])
    return save_test_model(graph, path)


def make_one_kernel_model(path: Path, n: int = 5000) -> Path:
    """``x [1] -> max((U(n, n) + x) @ U(n, n))``: one n x n MatMul kernel, which ORT cannot stop once it runs.
    Its operands are made inside the run (RandomUniform, never folded into constants), so the model file
    and its input stay small."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("RandomUniform", [], ["a"], shape=[n, n], seed=1.0),
         helper.make_node("RandomUniform", [], ["b"], shape=[n, n], seed=2.0),
         helper.make_node("Add", ["a", "x"], ["a1"]),
         helper.make_node("MatMul", ["a1", "b"], ["c"]),
         helper.make_node("ReduceMax", ["c"], ["y"], keepdims=0)], "onekernel",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    return save_test_model(graph, path)


# ---------------------------------------------------------------- the rule and the mechanism, in process


def test_the_option_takes_seconds_auto_and_off():
    assert item_timeout("auto") is None
    assert item_timeout("off") == math.inf and item_timeout("0") == math.inf
    assert item_timeout("90") == 90.0 and item_timeout("90s") == 90.0
    for bad in ("-1", "soon", ""):
        with pytest.raises(ValueError, match="seconds like 600, auto or off|must be positive"):
            item_timeout(bad)


def test_the_auto_limit_scales_with_the_first_run_within_floor_and_cap():
    settings = MeasureSettings(warmup=10, rounds=10, iterations=None)
    assert item_limit(None) == ITEM_TIMEOUT_CAP_S  # until the first run has finished
    assert item_limit(None, 0.05, settings) == ITEM_TIMEOUT_FLOOR_S  # a fast model: the floor
    # a 2 s model: adaptive iterations fall to the minimum, 1 + 10 + 10 * 5 runs planned
    assert planned_runs(settings, 2.0) == 61
    assert item_limit(None, 2000.0, settings) == pytest.approx(ITEM_TIMEOUT_FACTOR * 2.0 * 61)
    assert item_limit(None, 600_000.0, settings) == ITEM_TIMEOUT_CAP_S  # a 10-minute run: the cap
    assert item_limit(12.5) == 12.5 and item_limit(math.inf) is None  # given, off


@pytest.fixture(scope="module")
def forever_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_forever_model(tmp_path_factory.mktemp("forever") / "forever.onnx")


def _session(path: Path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def test_a_deadline_stops_a_real_run_from_its_watchdog_thread(forever_model):
    session, stop = _session(forever_model), RunStop()
    feeds = {"x": np.ones((1, 64), np.float32)}
    start = time.monotonic()
    with Deadline(0.5, "the item timeout", stop) as deadline, pytest.raises(Exception, match=TERMINATED_TEXT):
        session.run(None, feeds, stop.run_options)
    took = time.monotonic() - start
    assert deadline.expired and stop.reason == "the item timeout"
    assert took >= 0.5, took  # not before the deadline; that it ended at all is the claim (the model runs forever)
    stop.reset()  # the session runs again afterwards
    with Deadline(0.3, "again", None) as deadline, pytest.raises(Exception, match=TERMINATED_TEXT):
        session.run(None, feeds, stop.run_options)  # None: every RunStop of the process (stop_all)
    assert deadline.expired and stop.reason == "again"


def test_stop_all_reaches_a_run_in_flight_and_a_deadline_left_early_never_fires(forever_model):
    session, stop = _session(forever_model), RunStop()
    threading.Timer(0.3, stop_all, ("stopped by SIGTERM",)).start()
    with pytest.raises(Exception, match=TERMINATED_TEXT):
        session.run(None, {"x": np.ones((1, 64), np.float32)}, stop.run_options)
    assert stop.reason == "stopped by SIGTERM"
    stop.reset()
    with Deadline(0.2, "late", stop) as deadline:
        pass
    time.sleep(0.4)
    assert not deadline.expired and stop.reason is None and not stop.run_options.terminate


# ---------------------------------------------------------------- the plugin: a pytest run in a subprocess

#: conftest of the projects below: a private lock folder (the host's is shared with other runs), and
#: SIGINT / SIGHUP as a terminal gives them (a background job of a non-interactive shell inherits SIGINT
#: ignored, and Python then installs no KeyboardInterrupt handler; see tests/test_signals.py)
CONFTEST = """
import os, signal, threading, time
from pathlib import Path
import pytest
from pytest_aaco.measure import devicelock

devicelock.LOCK_ROOT = Path(__file__).parent / "locks"
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SIGNALS = {signals!r}  # seconds into the item whose id contains TARGET -> signal name

def _send(name):
    Path("signals.log").open("a").write(f"{{name}} {{time.time()!r}}\\n")
    os.kill(os.getpid(), getattr(signal, name))

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if {target!r} in item.nodeid:
        for delay, name in SIGNALS:
            threading.Timer(delay, _send, (name,)).start()
    return (yield)
"""
REGISTRY = """
models:
  tiny:
    path: tiny.onnx
  {slow}:
    path: {slow}.onnx
  tiny2:
    path: tiny.onnx
"""
ARGS = ("--aaco-reference=none", "--aaco-intra-op-threads=1", "--aaco-confirm=off")


def _project(aaco_project, slow: str, make, signals=(), target: str = "-"):
    root = aaco_project.pytester.path
    make(root / f"{slow}.onnx")
    aaco_project.registry(REGISTRY.format(slow=slow))
    (root / "conftest.py").write_text(CONFTEST.format(signals=list(signals), target=target))
    return root


def _run(aaco_project, *extra: str, timeout: float = 240) -> tuple[subprocess.CompletedProcess[str], float]:
    """pytest in a subprocess (this worktree's plugin: PYTHONPATH), its result and wall time (s)."""
    root = aaco_project.pytester.path
    args = [a for a in aaco_project.args(*ARGS, *extra) if a != "--aaco-no-bundle"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), str(root)])}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return proc, time.monotonic() - start


def _outcomes(out: str) -> dict[str, str]:
    """Model -> pytest's outcome word, from ``-v`` lines (``test_latency[tiny-cpu] aaco... PASSED``)."""
    return {m.group(1): m.group(2) for m in re.finditer(r"test_latency\[(\w+)-cpu\].*? (PASSED|FAILED|ERROR)", out)}


def _bundle_items(root: Path) -> dict[str, dict]:
    [bundle] = [p for p in (root / ".aaco" / "sessions").iterdir() if p.is_dir()]
    return {json.loads(p.read_text())["nodeid"].split("[")[1].split("-")[0]: json.loads(p.read_text())
            for p in bundle.rglob("*.json") if "nodeid" in p.read_text()}


@pytest.mark.slow
@pytest.mark.parametrize("where", ["option", "ini"])
def test_a_model_that_runs_forever_ends_at_the_item_timeout_and_the_run_goes_on(aaco_project, where):
    root = _project(aaco_project, "forever", make_forever_model)
    if where == "ini":
        (root / "pytest.ini").write_text("[pytest]\naaco_item_timeout = 3\n")
        extra: tuple[str, ...] = ()
    else:
        extra = ("--aaco-item-timeout=3",)
    proc, took = _run(aaco_project, "-v", *extra)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert _outcomes(out) == {"tiny": "PASSED", "forever": "FAILED", "tiny2": "PASSED"}, out
    message = ("forever[cpu]: stopped after 3 s, the item timeout (--aaco-item-timeout=3; ini aaco_item_timeout);"
               " the ONNX Runtime run was stopped and nothing of this measurement is kept")
    assert message in out, out
    assert "Traceback" not in out and TERMINATED_TEXT not in out + proc.stderr  # one line, ORT's own log left out
    table = out[out.index("pytest-aaco results"):]
    assert all(name in table for name in ("tiny ", "forever", "tiny2")), table  # the finished items are kept
    items = _bundle_items(root)
    assert items["tiny"]["outcome"] == "passed" and items["tiny2"]["outcome"] == "passed"
    assert items["forever"]["outcome"] == "failed" and "item timeout" in items["forever"]["error"]
    assert items["forever"]["duration_s"] >= 3, items["forever"]["duration_s"]  # not before the timeout
    print(f"forever item ended after {items['forever']['duration_s']:.2f} s (timeout 3 s); whole run {took:.1f} s")


def test_sigterm_stops_a_run_that_would_never_end_and_keeps_what_was_finished(aaco_project):
    root = _project(aaco_project, "forever", make_forever_model, signals=[(1.0, "SIGTERM")], target="forever")
    proc, took = _run(aaco_project, "-v", "--aaco-item-timeout=off")
    after = time.time() - float((root / "signals.log").read_text().split()[1])
    out = proc.stdout
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out + proc.stderr
    assert "stopped by SIGTERM" in out and _outcomes(out)["tiny"] == "PASSED", out
    assert len((root / "signals.log").read_text().splitlines()) == 1
    # the run in flight stopped (the model never ends: that the process ended at all is the claim)
    print(f"one SIGTERM inside a never-ending run: the process ended {after:.2f} s later")
    table = out[out.index("pytest-aaco results"):]
    assert "tiny " in table and "tiny2" not in table, table
    items = _bundle_items(root)
    assert items["tiny"]["outcome"] == "passed" and "tiny2" not in items
    print(f"whole run {took:.1f} s")


@pytest.fixture(scope="module")
def one_kernel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """The one-kernel model and how long one run of it takes here (s), with one thread."""
    path = make_one_kernel_model(tmp_path_factory.mktemp("onekernel") / "onekernel.onnx")
    session = _session(path)
    start = time.monotonic()
    session.run(None, {"x": np.ones(1, np.float32)})
    return path, time.monotonic() - start


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_second_signal_ends_the_process_inside_a_kernel_that_does_not_yield(aaco_project, one_kernel, sig):
    path, run_s = one_kernel
    if run_s < 5:
        pytest.skip(f"one run takes {run_s:.1f} s here: too short to be sure to be inside its MatMul at the signals")
    root = _project(aaco_project, "onekernel", lambda target: target.write_bytes(path.read_bytes()),
                    signals=[(2.5, sig), (3.0, sig)], target="onekernel")
    proc, took = _run(aaco_project, "-v", "--aaco-item-timeout=off", "--aaco-warmup=1")
    ended = time.time()
    sent = [float(line.split()[1]) for line in (root / "signals.log").read_text().splitlines()]
    assert len(sent) == 2, proc.stdout
    # ended by the signal either way: the plugin's exit (128 + n) or, when the OS delivers the second one
    # before the plugin's handler re-raises under load, the default action (-n)
    assert proc.returncode in (128 + getattr(signal, sig), -getattr(signal, sig)), proc.stdout + proc.stderr
    assert f"a second {sig} while ONNX Runtime was still inside a run" in proc.stderr
    after = ended - sent[1]
    assert after < run_s, after  # the second signal ended it, not the end of the kernel (run_s long alone)
    out = proc.stdout
    table = out[out.index("the items finished before the process was ended"):]
    assert "tiny " in table, out  # the last words: the results table so far
    assert _bundle_items(root)["tiny"]["outcome"] == "passed"
    print(f"{sig}: one run of the kernel takes {run_s:.1f} s; the process ended {after:.2f} s after the second"
          " signal")


def test_the_watcher_is_there_only_while_held_and_passes_bytes_on():
    from pytest_aaco.measure.stopping import InterruptGuard

    if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        pytest.skip("this process has its own SIGTERM handler")
    import socket

    reader, writer = socket.socketpair()
    writer.setblocking(False)
    old = signal.set_wakeup_fd(writer.fileno())
    try:
        guard = InterruptGuard()
        with guard:
            assert guard.watcher is not None
            exits: list[int] = []
            guard.watcher.exit_process = exits.append
            guard.watcher.signalled(signal.SIGTERM)
            guard.watcher.signalled(signal.SIGTERM)
            assert exits == [signal.SIGTERM]  # the second one ends the process
            assert signal.set_wakeup_fd(-1) != writer.fileno()  # ours while held ...
            signal.set_wakeup_fd(guard.watcher._pair[1].fileno())
        assert guard.watcher is None
        assert signal.set_wakeup_fd(writer.fileno()) == writer.fileno()  # ... and the previous one after
    finally:
        signal.set_wakeup_fd(old)
        reader.close()
        writer.close()
