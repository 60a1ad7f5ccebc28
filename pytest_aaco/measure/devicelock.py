"""The device lock: never two benchmarks on one device at once, across processes, jobs and users.

Lock files live in one folder per host, ``/tmp/pytest-aaco-locks`` (the system temporary folder
elsewhere), whatever a job's ``TMPDIR``: two CI jobs with different temporary folders still take the
same lock. The folder is world-writable with the sticky bit (mode 1777, as ``/tmp`` itself) and the
lock files are 0666, so every user of the host can take them and none can delete another's.

The lock is a courtesy, never a reason to fail: when it cannot be taken (a folder or file another
user made without write access, a read-only filesystem), :func:`hold_device` warns
(:class:`~pytest_aaco.warnings.AacoLockWarning`) and the benchmark runs without it.
"""

from __future__ import annotations

import os
import stat
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_aaco.warnings import AacoLockWarning

#: the folder of device lock files; None: ``/tmp/pytest-aaco-locks`` (see :func:`lock_root`)
LOCK_ROOT: Path | None = None
LOCK_FOLDER = "pytest-aaco-locks"
#: mode of the lock folder (world-writable, sticky) and of each lock file (read-write for all)
FOLDER_MODE, FILE_MODE = 0o1777, 0o666


def lock_root() -> Path:
    """:data:`LOCK_ROOT`, or ``/tmp/pytest-aaco-locks`` where ``/tmp`` exists, else ``<tempdir>/pytest-aaco-locks``."""
    if LOCK_ROOT is not None:
        return LOCK_ROOT
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


@contextmanager
def hold_device(is_gpu: bool, device_id: int, label: str = "", name: str | None = None) -> Iterator[bool]:
    """Hold the device's lock while the block runs; yields whether it is held.

    Waits for another benchmark on the device to finish; *name* is a GPU lock's file name
    (:func:`device_lock_path`). When the lock cannot be taken at all
    (``OSError``: permissions, a read-only or odd filesystem), warns with
    :class:`~pytest_aaco.warnings.AacoLockWarning` naming the lock file, yields False and the caller
    measures anyway: a missing lock may let two benchmarks share the device, which the warning
    says; it never fails the item.
    """
    from filelock import FileLock

    path = device_lock_path(is_gpu, device_id, name)
    lock = FileLock(str(path), mode=FILE_MODE)
    held = False
    try:
        _shared_folder(path.parent)
        lock.acquire()
        held = True
    except OSError as exc:
        warnings.warn(AacoLockWarning(
            f"{label or 'benchmark'}: could not take the device lock {path} ({exc.strerror or exc}{_owner(path)});"
            " measured without it, so another benchmark may have shared the device. Make the file writable"
            " for every user (chmod 666) or remove it (its folder should be mode 1777 like /tmp)"),
            stacklevel=3)
    try:
        yield held
    finally:
        if held:
            lock.release()


def _owner(path: Path) -> str:
    """``, owned by uid N, mode -rw-r--r--`` of *path* (or its folder), for the warning; ``""`` if unreadable."""
    try:
        info = path.stat() if path.exists() else path.parent.stat()
    except OSError:
        return ""
    return f", owned by uid {info.st_uid}, mode {stat.filemode(info.st_mode)}"
