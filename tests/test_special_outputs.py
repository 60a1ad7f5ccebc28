"""Output paths that are not regular files: a report never replaces one.

``--aaco-junit=/dev/null`` as root used to rename the report over ``/dev/null``, which became a
regular file that every later ``> /dev/null`` appended to. Now every writer (JUnit, HTML, the
bundle, the GitHub job summary, baseline saves: all through :mod:`pytest_aaco.jsonio`) writes a
character device or a FIFO directly (a FIFO nobody reads fails at once instead of blocking), follows
a symlink to the file it names, and refuses a folder, a socket or a block device.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_aaco.jsonio import append_text, atomic_write_json, atomic_write_text

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX special files")


def _char_device(folder: Path) -> Path:
    """A character device to write to: a fresh node like /dev/null where this account may create one
    (root), else /dev/null itself (which the fixed code only writes to)."""
    node = folder / "null-device"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # Linux: major 1, minor 3 is /dev/null
    except (OSError, AttributeError):
        return Path("/dev/null")
    return node


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = Path(f"/tmp/aaco-sock-{os.getpid()}-{time.monotonic_ns()}")  # AF_UNIX paths are short
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        yield path
    finally:
        server.close()
        path.unlink(missing_ok=True)


def _read_fifo(path: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(path, "rb") as handle:
            into.append(handle.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


WRITERS: dict[str, Callable[[Path], object]] = {
    "atomic_write_text": lambda p: atomic_write_text(p, "report\n"),
    "atomic_write_json": lambda p: atomic_write_json(p, {"a": 1}),
    "append_text": lambda p: append_text(p, "summary\n"),
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_character_device_is_written_not_replaced(tmp_path: Path, writer: str) -> None:
    device = _char_device(tmp_path)
    WRITERS[writer](device)
    assert stat.S_ISCHR(device.stat().st_mode)
    assert not list(device.parent.glob(f".{device.name}.*.tmp"))


@pytest.mark.parametrize("writer", list(WRITERS))
def test_fifo_with_a_reader_gets_the_text(tmp_path: Path, writer: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    thread = _read_fifo(fifo, got)
    deadline = time.monotonic() + 5
    while True:  # the reader may not have opened its end yet
        try:
            WRITERS[writer](fifo)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    thread.join(5)
    assert got and got[0].strip() and stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_fifo_without_a_reader_fails_at_once(tmp_path: Path, writer: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as info:  # a blocking open would hang here; ENXIO comes from O_NONBLOCK only
        WRITERS[writer](fifo)
    assert "FIFO that no process is reading" in str(info.value.strerror)
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_folder_and_socket_are_refused(tmp_path: Path, unix_socket: Path, writer: str) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(OSError, match="folder"):
        WRITERS[writer](folder)
    assert folder.is_dir()
    with pytest.raises(OSError, match="socket"):
        WRITERS[writer](unix_socket)
    assert stat.S_ISSOCK(unix_socket.stat().st_mode)


@pytest.mark.parametrize("writer", ["atomic_write_text", "atomic_write_json"])
def test_symlink_to_a_file_keeps_the_link(tmp_path: Path, writer: str) -> None:
    real = tmp_path / "real" / "report.txt"
    real.parent.mkdir()
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    WRITERS[writer](link)
    assert link.is_symlink() and real.read_text(encoding="utf-8") != "old"


# ---------------------------------------------------------------- through pytest


def test_reports_to_special_files_leave_them_as_they_are(aaco_project, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    device = _char_device(tmp_path)
    fifo = tmp_path / "summary.fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "report-folder"
    folder.mkdir()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fifo))  # nobody reads it: must not block the session
    result = aaco_project.run_subprocess(f"--aaco-junit={device}", f"--aaco-html={folder}", timeout=300)
    assert result.ret == 0, result.stdout.str()
    assert stat.S_ISCHR(device.stat().st_mode)
    assert stat.S_ISFIFO(fifo.stat().st_mode) and folder.is_dir() and not list(folder.iterdir())
    text = result.stdout.str()
    assert "FIFO that no process is reading" in text and "is a folder, not a file" in text, text


@pytest.mark.parametrize("option", ["--aaco-junit", "--aaco-html"])
@pytest.mark.parametrize("stream", ["/dev/stdout", "/dev/stderr"])
def test_a_report_to_a_redirected_stream_adds_to_the_log_and_keeps_it(aaco_project, option, stream):
    """pytester's subprocess has stdout and stderr redirected to regular files (as ``pytest > log``):
    the report is added to that log, and the results table and pytest's summary stay in it."""
    aaco_project.registry()
    aaco_project.tests()
    result = aaco_project.run_subprocess(f"{option}={stream}", "--aaco-rounds=3", "--aaco-warmup=1")
    out, err = result.stdout.str(), result.stderr.str()
    log = out if stream == "/dev/stdout" else err
    assert "1 passed" in out, out + err  # pytest's summary survives
    assert ("<testsuite" in log) if option == "--aaco-junit" else ("<html" in log.lower()), log[-2000:]
    assert result.ret == 0, out + err


def test_a_descriptor_path_is_written_through_the_descriptor(tmp_path):
    log = tmp_path / "log"
    with open(log, "w") as handle:
        handle.write("before\n")
        handle.flush()
        atomic_write_text(f"/dev/fd/{handle.fileno()}", "report\n")
        handle.write("after\n")
    assert log.read_text() == "before\nreport\nafter\n"  # neither replaced nor overwritten by what follows
