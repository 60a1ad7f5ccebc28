"""The device lock: its wait timed and reported, a timeout with a clear error, and a lock file of another
account in a sticky folder (``/tmp``), which filelock 4.x refuses.

Another process really holds the lock (``flock`` on the same file) in each test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest

from pytest_aaco.measure import devicelock

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the lock is flock(2) on POSIX")

WORKTREE = Path(__file__).parents[1]
#: a process holding the host's device lock: argv = lock folder, file written once held, seconds to hold,
#: and optionally a file to wait for before the seconds start (the item under test has begun)
HOLDER = """
import sys, time
from pathlib import Path
from pytest_aaco.measure import devicelock

devicelock.LOCK_ROOT = Path(sys.argv[1])
with devicelock.hold_device(False, 0, "holder[cpu]") as hold:
    assert hold, "not held"
    Path(sys.argv[2]).write_text("held")
    if len(sys.argv) > 4:
        while not Path(sys.argv[4]).exists():
            time.sleep(0.02)
    time.sleep(float(sys.argv[3]))
"""


def _holder(locks: Path, tmp: Path, hold_s: float, after: Path | None = None) -> subprocess.Popen[bytes]:
    """Start a process holding ``host.lock`` under *locks* through the plugin and wait until it does."""
    ready = tmp / f"held-{time.monotonic_ns()}"
    args = [sys.executable, "-c", HOLDER, str(locks), str(ready), str(hold_s), *([str(after)] if after else [])]
    env = {**os.environ, "PYTHONPATH": str(WORKTREE), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.Popen(args, env=env, cwd=tmp)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None, f"the holder ended with {proc.returncode}"
        assert time.monotonic() < deadline, "the holder never took the lock"
        time.sleep(0.02)
    return proc


@pytest.fixture
def locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "pytest-aaco-locks"
    monkeypatch.setattr(devicelock, "LOCK_ROOT", folder)
    old = devicelock.set_lock_timeout(None)
    yield folder
    devicelock.set_lock_timeout(old)


def test_a_wait_is_timed_told_once_and_names_the_holder(locks: Path, tmp_path: Path) -> None:
    holder = _holder(locks, tmp_path, 2.0)
    told: list[str] = []
    try:
        with devicelock.hold_device(False, 0, "tiny[cpu]", waiting=told.append) as hold:
            assert hold and hold.held
    finally:
        holder.wait(30)
    assert hold.wait_s > 1.0, hold.wait_s  # the holder keeps it 2 s after taking it: load only lengthens that
    assert len(told) == 1, told
    assert f"tiny[cpu]: waiting for the device lock {locks / 'host.lock'}, held by pid {holder.pid} on" in told[0]
    assert "holder[cpu]" in told[0] and "(--aaco-lock-timeout=off)" in told[0]
    with devicelock.hold_device(False, 0, "tiny[cpu]", waiting=told.append) as again:  # free now: no wait
        assert again.held and len(told) == 1  # no second "waiting" line: it did not wait


def test_the_lock_timeout_ends_the_wait_with_a_message_naming_lock_holder_and_option(locks: Path,
                                                                                     tmp_path: Path) -> None:
    holder = _holder(locks, tmp_path, 120)
    devicelock.set_lock_timeout(0.5)
    start = time.monotonic()
    try:
        with pytest.raises(devicelock.DeviceLockTimeout) as caught, devicelock.hold_device(False, 0, "tiny[cpu]"):
            pytest.fail("the lock was taken while another process held it")
    finally:
        holder.kill()
        holder.wait(30)
    took = time.monotonic() - start
    assert 0.5 <= took < 120, took  # the timeout ended the wait, not the holder letting go after 120 s
    message = str(caught.value)
    assert message.startswith(f"tiny[cpu]: the device lock {locks / 'host.lock'} stayed held by another benchmark"
                              f" (pid {holder.pid} on ")
    assert "for 0.5 s (--aaco-lock-timeout=0.5, ini aaco_lock_timeout); not measured" in message
    assert "\n" not in message


def test_what_a_holder_wrote_is_shown_as_printable_text_only(locks: Path) -> None:
    locks.mkdir(parents=True)
    os.chmod(locks, 0o1777)
    (locks / "host.lock").write_bytes(b"pid 1 \x1b[31m::error::owned\r\n" + b"x" * 1000)
    fd = os.open(locks / "host.lock", os.O_RDONLY)
    try:
        note = devicelock._holder(fd)
    finally:
        os.close(fd)
    assert note is not None and "\x1b" not in note and "\r" not in note and "\n" not in note
    assert note.startswith("pid 1 [31m::error::owned") and len(note) == devicelock.HOLDER_CHARS


def test_a_note_is_cleared_on_release_and_one_left_by_a_gone_process_is_not_shown(locks: Path) -> None:
    with devicelock.hold_device(False, 0, "tiny[cpu]") as hold:
        assert f"pid {os.getpid()} on {socket.gethostname()}" in (locks / "host.lock").read_text()
    assert hold.held and (locks / "host.lock").read_text() == ""  # a holder that writes none is not misnamed
    gone = subprocess.Popen(["true"])
    gone.wait()
    for pid, shown in ((gone.pid, False), (os.getpid(), True)):
        (locks / "host.lock").write_text(f"pid {pid} on {socket.gethostname()}, user x, tiny[cpu], since now\n")
        fd = os.open(locks / "host.lock", os.O_RDONLY)
        try:
            assert (devicelock._holder(fd) is not None) == shown, pid
        finally:
            os.close(fd)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to make files of other uids")
@pytest.mark.skipif(shutil.which("flock") is None, reason="util-linux flock(1) holds the lock as the third account")
def test_a_lock_file_of_a_third_account_in_a_sticky_folder_is_taken_and_still_excludes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """filelock 4.x refuses it (every item warned, and the suggested chmod 666 was already in place); the
    plugin takes it, and while a third account holds it (flock(1), the same flock(2) lock), the plugin waits."""
    from filelock import FileLock

    folder_owner, file_owner, third = 61001, 61002, 61003
    base = Path(tempfile.mkdtemp(prefix="aaco-lock-test-", dir="/tmp"))  # reachable by the other accounts
    try:
        os.chmod(base, 0o755)
        locks = base / "pytest-aaco-locks"
        locks.mkdir()
        os.chmod(locks, 0o1777)
        os.chown(locks, folder_owner, folder_owner)
        monkeypatch.setattr(devicelock, "LOCK_ROOT", locks)
        path = locks / "host.lock"
        path.touch()
        os.chmod(path, 0o666)
        os.chown(path, file_owner, file_owner)
        with pytest.raises(PermissionError, match=f"lock file belongs to uid {file_owner}"):
            FileLock(str(path)).acquire(timeout=1)  # filelock's own check (filelock/_filesystem/_ownership.py)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no AacoLockWarning
            with devicelock.hold_device(False, 0, "tiny[cpu]") as hold:
                assert hold.held
        ready = locks / "third-holds"
        holder = subprocess.Popen(["flock", "-x", str(path), "sh", "-c", f"echo held > {ready}; sleep 120"],
                                  user=third)
        try:
            deadline = time.monotonic() + 30
            while not ready.exists():
                assert holder.poll() is None and time.monotonic() < deadline, "the third account never held it"
                time.sleep(0.02)
            old = devicelock.set_lock_timeout(0.5)
            try:
                with pytest.raises(devicelock.DeviceLockTimeout, match="stayed held by another benchmark"), \
                        devicelock.hold_device(False, 0, "tiny[cpu]"):
                    pytest.fail("two accounts held the device lock at once")
            finally:
                devicelock.set_lock_timeout(old)
        finally:
            holder.kill()
            holder.wait(30)
        assert path.stat().st_uid == file_owner  # left as it was: never replaced
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- through the plugin

#: conftest of the projects: a private lock folder, and a file saying the item has begun
CONFTEST = """
from pathlib import Path
import pytest
from pytest_aaco.measure import devicelock

devicelock.LOCK_ROOT = Path({locks!r})

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    Path("started").write_text(item.nodeid)
    return (yield)
"""


def _run(aaco_project, *extra: str) -> subprocess.CompletedProcess[str]:
    root = aaco_project.pytester.path
    args = [a for a in aaco_project.args("--aaco-reference=none", *extra) if a != "--aaco-no-bundle"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(WORKTREE), str(root)])}
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=240)


@pytest.mark.slow
def test_an_items_wait_is_in_its_record_the_bundle_summary_and_the_terminal(aaco_project, tmp_path: Path) -> None:
    root = aaco_project.pytester.path
    locks = tmp_path / "locks"
    (root / "conftest.py").write_text(CONFTEST.format(locks=str(locks)))
    holder = _holder(locks, tmp_path, 2.5, after=root / "started")
    try:
        proc = _run(aaco_project, "-v")
    finally:
        holder.kill()
        holder.wait(30)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert f"tiny[cpu]: waiting for the device lock {locks / 'host.lock'}, held by pid {holder.pid}" in out, out
    assert f"tiny[cpu]: took the device lock {locks / 'host.lock'} after waiting" in out, out
    assert "device lock: 1 item(s) waited" in out and "(longest: tiny[cpu]," in out, out
    [bundle] = list((root / ".aaco" / "sessions").iterdir())
    [item] = [json.loads(p.read_text()) for p in bundle.rglob("*.json") if '"nodeid"' in p.read_text()]
    assert item["result"]["lock_wait_s"] >= 2.0, item["result"]["lock_wait_s"]
    summary = json.loads((bundle / "session_meta.json").read_text())["summary"]["device_lock"]
    assert summary["items"] == 1 and summary["longest"]["label"] == "tiny[cpu]"
    assert summary["total_s"] == pytest.approx(item["result"]["lock_wait_s"], abs=0.01)


@pytest.mark.slow
def test_an_item_that_never_gets_the_lock_fails_with_one_line_and_the_run_goes_on(aaco_project,
                                                                                 tmp_path: Path) -> None:
    root = aaco_project.pytester.path
    locks = tmp_path / "locks"
    (root / "conftest.py").write_text(CONFTEST.format(locks=str(locks)))
    (root / "pytest.ini").write_text("[pytest]\naaco_lock_timeout = 1\n")  # the ini key
    aaco_project.registry("models:\n  tiny:\n    path: tiny.onnx\n  tiny2:\n    path: tiny.onnx\n")
    holder = _holder(locks, tmp_path, 120)
    try:
        proc = _run(aaco_project)
    finally:
        holder.kill()
        holder.wait(30)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "2 failed" in out, out
    assert (f"tiny[cpu]: the device lock {locks / 'host.lock'} stayed held by another benchmark (pid {holder.pid} on"
            in out), out
    assert "for 1 s (--aaco-lock-timeout=1, ini aaco_lock_timeout); not measured" in out
    assert "Traceback" not in out


def test_the_option_takes_seconds_and_off() -> None:
    from pytest_aaco.options import lock_timeout

    assert lock_timeout("off") is None and lock_timeout("0") is None
    assert lock_timeout("3600") == 3600.0 and lock_timeout("90s") == 90.0
    for bad in ("-1", "soon", ""):
        with pytest.raises(ValueError):
            lock_timeout(bad)


def test_both_timeouts_share_one_parser_with_their_own_words() -> None:
    """--aaco-item-timeout and --aaco-lock-timeout parse seconds and off alike (options.seconds_or_off):
    the same numbers, each its own "no limit" value and its own example in the error."""
    import math

    from pytest_aaco.options import item_timeout, lock_timeout, seconds_or_off

    for text, seconds in (("600", 600.0), (" 90s ", 90.0), ("0.5", 0.5)):
        assert item_timeout(text) == lock_timeout(text) == seconds_or_off(text, None, "x") == seconds
    for off in ("off", "OFF", "0", "0s"):
        assert item_timeout(off) == math.inf and lock_timeout(off) is None
    assert item_timeout("auto") is None
    with pytest.raises(ValueError, match=r"^expected a number of seconds like 600, auto or off, got 'soon'$"):
        item_timeout("soon")
    with pytest.raises(ValueError, match=r"^expected a number of seconds like 3600, or off, got 'auto'$"):
        lock_timeout("auto")
    for parse in (item_timeout, lock_timeout):
        with pytest.raises(ValueError, match=r"^must be positive, got '-1'$"):
            parse("-1")


def test_a_lock_timeout_before_the_extra_passes_is_a_note(monkeypatch) -> None:
    """The extra passes (cold start, kernels, profile) take the device lock again after the rounds; a lock
    held past --aaco-lock-timeout then skips them with a note, as a failing pass does, and the measured
    item is still judged (before: the raw DeviceLockTimeout made the item an error row)."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from pytest_aaco import extra_passes
    from pytest_aaco.benchmark import LockTimeout

    @contextmanager
    def held_elsewhere(*args, **kwargs):
        raise LockTimeout("gpu-x.lock stayed held by another benchmark for 5 s (--aaco-lock-timeout=5)")
        yield  # pragma: no cover

    monkeypatch.setattr(extra_passes, "device_lock", held_elsewhere)
    ran = []
    monkeypatch.setattr(extra_passes, "_run_passes", lambda *args: ran.append(args))
    run = SimpleNamespace(provider=SimpleNamespace(short="cuda"), config=SimpleNamespace(device_id=0),
                          model=SimpleNamespace(name="resnet50"))
    insight = extra_passes.measure_insight(run, profile=True)
    assert not ran
    assert insight.notes == ["extra passes not run: gpu-x.lock stayed held by another benchmark for 5 s"
                             " (--aaco-lock-timeout=5)"]


def test_the_device_lock_names_its_timeout_as_the_items_error(tmp_path, monkeypatch) -> None:
    """benchmark.device_lock is the one place a lock timeout becomes LockTimeout (a SessionError: the item
    fails with the line), for the session build, the rounds and the extra passes alike."""
    from pytest_aaco import benchmark
    from pytest_aaco.measure.inference import SessionError

    def timed_out(*args, **kwargs):
        raise devicelock.DeviceLockTimeout("held by pid 1")

    monkeypatch.setattr(benchmark, "gpu_locks", timed_out)
    with pytest.raises(benchmark.LockTimeout, match="held by pid 1") as caught, \
            benchmark.device_lock(SimpleProvider(), 0, "m[cuda]"):
        pass
    assert isinstance(caught.value, SessionError)


class SimpleProvider:
    short, is_gpu = "cuda", True
