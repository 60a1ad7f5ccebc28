"""Asking the MIGraphX EP which provider options it takes, instead of going by the onnxruntime version.

The builds users install disagree (checked against the real wheels: tests/migraphx_wheels.py,
studies/migraphx_conformance.py): the onnxruntime-migraphx wheels on PyPI take
:data:`~pytest_aaco.measure.providers.MIGRAPHX_KEYS` and refuse anything else with
``Unknown provider option: "<key>"``; AMD's ROCm/onnxruntime wheels refuse with
``Invalid MIGraphX EP option: <key>``; upstream 1.20-1.22's EP reads only ``device_id`` from its options
(the rest from ``ORT_MIGRAPHX_*`` variables), so it creates the session and leaves the other keys out of
``get_provider_options()``. Version numbers do not tell them apart (AMD's and upstream's 1.23.0 differ).

So before the first MIGraphX session of a process with a given set of options, :func:`probe` creates a
session on a tiny model (Y = X + X, static shape) with those options (the compile-cache folder replaced
by a scratch one) and reads the answer per key:

* ``refused``: the parser named the key (``Unknown provider option``, ``Invalid MIGraphX EP option``,
  ``Failed to parse provider option`` for a value); the key is dropped and the probe retried, so one
  refusal never hides another;
* ``ignored``: the session was created on the EP, which reports its options and leaves the key out;
* ``accepted``: reported, or the parser passed and the EP failed later (no GPU, a HIP or MIGraphX error);
* ``unknown``: the provider library could not be loaded, so no parser ran.

Answers are kept per process and onnxruntime build, by (key, value): a value the parser refused does
not condemn another value.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EP = "MIGraphXExecutionProvider"
#: the parsers' words for a refused option, with the key they name (group 1)
REFUSALS = (
    re.compile(r"Unknown provider option: \"([^\"]+)\""),
    re.compile(r"Invalid MIGraphX EP option:?\s*\"?([A-Za-z0-9_]+)"),
    re.compile(r"Failed to parse provider option \"([^\"]+)\""),
    re.compile(r"The value for the key '([^']+)' should be"),
)
#: ORT's words when the provider library itself cannot be loaded (no option parser ran)
LOAD_FAILURES = re.compile(r"Failed to load (shared )?library|cannot open shared object|"
                           r"MIGraphX Provider not available|undefined symbol", re.I)
#: options whose probe value is a scratch path rather than the user's (the probe must not write there)
SCRATCH_KEYS = frozenset({"migraphx_model_cache_dir"})


@dataclass(frozen=True)
class Verdict:
    """What the EP did with one option: ``state`` (accepted, refused, ignored, unknown) and the EP's ``words``."""

    state: str
    words: str = ""


#: (onnxruntime build, key, value) -> Verdict, for this process
_VERDICTS: dict[tuple[str, str, str], Verdict] = {}


def reset() -> None:
    """Forget every answer (tests)."""
    _VERDICTS.clear()


def _build(ort: Any) -> str:
    return f"{getattr(ort, '__version__', '?')}@{getattr(ort, '__file__', '?')}"


def build_name(ort: Any) -> str:
    """The onnxruntime build for messages: its distribution and version (``onnxruntime-migraphx 1.27.1``)."""
    version = getattr(ort, "__version__", "?")
    try:
        from importlib.metadata import packages_distributions

        names = packages_distributions().get("onnxruntime", [])
        migraphx = [n for n in names if "migraphx" in n.lower()]
        if migraphx or names:
            return f"{(migraphx or names)[0]} {version}"
    except Exception:  # noqa: BLE001 - metadata is a courtesy in a message
        pass
    return f"onnxruntime {version}"


def _key_of(value: object) -> str:
    return str(value)


def refused_key(message: str, keys: set[str] | frozenset[str]) -> tuple[str, str] | None:
    """(key, the parser's words) when *message* refuses one of *keys*, else None."""
    for pattern in REFUSALS:
        for found in pattern.finditer(message):
            if found.group(1) in keys:
                line = message[found.start():].splitlines()[0].strip()
                return found.group(1), line[:300]
    return None


def tiny_model(path: Path) -> Path:
    """Write the probe model (Y = X + X, float32 [1, 4], opset 13) to *path*. Raises OSError."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Add", ["X", "X"], ["Y"])], "aaco_migraphx_probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.save(model, str(path))
    return path


def _attempt(ort: Any, model: Path, options: Mapping[str, str],
             factory: Callable[..., Any] | None) -> tuple[bool, str, dict[str, str]]:
    """(on the EP, ORT's words, the EP's reported options) for one probe session."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            session = (factory or ort.InferenceSession)(str(model), sess_options=so,
                                                        providers=[(EP, dict(options)), "CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT's own error types
        return False, f"{exc}\n{printed.getvalue()}", {}
    on_ep = EP in list(session.get_providers())
    reported = dict((session.get_provider_options() or {}).get(EP) or {}) if on_ep else {}
    return on_ep, printed.getvalue(), reported


def probe(options: Mapping[str, object], ort: Any = None,
          factory: Callable[..., Any] | None = None) -> dict[str, Verdict]:
    """The EP's verdict on each of *options* (key -> value as the plugin would send them), asked once per
    process and build for each (key, value) not asked before (see the module docstring). *factory*
    replaces ``ort.InferenceSession`` (tests). Never raises: a probe that cannot run gives ``unknown``."""
    if ort is None:
        import onnxruntime

        ort = onnxruntime
    build = _build(ort)
    wanted = {str(k): _key_of(v) for k, v in options.items()}
    value = {k: ("<scratch>" if k in SCRATCH_KEYS else v) for k, v in wanted.items()}
    missing = {k: v for k, v in wanted.items() if (build, k, value[k]) not in _VERDICTS}
    if missing:
        for key, verdict in _ask(ort, missing, factory).items():
            _VERDICTS[(build, key, value[key])] = verdict
    return {k: _VERDICTS[(build, k, value[k])] for k in wanted}


def _ask(ort: Any, options: dict[str, str], factory: Callable[..., Any] | None) -> dict[str, Verdict]:
    found: dict[str, Verdict] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="aaco-migraphx-probe-") as folder:
            model = tiny_model(Path(folder) / "probe.onnx")
            remaining = {k: (str(Path(folder) / "cache") if k in SCRATCH_KEYS else v) for k, v in options.items()}
            for _ in range(len(options) + 1):
                on_ep, message, reported = _attempt(ort, model, remaining, factory)
                refused = refused_key(message, set(remaining))
                if refused:
                    found[refused[0]] = Verdict("refused", refused[1])
                    remaining.pop(refused[0])
                    continue
                words = _words(message)
                if on_ep:
                    for key in remaining:
                        ignored = bool(reported) and key not in reported
                        found[key] = Verdict("ignored" if ignored else "accepted",
                                             "not among the options the EP reports" if ignored else "")
                elif LOAD_FAILURES.search(message):
                    found.update({k: Verdict("unknown", words) for k in remaining})
                else:  # the parser passed; the EP failed afterwards (no GPU, HIP or MIGraphX error)
                    found.update({k: Verdict("accepted", f"parsed; the EP then failed: {words}") for k in remaining})
                break
    except Exception as exc:  # noqa: BLE001 - no onnx, no temp folder: the probe cannot say
        found.update({k: Verdict("unknown", f"the probe could not run: {exc}") for k in options if k not in found})
    return found


def _words(message: str) -> str:
    text = re.sub(r"\s+", " ", message).strip()
    fallback = re.search(r"EP Error (?!\*)(.*?) when using ", text)
    text = fallback.group(1) if fallback else text
    found = re.search(r"\[ONNXRuntimeError\] : \d+ : \w+ : (.*)", text)
    return (found.group(1) if found else text)[:300]


def summary() -> dict[str, dict[str, str]]:
    """Every answer of this process, as ``{"key=value": {"state", "words"}}`` (for reports and tests)."""
    return {f"{k}={v}": {"state": verdict.state, "words": verdict.words} for (_, k, v), verdict in _VERDICTS.items()}
