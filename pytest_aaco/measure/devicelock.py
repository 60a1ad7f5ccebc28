"""The device lock: never two benchmarks on one device at once, across processes, jobs and users.

Lock files live in one folder per host, ``/tmp/pytest-aaco-locks`` (the system temporary folder
elsewhere), whatever a job's ``TMPDIR``: two CI jobs with different temporary folders still take the
same lock. The folder is world-writable with the sticky bit (mode 1777, as ``/tmp`` itself) and the
lock files are 0666, so every user of the host can take them and none can delete another's.

On POSIX the lock is ``flock(LOCK_EX)`` on the file, taken here directly, the same call filelock makes
(filelock/_native/_unix.py), so runs of either kind exclude each other. filelock 4.x itself refuses a lock
file in a sticky folder that belongs neither to this account nor to the folder's owner
(filelock/_filesystem/_ownership.py ``foreign_owner``, raised from ``_finalize_locked_fd``: "lock file
belongs to uid N, not to this process's account or the directory's owner"), which is every third account
on a shared host: that owner could replace the file during a hold. The plugin's lock files are never
removed or replaced by the plugin, and a file replaced all the same is noticed after the lock is taken (the
path no longer names the locked file) and locked again. Elsewhere (Windows) filelock's ``FileLock`` is used.

The wait is timed and reported (:class:`DeviceHold`), bounded by :func:`set_lock_timeout` (``--aaco-lock-timeout``;
:class:`DeviceLockTimeout` names the lock file and who holds it: each holder writes its pid, host, user and
item into the file). The lock is otherwise a courtesy, never a reason to fail: when it cannot be taken at
all (a folder or file another user made without write access, a read-only filesystem), :func:`hold_device`
warns (:class:`~pytest_aaco.warnings.AacoLockWarning`) and the benchmark runs without it.
"""

from __future__ import annotations

import errno
import getpass
import os
import re
import socket
import stat
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: filelock's lock instead
    fcntl = None  # type: ignore[assignment]

from pytest_aaco.warnings import AacoLockWarning

#: the folder of device lock files; None: ``$AACO_LOCK_DIR``, else ``/tmp/pytest-aaco-locks`` (see :func:`lock_root`)
LOCK_ROOT: Path | None = None
LOCK_FOLDER = "pytest-aaco-locks"
#: the environment variable naming another lock folder: one that several containers of a host share
#: (their ``/tmp`` differs), or a folder of its own for a run that must not wait on the host's others
LOCK_DIR_ENV = "AACO_LOCK_DIR"
#: mode of the lock folder (world-writable, sticky) and of each lock file (read-write for all)
FOLDER_MODE, FILE_MODE = 0o1777, 0o666


def lock_root() -> Path:
    """:data:`LOCK_ROOT`; else the folder ``$AACO_LOCK_DIR`` names (:data:`LOCK_DIR_ENV`, when set and not
    empty); else ``/tmp/pytest-aaco-locks`` where ``/tmp`` exists, else ``<tempdir>/pytest-aaco-locks``."""
    if LOCK_ROOT is not None:
        return LOCK_ROOT
    if os.environ.get(LOCK_DIR_ENV):
        return Path(os.environ[LOCK_DIR_ENV])
    base = Path("/tmp") if os.name == "posix" and Path("/tmp").is_dir() else Path(tempfile.gettempdir())
    return base / LOCK_FOLDER


def device_lock_path(is_gpu: bool, device_id: int, name: str | None = None) -> Path:
    """One lock file per device: ``host.lock`` for CPU-side EPs; for a GPU, *name* when given (the
    physical GPU's ``gpu-<uuid or PCI bus id>.lock``, :func:`pytest_aaco.samplers.gpus.gpu_lock_name`:
    the same file whatever the visibility variables of each process, so two pytest processes never
    share a GPU and different GPUs run in parallel), else ``gpu<ID>.lock``."""
    if not is_gpu:
        return lock_root() / "host.lock"
    return lock_root() / (name or f"gpu{device_id}.lock")


def _shared_folder(folder: Path) -> None:
    """Create *folder* as 1777 (umask ignored); leave an existing one as it is."""
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        return
    os.chmod(folder, FOLDER_MODE)


#: seconds between tries while another process holds the lock; a wait longer than NOTICE_S is told
POLL_S, NOTICE_S = 0.1, 1.0
#: characters of the holder's note kept (the file is writable by every user: what it says is untrusted)
HOLDER_CHARS = 160

#: ``--aaco-lock-timeout`` (s) for every hold of this process; None: wait as long as it takes
_TIMEOUT_S: float | None = None


def set_lock_timeout(seconds: float | None) -> float | None:
    """Wait at most *seconds* for a device lock from now on (None: no limit); returns the previous setting."""
    global _TIMEOUT_S
    old, _TIMEOUT_S = _TIMEOUT_S, seconds
    return old


class DeviceLockTimeout(RuntimeError):
    """The device lock stayed held by another process longer than the lock timeout; the message names the
    lock file, who holds it (as its holder wrote) and the option."""


@dataclass
class DeviceHold:
    """One hold of a device lock: its file, whether it is held (the object is truthy then), how long the
    wait for it took (s) and, when there was a wait, who held it (the holder's note, sanitized)."""

    path: Path
    held: bool = False
    wait_s: float = 0.0
    holder: str | None = None

    def __bool__(self) -> bool:
        return self.held


@contextmanager
def hold_device(is_gpu: bool, device_id: int, label: str = "", name: str | None = None,
                waiting: Callable[[str], None] | None = None) -> Iterator[DeviceHold]:
    """Hold the device's lock while the block runs; yields a :class:`DeviceHold` (truthy when held).

    Waits for another benchmark on the device to finish, at most the seconds :func:`set_lock_timeout` set
    (then raises :class:`DeviceLockTimeout`); *waiting*, when given, is called once with a line saying who
    holds the lock when the wait passes :data:`NOTICE_S`. *name* is a GPU lock's file name
    (:func:`device_lock_path`). When the lock cannot be taken at all (``OSError``: permissions, a read-only
    or odd filesystem), warns with :class:`~pytest_aaco.warnings.AacoLockWarning` naming the lock file,
    yields an unheld hold and the caller measures anyway: a missing lock may let two benchmarks share the
    device, which the warning says; it never fails the item.
    """
    path = device_lock_path(is_gpu, device_id, name)
    hold = DeviceHold(path)
    release: Callable[[], None] | None = None
    try:
        _shared_folder(path.parent)
        release = _acquire(path, hold, label, waiting)
    except OSError as exc:
        warnings.warn(AacoLockWarning(
            f"{label or 'benchmark'}: could not take the device lock {path} ({exc.strerror or exc}{_owner(path)});"
            " measured without it, so another benchmark may have shared the device. Make the file writable"
            " for every user (chmod 666) or remove it (its folder should be mode 1777 like /tmp)"),
            stacklevel=3)
    try:
        yield hold
    finally:
        if release is not None:
            release()


def _acquire(path: Path, hold: DeviceHold, label: str, waiting: Callable[[str], None] | None
             ) -> Callable[[], None]:
    """Take the lock at *path*, filling *hold*; returns the function that gives it back. Raises OSError
    when the file cannot be opened or locked, :class:`DeviceLockTimeout` past the timeout."""
    limit = _TIMEOUT_S
    start = time.monotonic()
    told = False
    if os.name != "posix":  # pragma: no cover - Windows: filelock's LockFileEx lock
        return _acquire_filelock(path, hold, start, limit)
    fd = _open(path)
    try:
        while True:
            if _try_flock(fd):
                if _same_file(path, fd):
                    break
                os.close(fd)  # replaced while we waited: lock the file the path names now
                fd = _open(path)
                continue
            waited = time.monotonic() - start
            if hold.holder is None or not told:
                hold.holder = _holder(fd)
            if limit is not None and waited >= limit:
                raise DeviceLockTimeout(_timeout_text(path, hold.holder, label, limit))
            if waiting is not None and not told and waited >= NOTICE_S:
                told = True
                waiting(f"{label or 'benchmark'}: waiting for the device lock {path}"
                        f"{f', held by {hold.holder}' if hold.holder else ''}"
                        f" (--aaco-lock-timeout={'off' if limit is None else f'{limit:g}'})")
            time.sleep(POLL_S)
    except BaseException:
        os.close(fd)
        raise
    hold.held, hold.wait_s = True, time.monotonic() - start
    _write_note(fd, label)

    def release() -> None:
        try:
            with suppress(OSError):
                os.ftruncate(fd, 0)  # the note goes with the hold: a holder that writes none is not misnamed
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    return release


def _open(path: Path) -> int:
    """Open (or create, 0666 whatever the umask) the lock file for reading and writing."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except OSError:
        pass  # another user's file: its mode is theirs to set
    return fd


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
            return False
        raise
    return True


def _same_file(path: Path, fd: int) -> bool:
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except OSError:
        return False


def _write_note(fd: int, label: str) -> None:
    """Write who holds the lock into its file (pid, host, user, item), for those who wait; best effort."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in this environment
        user = str(os.getuid()) if hasattr(os, "getuid") else "?"
    since = datetime.now(timezone.utc).strftime("%H:%M:%S UTC")
    note = f"pid {os.getpid()} on {socket.gethostname()}, user {user}, {label or 'benchmark'}, since {since}\n"
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, note.encode("utf-8", "replace"), 0)
    except OSError:
        pass


def _holder(fd: int) -> str | None:
    """The holder's note in the lock file, printable ASCII only and cut to :data:`HOLDER_CHARS`; None if empty,
    or when it names a process of this host that is gone (a holder killed before it could clear its note,
    while a holder that writes none, such as an older pytest-aaco through filelock, holds the lock now)."""
    try:
        raw = os.pread(fd, 4 * HOLDER_CHARS, 0)
    except OSError:
        return None
    text = "".join(c if " " <= c <= "~" else " " for c in raw.decode("ascii", "replace").strip())
    text = " ".join(text.split())[:HOLDER_CHARS]
    found = re.match(r"pid (\d+) on (\S+),", text)
    if found and found.group(2) == socket.gethostname() and not _alive(int(found.group(1))):
        return None
    return text or None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it exists
        return True
    return True


def _timeout_text(path: Path, holder: str | None, label: str, limit: float) -> str:
    return (f"{label or 'benchmark'}: the device lock {path} stayed held by another benchmark"
            f"{f' ({holder})' if holder else ''} for {limit:g} s (--aaco-lock-timeout={limit:g}, ini"
            " aaco_lock_timeout); not measured: run it when the device is free, raise the timeout, or set it to"
            " off to wait as long as it takes")


def _acquire_filelock(path: Path, hold: DeviceHold, start: float, limit: float | None
                      ) -> Callable[[], None]:  # pragma: no cover - Windows
    from filelock import FileLock, Timeout

    lock = FileLock(str(path), mode=FILE_MODE)
    try:
        lock.acquire(timeout=-1 if limit is None else limit, poll_interval=POLL_S)
    except Timeout:
        raise DeviceLockTimeout(_timeout_text(path, None, "", float(limit or 0))) from None
    hold.held, hold.wait_s = True, time.monotonic() - start
    return lock.release


def _owner(path: Path) -> str:
    """``, owned by uid N, mode -rw-r--r--`` of *path* (or its folder), for the warning; ``""`` if unreadable."""
    try:
        info = path.stat() if path.exists() else path.parent.stat()
    except OSError:
        return ""
    return f", owned by uid {info.st_uid}, mode {stat.filemode(info.st_mode)}"
