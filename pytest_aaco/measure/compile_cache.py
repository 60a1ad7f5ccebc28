"""The compile cache pytest-aaco owns for compiling execution providers (``--aaco-compile-cache``).

MIGraphX compiles the model while the InferenceSession is created (static shapes) or at its first
run (symbolic dimensions), for 25 s to minutes (ROCm/AMDMIGraphX#4618, #5234); the TensorRT EP
builds an engine and OpenVINO compiles a blob the same way. Without a cache every fresh session
pays it again. ONNX Runtime's own caches are keyed weakly: MIGraphX's ``.mxr`` file name hashes the
model file's *name*, input and node names and shapes, the GPU architecture and the MIGraphX
version, not the weights nor the fp16/int8 options (``migraphx_execution_provider.cc``), so a
baseline side and a candidate side of the same name would load each other's program.

pytest-aaco therefore hands each EP a folder of its own, keyed by

* the side (``baseline`` / ``candidate``: :attr:`~pytest_aaco.measure.providers.ProviderSpec.side`),
* the SHA-256 of the model file's bytes,
* the EP, the onnxruntime version and the provider options that change the program
  (every option except :data:`NOT_PROGRAM` and the cache options themselves),
* for MIGraphX, the ROCm version, the MIGraphX runtime version and the GPU architecture
  (:func:`pytest_aaco.samplers.rocm_install.stack_key`, ``unknown`` where nothing says): the EP names its
  ``.mxr`` after the MIGraphX version it was *built* with, and MIGraphX loads an older ``.mxr`` with a
  warning only, so without them a runner upgraded to a new MIGraphX would keep running the old program,

so two sides never share a folder, and the EP's own weak key only has to tell programs apart within
one. ``auto`` keeps one root per runner (``$RUNNER_NAME``, else the host name), and so does a folder
given while ``$RUNNER_NAME`` is set; a file lock per keyed folder (:class:`CompileHold`) serialises the
compile and save of one program: it is taken before the session is created and held until its first
run has finished (MIGraphX compiles a model with symbolic dimensions at its first run), never during
the measured rounds. The options that point an EP at the folder (:func:`cache_options`):

* MIGraphX: ``migraphx_model_cache_dir`` (every onnxruntime-migraphx wheel 1.23.0-1.27.1 and AMD's fork 6.4 on
  take it). Asked at run time (:mod:`pytest_aaco.measure.migraphx_probe`): an EP that ignores it gets the folder
  through ``ORT_MIGRAPHX_MODEL_CACHE_PATH``; one that refuses it and takes ``migraphx_save_compiled_model``
  (upstream <= 1.22, fork 6.2-6.3) saves and loads one program file in the folder through the
  ``ORT_MIGRAPHX_SAVE/LOAD_COMPILE(D)_*`` variables; one that refuses both (fork 6.1) has no compile cache (status
  ``none``; the item's session build time is its compile time). All set around the session's creation only.
  ``ORT_MIGRAPHX_CACHE_PATH`` is the int8 calibration-table folder in every generation, never a compile cache.
* TensorRT: ``trt_engine_cache_enable`` = 1, ``trt_engine_cache_path`` = folder
  (https://onnxruntime.ai/docs/execution-providers/TensorRT-ExecutionProvider.html).
* OpenVINO: ``cache_dir`` = folder
  (https://onnxruntime.ai/docs/execution-providers/OpenVINO-ExecutionProvider.html).
* VitisAI: ``cache_dir`` / ``cacheDir`` = folder and ``cache_key`` / ``cacheKey`` = the folder's name
  (https://onnxruntime.ai/docs/execution-providers/Vitis-AI-ExecutionProvider.html: the EP compiles into
  ``{cacheDir}/{cacheKey}``); the bytes of its ``config_file`` and ``xclbin`` go into the key.

Each EP's options come from its record (:attr:`pytest_aaco.eps.Ep.compile`): adding a compiling EP is an
entry in :data:`pytest_aaco.eps.ALL`.

Options the user gave win; a session whose cache the user steers is recorded as ``user``.
Whether a session compiled is read from the folder (:func:`cache_status`): a file that appeared or
changed while it was created (and first run) is a ``miss``, a folder that already held the program
and gained nothing is a ``hit``. A miss writes :data:`RECORD` into the folder (the compile's
creation and first-run ms), so a later run that hits still knows what compiling this program cost.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest_aaco.samplers.rocm_install as rocm_stack
from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure import migraphx_probe
from pytest_aaco.measure.migraphx_probe import CACHE_ENVS, NO_CACHE

if TYPE_CHECKING:  # imported where a lock is made: filelock is needed only with a compile cache
    from filelock import FileLock

#: provider options that do not change the compiled program (left out of the key)
NOT_PROGRAM = frozenset({
    "device_id", "migraphx_mem_limit", "migraphx_arena_extend_strategy", "gpu_mem_limit",
    "arena_extend_strategy", "user_compute_stream", "has_user_compute_stream",
})
#: the variables a MIGraphX EP reads its cache folder from (:data:`pytest_aaco.measure.migraphx_probe.CACHE_ENVS`)
MIGRAPHX_CACHE_ENVS = CACHE_ENVS
#: the environment variable through which the MIGraphX EP picks its own cache folder over the options
MIGRAPHX_CACHE_ENV = CACHE_ENVS[0]
#: the lock file inside a keyed folder (:func:`folder_lock`; ``.aaco-`` names are not program files)
LOCK_NAME = ".aaco-compile.lock"
#: how long a session waits for another runner compiling the same program (s)
LOCK_TIMEOUT_S = 3600.0
#: written into a folder by the session that compiled its program: ``{"create_ms", "first_run_ms", ...}``
RECORD = "aaco-compile.json"
#: the three settings of ``--aaco-compile-cache``
AUTO, OFF = "auto", "off"

#: the ``--aaco-compile-cache`` setting in use (:func:`set_compile_cache`), and its folder once resolved
_SETTING: str | Path = OFF


def _no_user_cache() -> Path:
    raise CompileCacheError("--aaco-compile-cache=auto: no user cache folder was configured; give a folder or off")


_USER_CACHE: Callable[[], Path] = _no_user_cache
_RESOLVED: dict[str, Path | None] = {}
#: (path, size, mtime_ns) -> SHA-256 hex of a model file, so a file is read once per session
_SHA: dict[tuple[str, int, int], str] = {}


class CompileCacheError(ValueError):
    """``--aaco-compile-cache`` names a folder that cannot be used; the message says how to fix it."""


def runner_name(environ: Mapping[str, str] | None = None) -> str:
    """The name of this runner for the per-runner folder: ``$RUNNER_NAME`` (GitHub Actions), else the
    host name, reduced to ``[A-Za-z0-9._-]``."""
    env = os.environ if environ is None else environ
    name = env.get("RUNNER_NAME") or socket.gethostname() or "local"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80] or "local"


def resolve_compile_cache(value: str, environ: Mapping[str, str] | None = None,
                          user_cache: Callable[[], Path] = _no_user_cache) -> Path | None:
    """The root folder for ``--aaco-compile-cache`` *value*: None for ``off``; for ``auto``
    ``<user cache dir>/compile/<runner>``, *user_cache* giving the user cache folder (the plugin passes
    :func:`pytest_aaco.measure.modelgen.cache_dir`, which falls back to a temporary folder with a
    warning when HOME is read-only; ``AACO_CACHE_DIR`` / ``XDG_CACHE_HOME`` move it); else the folder
    given (made if missing).

    Raises :class:`CompileCacheError` naming the option when the folder cannot be made.
    """
    text = value.strip()
    if text.lower() == OFF or not text:
        return None
    if text.lower() == AUTO:
        return user_cache() / "compile" / runner_name(environ)
    folder = Path(text).expanduser()
    if (os.environ if environ is None else environ).get("RUNNER_NAME"):  # runners of one host never share a root
        folder = folder / runner_name(environ)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CompileCacheError(f"--aaco-compile-cache={value}: the folder cannot be made ({exc.strerror or exc});"
                                " give a writable folder, auto or off") from None
    return folder


def set_compile_cache(setting: str | Path | None, user_cache: Callable[[], Path] | None = None) -> str | Path:
    """Use *setting* (``auto``, ``off``, a folder; None: off) from the next session on; it is resolved
    (:func:`resolve_compile_cache`, ``auto`` under *user_cache()*) when a compiling EP first needs it.
    Returns the old setting."""
    global _SETTING, _USER_CACHE
    old, _SETTING = _SETTING, (OFF if setting is None else setting)
    if user_cache is not None:
        _USER_CACHE = user_cache
    _RESOLVED.clear()
    return old


def compile_cache_root() -> Path | None:
    """The root folder in use (:func:`set_compile_cache`), or None when off. Raises
    :class:`CompileCacheError` when a folder given cannot be made."""
    key = str(_SETTING)
    if key not in _RESOLVED:
        _RESOLVED[key] = resolve_compile_cache(key, user_cache=_USER_CACHE)
    return _RESOLVED[key]


def model_sha256(model_path: Path) -> str:
    """SHA-256 (hex) of *model_path*'s bytes, read once per (path, size, mtime). Raises OSError."""
    stat = model_path.stat()
    key = (str(model_path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _SHA:
        digest = hashlib.sha256()
        with open(model_path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        _SHA[key] = digest.hexdigest()
    return _SHA[key]


def program_key(short: str, options: Mapping[str, object], ort_version: str,
                stack: Mapping[str, str] | None = None) -> str:
    """A 12-hex key of what changes *short*'s program besides the model: the EP, the onnxruntime
    version, every option but :data:`NOT_PROGRAM` and the EP's cache options
    (:attr:`pytest_aaco.eps.CompileCache.user_keys`), the SHA-256 of each file an option of
    :attr:`~pytest_aaco.eps.CompileCache.file_keys` names (VitisAI's ``config_file``; ``unreadable`` when it
    cannot be read: the EP then fails with its own words), and *stack* (the ROCm / MIGraphX /
    GPU-architecture facts, :func:`stack_for`)."""
    cache = eps.get(short).compile
    own = cache.user_keys if cache else frozenset()
    kept = {k: str(v) for k, v in options.items() if k not in NOT_PROGRAM and k not in own}
    data: dict[str, object] = {"ep": short, "ort": ort_version, "options": kept}
    files = {k: file_sha256(str(options[k])) for k in (cache.file_keys if cache else ()) if options.get(k)}
    if files:
        data["files"] = files
    if stack:
        data["stack"] = dict(stack)
    text = json.dumps(data, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def stack_for(short: str) -> dict[str, str] | None:
    """What besides the options changes *short*'s compiled program on this machine: for MIGraphX the
    ROCm version, the MIGraphX runtime version and the GPU architecture
    (:func:`pytest_aaco.samplers.rocm_install.stack_key`); None for other EPs."""
    cache = eps.get(short).compile
    if cache is None or not cache.rocm_stack:
        return None
    return rocm_stack.stack_key()


def keyed_folder(root: Path, side: str, short: str, model_path: Path, options: Mapping[str, object],
                 ort_version: str, stack: Mapping[str, str] | None = None) -> Path:
    """``root/<side>/<ep>-<model SHA-256, 16 hex>-<program key>``: one folder per side, model bytes
    and program options, and the software stack *stack* (default :func:`stack_for`; :func:`program_key`).
    Raises OSError when the model cannot be read."""
    side_name = re.sub(r"[^A-Za-z0-9_-]+", "_", side) or "candidate"
    key = program_key(short, options, ort_version, stack_for(short) if stack is None else stack)
    return root / side_name / f"{short}-{model_sha256(model_path)[:16]}-{key}"


def folder_lock(folder: Path, timeout: float = LOCK_TIMEOUT_S) -> FileLock:
    """A new file lock (:mod:`filelock`) on keyed *folder*, so two runners or processes never write one
    program at once; the second waits and then finds it (a hit). A context manager; raises
    ``filelock.Timeout`` after *timeout* seconds. Sessions take it through :class:`CompileHold`."""
    from filelock import FileLock

    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / LOCK_NAME), timeout=timeout)


#: this process's lock object per keyed folder: one process holding a folder takes it again at once
#: (``FileLock`` counts), so a session whose first run is still ahead never blocks the next one here
_LOCKS: dict[str, FileLock] = {}


class CompileHold:
    """The lock of one session's keyed *folder* (:func:`folder_lock`), from before the session is created
    until its first run has finished: MIGraphX compiles a model with static shapes while the session is
    created and one with symbolic dimensions at its first run, and saves the program into the folder
    either way. :meth:`acquire` waits up to :data:`LOCK_TIMEOUT_S` seconds (raises ``filelock.Timeout``);
    :meth:`release` may be called any number of times, and runs when the object is collected."""

    def __init__(self, folder: Path | None, timeout: float = LOCK_TIMEOUT_S) -> None:
        self.folder = folder
        self.timeout = timeout
        self._lock: FileLock | None = None

    @classmethod
    def nothing(cls) -> CompileHold:
        """A hold of no folder (no compile cache): acquiring and releasing it do nothing."""
        return cls(None)

    def acquire(self) -> CompileHold:
        """Take the folder's lock (again, when this process holds it already); returns self."""
        if self._lock is None and self.folder is not None:
            key = str(self.folder.resolve())
            lock = _LOCKS.get(key)
            if lock is None:  # not thread-local: a hold collected in another thread still gives its share back
                from filelock import FileLock

                self.folder.mkdir(parents=True, exist_ok=True)
                lock = _LOCKS[key] = FileLock(str(self.folder / LOCK_NAME), timeout=self.timeout, thread_local=False)
            lock.acquire(timeout=self.timeout)
            self._lock = lock
        return self

    @property
    def held(self) -> bool:
        return self._lock is not None

    def release(self) -> None:
        """Give the lock back (this hold's share of it); nothing when not held."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def __enter__(self) -> CompileHold:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown: the OS frees the lock with the process
            pass


def user_steered(short: str, options: Mapping[str, object]) -> bool:
    """Whether the user's *options* already point *short*'s EP at a cache of their own."""
    cache = eps.get(short).compile
    return cache is not None and bool(cache.user_keys & set(options))


def cache_options(short: str, folder: Path) -> JSONDict:
    """The provider options that point *short*'s EP at *folder* (its record's
    :attr:`~pytest_aaco.eps.Ep.compile`, the folder's name as the cache key); ``{}`` for an EP that does not
    compile."""
    cache = eps.get(short).compile
    return dict(cache.options_for(str(folder), folder.name)) if cache else {}


def file_sha256(path: str) -> str:
    """SHA-256 (hex) of the file at *path*, or ``unreadable`` when it cannot be read."""
    try:
        return model_sha256(Path(path))
    except OSError:
        return "unreadable"


def cache_env(folder: Path) -> dict[str, str]:
    """The environment that points a MIGraphX EP ignoring ``migraphx_model_cache_dir`` at *folder*."""
    return migraphx_probe.cache_env(str(folder))


@dataclass(frozen=True)
class CacheUse:
    """The folder one session was given and what it held before: ``files`` maps a file's name to
    (size in bytes, mtime ns). ``folder`` None: the session has no plugin-owned cache
    (``reason`` says why: ``off``, ``user``, ``not compiling``)."""

    folder: Path | None
    files: tuple[tuple[str, int, int], ...] = ()
    reason: str = ""

    @classmethod
    def none_here(cls, planned: CacheUse) -> CacheUse:
        """No cache on this build (:data:`~pytest_aaco.measure.migraphx_probe.NO_CACHE`): the *planned* folder is
        removed when still empty, and the session's status is ``none``."""
        if planned.folder is not None and not planned.files:
            try:
                planned.folder.rmdir()
            except OSError:
                pass  # not empty or not ours to remove: it stays, unused
        return cls(None, (), NO_CACHE)

    @classmethod
    def start(cls, folder: Path | None, reason: str = "") -> CacheUse:
        """Make *folder* (when given) and list what it holds now."""
        if folder is None:
            return cls(None, (), reason)
        folder.mkdir(parents=True, exist_ok=True)
        return cls(folder, snapshot(folder))

    def status(self) -> str | None:
        """``miss`` (a file appeared or changed since :meth:`start`: the EP compiled and saved a
        program), ``hit`` (the folder held a program and gained nothing), ``empty`` (nothing
        written: the EP did not use the folder), ``user`` (the user's own cache), ``none`` (the build has no
        compile cache: :data:`~pytest_aaco.measure.migraphx_probe.NO_CACHE`), or None (off)."""
        if self.folder is None:
            return {"user": "user", NO_CACHE: "none"}.get(self.reason)
        return cache_status(self.files, snapshot(self.folder))

    def settle(self, before: str | None, create_ms: float, first_run_ms: float | None = None,
               **extra: object) -> str | None:
        """The session's cache status after its first run (EPs compile there for symbolic shapes):
        :meth:`status`, or ``miss`` when *before* (the status at creation) was one; a miss writes
        what the compile cost (:meth:`record`)."""
        status = self.status()
        if status == "miss" or before == "miss":
            status = "miss"
            self.record(create_ms, first_run_ms, **extra)
        return status

    def record(self, create_ms: float, first_run_ms: float | None = None, **extra: object) -> None:
        """After a ``miss``, write :data:`RECORD` (what the compile cost, ms) into the folder."""
        if self.folder is None:
            return
        data = {"create_ms": round(create_ms, 3), **extra}
        if first_run_ms is not None:
            data["first_run_ms"] = round(first_run_ms, 3)
        try:
            (self.folder / RECORD).write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        except OSError:
            pass  # the record is a convenience: a read-only folder still caches what the EP wrote


def snapshot(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime ns) of every file under *folder* but :data:`RECORD`, sorted; ``()`` when missing."""
    found = []
    try:
        for path in folder.rglob("*"):
            if path.is_file() and path.name != RECORD and not path.name.startswith(".aaco-"):
                stat = path.stat()
                found.append((str(path.relative_to(folder)), stat.st_size, stat.st_mtime_ns))
    except OSError:
        return ()
    return tuple(sorted(found))


def cache_status(before: tuple[tuple[str, int, int], ...], after: tuple[tuple[str, int, int], ...]) -> str:
    """``miss`` when *after* has a file not in *before* (or changed), ``hit`` when not and *after*
    is not empty, ``empty`` otherwise."""
    if set(after) - set(before):
        return "miss"
    return "hit" if after else "empty"


def compile_record(folder: Path | None) -> JSONDict | None:
    """The :data:`RECORD` of *folder* (``create_ms``, ``first_run_ms`` ...), or None when absent or unreadable."""
    if folder is None:
        return None
    try:
        data = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("create_ms"), (int, float)) else None


def recorded_compile_ms(folder: Path | None) -> float | None:
    """Creation + first run (ms) of the session that compiled *folder*'s program (:data:`RECORD`), or None."""
    record = compile_record(folder)
    if record is None:
        return None
    create, first = record.get("create_ms"), record.get("first_run_ms")
    if not isinstance(create, (int, float)):
        return None
    return float(create) + (float(first) if isinstance(first, (int, float)) else 0.0)
