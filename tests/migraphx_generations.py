"""The MIGraphX EP generations, read from the source at pinned commits (issue 40), and an emulation of each over
the real CPU ONNX Runtime (:class:`GenerationSession`).

Generations: upstream microsoft/onnxruntime <= 1.22 (tags v1.20.0 ``c4fb724e8104``, v1.21.0 ``e0b66cad2820`` and
v1.22.1 ``89746dc19a0a``: the MIGraphX branch of the binding, migraphx_execution_provider_info.cc and the EP
constructor are identical in the three; read in the ROCm/onnxruntime mirror, which carries upstream's tags), AMD's
ROCm/onnxruntime fork at the heads of its ``rocmX.Y_internal_testing`` branches (stored 2026-11-28), and the PyPI
``onnxruntime-migraphx`` wheels 1.23.0-1.27.1, whose parser was run for real over stand-in libraries
(tests/migraphx_wheels.py; the keys they report cannot be observed without a GPU: taken as the fork 7.0's names).

Per generation: ``source`` (repository, ref, commit), ``accepted`` (the keys the MIGraphX branch of
onnxruntime/python/onnxruntime_pybind_state.cc compares ``option.first`` with, in source order; any other key
raises ``refusal``), ``reported`` (the keys ``MIGraphXExecutionProviderInfo::ToProviderOptions(const
MIGraphXExecutionProviderInfo&)`` in onnxruntime/core/providers/migraphx/migraphx_execution_provider_info.cc
returns, i.e. what ``get_provider_options()`` shows; upstream <= 1.22 and the fork 6.1-6.3 use ``trt_fp16_enable`` /
``migx_*``), ``env`` (every ``ORT_MIGRAPHX_*`` name in migraphx_execution_provider.{h,cc} but DUMP_MODEL_OPS),
``applies`` (``env``: the EP constructor takes only ``device_id`` from ``info`` and every other setting from the
environment, as upstream <= 1.22 and the fork 6.1-6.2 do; ``options``: ``get_flags_from_session_info(info)``
then ``get_flags_from_env()``, the variables over the options) and ``cache`` (``None``: no compile cache;
``program file``: ``load_precompiled_model`` / ``save_compiled_model`` of one path, switched on by
``ORT_MIGRAPHX_{SAVE,LOAD}_COMPILED_MODEL``; ``folder``: ``migraphx_model_cache_dir`` or
``ORT_MIGRAPHX_MODEL_CACHE_PATH``, one ``.mxr`` per input-shape hash).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import onnxruntime as ort

from pytest_aaco.measure.providers import MIGRAPHX_KEYS

_ENV_62 = (
    'ORT_MIGRAPHX_CACHE_PATH', 'ORT_MIGRAPHX_EXHAUSTIVE_TUNE', 'ORT_MIGRAPHX_FP16_ENABLE',
    'ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_INT8_ENABLE',
    'ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE', 'ORT_MIGRAPHX_LOAD_COMPILED_MODEL',
    'ORT_MIGRAPHX_LOAD_COMPILE_PATH', 'ORT_MIGRAPHX_SAVE_COMPILED_MODEL', 'ORT_MIGRAPHX_SAVE_COMPILE_PATH',
)
_ACCEPTED_62 = (
    'device_id', 'migraphx_fp16_enable', 'migraphx_int8_enable', 'migraphx_int8_calibration_table_name',
    'migraphx_use_native_calibration_table', 'migraphx_save_compiled_model', 'migraphx_save_model_path',
    'migraphx_load_compiled_model', 'migraphx_load_model_path', 'migraphx_exhaustive_tune',
)
_REPORTED_62 = (
    'device_id', 'trt_fp16_enable', 'migx_int8_enable', 'migx_save_compiled_model',
    'migx_load_compiled_model', 'migx_exhaustive_tune',
)
#: the fork's ROCm 6.4 and 6.5 heads: the binding's MIGraphX branch and migraphx_execution_provider_info.cc are
#: the same at both commits (``git diff fdb6fa9b8ba0 008a38525ff0``), so the two rows share these
_ACCEPTED_64 = (
    'device_id', 'migraphx_fp16_enable', 'migraphx_fp8_enable', 'migraphx_int8_enable',
    'migraphx_int8_calibration_table_name', 'migraphx_int8_use_native_calibration_table',
    'migraphx_model_cache_dir', 'migraphx_exhaustive_tune',
)
_REPORTED_64 = (
    'device_id', 'migraphx_fp16_enable', 'migraphx_fp8_enable', 'migraphx_int8_enable',
    'migraphx_model_cache_dir', 'migraphx_mem_limit', 'migraphx_external_alloc', 'migraphx_external_free',
    'migraphx_external_empty_cache', 'migraphx_arena_extend_strategy', 'migraphx_exhaustive_tune',
)
_ENV_64 = (
    'ORT_MIGRAPHX_CACHE_PATH', 'ORT_MIGRAPHX_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_EXHAUSTIVE_TUNE',
    'ORT_MIGRAPHX_EXHAUSTIVE_TUNE_OPS', 'ORT_MIGRAPHX_FP16_ENABLE', 'ORT_MIGRAPHX_FP8_ENABLE',
    'ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_INT8_ENABLE',
    'ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE', 'ORT_MIGRAPHX_MODEL_CACHE_PATH',
)
#: what the fork 7.0 EP reports; the PyPI wheels' report is taken to be the same (not observable without a GPU)
_REPORTED_70 = (
    'device_id', 'migraphx_fp16_enable', 'migraphx_bf16_enable', 'migraphx_fp8_enable',
    'migraphx_int8_enable', 'migraphx_model_cache_dir', 'migraphx_mem_limit', 'migraphx_external_alloc',
    'migraphx_external_free', 'migraphx_external_empty_cache', 'migraphx_arena_extend_strategy',
    'migraphx_exhaustive_tune',
)
#: the binding's words for a key it does not compare with (fork and upstream <= 1.22), and the PyPI parser's
FORK_REFUSAL = "Invalid MIGraphX EP option: {key}"
PYPI_REFUSAL = 'Unknown provider option: "{key}".'

GENERATIONS: dict[str, dict[str, object]] = {
    'upstream-1.22': {
        "source": ("microsoft/onnxruntime", 'v1.22.1 (= v1.20.0, v1.21.0)', '89746dc19a0a1ae59ebf4b16df9acab8f99f3925'),
        'accepted': _ACCEPTED_62,
        'reported': _REPORTED_62,
        'env': _ENV_62,
        'applies': 'env', 'cache': 'program file', 'refusal': FORK_REFUSAL,
    },
    'fork-6.1': {
        "source": ("ROCm/onnxruntime", 'rocm6.1_internal_testing', 'd5697e54ef3a7ee5577e69014885b24a82569f0c'),
        'accepted': (
            'device_id', 'migraphx_fp16_enable', 'migraphx_int8_enable', 'migraphx_int8_calibration_table_name',
            'migraphx_use_native_calibration_table',
        ),
        'reported': (
            'device_id', 'trt_fp16_enable', 'migx_int8_enable',
        ),
        'env': (
            'ORT_MIGRAPHX_CACHE_PATH', 'ORT_MIGRAPHX_FP16_ENABLE', 'ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME',
            'ORT_MIGRAPHX_INT8_ENABLE', 'ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE',
        ),
        'applies': 'env', 'cache': None, 'refusal': FORK_REFUSAL,
    },
    'fork-6.2': {
        "source": ("ROCm/onnxruntime", 'rocm6.2_internal_testing', 'b434d2d6595b23521778860441dade9912ac33e0'),
        'accepted': _ACCEPTED_62,
        'reported': _REPORTED_62,
        'env': _ENV_62,
        'applies': 'env', 'cache': 'program file', 'refusal': FORK_REFUSAL,
    },
    'fork-6.3': {
        "source": ("ROCm/onnxruntime", 'rocm6.3_internal_testing', '9af9406c09d918316af08ef1397414b85c0ae9d9'),
        'accepted': (
            'device_id', 'migraphx_fp16_enable', 'migraphx_fp8_enable', 'migraphx_int8_enable',
            'migraphx_int8_calibration_table_name', 'migraphx_use_native_calibration_table',
            'migraphx_save_compiled_model', 'migraphx_save_model_path', 'migraphx_load_compiled_model',
            'migraphx_load_model_path', 'migraphx_exhaustive_tune',
        ),
        'reported': (
            'device_id', 'trt_fp16_enable', 'migx_fp8_enable', 'migx_int8_enable', 'migx_save_compiled_model',
            'migx_load_compiled_model', 'migx_mem_limit', 'migx_external_alloc', 'migx_external_free',
            'migx_external_empty_cache', 'migx_arena_extend_strategy', 'migx_exhaustive_tune',
        ),
        'env': (
            'ORT_MIGRAPHX_CACHE_PATH', 'ORT_MIGRAPHX_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_EXHAUSTIVE_TUNE',
            'ORT_MIGRAPHX_EXHAUSTIVE_TUNE_OPS', 'ORT_MIGRAPHX_FP16_ENABLE', 'ORT_MIGRAPHX_FP8_ENABLE',
            'ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_INT8_ENABLE',
            'ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE', 'ORT_MIGRAPHX_LOAD_COMPILED_MODEL',
            'ORT_MIGRAPHX_LOAD_COMPILED_PATH', 'ORT_MIGRAPHX_SAVE_COMPILED_MODEL',
            'ORT_MIGRAPHX_SAVE_COMPILED_PATH',
        ),
        'applies': 'options', 'cache': 'program file', 'refusal': FORK_REFUSAL,
    },
    'fork-6.4': {
        "source": ("ROCm/onnxruntime", 'rocm6.4_internal_testing', 'fdb6fa9b8ba0331c75598a22b899b469aef116a8'),
        'accepted': _ACCEPTED_64,
        'reported': _REPORTED_64,
        'env': _ENV_64,
        'applies': 'options', 'cache': 'folder', 'refusal': FORK_REFUSAL,
    },
    'fork-6.5': {
        "source": ("ROCm/onnxruntime", 'rocm6.5_internal_testing', '008a38525ff0c8bb7ba09fe8a3f8aef691a8f3ab'),
        'accepted': _ACCEPTED_64,
        'reported': _REPORTED_64,
        'env': _ENV_64,
        'applies': 'options', 'cache': 'folder', 'refusal': FORK_REFUSAL,
    },
    'fork-7.0': {
        "source": ("ROCm/onnxruntime", 'rocm7.0_internal_testing', '3998378a4e429832b2a0a863bdf36bcafa1bcd4d'),
        'accepted': (
            'device_id', 'migraphx_fp16_enable', 'migraphx_bf16_enable', 'migraphx_fp8_enable',
            'migraphx_int8_enable', 'migraphx_int8_calibration_table_name',
            'migraphx_int8_use_native_calibration_table', 'migraphx_model_cache_dir', 'migraphx_exhaustive_tune',
        ),
        'reported': _REPORTED_70,
        'env': (
            'ORT_MIGRAPHX_BF16_ENABLE', 'ORT_MIGRAPHX_CACHE_PATH', 'ORT_MIGRAPHX_CALIBRATION_TABLE_NAME',
            'ORT_MIGRAPHX_EXHAUSTIVE_TUNE', 'ORT_MIGRAPHX_EXHAUSTIVE_TUNE_OPS', 'ORT_MIGRAPHX_FP16_ENABLE',
            'ORT_MIGRAPHX_FP8_ENABLE', 'ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_INT8_ENABLE',
            'ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE', 'ORT_MIGRAPHX_MODEL_CACHE_PATH',
        ),
        'applies': 'options', 'cache': 'folder', 'refusal': FORK_REFUSAL,
    },
    'pypi-1.23+': {
        "source": ("PyPI onnxruntime-migraphx", '1.23.0-1.27.1, real wheels', 'tests/migraphx_wheels.py'),
        'accepted': tuple(sorted(MIGRAPHX_KEYS)),
        'reported': _REPORTED_70,
        'env': (
            'ORT_MIGRAPHX_BF16_ENABLE', 'ORT_MIGRAPHX_CACHE_PATH', 'ORT_MIGRAPHX_EXHAUSTIVE_TUNE',
            'ORT_MIGRAPHX_FP16_ENABLE', 'ORT_MIGRAPHX_FP8_ENABLE', 'ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME',
            'ORT_MIGRAPHX_INT8_ENABLE', 'ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE',
            'ORT_MIGRAPHX_MODEL_CACHE_PATH',
        ),
        'applies': 'options', 'cache': 'folder', 'refusal': PYPI_REFUSAL,
    },
}


def applied_unreported(name: str) -> tuple[str, ...]:
    """Keys generation *name*'s binding takes that its ``get_provider_options()`` does not list by that name."""
    row = GENERATIONS[name]
    return tuple(k for k in row["accepted"] if k not in row["reported"])  # type: ignore[attr-defined,operator]


EP = "MIGraphXExecutionProvider"
#: the real CPU InferenceSession, taken before a test replaces ``onnxruntime.InferenceSession``
REAL_SESSION = ort.InferenceSession
#: each setting the EP applies, by the keys the bindings take for it (first: the current name)
SETTINGS = {
    "fp16": ("migraphx_fp16_enable",), "bf16": ("migraphx_bf16_enable",), "fp8": ("migraphx_fp8_enable",),
    "int8": ("migraphx_int8_enable",), "table": ("migraphx_int8_calibration_table_name",),
    "native": ("migraphx_int8_use_native_calibration_table", "migraphx_use_native_calibration_table"),
    "exhaustive tune": ("migraphx_exhaustive_tune",),
}
#: the variable of each setting (``migraphx_env_vars`` in migraphx_execution_provider.h, every generation that has it)
SETTING_ENVS = {"fp16": "ORT_MIGRAPHX_FP16_ENABLE", "bf16": "ORT_MIGRAPHX_BF16_ENABLE",
                "fp8": "ORT_MIGRAPHX_FP8_ENABLE", "int8": "ORT_MIGRAPHX_INT8_ENABLE",
                "table": "ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME",
                "native": "ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE",
                "exhaustive tune": "ORT_MIGRAPHX_EXHAUSTIVE_TUNE"}
#: the names under which upstream <= 1.22 and the fork 6.1-6.3 report a key (migraphx_execution_provider_info.cc)
OLD_NAMES = {"trt_fp16_enable": "migraphx_fp16_enable", "migx_int8_enable": "migraphx_int8_enable",
             "migx_fp8_enable": "migraphx_fp8_enable", "migx_exhaustive_tune": "migraphx_exhaustive_tune",
             "migx_save_compiled_model": "migraphx_save_compiled_model",
             "migx_load_compiled_model": "migraphx_load_compiled_model"}


def _on(value: object) -> bool:
    return str(value).strip().lower() in ("1", "true")


def applied(name: str, options: dict[str, str], environ: Any = None) -> dict[str, tuple[str, str]]:
    """What generation *name*'s EP applies: setting -> (value, how: ``option``, ``env`` or ``option+env``).
    The variable (:data:`SETTING_ENVS`) is read where the generation has it, over the option; the option only where
    the EP reads its options (``applies`` = ``options``)."""
    row = GENERATIONS[name]
    env = os.environ if environ is None else environ
    out: dict[str, tuple[str, str]] = {}
    for setting, keys in SETTINGS.items():
        key = next((k for k in keys if k in options), None)
        variable = SETTING_ENVS[setting]
        from_env = env.get(variable, "") if variable in row["env"] else ""  # type: ignore[operator]
        by_option = key is not None and row["applies"] == "options"
        if from_env:
            out[setting] = (from_env, "option+env" if by_option else "env")
        elif by_option:
            out[setting] = (options[key], "option")  # type: ignore[index]
    return out


class GenerationSession:
    """The real CPU InferenceSession, its MIGraphX EP emulated as generation :attr:`generation` builds it: the
    binding refuses a key it does not compare with (its own words), the EP applies what :func:`applied` says,
    reads the int8 calibration table at ``GetCachePath(ORT_MIGRAPHX_CACHE_PATH, name)``, "compiles" by its cache
    mechanism (``cache``), and ``get_provider_options()`` lists ``reported``. :attr:`compiles` logs, per
    creation, ``compiled`` or ``loaded``."""

    generation = "fork-6.4"
    compiles: list[str] = []

    def __init__(self, path: str, sess_options: Any = None, providers: Any = None) -> None:
        row = GENERATIONS[self.generation]
        options = next((dict(p[1]) for p in providers or [] if isinstance(p, tuple) and p[0] == EP), {})
        for key in options:
            if key not in row["accepted"]:  # type: ignore[operator]
                raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : " + str(row["refusal"]).format(key=key))
        self.options = {k: str(v) for k, v in options.items()}
        self.applied = applied(self.generation, self.options)
        self._read_table()
        self.compiles.append(self._compile(row, Path(path)))
        self._session = REAL_SESSION(path, sess_options=sess_options, providers=["CPUExecutionProvider"])

    def _read_table(self) -> None:
        int8, table = self.applied.get("int8", ("0", ""))[0], self.applied.get("table", ("", ""))[0]
        if _on(int8) and table:
            folder = os.environ.get("ORT_MIGRAPHX_CACHE_PATH", "")
            where = os.path.join(folder, table) if folder else table
            if not os.path.isfile(where):
                words = "ENV Failed to read calibration table " if folder else "Failed to read INT8 calibration table "
                raise RuntimeError(words + where)

    def _compile(self, row: dict[str, object], model: Path) -> str:
        env = os.environ
        key = hashlib.sha256(model.read_bytes() + repr(sorted(self.applied.items())).encode()).hexdigest()[:16]
        if row["cache"] == "folder":
            folder = env.get("ORT_MIGRAPHX_MODEL_CACHE_PATH") or self.options.get("migraphx_model_cache_dir", "")
            if not folder:
                return "compiled"
            program = Path(folder) / f"{key}.mxr"
            if program.is_file():
                return "loaded"
            program.parent.mkdir(parents=True, exist_ok=True)
            program.write_bytes(b"mxr")
            return "compiled"
        if row["cache"] == "program file":
            spelled = "COMPILED" if "ORT_MIGRAPHX_SAVE_COMPILED_PATH" in row["env"] else "COMPILE"  # type: ignore[operator]
            by_options = row["applies"] == "options"
            load = env.get("ORT_MIGRAPHX_LOAD_COMPILED_MODEL") or (
                self.options.get("migraphx_load_compiled_model", "0") if by_options else "0")
            save = env.get("ORT_MIGRAPHX_SAVE_COMPILED_MODEL") or (
                self.options.get("migraphx_save_compiled_model", "0") if by_options else "0")
            load_path = env.get(f"ORT_MIGRAPHX_LOAD_{spelled}_PATH") or (
                self.options.get("migraphx_load_model_path", "./compiled_model.mxr") if by_options else "")
            save_path = env.get(f"ORT_MIGRAPHX_SAVE_{spelled}_PATH") or (
                self.options.get("migraphx_save_model_path", "./compiled_model.mxr") if by_options else "")
            if _on(load) and load_path and os.path.isfile(load_path):
                return "loaded"
            if _on(save) and save_path:
                Path(save_path).write_bytes(b"mxr")
            return "compiled"
        return "compiled"

    def get_providers(self) -> list[str]:
        return [EP, "CPUExecutionProvider"]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        reported = GENERATIONS[self.generation]["reported"]
        return {EP: {k: self.options.get(OLD_NAMES.get(k, k), "0") for k in reported}}  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)
