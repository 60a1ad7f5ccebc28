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


def test_only_default_handlers_are_replaced_and_restored():
    from pytest_aaco.plugin import Terminated, _interrupt, interrupt_on_termination, restore_signals

    before = signal.getsignal(signal.SIGTERM)
    replaced = interrupt_on_termination()
    try:
        if before == signal.SIG_DFL:
            assert signal.getsignal(signal.SIGTERM) is _interrupt
        else:  # the outer pytest-aaco (or the user) already installed one: left alone
            assert signal.SIGTERM not in replaced
        with pytest.raises(Terminated):
            _interrupt(signal.SIGTERM, None)
    finally:
        restore_signals(replaced)
    assert signal.getsignal(signal.SIGTERM) == before
