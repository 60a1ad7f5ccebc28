"""A simulated compiling execution provider, for the compile cache's tests and studies/compile_cache_study.py.

:class:`CompilingEP` stands in for ``onnxruntime.InferenceSession`` at the plugin's session-factory
boundary (``pytest_aaco.measure.inference.SESSION_FACTORY``), so the plugin builds the MIGraphX
provider options exactly as it would for the real EP (booleans, legacy defaults, the compile-cache
folder) and hands them over. It behaves as the MIGraphX EP does on paper (docs/amd.md):

* it reads the cache folder the options name: ``migraphx_model_cache_dir`` (ORT >= 1.24), or
  ``migraphx_load_model_path`` / ``migraphx_save_model_path`` with the load/save flags (legacy);
* the program file's name hashes only the model file's *name* (as MIGraphX's ``.mxr`` name does,
  not its weights), so two sides given one folder would load each other's program;
* when the program is in the folder it loads it (no wait); otherwise it "compiles": sleeps
  ``compile_s`` seconds and, when the options say so, saves the program there.

The session itself is a real CPU InferenceSession that reports the simulated EP as its first
provider. Every compile and load is appended to ``log`` (a JSON-lines file, when given) as
``{"event": "compile"|"load", "folder": ..., "model": ...}``, so a test in another process (pytester)
counts compiles instead of timing them.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import onnxruntime as ort

EP = "MIGraphXExecutionProvider"


def _on(value: object) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes")


class FakeSession:
    """A CPU InferenceSession that says it runs on *ep* with *options* (what the plugin checks)."""

    def __init__(self, inner: Any, ep: str, options: dict[str, str]) -> None:
        self._inner = inner
        self._ep = ep
        self._options = dict(options)

    def get_providers(self) -> list[str]:
        return [self._ep, "CPUExecutionProvider"]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return {self._ep: dict(self._options), "CPUExecutionProvider": {}}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CompilingEP:
    """Callable like ``onnxruntime.InferenceSession(path, sess_options=..., providers=...)``; sleeps
    *compile_s* seconds at creation unless its program is in the cache folder the options name."""

    def __init__(self, compile_s: float = 0.5, log: Path | None = None, ep: str = EP) -> None:
        self.compile_s = compile_s
        self.log = log
        self.ep = ep
        self.events: list[dict[str, str]] = []

    def program(self, model: str, options: dict[str, str]) -> tuple[Path | None, bool, bool]:
        """(program file, load it, save it) from the provider *options*; (None, False, False) without a cache."""
        weak = hashlib.sha256(Path(model).name.encode()).hexdigest()[:16] + ".mxr"  # the name only, as MIGraphX
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
        program, load, save = self.program(model, dict(options))
        if program is not None and load and program.exists():
            self._note("load", program, model)
        else:
            time.sleep(self.compile_s)
            if program is not None and save:
                program.parent.mkdir(parents=True, exist_ok=True)
                program.write_bytes(b"compiled " + Path(model).name.encode())
            self._note("compile", program, model)
        inner = ort.InferenceSession(model, sess_options=sess_options, providers=["CPUExecutionProvider"])
        return FakeSession(inner, ep, dict(options))

    def _note(self, event: str, program: Path | None, model: str) -> None:
        entry = {"event": event, "folder": str(program.parent) if program is not None else "",
                 "model": str(model), "time": time.time()}
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
