"""The execution providers pytest-aaco knows: one frozen :class:`Ep` record each, in one table.

Every fact about an execution provider (EP) lives here: its names, vendor, whether it runs on a
GPU, the ORT device of its IO binding, which provider options it takes, its graph-replay option,
how its compile cache is pointed at the plugin's folder, which kernel tracer sees it, which
library reports its telemetry, and when ONNX Runtime removed it. Code asks the record
(``eps.get(short).tracer``), never a set of names. Adding an EP is one entry in :data:`ALL`.

An EP that is not in the table (a plugin EP's own name, ``AMDGPUExecutionProvider``, registered
through ``--aaco-ep-library``) gets :func:`get`'s plain record: no GPU facts, it lists its own
options, no compile cache, no tracer.

References: https://onnxruntime.ai/docs/execution-providers/ (each EP's page is cited at its entry).
This module imports nothing: every layer may ask it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

#: tracer kinds (:attr:`Ep.tracer`): CUPTI in this process, rocprofv3 around a child process, none
CUPTI, ROCPROFV3, NO_TRACER = "cupti", "rocprofv3", "none"
#: vendors (:attr:`Ep.vendor`); NVIDIA and AMD name the telemetry sources too (:attr:`Ep.telemetry`: NVML, amdsmi)
NVIDIA, AMD, INTEL, MICROSOFT, CPU = "nvidia", "amd", "intel", "microsoft", "cpu"


@dataclass(frozen=True)
class CompileCache:
    """How a compiling EP is pointed at the compile-cache folder pytest-aaco keys for it
    (:mod:`pytest_aaco.measure.compile_cache`).

    ``options`` are the provider options to add, ``{folder}`` standing for the keyed folder's path and
    ``{key}`` for its name; ``user_keys`` are the options through which a user points the EP at a cache
    of their own (any of them given: the session's cache is recorded as ``user`` and nothing is added);
    ``file_keys`` name options whose value is a file that changes the program (its bytes' SHA-256 goes
    into the folder's key); ``rocm_stack``: the ROCm and MIGraphX versions and the GPU architecture go
    into the key too; ``what`` names the compile in cold-start figures."""

    options: tuple[tuple[str, str], ...]
    user_keys: frozenset[str]
    what: str
    file_keys: tuple[str, ...] = ()
    rocm_stack: bool = False

    def options_for(self, folder: str, key: str) -> dict[str, str]:
        """The provider options that point the EP at *folder* (a path), whose cache key is *key*."""
        return {name: value.replace("{folder}", folder).replace("{key}", key) for name, value in self.options}


@dataclass(frozen=True)
class Ep:
    """One execution provider's facts. ``short`` is its id in test ids and ``--aaco-provider``."""

    short: str
    ort_name: str
    #: ``nvidia``, ``amd``, ``intel``, ``microsoft`` or ``cpu``
    vendor: str
    aliases: tuple[str, ...] = ()
    #: the EP runs on a GPU: device memory, a device lock per GPU, IO binding on the device
    is_gpu: bool = False
    #: the EP takes a ``device_id`` provider option (added as ``--aaco-device-id`` when missing)
    takes_device_id: bool = False
    #: the device of ``OrtValue.ortvalue_from_numpy`` for IO binding (``cpu``: host memory)
    ort_device: str = "cpu"
    #: what ``--aaco-iobinding=auto`` becomes (docs/gpu.md has the measurements behind it)
    iobinding: str = "none"
    #: the provider options the EP takes, where ORT cannot say: a frozenset is checked when options are read;
    #: None: the EP lists its own in ``get_provider_options()`` (checked once the session exists)
    option_keys: frozenset[str] | None = None
    #: ``get_provider_options()`` lists every option the EP accepts, so a key missing there was ignored
    lists_all_options: bool = False
    #: (provider option, value) that turns graph replay on; None: no graph replay
    graph_option: tuple[str, str] | None = None
    #: the graph option is used only where the EP's build takes it, asked at run time
    graph_probed: bool = False
    #: how the EP's compile cache is pointed at the plugin's folder; None: the EP compiles nothing to keep
    compile: CompileCache | None = None
    #: which kernel tracer sees the EP's kernels (:data:`CUPTI`, :data:`ROCPROFV3`, :data:`NO_TRACER`)
    tracer: str = NO_TRACER
    #: the library that reports the EP's device telemetry (:data:`NVIDIA`, :data:`AMD`), None: none
    telemetry: str | None = None
    #: the onnxruntime (major, minor) that removed the EP, and what to use instead
    removed_in: tuple[int, int] | None = None
    removed_hint: str = ""
    #: ``sys.platform`` values the EP's builds exist for (empty: any), and what to say elsewhere
    platforms: tuple[str, ...] = ()
    platform_note: str = ""
    #: advice per diagnosis category where the EP changes it (:mod:`pytest_aaco.verdict.diagnosis`)
    advice: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def host_only(self) -> bool:
        """Whether the EP runs on the host CPU alone (the CPU EP): no device time, no device telemetry."""
        return self.vendor == CPU

    @property
    def known(self) -> bool:
        """Whether the EP is in :data:`ALL` (not only a registered EP library's name)."""
        return BY_SHORT.get(self.short) is self

    def removed(self, ort_version: tuple[int, ...]) -> bool:
        """Whether onnxruntime *ort_version* (major, minor) no longer has the EP."""
        return self.removed_in is not None and tuple(ort_version[:2]) >= self.removed_in

    def off_platform(self, platform: str | None = None) -> str | None:
        """Why the EP has no build for *platform* (default ``sys.platform``), or None."""
        here = sys.platform if platform is None else platform
        if not self.platforms or here in self.platforms:
            return None
        return self.platform_note or f"{self.ort_name} is built for {', '.join(self.platforms)} only"


#: every EP pytest-aaco knows, in the order ``--aaco-provider``'s help lists them
ALL: tuple[Ep, ...] = (
    # The CPU EP takes no provider options: ORT's Python binding builds it from session options only and
    # ignores every provider option without a word (onnxruntime 1.32.0: intra_op_num_threads=abc and
    # no_such_option=1 both load, get_provider_options() reports {}).
    Ep("cpu", "CPUExecutionProvider", CPU, option_keys=frozenset()),
    # https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html; get_provider_options()
    # lists every option (onnxruntime-gpu 1.31.1, docs/gpu.md); IO binding of inputs and outputs measured best
    Ep("cuda", "CUDAExecutionProvider", NVIDIA, is_gpu=True, takes_device_id=True, ort_device="cuda",
       iobinding="all", lists_all_options=True, graph_option=("enable_cuda_graph", "1"), tracer=CUPTI,
       telemetry=NVIDIA,
       advice={"launch_bound": "replay CUDA graphs (--aaco-graph=on)",
               "compute_bound": "the TensorRT EP"}),
    # https://onnxruntime.ai/docs/execution-providers/MIGraphX-ExecutionProvider.html; which option keys a
    # build takes is asked at run time (pytest_aaco/measure/migraphx_probe.py), the graph key too
    Ep("migraphx", "MIGraphXExecutionProvider", AMD, is_gpu=True, takes_device_id=True, ort_device="cuda",
       iobinding="inputs", graph_option=("migraphx_hip_graph_enable", "1"), graph_probed=True,
       compile=CompileCache((("migraphx_model_cache_dir", "{folder}"),), frozenset({"migraphx_model_cache_dir"}),
                            "the MIGraphX compile", rocm_stack=True),
       tracer=ROCPROFV3, telemetry=AMD,
       advice={"warmup_instability": "MIGraphX compiled-model cache: --aaco-compile-cache (migraphx_model_cache_dir)",
               "compute_bound": "MIGraphX FP16/INT8 (--aaco-provider-option migraphx_fp16_enable=1,"
                                " migraphx_int8_enable=1)"}),
    Ep("rocm", "ROCMExecutionProvider", AMD, is_gpu=True, takes_device_id=True, ort_device="cuda",
       iobinding="inputs", tracer=ROCPROFV3, telemetry=AMD,
       # https://github.com/microsoft/onnxruntime/releases/tag/v1.23.0
       removed_in=(1, 23), removed_hint="use --aaco-provider=migraphx on AMD GPUs",
       advice={"launch_bound": "enable HIP graphs (--aaco-provider-option enable_hip_graph=1)",
               "compute_bound": "the MIGraphX EP"}),
    # https://onnxruntime.ai/docs/execution-providers/TensorRT-ExecutionProvider.html
    Ep("tensorrt", "TensorrtExecutionProvider", NVIDIA, aliases=("trt",), is_gpu=True, takes_device_id=True,
       ort_device="cuda", iobinding="inputs",
       compile=CompileCache((("trt_engine_cache_enable", "1"), ("trt_engine_cache_path", "{folder}")),
                            frozenset({"trt_engine_cache_enable", "trt_engine_cache_path"}),
                            "the TensorRT engine build"),
       tracer=CUPTI, telemetry=NVIDIA,
       advice={"warmup_instability": "TensorRT engine and timing caches: --aaco-compile-cache,"
                                     " --aaco-provider-option trt_timing_cache_enable=1",
               "launch_bound": "enable CUDA graphs (--aaco-provider-option trt_cuda_graph_enable=1)",
               "compute_bound": "TensorRT FP16/INT8 (--aaco-provider-option trt_fp16_enable=1,"
                                " trt_int8_enable=1)"}),
    # https://onnxruntime.ai/docs/execution-providers/OpenVINO-ExecutionProvider.html
    Ep("openvino", "OpenVINOExecutionProvider", INTEL, aliases=("ov",),
       compile=CompileCache((("cache_dir", "{folder}"),), frozenset({"cache_dir"}), "the OpenVINO compile")),
    # https://onnxruntime.ai/docs/execution-providers/DirectML-ExecutionProvider.html: Windows only
    Ep("dml", "DmlExecutionProvider", MICROSOFT, aliases=("directml",), is_gpu=True, ort_device="dml",
       iobinding="inputs", platforms=("win32",),
       platform_note="DirectML (DmlExecutionProvider) is built for Windows only (onnxruntime-directml)"),
    # AMD's Ryzen AI NPU: https://onnxruntime.ai/docs/execution-providers/Vitis-AI-ExecutionProvider.html and
    # https://ryzenai.docs.amd.com/en/latest/modelrun.html. ORT hands the provider options to AMD's own library
    # unparsed, and its releases spell the cache options two ways: cacheDir / cacheKey (Vitis AI 3.5, UG1354
    # "Runtime Options"), cache_dir / cache_key (Ryzen AI Software; ORT's page since microsoft/onnxruntime#24739):
    # both are passed, and either given by the user is the user's cache. The program is compiled while the
    # session is created, into {cacheDir}/{cacheKey}; config_file (the compile configuration) and xclbin (the NPU
    # binary) are files whose bytes change the program.
    Ep("vitisai", "VitisAIExecutionProvider", AMD, aliases=("vitis", "ryzenai"),
       compile=CompileCache((("cache_dir", "{folder}"), ("cache_key", "{key}"),
                             ("cacheDir", "{folder}"), ("cacheKey", "{key}")),
                            frozenset({"cache_dir", "cache_key", "cacheDir", "cacheKey"}),
                            "the VitisAI compile for the NPU", file_keys=("config_file", "xclbin")),
       platforms=("win32",),
       platform_note="the Ryzen AI NPU builds of VitisAIExecutionProvider (AMD's Ryzen AI Software) are for Windows;"
                     " on Linux only AMD's Adaptable SoC images have it"),
)

#: :data:`ALL` by short name
BY_SHORT: dict[str, Ep] = {ep.short: ep for ep in ALL}
_BY_NAME: dict[str, Ep] = {
    **{ep.ort_name.lower(): ep for ep in ALL},
    **{alias: ep for ep in ALL for alias in ep.aliases},
    **BY_SHORT,
}


def lookup(name: str) -> Ep | None:
    """The EP named *name*: a short name (``migraphx``), an alias (``trt``) or the ORT name
    (``MIGraphXExecutionProvider``), in any case; None when pytest-aaco does not know it."""
    key = name.strip().lower()
    return BY_SHORT.get(key) or _BY_NAME.get(key)


def get(short: str) -> Ep:
    """The record of EP *short* (any name :func:`lookup` takes); for a name not in :data:`ALL` (a
    registered EP library's EP) a plain record of that name: no GPU facts, it lists its own options,
    no compile cache, no tracer. Never raises."""
    return lookup(short) or Ep(short, short, "unknown")


def with_tracer(kind: str) -> tuple[Ep, ...]:
    """The EPs whose kernels tracer *kind* (:data:`CUPTI`, :data:`ROCPROFV3`) sees."""
    return tuple(ep for ep in ALL if ep.tracer == kind)
