"""A simulated compiling execution provider, for the compile cache's tests (and the former
studies/compile_cache_study.py, in git history at commit af54b7b).

:class:`CompilingEP` stands in for ``onnxruntime.InferenceSession`` at the plugin's session-factory
boundary (``pytest_aaco.measure.inference.SESSION_FACTORY``), so the plugin builds the MIGraphX
provider options exactly as it would for the real EP (booleans, legacy defaults, the compile-cache
folder) and hands them over. It behaves as the MIGraphX EP does on paper (docs/amd.md):

* it reads the cache folder the options name: ``migraphx_model_cache_dir`` (ORT >= 1.24), or
  ``migraphx_load_model_path`` / ``migraphx_save_model_path`` with the load/save flags (legacy);
* the program file's name hashes only the model file's *name* (as MIGraphX's ``.mxr`` name does,
  not its weights), so two sides given one folder would load each other's program;
* when the program is in the folder it loads it (no wait); otherwise it "compiles": sleeps
  ``compile_s`` seconds and, when the options say so, saves the program there;
* ``compile_at="first_run"``: it compiles (or loads) at the session's first ``run``, as MIGraphX does for
  a model with symbolic dimensions, instead of at creation;
* ``cache_from``: ``"option"`` (the onnxruntime-migraphx wheels: ``migraphx_model_cache_dir``),
  ``"env-only"`` (upstream 1.20-1.22: creates the session, reports only its own options, reads the folder
  from ``ORT_MIGRAPHX_MODEL_CACHE_PATH`` at creation, as the fork 6.4 on does when the option is absent) or
  ``"refuses"`` (upstream <= 1.22 and AMD's fork 6.2-6.3: ``Invalid MIGraphX EP option: migraphx_model_cache_dir``;
  one program file loaded from ``ORT_MIGRAPHX_LOAD_COMPILE_PATH`` when ``ORT_MIGRAPHX_LOAD_COMPILED_MODEL`` is 1,
  saved to ``ORT_MIGRAPHX_SAVE_COMPILE_PATH`` when ``ORT_MIGRAPHX_SAVE_COMPILED_MODEL`` is 1;
  tests/migraphx_generations.py).

:func:`patch_onnxruntime` puts a :class:`CompilingEP` in place of ``onnxruntime.InferenceSession`` itself,
for a process that is not the plugin's (the side worker): :func:`patch_from_env` does so from
``$AACO_FAKE_EP`` (JSON of CompilingEP's arguments), called by a ``sitecustomize`` the test writes.

The session itself is a real CPU InferenceSession that reports the simulated EP as its first
provider. Every compile and load is appended to ``log`` (a JSON-lines file, when given) as
``{"event": "compile"|"load", "folder": ..., "model": ...}``, so a test in another process (pytester)
counts compiles instead of timing them.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import onnxruntime as ort

EP = "MIGraphXExecutionProvider"
#: the real session class (the inner session of every fake one, also once :func:`patch_onnxruntime` ran)
REAL_SESSION = ort.InferenceSession
#: what an EP that reads only device_id from its options reports (upstream 1.20-1.22)
ENV_ONLY_REPORT = {"device_id": "0", "migraphx_fp16_enable": "0", "migraphx_int8_enable": "0"}


def _on(value: object) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes")


class FakeSession:
    """A CPU InferenceSession that says it runs on *ep* with *options* (what the plugin checks)."""

    def __init__(self, inner: Any, ep: str, options: dict[str, str], first_run: Any = None) -> None:
        self._inner = inner
        self._ep = ep
        self._options = dict(options)
        self._first_run = first_run  # called before the first run (compile_at="first_run"), then dropped

    def run(self, *args: Any, **kwargs: Any) -> Any:
        if self._first_run is not None:
            first, self._first_run = self._first_run, None
            first()
        return self._inner.run(*args, **kwargs)

    def get_providers(self) -> list[str]:
        return [self._ep, "CPUExecutionProvider"]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return {self._ep: dict(self._options), "CPUExecutionProvider": {}}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CompilingEP:
    """Callable like ``onnxruntime.InferenceSession(path, sess_options=..., providers=...)``; sleeps
    *compile_s* seconds at creation unless its program is in the cache folder the options name."""

    def __init__(self, compile_s: float = 0.5, log: Path | str | None = None, ep: str = EP,
                 compile_at: str = "create", cache_from: str = "option") -> None:
        self.compile_s = compile_s
        self.log = None if log is None else Path(log)
        self.ep = ep
        self.compile_at = compile_at
        self.cache_from = cache_from
        self.events: list[dict[str, str]] = []

    def program(self, model: str, options: dict[str, str]) -> tuple[Path | None, bool, bool]:
        """(program file, load it, save it) from the provider *options* (or the environment, for an EP
        that reads only ``ORT_MIGRAPHX_*``); (None, False, False) without a cache."""
        weak = hashlib.sha256(Path(model).name.encode()).hexdigest()[:16] + ".mxr"  # the name only, as MIGraphX
        if self.cache_from == "refuses":
            path = os.environ.get("ORT_MIGRAPHX_LOAD_COMPILE_PATH") or os.environ.get("ORT_MIGRAPHX_SAVE_COMPILE_PATH")
            load = _on(os.environ.get("ORT_MIGRAPHX_LOAD_COMPILED_MODEL"))
            save = _on(os.environ.get("ORT_MIGRAPHX_SAVE_COMPILED_MODEL"))
            return (Path(path), load, save) if path and (load or save) else (None, False, False)
        if self.cache_from != "option":
            folder = os.environ.get("ORT_MIGRAPHX_MODEL_CACHE_PATH")
            return (Path(folder) / weak, True, True) if folder else (None, False, False)
        if options.get("migraphx_model_cache_dir"):
            return Path(options["migraphx_model_cache_dir"]) / weak, True, True
        load, save = _on(options.get("migraphx_load_compiled_model")), _on(options.get("migraphx_save_compiled_model"))
        path = options.get("migraphx_load_model_path") or options.get("migraphx_save_model_path")
        if path and (load or save):
            return Path(path), load, save
        return None, False, False

    def __call__(self, model: str, sess_options: Any = None, providers: Any = None) -> FakeSession:
        first = providers[0]
        ep, options = (first if isinstance(first, tuple) else (first, {}))
        assert ep == self.ep, f"the simulated EP is {self.ep}, the plugin asked for {ep}"
        if self.cache_from == "refuses" and "migraphx_model_cache_dir" in options:
            raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : Invalid MIGraphX EP option: migraphx_model_cache_dir")
        program, load, save = self.program(model, dict(options))

        def compile_or_load() -> None:
            if program is not None and load and program.exists():
                self._note("load", program, model)
            else:
                time.sleep(self.compile_s)
                if program is not None and save:
                    program.parent.mkdir(parents=True, exist_ok=True)
                    program.write_bytes(b"compiled " + Path(model).name.encode())
                self._note("compile", program, model)

        if self.compile_at != "first_run":
            compile_or_load()
        inner = REAL_SESSION(model, sess_options=sess_options, providers=["CPUExecutionProvider"])
        reported = dict(ENV_ONLY_REPORT) if self.cache_from == "env-only" else dict(options)
        return FakeSession(inner, ep, reported, compile_or_load if self.compile_at == "first_run" else None)

    def _note(self, event: str, program: Path | None, model: str) -> None:
        entry = {"event": event, "folder": str(program.parent) if program is not None else "",
                 "model": str(model), "time": time.time(), "pid": os.getpid()}
        self.events.append(entry)
        if self.log is not None:
            with open(self.log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")


def read_log(log: Path) -> list[dict[str, Any]]:
    """The events a :class:`CompilingEP` appended to *log* (``[]`` when there is none)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def install(monkeypatch: Any, compiling: CompilingEP) -> None:
    """Make the plugin build its sessions with *compiling* and list its EP as available (pytest's *monkeypatch*)."""
    import pytest_aaco.measure.inference as inference

    real = ort.get_available_providers
    monkeypatch.setattr(inference, "SESSION_FACTORY", compiling)
    monkeypatch.setattr(ort, "get_available_providers", lambda: [compiling.ep, *real()])


def patch_onnxruntime(compiling: CompilingEP) -> None:
    """Make this process's ``onnxruntime.InferenceSession`` the simulated EP and list its EP as available
    (for a process that builds sessions without the plugin's factory hook: the side worker)."""
    real = ort.get_available_providers
    ort.InferenceSession = compiling  # type: ignore[misc, assignment]
    ort.get_available_providers = lambda: [compiling.ep, *real()]  # type: ignore[assignment]


def patch_from_env() -> None:
    """:func:`patch_onnxruntime` with ``CompilingEP(**json.loads($AACO_FAKE_EP))``; nothing when unset."""
    config = os.environ.get("AACO_FAKE_EP")
    if config and not isinstance(ort.InferenceSession, CompilingEP):  # a venv's lib64 link runs a .pth twice
        patch_onnxruntime(CompilingEP(**json.loads(config)))


def worker_environment(folder: Path) -> dict[str, str]:
    """Environment variables that make a side worker started with them (``WorkerSide(env=...)``) patch its
    onnxruntime from ``$AACO_FAKE_EP`` at start-up: a ``sitecustomize`` in *folder*, and this file's folder,
    on ``PYTHONPATH``. Set ``AACO_FAKE_EP`` beside them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text("import fake_compiling_ep\nfake_compiling_ep.patch_from_env()\n",
                                             encoding="utf-8")
    return {"PYTHONPATH": os.pathsep.join([str(folder), str(Path(__file__).parent)])}
