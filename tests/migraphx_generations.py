"""What each generation of the MIGraphX EP reports back from ``get_provider_options()``, read from the
source at a pinned commit (issue 40). Only rows read at the commit named are here; the other generations
(upstream pybind <= 1.22, fork 6.1-6.3) are not yet tabled.

Each entry: ``source`` (repository, commit, path read) and ``reported`` (the keys
``MIGraphXExecutionProviderInfo::ToProviderOptions`` returns, for the info the EP builds from options).
"""

from __future__ import annotations

GENERATIONS: dict[str, dict[str, object]] = {
    "fork-6.4-7.0": {
        "source": ("ROCm/onnxruntime", "0069950055765d61d6be48c7187faec6a904316e",
                   "onnxruntime/core/providers/migraphx/migraphx_execution_provider_info.cc"),
        # ToProviderOptions(const MIGraphXExecutionProviderInfo&): no calibration key is listed, although the
        # EP applies migraphx_int8_calibration_table_name / _use_native_calibration_table (issue 40, finding 1)
        "reported": ("device_id", "migraphx_fp16_enable", "migraphx_bf16_enable", "migraphx_fp8_enable",
                     "migraphx_int8_enable", "migraphx_model_cache_dir", "migraphx_mem_limit",
                     "migraphx_external_alloc", "migraphx_external_free", "migraphx_external_empty_cache",
                     "migraphx_arena_extend_strategy", "migraphx_exhaustive_tune"),
        "applied_unreported": ("migraphx_int8_calibration_table_name", "migraphx_int8_use_native_calibration_table"),
    },
}
