"""SIGTERM and SIGINT at a moment inside the measurement: no temporary folder is left, no file is
half-written, the work tree is untouched (issue 22, "Signals").

CI systems cancel with SIGTERM (GitLab, Jenkins, ``docker stop``); pytest cleans up only on
SIGINT, so the plugin turns SIGTERM and SIGHUP into the same interruption.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pytest_aaco.sidebyside.revision import OWNER_FILE, STALE_AFTER_S, TREE_PREFIX, remove_stale_trees

#: a conftest that sends SIGNAL to its own process DELAY seconds into the first benchmark
KILLER = """
import os, signal, threading
import pytest

# a hangup as on a terminal: a run started under nohup (CI wrappers, this suite run in the
# background) inherits SIGHUP ignored, and the plugin then rightly leaves it ignored
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
# Ctrl-C likewise: a background job of a non-interactive shell (`cmd &`) inherits SIGINT ignored, and
# Python then installs no KeyboardInterrupt handler; restore what a terminal gives
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    threading.Timer({delay}, os.kill, (os.getpid(), signal.{signal})).start()
    return (yield)
"""
#: a conftest that sends SIGNAL inside the first atomic write of a baseline file: after the
#: temporary file is written, before it replaces the baseline (the moment a half-written file
#: could be left behind)
KILLER_AT_WRITE = """
import os, signal

# a hangup as on a terminal: a run started under nohup (CI wrappers, this suite run in the
# background) inherits SIGHUP ignored, and the plugin then rightly leaves it ignored
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
# Ctrl-C likewise: a background job of a non-interactive shell (`cmd &`) inherits SIGINT ignored, and
# Python then installs no KeyboardInterrupt handler; restore what a terminal gives
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_replace = os.replace

def _replace_then_die(src, dst, *args, **kwargs):
    if "{folder}" in str(dst) and not getattr(_replace_then_die, "done", False):
        _replace_then_die.done = True
        os.kill(os.getpid(), signal.{signal})
    return _replace(src, dst, *args, **kwargs)

os.replace = _replace_then_die
"""
REGISTRY = """
models:
  net:
    path: net.onnx
"""
#: FAST_ARGS with the session bundle on: its files are checked too
ARGS = ("--aaco-models=models.yaml", "--aaco-warmup=2", "--aaco-rounds=3", "--aaco-iterations=5",
        "--aaco-max-contention=off", "-p", "no:cacheprovider")
SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _repository(project) -> Path:
    """The project as a git repository, one commit; ignored: the bundle folder, the baselines, and
    what pytester's subprocess runs leave (their output files, a cache folder)."""
    root = project.pytester.path
    (root / ".gitignore").write_text(".aaco/\nbl/\nstdout\nstderr\nrunpytest-*\n.cache/\n")
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "base")
    return root


@pytest.fixture
def side_by_side(aaco_project):
    root = aaco_project.pytester.path
    shutil.copy(aaco_project.model, root / "net.onnx")
    aaco_project.registry(REGISTRY)
    _repository(aaco_project)
    import onnx

    from pytest_aaco.measure.modelgen import add_extra_work

    onnx.save(add_extra_work(onnx.load(str(root / "net.onnx")), matmuls=4, size=64), str(root / "net.onnx"))
    _git(root, "commit", "-qam", "change")
    return aaco_project


def _nothing_half_written(root: Path) -> list[Path]:
    """Every file pytest-aaco writes as JSON (baselines, the session bundle) parses; no temporary
    file of an atomic write is left. Returns the JSON files found."""
    written = [p for folder in (root / "bl", root / ".aaco") if folder.exists() for p in folder.rglob("*")
               if p.is_file()]
    assert not [p for p in written if p.name.endswith(".tmp")], written
    found = [p for p in written if p.suffix == ".json"]
    for path in found:
        json.loads(path.read_text())  # whole, or not there
    return found


def _interrupted(result: pytest.RunResult) -> None:
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert "KeyboardInterrupt" in result.stdout.str() or "stopped by SIG" in result.stdout.str()
    assert "Traceback" not in result.stdout.str().split("KeyboardInterrupt")[0]


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_signal_during_a_side_by_side_run_leaves_no_temporary_folder(side_by_side, tmp_path, monkeypatch, sig):
    root = side_by_side.pytester.path
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    (root / "conftest.py").write_text(KILLER.format(delay={"SIGTERM": 0.3, "SIGINT": 0.1, "SIGHUP": 0.6}[sig],
                                                    signal=sig))
    before = _git(root, "status", "--porcelain")
    result = side_by_side.pytester.runpytest_subprocess(*ARGS, "--aaco-compare=HEAD~1", "--aaco-compare-budget=60",
                                                       "--aaco-intra-op-threads=1", timeout=180)
    _interrupted(result)
    assert not [p.name for p in tmp.iterdir() if p.name.startswith(TREE_PREFIX)]
    _nothing_half_written(root)
    assert _git(root, "status", "--porcelain") == before  # the work tree untouched


#: appended to :data:`KILLER`: the guard's handler runs but what it raises never reaches pytest, as when CPython
#: runs it inside a finalizer or a weak-reference callback (and prints and drops the exception there)
LOST_HANDLER = """
import pytest_aaco.measure.stopping as stopping

def _lost(signum, frame):
    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        if signal.getsignal(number) is _lost:
            signal.signal(number, signal.SIG_DFL)

stopping._interrupt = _lost
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_whose_handler_never_raised_still_interrupts_the_run(side_by_side, sig):
    """The signal stopped the run (ORT fails it with its terminate message) or came between runs; either
    way the session stops as interrupted (exit 2), not with an item error (exit 1) or a finished run."""
    root = side_by_side.pytester.path
    (root / "conftest.py").write_text(KILLER.format(delay=0.3, signal=sig) + LOST_HANDLER)
    result = side_by_side.pytester.runpytest_subprocess(*ARGS, "--aaco-compare=HEAD~1", "--aaco-compare-budget=60",
                                                       "--aaco-intra-op-threads=1", timeout=180)
    _interrupted(result)
    assert "could not measure" not in result.stdout.str()


def test_the_guard_raises_a_signal_the_watcher_saw_once():
    from pytest_aaco.measure.stopping import InterruptGuard, Terminated

    if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        pytest.skip("this process has its own SIGTERM handler")
    guard = InterruptGuard()
    guard.interrupt_if_signalled()  # none seen: nothing
    with guard:
        assert guard.watcher is not None
        guard.watcher.signalled(signal.SIGTERM)
        with pytest.raises(Terminated, match="stopped by SIGTERM"):
            guard.interrupt_if_signalled()
        guard.interrupt_if_signalled()  # raised once: forgotten
    with guard:  # a new hold starts with none seen
        guard.interrupt_if_signalled()


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["measuring", "writing"])
@pytest.mark.parametrize("sig", SIGNALS)
def test_a_signal_during_a_save_leaves_no_half_written_file(aaco_project, sig, moment):
    root = _repository(aaco_project)
    _save = ("--aaco-save-baseline", "--aaco-baseline-dir=bl")
    assert aaco_project.pytester.runpytest_subprocess(*ARGS, *_save, timeout=120).ret == 0  # a history to keep
    [baseline] = [p for p in (root / "bl").rglob("*.json")]
    kept = baseline.read_bytes()
    if moment == "measuring":
        (root / "conftest.py").write_text(KILLER.format(delay=0.3, signal=sig))
        rounds = "--aaco-rounds=400"
    else:
        (root / "conftest.py").write_text(KILLER_AT_WRITE.format(folder=root / "bl", signal=sig))
        rounds = "--aaco-rounds=3"
    before = _git(root, "status", "--porcelain")
    result = aaco_project.pytester.runpytest_subprocess(*ARGS, *_save, rounds, timeout=120)
    _interrupted(result)
    assert baseline in _nothing_half_written(root)
    assert baseline.read_bytes() == kept  # the interrupted save did not replace the history
    assert _git(root, "status", "--porcelain") == before


def test_stale_trees_of_gone_processes_are_removed_and_others_kept(tmp_path):
    old = time.time() - STALE_AFTER_S - 60

    def tree(name: str, pid: int | None, mtime: float) -> Path:
        path = tmp_path / f"{TREE_PREFIX}{name}"
        path.mkdir()
        if pid is not None:
            (path / OWNER_FILE).write_text(str(pid))
        os.utime(path, (mtime, mtime))
        return path

    child = subprocess.Popen(["true"])
    child.wait()  # a pid whose process is gone
    gone = tree("gone", child.pid, old)
    alive = tree("alive", os.getpid(), old)
    young = tree("young", child.pid, time.time())
    orphan = tree("nopid", None, old)
    other = tmp_path / "unrelated"
    other.mkdir()
    os.utime(other, (old, old))
    removed = remove_stale_trees(tmp_path)
    assert sorted(p.name for p in removed) == sorted([gone.name, orphan.name])
    assert alive.exists() and young.exists() and other.exists()


def test_only_default_handlers_are_replaced_held_re_entrantly_and_restored():
    from pytest_aaco.measure.stopping import InterruptGuard, _interrupt

    before = {n: signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    guard = InterruptGuard()
    with guard:
        with guard:  # nested: a save inside a side-by-side session's hold
            assert guard.depth == 2
        for number, handler in before.items():
            expected = handler == signal.SIG_DFL or handler is signal.default_int_handler
            # a handler the user (or an outer run's guard) installed is left alone
            assert (signal.getsignal(number) is _interrupt) == expected, signal.Signals(number).name
    assert {n: signal.getsignal(n) for n in before} == before


def test_a_second_signal_while_held_gets_the_default_action():
    from pytest_aaco.measure.stopping import InterruptGuard, Terminated, _interrupt

    before = signal.getsignal(signal.SIGTERM)
    if before != signal.SIG_DFL:
        pytest.skip("this process has its own SIGTERM handler")
    with InterruptGuard():
        with pytest.raises(Terminated, match="stopped by SIGTERM"):
            _interrupt(signal.SIGTERM, None)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the next one ends the process
        assert signal.getsignal(signal.SIGINT) is not _interrupt
    assert signal.getsignal(signal.SIGTERM) == before


#: a suite that never uses the plugin: SIGTERM's handler untouched, a forked child stopped by it
FORKED_CHILD = """
import multiprocessing, signal, sys, time

def test_a_forked_child_is_stopped_by_sigterm(request):
    assert request.config.pluginmanager.hasplugin("aaco")  # installed and loaded, just not used
    assert "pytest_aaco.session" not in sys.modules
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
    child.start()
    time.sleep(0.2)
    child.terminate()
    child.join(10)
    assert child.exitcode == -signal.SIGTERM
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork start method: POSIX only")
def test_a_suite_that_does_not_use_the_plugin_keeps_its_signal_handlers(pytester):
    pytester.makepyfile(test_fork=FORKED_CHILD)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", timeout=60)
    result.assert_outcomes(passed=1)


#: records SIGTERM's handler in the test body, around the measurement and while the verdict is kept
WATCH_HANDLERS = """
import json, signal
from pathlib import Path

SEEN = []

def _name():
    handler = signal.getsignal(signal.SIGTERM)
    return handler.name if isinstance(handler, signal.Handlers) else handler.__name__

def pytest_aaco_verdict(config, item, record):
    SEEN.append(("saving", _name()))

def pytest_unconfigure(config):
    Path("seen.json").write_text(json.dumps(SEEN))
"""
WATCHED_TEST = """
import signal
from conftest import SEEN, _name

def test_latency(benchmark_model):
    SEEN.append(("before", _name()))
    benchmark_model()
    SEEN.append(("after", _name()))
"""


def test_handlers_are_replaced_only_while_measuring_or_saving(aaco_project):
    aaco_project.registry()
    aaco_project.pytester.makeconftest(WATCH_HANDLERS)
    aaco_project.tests(WATCHED_TEST)
    result = aaco_project.run_subprocess("--aaco-save-baseline", "--aaco-baseline-dir=bl")
    result.assert_outcomes(passed=1)
    seen = json.loads((aaco_project.pytester.path / "seen.json").read_text())
    assert seen == [["before", "SIG_DFL"], ["after", "SIG_DFL"], ["saving", "_interrupt"]]


#: the first SIGTERM is swallowed (as clean-up code that catches everything would), the second must end the process
SWALLOW_THEN_SIGTERM = """
import os, signal, time

def pytest_aaco_verdict(config, item, record):
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    except KeyboardInterrupt:
        pass
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
"""


def test_a_second_sigterm_while_saving_ends_the_process(aaco_project):
    aaco_project.registry()
    aaco_project.pytester.makeconftest(SWALLOW_THEN_SIGTERM)
    aaco_project.tests()
    result = aaco_project.run_subprocess("--aaco-save-baseline", "--aaco-baseline-dir=bl")
    # ended by the second SIGTERM (the conftest then sleeps 30 s): by its default action (-15), or by the
    # plugin's exit for it (128 + 15) when the OS delivers it while the plugin's handler is still running
    assert result.ret in (-signal.SIGTERM, 128 + signal.SIGTERM), result.stdout.str()
