"""NVIDIA GPU telemetry through NVML (the ``nvidia-ml-py`` package, imported as ``pynvml``).

NVML reference: https://docs.nvidia.com/deploy/nvml-api/ . Calls used, with their units:
``nvmlDeviceGetUtilizationRates(h).gpu`` (%), ``nvmlDeviceGetPowerUsage`` (mW),
``nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU)`` (°C), ``nvmlDeviceGetClockInfo(h,
NVML_CLOCK_SM | NVML_CLOCK_MEM)`` (MHz), ``nvmlDeviceGetMemoryInfo(h).used`` (bytes),
``nvmlDeviceGetPerformanceState`` (0 = P0, fastest) and ``nvmlDeviceGetCurrentClocksEventReasons``
(a bit mask; ``nvmlDeviceGetCurrentClocksThrottleReasons`` in drivers before r535).

``nvmlDeviceGetPowerUsage`` is averaged by the driver over about one second on recent GPUs: on an
H100 (driver 580) it took ~1 s to climb from 78 W to 730 W when a matmul load started, while
utilisation jumped to 100% within one 100 ms sample. Read power as a smoothed figure.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.samplers.base import Sampler, SamplerUnavailable, describe_exception
from pytest_aaco.samplers.visibility import PhysicalGpu, nvidia_handle, nvidia_physical

_T = TypeVar("_T")

BYTES_PER_MB = 1024 * 1024
#: NVML constants, as in nvml.h, so a reading decodes the same whatever pynvml version is present
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
#: nvmlClocksEventReason* bits (nvml.h, "Clock Event Reasons") -> the names pytest-aaco reports
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})
POWER_REASONS = frozenset({"sw_power_cap", "hw_slowdown", "hw_power_brake_slowdown"})


def decode_clock_event_reasons(mask: int) -> list[str]:
    """Names of the bits set in an NVML clock-event (throttle) reason *mask*, lowest bit first.

    Unknown bits are reported as ``"bit_0x..."`` so nothing is silently dropped.
    """
    mask = int(mask)
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    bit = 1
    while unknown:
        if unknown & bit:
            names.append(f"bit_{bit:#x}")
            unknown &= ~bit
        bit <<= 1
    return names


def _is_not_supported(exc: BaseException) -> bool:
    """True for NVML errors that will not go away: NotSupported, FunctionNotFound, missing function."""
    name = type(exc).__name__
    return isinstance(exc, AttributeError) or "NotSupported" in name or "FunctionNotFound" in name


def import_pynvml() -> ModuleType:
    """Import pynvml; ImportError names the package to install."""
    try:
        import pynvml
    except ImportError as exc:
        raise ImportError("nvidia-ml-py not installed: pip install nvidia-ml-py") from exc
    return pynvml


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NVIDIAGPUSampler(Sampler):
    """NVIDIA GPU utilisation, power, temperature, clocks, memory, P-state and clock-event reasons.

    Fields: ``gpu_util_percent`` (%), ``power_w`` (W, from mW), ``temp_edge_c`` (°C, the GPU
    die sensor), ``temp_junction_c`` (always None: NVML has no hotspot sensor),
    ``gfx_clock_mhz`` (SM clock, MHz), ``mem_clock_mhz`` (MHz), ``vram_used_mb`` (MB),
    ``perf_level`` (``"P0"`` .. ``"P15"``) and ``clock_event_reasons`` (list of names from
    :data:`CLOCK_EVENT_REASONS`, e.g. ``["sw_power_cap"]``).

    A query the GPU does not support gives None and is not asked again. Without NVML,
    :attr:`error` is ``"no NVIDIA GPU telemetry (...)"`` and nothing is sampled.
    """

    name = "nvidia_gpu"

    def __init__(self, device_id: int = 0, interval_s: float = 0.1) -> None:
        super().__init__(interval_s)
        self.device_id = int(device_id)
        self._nvml: ModuleType | None = None  # pynvml, between setup and teardown
        self._handle: object = None
        self._skip: set[str] = set()

    def setup(self) -> None:
        """Import pynvml, ``nvmlInit``, get the device handle; SamplerUnavailable when any step fails."""
        try:
            nvml = import_pynvml()
        except ImportError as exc:
            raise SamplerUnavailable(f"no NVIDIA GPU telemetry ({exc})") from exc
        try:
            nvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded ...
            raise SamplerUnavailable(f"no NVIDIA GPU telemetry (NVML init failed: {describe_exception(exc)})") from exc
        try:
            handle = nvidia_handle(nvml, self.device_id).handle
        except Exception as exc:  # noqa: BLE001
            nvml.nvmlShutdown()
            raise SamplerUnavailable(
                f"no NVIDIA GPU telemetry (no device {self.device_id}: {describe_exception(exc)})"
            ) from exc
        self._nvml, self._handle, self._skip = nvml, handle, set()

    def teardown(self) -> None:
        """``nvmlShutdown`` (NVML counts init/shutdown pairs)."""
        if self._nvml is not None:
            nvml, self._nvml, self._handle = self._nvml, None, None
            nvml.nvmlShutdown()

    def _query(self, field: str, call: Callable[[], _T]) -> _T | None:
        if field in self._skip:
            return None
        try:
            return call()
        except Exception as exc:  # noqa: BLE001
            if _is_not_supported(exc):
                self._skip.add(field)
            return None

    def _clock_event_mask(self) -> int:
        nvml, handle = self._nvml, self._handle
        assert nvml is not None, "read before setup"
        getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if getter is not None:
            try:
                return int(getter(handle))
            except Exception as exc:  # noqa: BLE001
                if not _is_not_supported(exc):
                    raise
        return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))

    def _read(self) -> JSONDict:
        nvml, handle = self._nvml, self._handle
        assert nvml is not None, "read before setup"
        util = self._query("util", lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        power_mw = self._query("power", lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        temp = self._query("temp", lambda: nvml.nvmlDeviceGetTemperature(handle, NVML_TEMPERATURE_GPU))
        sm_clock = self._query("sm_clock", lambda: nvml.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM))
        mem_clock = self._query("mem_clock", lambda: nvml.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_MEM))
        used = self._query("memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used)
        pstate = self._query("pstate", lambda: nvml.nvmlDeviceGetPerformanceState(handle))
        mask = self._query("reasons", self._clock_event_mask)
        return {
            "gpu_util_percent": None if util is None else float(util),
            "power_w": None if power_mw is None else power_mw / 1000.0,
            "temp_edge_c": None if temp is None else float(temp),
            "temp_junction_c": None,
            "gfx_clock_mhz": None if sm_clock is None else float(sm_clock),
            "mem_clock_mhz": None if mem_clock is None else float(mem_clock),
            "vram_used_mb": None if used is None else used / BYTES_PER_MB,
            "perf_level": None if pstate is None else f"P{int(pstate)}",
            "clock_event_reasons": None if mask is None else decode_clock_event_reasons(mask),
        }


def _with_nvml(query: Callable[[ModuleType], _T]) -> _T | None:
    """Run ``query(pynvml)`` between nvmlInit and nvmlShutdown; None on any failure."""
    try:
        nvml = import_pynvml()
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001
        return None
    try:
        return query(nvml)
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def nvidia_physical_gpu(device_id: int = 0) -> PhysicalGpu | None:
    """The physical GPU of CUDA device *device_id* (:func:`pytest_aaco.samplers.visibility.nvidia_physical`,
    honouring ``CUDA_VISIBLE_DEVICES``); None without NVML. Raises
    :class:`~pytest_aaco.samplers.visibility.GpuMappingError` when the id names no visible GPU."""
    nvml = import_pynvml()
    nvml.nvmlInit()
    try:
        return nvidia_physical(nvml, device_id)
    finally:
        nvml.nvmlShutdown()


def nvidia_gpu_identity(device_id: int = 0) -> JSONDict:
    """``{"name", "driver", "runtime"}`` (runtime ``"CUDA 12.4"``) of CUDA device *device_id* (the
    physical GPU it maps to under ``CUDA_VISIBLE_DEVICES``); None values without NVML."""

    def query(nvml: ModuleType) -> JSONDict:
        identity: JSONDict = {"name": None, "driver": None, "runtime": None}
        try:
            identity["name"] = _text(nvml.nvmlDeviceGetName(nvidia_handle(nvml, device_id).handle))
        except Exception:  # noqa: BLE001
            pass
        try:
            identity["driver"] = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception:  # noqa: BLE001
            pass
        try:
            version = int(nvml.nvmlSystemGetCudaDriverVersion())
            identity["runtime"] = f"CUDA {version // 1000}.{(version % 1000) // 10}"
        except Exception:  # noqa: BLE001
            pass
        return identity

    return _with_nvml(query) or {"name": None, "driver": None, "runtime": None}
