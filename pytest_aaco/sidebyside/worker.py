"""pytest-aaco's side worker: one side of a side-by-side comparison, run in another Python interpreter.

``--aaco-compare-python=PATH`` measures the baseline side in another environment, such as a
virtualenv holding an older onnxruntime. The plugin (:mod:`pytest_aaco.sidebyside.worker_client`) launches
this file as a script::

    PATH /abs/path/to/pytest_aaco/sidebyside/worker.py

and drives it over its stdin and stdout, one request at a time, so the two sides never run at
the same time. The worker needs only the standard library, numpy and onnxruntime: it never
imports pytest_aaco, pytest or scipy. It loads ``measure/timedloop.py``, beside this folder, by its path, so both
sides time their iterations with the same code, and ``measure/migraphx_probe.py`` the same way, so a
MIGraphX session here is planned by the same rules as in the plugin's process, asking *this*
interpreter's onnxruntime. Python 3.8 syntax (old onnxruntime wheels exist only for old Pythons).

Protocol (version :data:`PROTOCOL`): every message is one line of UTF-8 JSON (JSON escapes
newlines, so a line of any length is one message). The worker writes its replies to a private
duplicate of its original stdout, each as ``"\\n" + MARKER + json + "\\n"``; file descriptor 1
itself is pointed at stderr, so whatever ONNX Runtime, numpy or a ``.pth`` file prints cannot
corrupt the protocol, and the plugin skips lines without the marker. Arrays travel as
``{"dtype": "<i8", "shape": [n], "b64": ...}``: base64 of their little-endian bytes.

Requests are ``{"id": N, "op": OP, ...}``; each gets one reply ``{"id": N, "ok": true, ...}`` or
``{"id": N, "ok": false, "error": {"type": T, "message": M, ...}}`` (type ``internal``, a bug
here, adds ``traceback``; a line that is not a JSON object gets type ``request`` and id null):

``hello``
    -> ``python``, ``executable``, ``numpy``, ``onnxruntime`` (versions), ``providers`` (available
    EPs), ``pid``, ``protocol``, ``cpus`` (the CPUs the worker was pinned to from ``AACO_WORKER_CPUS``, a
    comma-separated list of CPU numbers, before numpy or onnxruntime were imported; null when not pinned).
    Type ``missing`` (with ``missing``: module names) when numpy or
    onnxruntime cannot be imported.
``load`` (``model``, ``providers``: ``[[EP name, {option: value}], ...]``,
``intra_op_num_threads``, ``config_entries``: ``{key: value}`` (``session.intra_op.allow_spinning``
...), ``feeds``: ``{input name: path of a .npy file}``, ``iobinding``: none/inputs/all, ``device``:
ORT device name, ``device_id``, and for the MIGraphX EP ``migraphx``: ``{"plugin_cache": the compile-cache
folder pytest-aaco put in the options or null, "questions": {key: value}}``)
    -> ``create_ms``, ``providers`` (``session.get_providers()``: the placement check is the
    plugin's), ``provider_options`` (``session.get_provider_options()``), ``printed`` (what ORT's
    Python layer printed while creating the session: its "EP Error" fallback notice),
    ``build_rss_mb``, ``migraphx`` (null, or what was sent after asking this onnxruntime's MIGraphX EP
    which options it takes: ``migraphx_probe.Plan.to_dict()``: ``options``, ``env``, ``refused``, ``takes``,
    ``build``; ``env`` is set around the creation only). A previous session is released first. Type
    ``session`` when ORT refuses; with ``migraphx`` (the plan) when the EP refused an option before any
    session was built.
``warmup`` (``iterations``) -> ``first_ms``, ``latencies_ms`` (float64 array, ms).
``block`` (``iterations``) -> ``latencies_ns`` (int64 array, ``perf_counter_ns`` differences).
    Type ``run`` when ``session.run`` fails.
``memory`` -> ``rss_mb``, ``peak_rss_mb`` (this process's VmRSS / VmHWM from /proc/self/status,
    MB), ``gpu_mb`` (this process's memory on NVIDIA GPUs from ``nvidia-smi``, MB, or null) and
    ``gpu_source`` (how ``gpu_mb`` was read, or why it is null).
``close`` -> ``{}``; the worker then exits with status 0. End of input does the same.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
#: the timed loop, loaded by its path: pytest_aaco/measure/timedloop.py
TIMED_LOOP = os.path.join(os.path.dirname(HERE), "measure", "timedloop.py")
#: asking the MIGraphX EP which options it takes, loaded by its path: pytest_aaco/measure/migraphx_probe.py
MIGRAPHX_PROBE = os.path.join(os.path.dirname(HERE), "measure", "migraphx_probe.py")
# Launched as a script, Python puts this folder (pytest_aaco/) first on sys.path, where its
# modules (warnings.py, config.py, stats.py ...) would shadow what numpy and onnxruntime import.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.dont_write_bytecode = True  # leave no __pycache__ of another interpreter in the package
#: the CPUs this worker runs on, set before numpy or onnxruntime start a thread (every later thread inherits
#: them): the plugin puts both sides' workers on the same CPUs (pytest_aaco/sidebyside/workers.py, shared_cpus)
CPUS_VAR = "AACO_WORKER_CPUS"
PINNED = None
if os.environ.get(CPUS_VAR) and hasattr(os, "sched_setaffinity"):
    try:
        os.sched_setaffinity(0, {int(cpu) for cpu in os.environ[CPUS_VAR].split(",")})
        PINNED = sorted(os.sched_getaffinity(0))
    except (OSError, ValueError):  # a CPU this machine lacks: the worker runs where the OS puts it
        PINNED = None

import base64  # noqa: E402  (after the sys.path fix above)
import contextlib  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

PROTOCOL = 2
#: every reply line starts with this, so lines printed by anything else are recognised and skipped
MARKER = "@aaco-side-worker "


class RequestError(Exception):
    """A request failed; *kind* is the reply's ``error.type`` (``session``, ``run``, ``missing``, ``request``)."""

    def __init__(self, kind: str, message: str, **extra: object) -> None:
        super().__init__(message)
        self.kind = kind
        self.extra = extra


def encode_array(array: Any) -> dict[str, object]:
    """``{"dtype", "shape", "b64"}`` of a numpy array, little-endian."""
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return {"dtype": little.dtype.str, "shape": list(little.shape),
            "b64": base64.b64encode(little.tobytes()).decode("ascii")}


def status_mb(field: str) -> float | None:
    """A ``kB`` field of /proc/self/status (``VmRSS``, ``VmHWM``) in MB, or None off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None


def smi_process_mb(pid: int) -> tuple[float | None, str]:
    """This process's memory on NVIDIA GPUs (MB) from ``nvidia-smi --query-compute-apps``, and the source.

    None, with the reason, when nvidia-smi is missing or does not list this pid (in a container
    nvidia-smi may show host pids).
    """
    command = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    try:
        out = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=15, check=False).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"nvidia-smi failed: {exc}"
    used = [float(parts[1]) for parts in (line.split(",") for line in out.splitlines())
            if len(parts) == 2 and parts[0].strip() == str(pid) and parts[1].strip().replace(".", "", 1).isdigit()]
    if not used:
        return None, f"nvidia-smi lists no compute process with pid {pid}"
    return sum(used), "nvidia-smi"


class Worker:
    """The worker's state: at most one InferenceSession and its bound ``run`` callable."""

    def __init__(self) -> None:
        self.loop: Any = None  # timedloop.py, loaded once numpy is known to import
        self.probe: Any = None  # migraphx_probe.py, loaded for the first MIGraphX session
        self.session: Any = None
        self.run: Any = None
        self.stop: Any = None  # the RunStop whose RunOptions every run of the session gets
        self.smi = False  # the session runs on an NVIDIA EP: nvidia-smi reports its memory

    def handle(self, request: dict[str, Any]) -> dict[str, object]:
        op = request.get("op")
        if op == "hello":
            return self.hello()
        if op == "memory":
            return self.memory()
        if op == "close":
            return {}
        if self.loop is None:
            raise RequestError("request", f"send hello before {op!r}")
        if op == "load":
            return self.load(request)
        if op in ("warmup", "block"):
            count = request.get("iterations")
            if not isinstance(count, int) or count < 1:
                raise RequestError("request", f"{op} needs iterations >= 1, got {count!r}")
            if self.run is None:
                raise RequestError("request", f"send load before {op}")
            return self.warmup(count) if op == "warmup" else self.block(count)
        raise RequestError("request", f"unknown op {op!r}")

    def hello(self) -> dict[str, object]:
        missing, reasons = [], []
        for module in ("numpy", "onnxruntime"):
            try:
                importlib.import_module(module)
            except Exception as exc:  # ImportError, or a broken binary module's own error
                missing.append(module)
                reasons.append(f"{module}: {exc}")
        if missing:
            raise RequestError("missing", "; ".join(reasons), missing=missing)
        if self.loop is None:
            self.loop = load_sibling("aaco_timedloop", TIMED_LOOP)
        import numpy as np
        import onnxruntime as ort

        return {"protocol": PROTOCOL, "pid": os.getpid(), "python": sys.version.split()[0],
                "executable": sys.executable, "numpy": np.__version__, "onnxruntime": ort.__version__,
                "providers": list(ort.get_available_providers()), "cpus": PINNED}

    def release(self) -> None:
        self.run = None
        self.stop = None
        self.session = None
        gc.collect()

    def load(self, request: dict[str, Any]) -> dict[str, object]:
        import numpy as np
        import onnxruntime as ort

        self.release()
        before = status_mb("VmRSS")
        level = int(request.get("log_severity_level", 3))
        ort.set_default_logger_severity(level)
        so = ort.SessionOptions()
        so.log_severity_level = level
        threads = int(request.get("intra_op_num_threads") or 0)
        if threads:
            so.intra_op_num_threads = threads
        for key, value in sorted((request.get("config_entries") or {}).items()):
            so.add_session_config_entry(str(key), str(value))
        providers = [(name, dict(options)) for name, options in request["providers"]]
        plan, env = self.migraphx_plan(request, providers, ort)
        printed = io.StringIO()
        start = time.perf_counter_ns()
        try:
            with self.probe.environment(env) if env else contextlib.nullcontext(), \
                    contextlib.redirect_stdout(printed):
                session = ort.InferenceSession(str(request["model"]), sess_options=so, providers=providers)
        except Exception as exc:  # ORT raises its own Fail/InvalidArgument types
            raise RequestError("session", str(exc), printed=printed.getvalue()[-4000:]) from exc
        create_ms = (time.perf_counter_ns() - start) / 1e6
        try:
            feeds = {name: np.load(path, allow_pickle=False) for name, path in request["feeds"].items()}
            # the same RunOptions as the plugin's own sessions (inference.SessionHandle.run_stop): with
            # run_options=None, ORT's Python binding builds a default RunOptions on every run, about 0.9 us
            # (onnxruntime 1.32.0, CPU), and a model of a few us then read 15-20% slower here than in process
            self.stop = self.loop.RunStop(quiet=level >= 3)
            run = self.loop.bound_runner(session, feeds, request.get("iobinding", "none"),
                                         request.get("device", "cpu"), int(request.get("device_id", 0)),
                                         self.stop.run_options)
        except Exception as exc:
            raise RequestError("session", f"binding the inputs failed: {exc}") from exc
        self.session, self.run = session, run
        # the client names the EP's telemetry source (pytest_aaco.eps; this file imports nothing of the package):
        # nvidia-smi reports the memory of a session that runs on an NVIDIA EP
        self.smi = request.get("telemetry") == "nvidia" and providers[0][0] in session.get_providers()
        after = status_mb("VmRSS")
        return {"create_ms": create_ms, "providers": list(session.get_providers()),
                "provider_options": session.get_provider_options(), "printed": printed.getvalue()[-4000:],
                "build_rss_mb": None if before is None or after is None else after - before, "migraphx": plan}

    def migraphx_plan(self, request: dict[str, Any], providers: list[Any],
                      ort: ModuleType) -> tuple[Any, dict[str, str]]:
        """For a MIGraphX session (*request*'s ``migraphx``), ask this onnxruntime's EP which options it
        takes (``migraphx_probe.plan``, the plugin's own rules) and put what it says in *providers*; returns
        (the plan as data or None, the environment to set around the creation). Raises :class:`RequestError`
        (``session``, with the plan) when the EP refuses an option."""
        ask = request.get("migraphx")
        if not isinstance(ask, dict) or not providers or providers[0][0] not in ort.get_available_providers():
            return None, {}
        if self.probe is None:
            self.probe = load_sibling("aaco_migraphx_probe", MIGRAPHX_PROBE)
        if providers[0][0] != self.probe.EP:
            return None, {}
        found = self.probe.plan(providers[0][1], ort, plugin_cache=ask.get("plugin_cache"),
                                questions=ask.get("questions") or {})
        if found.refused:
            raise RequestError("session", "; ".join(f"{k}: {v}" for k, v in sorted(found.refused.items())),
                               migraphx=found.to_dict())
        providers[0] = (providers[0][0], dict(found.options))
        return found.to_dict(), dict(found.env)

    def warmup(self, iterations: int) -> dict[str, object]:
        try:
            first_ms, lat_ms = self.loop.warmup(self.run, iterations)
        except Exception as exc:
            raise RequestError("run", f"session.run failed during warmup: {exc}") from exc
        return {"first_ms": first_ms, "latencies_ms": encode_array(lat_ms)}

    def block(self, iterations: int) -> dict[str, object]:
        try:
            lat = self.loop.time_iterations(self.run, iterations)
        except Exception as exc:
            raise RequestError("run", f"session.run failed: {exc}") from exc
        return {"latencies_ns": encode_array(lat)}

    def memory(self) -> dict[str, object]:
        gpu_mb, source = None, "no session on an NVIDIA EP"
        if self.session is not None and self.smi:
            gpu_mb, source = smi_process_mb(os.getpid())
        return {"rss_mb": status_mb("VmRSS"), "peak_rss_mb": status_mb("VmHWM"), "gpu_mb": gpu_mb,
                "gpu_source": source}


def load_sibling(name: str, path: str) -> Any:
    """The module at *path* (a file of pytest_aaco that needs only the standard library, numpy and
    onnxruntime), loaded by its path under *name* (registered in ``sys.modules``: dataclasses look it up)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def claim_stdout() -> io.BufferedWriter:
    """The protocol's channel: a private duplicate of fd 1; fd 1 and ``sys.stdout`` then go to stderr."""
    channel = os.fdopen(os.dup(1), "wb")
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel


def send(channel: io.BufferedWriter, message: dict[str, object]) -> None:
    line = json.dumps(message, separators=(",", ":"), allow_nan=True)
    channel.write(("\n" + MARKER + line + "\n").encode("utf-8"))
    channel.flush()


def main() -> int:
    # Ctrl-C in the terminal reaches the whole process group: the plugin decides when this worker
    # stops (it closes the pipe, or kills it), so a block is never cut off half-way
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = claim_stdout()
    worker = Worker()
    requests = sys.stdin.buffer
    while True:
        raw = requests.readline()
        if not raw:
            break  # the plugin closed the pipe (or died): nothing more to do
        if not raw.strip():
            continue
        request: dict[str, Any] = {}
        try:
            parsed = json.loads(raw.decode("utf-8"))
            if not isinstance(parsed, dict):
                raise RequestError("request", f"expected a JSON object, got {parsed!r}")
            request = parsed
            reply: dict[str, object] = {"id": request.get("id"), "ok": True}
            reply.update(worker.handle(request))
        except Exception as exc:  # every failure goes back as a structured reply, never a hang
            if isinstance(exc, RequestError):
                kind, extra = exc.kind, exc.extra
            else:  # a line that is not JSON, or a bug here
                kind, extra = ("request" if not request else "internal"), {}
            error: dict[str, object] = {"type": kind, "message": str(exc) or type(exc).__name__}
            if kind == "internal":
                error["traceback"] = traceback.format_exc()[-4000:]
            error.update(extra)
            reply = {"id": request.get("id"), "ok": False, "error": error}
        send(channel, reply)
        if request.get("op") == "close":
            break
    worker.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
