"""The baseline side in another Python interpreter (``--aaco-compare-python``), driven over a pipe.

An ORT, ROCm or MIGraphX upgrade is the regression users fear most, and the old version lives
in another environment. :class:`WorkerSide` launches ``sideworker.py`` (shipped next to this
module) in that environment's interpreter and implements :class:`~pytest_aaco.measure.interleave.BlockRunner`
over the worker's stdin/stdout, so :func:`~pytest_aaco.measure.interleave.run_cycles` interleaves it
with an in-process :class:`~pytest_aaco.measure.interleave.LocalSide` block by block: one request at a
time, so the two sides never run at the same time. The protocol is documented in
``sideworker.py``.

The judgement stays here, in the plugin's process: IO binding resolution, provider options, the
"EP Error" fallback check, unknown options and the placement check reuse :mod:`pytest_aaco.measure.inference`
on what the worker reports; the worker only creates the session and times it with the shared
:mod:`pytest_aaco.measure.timedloop`.

Errors: :class:`WorkerEnvironmentError` (the interpreter is missing, not executable, not Python,
or lacks numpy or onnxruntime: the message gives the fix), :class:`WorkerError` (the worker died,
timed out or broke the protocol: the message quotes the end of its stderr), and
:class:`~pytest_aaco.measure.inference.SessionError` for what ORT refused in the worker, as in process.
POSIX only: the pipe is read with ``select``.
"""

from __future__ import annotations

import base64
import collections
import json
import os
import select
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.compile_cache import CacheUse, CompileCacheError, CompileHold, recorded_compile_ms
from pytest_aaco.measure.inference import (
    SessionError,
    creation_failure,
    creation_problem,
    cuda_graph_on,
    effective_options,
    hold_compile_lock,
    migraphx_questions,
    migraphx_refusal,
    ort_log_level,
    plugin_cache_folder,
    resolve_iobinding,
    session_providers,
    warn_migraphx_env,
    with_compile_cache,
)
from pytest_aaco.measure.migraphx_probe import EP as MIGRAPHX_EP
from pytest_aaco.measure.providers import ProviderError, ProviderSpec, session_fallback_problem
from pytest_aaco.measure.results import FreshSample
from pytest_aaco.options import find_interpreter as find_interpreter  # the option's parser, re-exported

#: the worker script, launched as ``PYTHON WORKER_SCRIPT``
WORKER_SCRIPT = Path(__file__).with_name("worker.py")
#: must equal ``sideworker.PROTOCOL`` (not imported: that module is a script for another interpreter)
PROTOCOL = 2
#: every reply line of the worker starts with this (``sideworker.MARKER``)
MARKER = b"@aaco-side-worker "
OPTION = "--aaco-compare-python"
#: seconds to wait for a reply: the default, and for ``load`` (a MIGraphX or TensorRT compile takes minutes)
TIMEOUT_S, LOAD_TIMEOUT_S = 120.0, 1800.0
#: a block's reply may also take this many times its expected duration (the last block's pace)
BLOCK_SLACK = 10.0
#: characters of the worker's stderr quoted in an error
STDERR_TAIL = 3000
#: environment variables not passed to the worker: they point at the plugin's own Python
PLUGIN_PYTHON_VARS = ("PYTHONHOME", "PYTHONPATH")


class WorkerError(RuntimeError):
    """The side worker could not be started, died, timed out or broke the protocol."""


class WorkerEnvironmentError(WorkerError):
    """The ``--aaco-compare-python`` interpreter cannot run the worker; the message gives the fix."""


class WorkerKilled(WorkerError):
    """The side worker was ended by a signal (``signum``): a crash, or a stop from outside (the out-of-memory
    killer, a job's timeout, ``kill``), never a sign of the wrong interpreter."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


#: signals a process gets from its own fault (a crash inside the interpreter or a native library it loaded)
CRASH_SIGNALS = frozenset(getattr(signal, name) for name in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT")
                          if hasattr(signal, name))


def killed_text(signum: int, op: str) -> str:
    """``killed by SIGKILL during hello (signal 9: stopped from outside ...)``; a crash signal (SIGSEGV ...)
    is called a crash instead."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    why = ("a crash inside the interpreter or a native library it loaded (numpy, onnxruntime, a driver)"
           if signum in CRASH_SIGNALS else
           "stopped from outside pytest-aaco: the out-of-memory killer, a job's timeout or a kill")
    return f"killed by {name} during {op} (signal {signum}: {why})"


def install_hint(python: str) -> str:
    """What the other environment needs, as a command."""
    return (f"{python} -m pip install onnxruntime numpy (or the onnxruntime build under test, e.g."
            " onnxruntime-gpu)")


@dataclass(frozen=True)
class WorkerInfo:
    """What the worker's interpreter runs: versions, available EPs, its pid, and the CPUs it was pinned to
    (``None``: not pinned; :func:`pytest_aaco.sidebyside.workers.shared_cpus`)."""

    pid: int
    python_version: str
    executable: str
    numpy_version: str
    ort_version: str
    providers: tuple[str, ...]
    cpus: tuple[int, ...] | None = None


@dataclass
class WorkerSession:
    """The session loaded in the worker: creation time (ms), the EPs it runs on, the binding used,
    the provider options passed, and the RSS it added to the worker (MB, None off Linux)."""

    model_path: Path
    provider: ProviderSpec
    create_ms: float
    providers_used: tuple[str, ...]
    iobinding: str
    options: JSONDict
    build_rss_mb: float | None
    #: the compile-cache folder the worker's EP was given, read by this process (same file system)
    cache: CacheUse = field(default_factory=lambda: CacheUse(None))
    #: ``hit`` / ``miss`` ... after creation (:meth:`CacheUse.status`), None without a cache
    compile_cache: str | None = None
    #: the compile-cache folder's lock, taken here (the same file system) before the worker created the
    #: session and held until its first run has finished (:meth:`settle_cache`)
    compile_hold: CompileHold | None = field(default=None, repr=False)
    #: what the worker sent its MIGraphX EP after asking it (``migraphx_probe.Plan.to_dict()``), None otherwise
    migraphx: JSONDict | None = None

    def settle_cache(self, first_run_ms: float | None = None) -> str | None:
        """As :meth:`pytest_aaco.measure.inference.SessionHandle.settle_cache`, for the worker's session:
        reads the folder after the first run, then gives its lock back."""
        try:
            self.compile_cache = self.cache.settle(self.compile_cache, self.create_ms, first_run_ms,
                                                   ep=self.provider.short, side=self.provider.side)
        finally:
            self.release_compile_lock()
        return self.compile_cache

    def release_compile_lock(self) -> None:
        """Give the compile-cache folder's lock back; idempotent."""
        if self.compile_hold is not None:
            self.compile_hold.release()


@dataclass(frozen=True)
class WorkerMemory:
    """The worker process's own memory: RSS and peak RSS (VmRSS, VmHWM; MB; None off Linux), and
    its memory on NVIDIA GPUs (MB, from ``nvidia-smi``; None with the reason in ``gpu_source``)."""

    rss_mb: float | None
    peak_rss_mb: float | None
    gpu_mb: float | None
    gpu_source: str


def decode_array(payload: Mapping[str, Any]) -> np.ndarray:
    """The array of a ``{"dtype", "shape", "b64"}`` payload (see ``sideworker.encode_array``)."""
    array = np.frombuffer(base64.b64decode(payload["b64"]), dtype=np.dtype(payload["dtype"]))
    return array.reshape(payload["shape"]).astype(array.dtype.newbyteorder("="), copy=True)


def _stop(proc: subprocess.Popen[bytes], stderr: IO[bytes]) -> None:
    """Kill *proc* if it still runs, reap it (no zombie) and close its pipes; safe to call twice."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
        pass
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass
    stderr.close()


class WorkerProcess:
    """The side worker's process and its pipe: ``sideworker.py`` launched in the interpreter *python*,
    one request at a time over its stdin and stdout (the protocol is in ``sideworker.py``).

    :meth:`start` launches a fresh worker and checks its environment (``hello``); :meth:`close`
    asks it to exit and reaps it. Every reply is awaited at most the request's timeout; a worker
    that does not answer in time is killed. After a :class:`WorkerError` the worker is gone;
    :meth:`start` launches a fresh one. *env* overrides variables of the worker's environment,
    which is the plugin's minus :data:`PLUGIN_PYTHON_VARS`. :class:`WorkerSide` measures with it.
    """

    def __init__(self, python: str | os.PathLike[str], name: str = "baseline", *, timeout_s: float = TIMEOUT_S,
                 env: Mapping[str, str] | None = None) -> None:
        self.python = os.fspath(python)
        self.name = name
        self.timeout_s = float(timeout_s)
        self.env = dict(env or {})
        self.info: WorkerInfo | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._finalizer: weakref.finalize | None = None
        self._buffer = b""
        self._noise: collections.deque[str] = collections.deque(maxlen=5)
        self._next_id = 0

    # ------------------------------------------------------------ lifecycle

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> WorkerProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> WorkerInfo:
        """Launch the worker and check its environment (the ``hello`` request).

        Raises :class:`WorkerEnvironmentError` when the interpreter is missing, not executable,
        not a Python that runs the worker, or lacks numpy or onnxruntime.
        """
        self.close()
        try:
            python = find_interpreter(self.python)
        except ValueError as exc:
            raise WorkerEnvironmentError(f"{OPTION}={self.python}: {exc}") from None
        env = {k: v for k, v in os.environ.items() if k not in PLUGIN_PYTHON_VARS}
        env.update(self.env)
        stderr = tempfile.TemporaryFile(prefix="aaco-side-worker-", suffix=".stderr")
        try:
            proc = subprocess.Popen([python, str(WORKER_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=stderr, bufsize=0, env=env)
        except OSError as exc:  # ENOEXEC, EACCES: not a program this system runs
            stderr.close()
            raise WorkerEnvironmentError(f"{OPTION}={self.python}: cannot run {python}: {exc.strerror or exc};"
                                         " give the path of a Python interpreter") from None
        self._proc, self._stderr, self._buffer, self._next_id = proc, stderr, b"", 0
        self._noise.clear()
        self._finalizer = weakref.finalize(self, _stop, proc, stderr)
        try:
            hello = self._request("hello", self.timeout_s)
        except (WorkerEnvironmentError, WorkerKilled):  # a signal says nothing about the interpreter's version
            raise
        except WorkerError as exc:
            raise WorkerEnvironmentError(f"{OPTION}={self.python} could not run the side worker (is it a Python"
                                         f" 3.8 or newer?): {exc}") from None
        if hello.get("protocol") != PROTOCOL:
            self._terminate()
            raise WorkerEnvironmentError(f"{OPTION}={self.python}: the side worker speaks protocol"
                                         f" {hello.get('protocol')!r}, this plugin {PROTOCOL}")
        self.info = WorkerInfo(int(hello["pid"]), str(hello["python"]), str(hello["executable"]),
                               str(hello["numpy"]), str(hello["onnxruntime"]), tuple(hello["providers"]),
                               tuple(int(c) for c in hello["cpus"]) if hello.get("cpus") else None)
        return self.info

    def close(self) -> None:
        """Ask the worker to exit, then make sure it did (killed after a few seconds) and reap it.
        Safe to call at any time, more than once."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                self._request("close", min(self.timeout_s, 10.0))
                proc.wait(timeout=5)
            except (WorkerError, subprocess.TimeoutExpired):
                pass
        self._terminate()

    def _terminate(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # _stop: kill if alive, reap, close pipes
        self._drop_session()
        self._proc, self._stderr, self._finalizer = None, None, None

    def _drop_session(self) -> None:
        """Forget what the worker held (nothing here; :class:`WorkerSide` drops its session)."""

    def _model_name(self) -> str:
        """The model a ``run`` error names."""
        return "the model"

    # ------------------------------------------------------------ the pipe

    def _who(self) -> str:
        version = f"onnxruntime {self.info.ort_version}, " if self.info else ""
        return f"{self.name} side ({version}{OPTION}={self.python})"

    def _request(self, op: str, timeout_s: float, failure: Any = None, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its reply; raise on an error reply, a death or a timeout.

        *failure* maps a ``session`` error's message and the error itself to the SessionError text.
        """
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise WorkerError(f"{self._who()}: the worker is not running (call start())")
        self._next_id += 1
        line = json.dumps({"id": self._next_id, "op": op, **fields}, separators=(",", ":")) + "\n"
        try:
            proc.stdin.write(line.encode("utf-8"))
            proc.stdin.flush()
        except OSError:  # BrokenPipeError: it is gone
            raise self._died(op) from None
        reply = self._read_reply(op, timeout_s)
        if reply.get("id") != self._next_id:
            self._terminate()
            raise WorkerError(f"{self._who()}: reply {reply.get('id')!r} to request {self._next_id} ({op})")
        if reply.get("ok"):
            return reply
        error = reply.get("error") or {}
        kind, message = error.get("type"), str(error.get("message", "no message"))
        if kind == "missing":
            self._terminate()
            raise WorkerEnvironmentError(
                f"{OPTION}={self.python}: that interpreter lacks {', '.join(error.get('missing') or [])} ({message});"
                f" install them there: {install_hint(self.python)}")
        if kind == "session":
            text = failure(message, error) if failure is not None else message
            raise SessionError(f"{self._who()}: {text}")
        if kind == "run":
            raise SessionError(f"{self._who()}: {self._model_name()}: {message}")
        raise WorkerError(f"{self._who()}: {op} failed ({kind}): {message}"
                          + (f"\n{error['traceback']}" if error.get("traceback") else ""))

    def _read_reply(self, op: str, timeout_s: float) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while True:
            newline = self._buffer.find(b"\n")
            while newline >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1:]
                start = line.find(MARKER)
                if start >= 0:
                    try:
                        reply = json.loads(line[start + len(MARKER):].decode("utf-8"))
                    except ValueError as exc:
                        self._terminate()
                        raise WorkerError(f"{self._who()}: unreadable reply to {op}: {exc}") from None
                    if isinstance(reply, dict):
                        return reply
                elif line.strip():
                    self._noise.append(line.decode("utf-8", "replace")[:200])
                newline = self._buffer.find(b"\n")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                tails = self._tails()
                self._terminate()
                raise WorkerError(f"{self._who()}: no reply to {op} within {timeout_s:.3g} s; the worker was stopped"
                                  + tails)
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise self._died(op)
            self._buffer += chunk

    def _died(self, op: str) -> WorkerError:
        """The error for a worker found dead during *op*, after reaping it."""
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        tails = self._tails()
        self._terminate()
        if code is not None and code < 0:
            return WorkerKilled(f"{self._who()}: the worker was {killed_text(-code, op)}{tails}", -code)
        how = f"exited with status {code}" if code is not None else "closed its output"
        return WorkerError(f"{self._who()}: the worker {how} during {op}{tails}")

    def _tails(self) -> str:
        """The end of the worker's stderr and any stray stdout lines, for an error message."""
        parts = []
        if self._stderr is not None:
            try:
                self._stderr.seek(0, os.SEEK_END)
                size = self._stderr.tell()
                self._stderr.seek(max(0, size - STDERR_TAIL))
                text = self._stderr.read().decode("utf-8", "replace").strip()
            except (OSError, ValueError):
                text = ""
            if text:
                parts.append(f"; its stderr ended with:\n{text}")
        if self._noise:
            parts.append("; it also printed: " + " | ".join(self._noise))
        return "".join(parts)


class WorkerSide(WorkerProcess):
    """One side of an interleaved measurement, run by ``sideworker.py`` in another interpreter.

    Use it as a context manager (or call :meth:`close`)::

        with WorkerSide(".venv-old/bin/python", name="baseline") as side:   # start(): hello
            side.load(model_path, provider, feeds, iobinding="auto")        # -> WorkerSession
            side.warmup(10)                                                 # -> (first_ms, warmup ms)
            cycles = run_cycles([side, LocalSide("candidate", run)], {...}, cycles=10)
            side.memory()                                                   # -> WorkerMemory

    :meth:`block` is :class:`~pytest_aaco.measure.interleave.BlockRunner`'s: int64 ns, shape ``(n,)``.
    Every reply is awaited at most *timeout_s* seconds (*load_timeout_s* for :meth:`load`; a
    block also gets :data:`BLOCK_SLACK` times its expected duration); a worker that does not
    answer in time is killed. After a :class:`WorkerError` the worker is gone; :meth:`start`
    launches a fresh one. *env* overrides variables of the worker's environment, which is the
    plugin's minus :data:`PLUGIN_PYTHON_VARS`.
    """

    def __init__(self, python: str | os.PathLike[str], name: str = "baseline", *, timeout_s: float = TIMEOUT_S,
                 load_timeout_s: float = LOAD_TIMEOUT_S, env: Mapping[str, str] | None = None) -> None:
        super().__init__(python, name, timeout_s=timeout_s, env=env)
        self.load_timeout_s = float(load_timeout_s)
        self.session: WorkerSession | None = None
        self._per_iteration_s = 0.0

    def __enter__(self) -> WorkerSide:
        if not self.running:
            self.start()
        return self

    def _drop_session(self) -> None:
        """Forget the loaded session, giving its compile-cache lock back if its first run never came."""
        if self.session is not None:
            self.session.release_compile_lock()
        self.session = None

    def _model_name(self) -> str:
        return self.session.model_path.name if self.session else "the model"

    # ------------------------------------------------------------ requests

    def load(self, model_path: str | os.PathLike[str], provider: ProviderSpec, feeds: Mapping[str, np.ndarray], *,
             iobinding: str = "none", device_id: int = 0, intra_op_threads: int = 0,
             config_entries: Mapping[str, str] | None = None, cache_folder: Path | None = None) -> WorkerSession:
        """Create the InferenceSession in the worker (releasing the previous one) and bind *feeds*.

        As :func:`pytest_aaco.measure.inference.build_session` plus :func:`~pytest_aaco.measure.inference.bind_run`:
        *iobinding* ``auto`` resolves per EP; GPU EPs get ``device_id`` and the CPU EP as fallback;
        *config_entries* go to ``SessionOptions.add_session_config_entry`` (e.g.
        ``{"session.intra_op.allow_spinning": "0"}``). *feeds* travel as ``.npy`` files in a
        temporary folder, removed after loading. A MIGraphX session is planned in the worker by
        :func:`pytest_aaco.measure.migraphx_probe.plan`, asking the worker's own onnxruntime which options
        its EP takes (the cache folder through ``ORT_MIGRAPHX_*`` where it will not take
        ``migraphx_model_cache_dir``). The compile-cache folder's lock is taken here before the worker
        creates the session and kept until :meth:`WorkerSession.settle_cache` (after the first run).
        Raises :class:`SessionError` when ORT refuses the model or the options (a MIGraphX option the EP
        refuses: :func:`~pytest_aaco.measure.inference.migraphx_refusal`), fell back off the EP
        (placement), or ignored an option; :class:`WorkerError` when the worker fails.
        """
        self._drop_session()  # the worker releases its session first; a refused one is never measured
        path = Path(model_path).absolute()
        mode = resolve_iobinding(iobinding, provider)
        try:  # the worker's ORT may be another generation than this one's (MIGraphX options differ)
            version = self.info.ort_version if self.info else None
            options = effective_options(provider, device_id, version)
            options, cache = with_compile_cache(provider, path, options, version or "?", cache_folder)
        except (ProviderError, CompileCacheError) as exc:
            raise SessionError(f"{path.name}: {exc}") from None
        except OSError as exc:
            raise SessionError(f"{path.name}: the compile cache (--aaco-compile-cache) cannot be used: {exc};"
                               " give a writable folder or off") from None
        warn_migraphx_env(provider)
        if cuda_graph_on(options) and mode == "none":
            raise SessionError(f"{path.name}: enable_cuda_graph=1 needs device inputs: use --aaco-iobinding=all or"
                               " inputs (with host feeds ORT's graph replay returned no outputs)")
        # the worker asks its own onnxruntime's MIGraphX EP (migraphx_probe.plan, as build_session does here)
        migraphx = ({"plugin_cache": plugin_cache_folder(provider, cache), "questions": migraphx_questions()}
                    if provider.ep_name == MIGRAPHX_EP else None)

        def failure(message: str, error: Mapping[str, Any]) -> str:
            refused = (error.get("migraphx") or {}).get("refused")
            if refused:
                plan = error["migraphx"]
                return migraphx_refusal(path, provider, str(plan.get("build")), refused, plan.get("takes") or ())
            return creation_failure(path, provider, options, message)

        hold, cache = hold_compile_lock(path, cache)  # held until the first run has finished (settle_cache)
        try:
            reply = self._send_load(path, provider, options, feeds, mode, device_id, intra_op_threads,
                                    config_entries, migraphx, failure)
            sent = dict((reply.get("migraphx") or {}).get("options") or options)
            used = [str(ep) for ep in reply["providers"]]
            version = self.info.ort_version if self.info else "?"
            problem = (creation_problem(path, provider, sent, str(reply.get("printed") or ""), used,
                                        reply.get("provider_options") or {}, version)
                       or session_fallback_problem(provider, used))
            if problem:
                raise SessionError(f"{self._who()}: {problem}")
        except BaseException:
            hold.release()
            raise
        self._per_iteration_s = 0.0
        self.session = WorkerSession(path, provider, float(reply["create_ms"]), tuple(used), mode, sent,
                                     reply.get("build_rss_mb"), cache, compile_hold=hold,
                                     migraphx=reply.get("migraphx"))
        self.session.compile_cache = cache.status()
        return self.session

    def _send_load(self, path: Path, provider: ProviderSpec, options: JSONDict, feeds: Mapping[str, np.ndarray],
                   mode: str, device_id: int, intra_op_threads: int, config_entries: Mapping[str, str] | None,
                   migraphx: Mapping[str, Any] | None, failure: Any) -> dict[str, Any]:
        """The ``load`` request, with *feeds* as ``.npy`` files in a temporary folder removed after it."""
        with tempfile.TemporaryDirectory(prefix="aaco-side-feeds-") as folder:
            files = {}
            for index, (name, array) in enumerate(feeds.items()):
                files[name] = os.path.join(folder, f"{index}.npy")
                try:
                    np.save(files[name], np.asarray(array), allow_pickle=False)
                except ValueError as exc:  # object arrays would need pickle, which the worker refuses
                    raise SessionError(f"{path.name}: input {name!r} cannot be sent to the {self.name} side:"
                                       f" {exc}") from None
            return self._request("load", self.load_timeout_s, model=str(path),
                                 providers=[list(p) if isinstance(p, tuple) else [p, {}]
                                            for p in session_providers(provider, options)],
                                 intra_op_num_threads=int(intra_op_threads),
                                 config_entries={str(k): str(v) for k, v in (config_entries or {}).items()},
                                 feeds=files, iobinding=mode, device=provider.ep.ort_device,
                                 telemetry=provider.ep.telemetry, device_id=int(device_id),
                                 log_severity_level=ort_log_level(), migraphx=migraphx, failure=failure)

    def warmup(self, iterations: int) -> tuple[float, np.ndarray]:
        """As :func:`pytest_aaco.measure.inference.warmup`, in the worker: first run (ms) and the warmup
        latencies (ms, float64, at least *iterations*, extended to 0.25 s for fast models)."""
        self._loaded("warmup")
        reply = self._request("warmup", self.load_timeout_s, iterations=int(iterations))
        latencies_ms = decode_array(reply["latencies_ms"]).astype(np.float64)
        if latencies_ms.size:
            self._per_iteration_s = float(np.median(latencies_ms)) / 1000.0
        return float(reply["first_ms"]), latencies_ms

    def block(self, iterations: int) -> np.ndarray:
        """Run the model *iterations* times back to back in the worker: int64 ns, shape ``(iterations,)``."""
        self._loaded("block")
        count = int(iterations)
        timeout = self.timeout_s + BLOCK_SLACK * count * self._per_iteration_s
        reply = self._request("block", timeout, iterations=count)
        latencies = decode_array(reply["latencies_ns"])
        if latencies.dtype != np.int64 or latencies.shape != (count,):
            self._terminate()
            raise WorkerError(f"{self._who()}: a block of {count} came back as {latencies.dtype} {latencies.shape}")
        self._per_iteration_s = float(np.median(latencies)) / 1e9
        return latencies

    def memory(self) -> WorkerMemory:
        """The worker process's own memory (see :class:`WorkerMemory`)."""
        reply = self._request("memory", self.timeout_s)
        return WorkerMemory(reply.get("rss_mb"), reply.get("peak_rss_mb"), reply.get("gpu_mb"),
                            str(reply.get("gpu_source", "")))

    def _loaded(self, op: str) -> None:
        if self._proc is None:
            raise WorkerError(f"{self._who()}: the worker is not running (call start())")
        if self.session is None:
            raise WorkerError(f"{self._who()}: {op} before a session was loaded (call load(); a session that"
                              " failed its checks is not measured)")

@dataclass
class WorkerSessions:
    """Fresh sessions in another interpreter, for a cold start compared side by side
    (:class:`~pytest_aaco.passes.coldstart.FreshSessions`): each :meth:`fresh` loads *model_path* in
    *side*'s worker (which releases its previous session first, as :meth:`WorkerSide.load` says)
    and times its first run as a block of one iteration, on host inputs (*feeds*, no IO binding,
    as the in-process side's first run). The worker is started on first use; close *side* after.
    """

    side: WorkerSide
    model_path: Path
    provider: ProviderSpec
    feeds: Mapping[str, np.ndarray]
    device_id: int = 0
    intra_op_threads: int = 0
    config_entries: dict[str, str] = field(default_factory=dict)

    def fresh(self, cache_folder: Path | None = None) -> FreshSample:
        """``FreshSample(creation ms, first run ms)`` of one new session in the worker; raises
        :class:`~pytest_aaco.measure.inference.SessionError` or :class:`WorkerError` as :meth:`WorkerSide.load`.
        *cache_folder*: a compile-cache folder replacing the keyed one (an empty one: the session compiles)."""
        if not self.side.running:
            self.side.start()
        session = self.side.load(self.model_path, self.provider, self.feeds, iobinding="none",
                                 device_id=self.device_id, intra_op_threads=self.intra_op_threads,
                                 config_entries=self.config_entries, cache_folder=cache_folder)
        first_ms = float(self.side.block(1)[0]) / 1e6
        status = session.settle_cache(first_ms)
        return FreshSample(session.create_ms, first_ms, compile_cache=status,
                           compile_ms=recorded_compile_ms(session.cache.folder))
