"""The MIGraphX EP generations of AMD's ROCm/onnxruntime fork, read from the source at pinned commits
(issue 40): the heads of the ``rocmX.Y_internal_testing`` branches as stored on 2026-11-28.

Per generation: ``source`` (repository, branch, commit), ``accepted`` (the keys the MIGraphX branch of
onnxruntime/python/onnxruntime_pybind_state.cc compares ``option.first`` with, in source order; any other key
raises "Invalid MIGraphX EP option"), ``reported`` (the keys
``MIGraphXExecutionProviderInfo::ToProviderOptions(const MIGraphXExecutionProviderInfo&)`` in
onnxruntime/core/providers/migraphx/migraphx_execution_provider_info.cc returns, i.e. what
``get_provider_options()`` shows; on 6.1-6.3 its constants are ``trt_fp16_enable`` / ``migx_*``, not the
names the binding takes) and ``env`` (every ``ORT_MIGRAPHX_*`` name in migraphx_execution_provider.{h,cc}).
Not tabled yet: upstream microsoft/onnxruntime pybind <= 1.22, and the per-option-set columns of the issue.
"""

from __future__ import annotations

GENERATIONS: dict[str, dict[str, object]] = {
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
    },
    'fork-6.2': {
        "source": ("ROCm/onnxruntime", 'rocm6.2_internal_testing', 'b434d2d6595b23521778860441dade9912ac33e0'),
        'accepted': (
            'device_id', 'migraphx_fp16_enable', 'migraphx_int8_enable', 'migraphx_int8_calibration_table_name',
            'migraphx_use_native_calibration_table', 'migraphx_save_compiled_model', 'migraphx_save_model_path',
            'migraphx_load_compiled_model', 'migraphx_load_model_path', 'migraphx_exhaustive_tune',
        ),
        'reported': (
            'device_id', 'trt_fp16_enable', 'migx_int8_enable', 'migx_save_compiled_model',
            'migx_load_compiled_model', 'migx_exhaustive_tune',
        ),
        'env': (
            'ORT_MIGRAPHX_CACHE_PATH', 'ORT_MIGRAPHX_EXHAUSTIVE_TUNE', 'ORT_MIGRAPHX_FP16_ENABLE',
            'ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_INT8_ENABLE',
            'ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE', 'ORT_MIGRAPHX_LOAD_COMPILED_MODEL',
            'ORT_MIGRAPHX_LOAD_COMPILE_PATH', 'ORT_MIGRAPHX_SAVE_COMPILED_MODEL', 'ORT_MIGRAPHX_SAVE_COMPILE_PATH',
        ),
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
    },
    'fork-6.4': {
        "source": ("ROCm/onnxruntime", 'rocm6.4_internal_testing', 'fdb6fa9b8ba0331c75598a22b899b469aef116a8'),
        'accepted': (
            'device_id', 'migraphx_fp16_enable', 'migraphx_fp8_enable', 'migraphx_int8_enable',
            'migraphx_int8_calibration_table_name', 'migraphx_int8_use_native_calibration_table',
            'migraphx_model_cache_dir', 'migraphx_exhaustive_tune',
        ),
        'reported': (
            'device_id', 'migraphx_fp16_enable', 'migraphx_fp8_enable', 'migraphx_int8_enable',
            'migraphx_model_cache_dir', 'migraphx_mem_limit', 'migraphx_external_alloc', 'migraphx_external_free',
            'migraphx_external_empty_cache', 'migraphx_arena_extend_strategy', 'migraphx_exhaustive_tune',
        ),
        'env': (
            'ORT_MIGRAPHX_CACHE_PATH', 'ORT_MIGRAPHX_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_EXHAUSTIVE_TUNE',
            'ORT_MIGRAPHX_EXHAUSTIVE_TUNE_OPS', 'ORT_MIGRAPHX_FP16_ENABLE', 'ORT_MIGRAPHX_FP8_ENABLE',
            'ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_INT8_ENABLE',
            'ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE', 'ORT_MIGRAPHX_MODEL_CACHE_PATH',
        ),
    },
    'fork-6.5': {
        "source": ("ROCm/onnxruntime", 'rocm6.5_internal_testing', '008a38525ff0c8bb7ba09fe8a3f8aef691a8f3ab'),
        'accepted': (
            'device_id', 'migraphx_fp16_enable', 'migraphx_fp8_enable', 'migraphx_int8_enable',
            'migraphx_int8_calibration_table_name', 'migraphx_int8_use_native_calibration_table',
            'migraphx_model_cache_dir', 'migraphx_exhaustive_tune',
        ),
        'reported': (
            'device_id', 'migraphx_fp16_enable', 'migraphx_fp8_enable', 'migraphx_int8_enable',
            'migraphx_model_cache_dir', 'migraphx_mem_limit', 'migraphx_external_alloc', 'migraphx_external_free',
            'migraphx_external_empty_cache', 'migraphx_arena_extend_strategy', 'migraphx_exhaustive_tune',
        ),
        'env': (
            'ORT_MIGRAPHX_CACHE_PATH', 'ORT_MIGRAPHX_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_EXHAUSTIVE_TUNE',
            'ORT_MIGRAPHX_EXHAUSTIVE_TUNE_OPS', 'ORT_MIGRAPHX_FP16_ENABLE', 'ORT_MIGRAPHX_FP8_ENABLE',
            'ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_INT8_ENABLE',
            'ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE', 'ORT_MIGRAPHX_MODEL_CACHE_PATH',
        ),
    },
    'fork-7.0': {
        "source": ("ROCm/onnxruntime", 'rocm7.0_internal_testing', '3998378a4e429832b2a0a863bdf36bcafa1bcd4d'),
        'accepted': (
            'device_id', 'migraphx_fp16_enable', 'migraphx_bf16_enable', 'migraphx_fp8_enable',
            'migraphx_int8_enable', 'migraphx_int8_calibration_table_name',
            'migraphx_int8_use_native_calibration_table', 'migraphx_model_cache_dir', 'migraphx_exhaustive_tune',
        ),
        'reported': (
            'device_id', 'migraphx_fp16_enable', 'migraphx_bf16_enable', 'migraphx_fp8_enable',
            'migraphx_int8_enable', 'migraphx_model_cache_dir', 'migraphx_mem_limit', 'migraphx_external_alloc',
            'migraphx_external_free', 'migraphx_external_empty_cache', 'migraphx_arena_extend_strategy',
            'migraphx_exhaustive_tune',
        ),
        'env': (
            'ORT_MIGRAPHX_BF16_ENABLE', 'ORT_MIGRAPHX_CACHE_PATH', 'ORT_MIGRAPHX_CALIBRATION_TABLE_NAME',
            'ORT_MIGRAPHX_EXHAUSTIVE_TUNE', 'ORT_MIGRAPHX_EXHAUSTIVE_TUNE_OPS', 'ORT_MIGRAPHX_FP16_ENABLE',
            'ORT_MIGRAPHX_FP8_ENABLE', 'ORT_MIGRAPHX_INT8_CALIBRATION_TABLE_NAME', 'ORT_MIGRAPHX_INT8_ENABLE',
            'ORT_MIGRAPHX_INT8_USE_NATIVE_CALIBRATION_TABLE', 'ORT_MIGRAPHX_MODEL_CACHE_PATH',
        ),
    },
}


def applied_unreported(name: str) -> tuple[str, ...]:
    """Keys generation *name*'s binding takes that its ``get_provider_options()`` does not list by that name."""
    row = GENERATIONS[name]
    return tuple(k for k in row["accepted"] if k not in row["reported"])  # type: ignore[attr-defined,operator]
