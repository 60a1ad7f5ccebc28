"""SIGTERM and SIGINT at a moment inside the measurement: no temporary folder is left, no file is
half-written, the work tree is untouched (issue 22, "Signals").

CI systems cancel with SIGTERM (GitLab, Jenkins, ``docker stop``); pytest cleans up only on
SIGINT, so the plugin turns SIGTERM and SIGHUP into the same interruption.
"""

from __future__ import annotations

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

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    threading.Timer({delay}, os.kill, (os.getpid(), signal.{signal})).start()
    return (yield)
"""
REGISTRY = """
models:
  net:
    path: net.onnx
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def side_by_side(aaco_project):
    root = aaco_project.pytester.path
    shutil.copy(aaco_project.model, root / "net.onnx")
    aaco_project.registry(REGISTRY)
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "base")
    import onnx

    from pytest_aaco.measure.modelgen import add_extra_work

    onnx.save(add_extra_work(onnx.load(str(root / "net.onnx")), matmuls=4, size=64), str(root / "net.onnx"))
    _git(root, "commit", "-qam", "change")
    return aaco_project


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_during_a_side_by_side_run_leaves_no_temporary_folder(side_by_side, tmp_path, monkeypatch, sig):
    root = side_by_side.pytester.path
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    (root / "conftest.py").write_text(KILLER.format(delay=0.3, signal=sig))
    result = side_by_side.run_subprocess("--aaco-compare=HEAD~1", "--aaco-compare-budget=60",
                                         "--aaco-intra-op-threads=1", timeout=180)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert "KeyboardInterrupt" in result.stdout.str() or "Terminated" in result.stdout.str()
    assert not [p.name for p in tmp.iterdir() if p.name.startswith(TREE_PREFIX)]
    assert _git(root, "status", "--porcelain", "--untracked-files=no") == ""  # tracked files untouched


def test_sigterm_during_a_save_leaves_no_half_written_file(aaco_project, tmp_path):
    root = aaco_project.pytester.path
    (root / "conftest.py").write_text(KILLER.format(delay=0.3, signal="SIGTERM"))
    result = aaco_project.run_subprocess("--aaco-save-baseline", "--aaco-baseline-dir=bl", "--aaco-rounds=400",
                                         timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    written = [p for p in (root / "bl").rglob("*")] if (root / "bl").exists() else []
    assert not [p for p in written if p.is_file() and not p.name.endswith(".json")], written
    for path in written:
        if path.is_file():
            import json

            json.loads(path.read_text())  # whole, or not there


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
