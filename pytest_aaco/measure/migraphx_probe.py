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
not condemn another value. :func:`plan` turns the answers into what is sent (the options, and the
``ORT_MIGRAPHX_*`` cache variables set around the session's creation by :func:`environment`).

The answer belongs to the onnxruntime that will build the session, so the probe runs in that
process: in the plugin's (:func:`pytest_aaco.measure.inference.build_session`) and in the side
worker's, another interpreter that never imports pytest_aaco (``--aaco-compare-python``;
pytest_aaco/sidebyside/worker.py loads this file by its path). Hence this module needs only the
standard library and onnxruntime, writes its probe model without the ``onnx`` package, and keeps to
Python 3.8 syntax.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
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
#: the option that points the EP at its compile cache
CACHE_KEY = "migraphx_model_cache_dir"
#: options whose probe value is a scratch path rather than the user's (the probe must not write there)
SCRATCH_KEYS = frozenset({CACHE_KEY})
#: the variable through which the MIGraphX EP of AMD's fork 6.4 on and of the PyPI wheels (1.23 on) reads its
#: compile-cache folder when it ignores :data:`CACHE_KEY`; upstream <= 1.22 and the fork <= 6.3 have none
#: (tests/migraphx_generations.py)
MODEL_CACHE_ENV = "ORT_MIGRAPHX_MODEL_CACHE_PATH"
#: the folder of the int8 calibration table in every generation (``GetCachePath(calibration_cache_path_,
#: int8_calibration_cache_name_)`` in migraphx_execution_provider.cc): never a compile cache, never set here
CALIBRATION_FOLDER_ENV = "ORT_MIGRAPHX_CACHE_PATH"
#: the key whose acceptance tells a build that saves and loads one compiled program file (upstream <= 1.22, fork
#: 6.2 and 6.3) from one with no compile cache at all (fork 6.1)
SAVE_KEY = "migraphx_save_compiled_model"
#: the variables of that program file: save and load on (``"1"``), and its path under both spellings (upstream
#: <= 1.22 and fork 6.2 read ``..._COMPILE_PATH``, fork 6.3 ``..._COMPILED_PATH``); each build reads its own
PROGRAM_FILE_SWITCHES = ("ORT_MIGRAPHX_SAVE_COMPILED_MODEL", "ORT_MIGRAPHX_LOAD_COMPILED_MODEL")
PROGRAM_FILE_PATHS = ("ORT_MIGRAPHX_SAVE_COMPILE_PATH", "ORT_MIGRAPHX_LOAD_COMPILE_PATH",
                      "ORT_MIGRAPHX_SAVE_COMPILED_PATH", "ORT_MIGRAPHX_LOAD_COMPILED_PATH")
#: the program file's name inside the keyed folder
PROGRAM_FILE = "aaco_compiled_model.mxr"
#: every variable that steers a MIGraphX compile cache: one set by the user wins over the plugin's folder
CACHE_ENVS = (MODEL_CACHE_ENV, *PROGRAM_FILE_SWITCHES, *PROGRAM_FILE_PATHS)
#: the plan's compile-cache mechanism on a build that has none (fork 6.1): the item records its session build time
NO_CACHE = "no compile cache on this build"
#: the variable each precision / tuning key has in the EP; the EP reads it over its options in every generation,
#: and upstream <= 1.22 and the fork 6.1-6.2 read these settings *only* from it (their EP constructor takes only
#: ``device_id`` from the options), so the plan sets it too (:func:`precision_env`)
PRECISION_ENVS = {
    "migraphx_fp16_enable": "ORT_MIGRAPHX_FP16_ENABLE",
    "migraphx_bf16_enable": "ORT_MIGRAPHX_BF16_ENABLE",
    "migraphx_fp8_enable": "ORT_MIGRAPHX_FP8_ENABLE",
    "migraphx_int8_enable": "ORT_MIGRAPHX_INT8_ENABLE",
    "migraphx_int8_calibration_table_name": "ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME",
    "migraphx_int8_use_native_calibration_table": "ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE",
    "migraphx_use_native_calibration_table": "ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE",
    "migraphx_exhaustive_tune": "ORT_MIGRAPHX_EXHAUSTIVE_TUNE",
}


@dataclass(frozen=True)
class OptionCheck:
    """What the EP did with one option: ``state`` (accepted, refused, ignored, unknown) and the EP's ``words``."""

    state: str
    words: str = ""


#: (onnxruntime build, key, value) -> OptionCheck, for this process
_CHECKS: dict[tuple[str, str, str], OptionCheck] = {}


def reset() -> None:
    """Forget every answer (tests)."""
    _CHECKS.clear()


def _build(ort: ModuleType) -> str:
    return f"{getattr(ort, '__version__', '?')}@{getattr(ort, '__file__', '?')}"


def build_name(ort: ModuleType) -> str:
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


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def _field(number: int, value: int | str | bytes) -> bytes:
    """One protobuf field: a varint for an int, length-delimited bytes otherwise."""
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode("utf-8") if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _float_tensor(name: str, dims: tuple[int, ...]) -> bytes:
    """ValueInfoProto ``name``: float32 tensor of static *dims* (onnx.proto: ValueInfoProto, TypeProto)."""
    shape = b"".join(_field(1, _field(1, dim)) for dim in dims)  # TensorShapeProto.dim.dim_value
    tensor = _field(1, 1) + _field(2, shape)  # TypeProto.Tensor: elem_type FLOAT (1), shape
    return _field(1, name) + _field(2, _field(1, tensor))


def tiny_model_bytes() -> bytes:
    """The probe model (Y = X + X, float32 [1, 4], opset 13, IR version 7) as ONNX ModelProto bytes,
    encoded here from onnx.proto's field numbers (https://github.com/onnx/onnx/blob/main/onnx/onnx.proto)
    so that an environment without the ``onnx`` package can be asked too."""
    node = _field(1, "X") + _field(1, "X") + _field(2, "Y") + _field(4, "Add")  # NodeProto input, output, op_type
    graph = (_field(1, node) + _field(2, "aaco_migraphx_probe")  # GraphProto node, name
             + _field(11, _float_tensor("X", (1, 4))) + _field(12, _float_tensor("Y", (1, 4))))
    opset = _field(1, "") + _field(2, 13)  # OperatorSetIdProto domain "", version 13
    return _field(1, 7) + _field(7, graph) + _field(8, opset)  # ModelProto ir_version, graph, opset_import


def tiny_model(path: Path) -> Path:
    """Write the probe model (:func:`tiny_model_bytes`) to *path*. Raises OSError."""
    path.write_bytes(tiny_model_bytes())
    return path


def _attempt(ort: ModuleType, model: Path, options: Mapping[str, str],
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


def probe(options: Mapping[str, object], ort: ModuleType | None = None,
          factory: Callable[..., Any] | None = None) -> dict[str, OptionCheck]:
    """What the EP does with each of *options* (key -> value as the plugin would send them; an
    :class:`OptionCheck` per key), asked once per process and build for each (key, value) not asked
    before (see the module docstring). *factory* replaces ``ort.InferenceSession`` (tests). Never
    raises: a probe that cannot run gives ``unknown``."""
    if ort is None:
        import onnxruntime

        ort = onnxruntime
    build = _build(ort)
    wanted = {str(k): _key_of(v) for k, v in options.items()}
    value = {k: ("<scratch>" if k in SCRATCH_KEYS else v) for k, v in wanted.items()}
    missing = {k: v for k, v in wanted.items() if (build, k, value[k]) not in _CHECKS}
    if missing:
        for key, check in _ask(ort, missing, factory).items():
            _CHECKS[(build, key, value[key])] = check
    return {k: _CHECKS[(build, k, value[k])] for k in wanted}


def _ask(ort: ModuleType, options: dict[str, str], factory: Callable[..., Any] | None) -> dict[str, OptionCheck]:
    found: dict[str, OptionCheck] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="aaco-migraphx-probe-") as folder:
            model = tiny_model(Path(folder) / "probe.onnx")
            remaining = {k: (str(Path(folder) / "cache") if k in SCRATCH_KEYS else v) for k, v in options.items()}
            for _ in range(len(options) + 1):
                on_ep, message, reported = _attempt(ort, model, remaining, factory)
                refused = refused_key(message, set(remaining))
                if refused:
                    found[refused[0]] = OptionCheck("refused", refused[1])
                    remaining.pop(refused[0])
                    continue
                words = _words(message)
                if on_ep:
                    for key in remaining:
                        ignored = bool(reported) and key not in reported
                        found[key] = OptionCheck("ignored" if ignored else "accepted",
                                                 "not among the options the EP reports" if ignored else "")
                elif LOAD_FAILURES.search(message):
                    found.update({k: OptionCheck("unknown", words) for k in remaining})
                else:  # the parser passed; the EP failed afterwards (no GPU, HIP or MIGraphX error)
                    found.update({k: OptionCheck("accepted", f"parsed; the EP then failed: {words}")
                                  for k in remaining})
                break
    except Exception as exc:  # noqa: BLE001 - no onnx, no temp folder: the probe cannot say
        found.update({k: OptionCheck("unknown", f"the probe could not run: {exc}") for k in options if k not in found})
    return found


def _words(message: str) -> str:
    text = re.sub(r"\s+", " ", message).strip()
    fallback = re.search(r"EP Error (?!\*)(.*?) when using ", text)
    text = fallback.group(1) if fallback else text
    found = re.search(r"\[ONNXRuntimeError\] : \d+ : \w+ : (.*)", text)
    return (found.group(1) if found else text)[:300]


def summary() -> dict[str, dict[str, str]]:
    """Every answer of this process, as ``{"key=value": {"state", "words"}}`` (for reports and tests)."""
    return {f"{k}={v}": {"state": check.state, "words": check.words} for (_, k, v), check in _CHECKS.items()}


@dataclass(frozen=True)
class Plan:
    """What to send to the MIGraphX EP after asking it (:func:`plan`): the provider ``options``, the
    ``env`` to set around the session's creation, the keys it ``refused`` (key -> the parser's words;
    the session must not be built), the keys it ``takes`` (asked only when one was refused, for the
    message), the ``build`` asked (:func:`build_name`) and how the compile cache reaches the EP (``cache``:
    :data:`CACHE_KEY`, :data:`MODEL_CACHE_ENV`, ``program file``, :data:`NO_CACHE`, ``user``; ``""``
    without a plugin folder)."""

    options: dict[str, str]
    env: dict[str, str]
    refused: dict[str, str]
    takes: tuple[str, ...]
    build: str
    cache: str = ""

    def to_dict(self) -> dict[str, object]:
        """The plan as JSON-able data (the side worker's reply)."""
        return {"options": dict(self.options), "env": dict(self.env), "refused": dict(self.refused),
                "takes": list(self.takes), "build": self.build, "cache": self.cache}


def plan(options: Mapping[str, object], ort: ModuleType | None = None, *, plugin_cache: str | None = None,
         questions: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None,
         factory: Callable[..., Any] | None = None) -> Plan:
    """Ask the EP about *options* (:func:`probe`) and decide what to send.

    *plugin_cache*: the compile-cache folder pytest-aaco put in *options* as :data:`CACHE_KEY` (None when
    the user's options name the folder, or there is none). Where the EP ignores that key, the folder goes
    through :data:`MODEL_CACHE_ENV`; where it refuses it, the EP is asked about :data:`SAVE_KEY`: a build
    that takes it saves and loads one program file, pointed at ``<folder>/``:data:`PROGRAM_FILE` through
    :data:`PROGRAM_FILE_SWITCHES` and :data:`PROGRAM_FILE_PATHS` (:func:`program_file_env`); one that refuses it
    has no compile cache (``cache`` :data:`NO_CACHE`). A cache variable of :data:`CACHE_ENVS` already in
    *environ* (default ``os.environ``) wins (``cache`` ``user``; the plugin warns about it).
    :data:`CALIBRATION_FOLDER_ENV` is never set: it moves the int8 calibration table. Each precision key
    of *options* the EP did not refuse also goes through its variable (:func:`precision_env`), which
    *environ* may already set. *questions* (key -> a value every parser takes) are asked only when a key of
    *options* is refused, so the message can say which keys the EP takes. Never raises (see :func:`probe`).
    """
    if ort is None:
        import onnxruntime

        ort = onnxruntime
    checks = probe(options, ort, factory)
    out = {str(k): str(v) for k, v in options.items()}
    given = os.environ if environ is None else environ
    env: dict[str, str] = {}
    cache = ""
    if plugin_cache is not None:
        state = checks.get(CACHE_KEY, OptionCheck("accepted")).state
        cache = CACHE_KEY
        if state in ("refused", "ignored"):
            out.pop(CACHE_KEY, None)
            if any(name in given for name in CACHE_ENVS):
                cache = "user"
            elif state == "ignored":
                env, cache = {MODEL_CACHE_ENV: plugin_cache}, MODEL_CACHE_ENV
            elif probe({SAVE_KEY: "False"}, ort, factory)[SAVE_KEY].state in ("accepted", "ignored"):
                env, cache = program_file_env(plugin_cache), "program file"
            else:
                cache = NO_CACHE
    env.update(precision_env({k: v for k, v in out.items() if checks[k].state != "refused"}, given))
    refused = {k: v.words for k, v in checks.items() if v.state == "refused" and k in out}
    takes: tuple[str, ...] = ()
    if refused and questions:
        answers = probe(questions, ort, factory)
        takes = tuple(sorted(k for k, v in answers.items() if v.state in ("accepted", "ignored")))
    return Plan(out, env, refused, takes, build_name(ort), cache)


def program_file_env(folder: str) -> dict[str, str]:
    """The environment that makes a MIGraphX EP of upstream <= 1.22 or the fork 6.2-6.3 load its compiled program
    from ``<folder>/``:data:`PROGRAM_FILE` when it is there and save it there after compiling
    (``load_precompiled_model`` / ``save_compiled_model`` in their migraphx_execution_provider.cc). The EP has one
    such path, so a model it splits into several MIGraphX partitions would share one file: benchmark models the
    EP takes whole."""
    path = str(Path(folder) / PROGRAM_FILE)
    return {**{name: "1" for name in PROGRAM_FILE_SWITCHES}, **{name: path for name in PROGRAM_FILE_PATHS}}


def precision_env(options: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The :data:`PRECISION_ENVS` variable of each precision / tuning key of *options* (booleans as ``"1"`` /
    ``"0"``, as the EP's ``std::stoi`` reads them; the table name as given), except those *environ* sets
    already (the user's own value wins, with the plugin's warning)."""
    env: dict[str, str] = {}
    for key, value in options.items():
        name = PRECISION_ENVS.get(key)
        if name is None or name in environ:
            continue
        text = str(value)
        env[name] = {"true": "1", "false": "0"}.get(text.strip().lower(), text)
    return env


def cache_env(folder: str) -> dict[str, str]:
    """The environment that points a MIGraphX EP ignoring :data:`CACHE_KEY` at its compile-cache *folder*."""
    return {MODEL_CACHE_ENV: folder}


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """Set *env* in ``os.environ`` for the ``with`` block only; the old values (or their absence) come back."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
