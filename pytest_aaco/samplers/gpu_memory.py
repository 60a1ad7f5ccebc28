"""The item's own device memory: what this process holds on the GPU, not the device's total use.

Peak device-used VRAM moves with cuDNN workspaces, a confirmation's second session and whatever
other processes hold: on an H100 it failed 7 unchanged gates with +130..+400 MB (issue 11). The
memory gate therefore judges the growth of *this process's* device memory around the item's
session creation and measured rounds (:class:`DeviceMemoryProbe`):

* NVIDIA: ``nvmlDeviceGetComputeRunningProcesses`` (``usedGpuMemory`` in bytes per process;
  https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html). In a container without
  the host's PID namespace NVML lists host PIDs, so this process may be missing, and
  ``usedGpuMemory`` is None where the driver withholds it; then the device-wide used memory
  (``nvmlDeviceGetMemoryInfo``) is differenced instead, over the same window only.
* AMD: ``amdsmi_get_gpu_process_list`` (ROCm 6.1+: a list of dicts with ``pid`` and
  ``memory_usage.vram_mem`` in bytes; ROCm 5.7/6.0: process handles for
  ``amdsmi_get_gpu_process_info``, which returns the same dict;
  https://rocm.docs.amd.com/projects/amdsmi/en/latest/reference/amdsmi-py-api.html), with the same
  fallback to ``amdsmi_get_gpu_vram_usage``'s ``vram_used`` (MB).

Units: MB of 2**20 bytes, as :mod:`pytest_aaco.samplers.nvidia` reports VRAM.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeAlias

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.samplers.amd import import_amdsmi
from pytest_aaco.samplers.nvidia import import_pynvml
from pytest_aaco.samplers.visibility import amd_handle, nvidia_handle

BYTES_PER_MB = 1024 * 1024
#: how an own-footprint figure was obtained; only figures of the same method are compared
PROCESS, DEVICE_DIFFERENCE = "process", "device-difference"


def nvml_process_mb(processes: Iterable[object], pid: int) -> float | None:
    """MB of device memory NVML attributes to *pid*: the sum of ``usedGpuMemory`` (bytes) over the
    entries of ``nvmlDeviceGetComputeRunningProcesses`` with that ``pid``. None when the pid is
    not listed or every figure is None (not available to this process)."""
    used = [getattr(p, "usedGpuMemory", None) for p in processes if int(getattr(p, "pid", -1)) == pid]
    known = [int(u) for u in used if isinstance(u, int)]
    return sum(known) / BYTES_PER_MB if known else None


def amd_process_mb(processes: Iterable[Mapping[str, Any]], pid: int) -> float | None:
    """MB of VRAM amdsmi attributes to *pid*: ``memory_usage.vram_mem`` (bytes) of the entries of
    ``amdsmi_get_gpu_process_list`` / ``amdsmi_get_gpu_process_info`` with that ``pid``, or their
    ``mem`` when ``memory_usage`` is absent. None when the pid is not listed or has no figure."""
    total, found = 0, False
    for entry in processes:
        if not isinstance(entry, Mapping) or int(entry.get("pid", -1)) != pid:
            continue
        usage = entry.get("memory_usage")
        value = usage.get("vram_mem") if isinstance(usage, Mapping) else entry.get("mem")
        if isinstance(value, int) and not isinstance(value, bool):
            total, found = total + value, True
    return total / BYTES_PER_MB if found else None


def _nvidia_read(device_id: int, pid: int) -> tuple[float | None, float | None]:
    nvml = import_pynvml()
    nvml.nvmlInit()
    try:
        handle = nvidia_handle(nvml, device_id).handle
        try:
            own = nvml_process_mb(nvml.nvmlDeviceGetComputeRunningProcesses(handle), pid)
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported on some vGPUs
            own = None
        used = nvml.nvmlDeviceGetMemoryInfo(handle).used / BYTES_PER_MB
        return own, float(used)
    finally:
        nvml.nvmlShutdown()


def _amd_processes(amdsmi: ModuleType, handle: object) -> list[Mapping[str, object]]:
    listed = amdsmi.amdsmi_get_gpu_process_list(handle)
    if listed and not isinstance(listed[0], Mapping):  # ROCm 5.7/6.0: process handles
        return [amdsmi.amdsmi_get_gpu_process_info(handle, p) for p in listed]
    return list(listed or [])


def _amd_read(device_id: int, pid: int) -> tuple[float | None, float | None]:
    amdsmi = import_amdsmi()
    amdsmi.amdsmi_init()
    try:
        handle = amd_handle(amdsmi, device_id).handle
        try:
            own = amd_process_mb(_amd_processes(amdsmi, handle), pid)
        except Exception:  # noqa: BLE001 - AmdSmiLibraryException: not supported
            own = None
        used = amdsmi.amdsmi_get_gpu_vram_usage(handle).get("vram_used")
        return own, (float(used) if isinstance(used, (int, float)) else None)
    finally:
        amdsmi.amdsmi_shut_down()


#: telemetry source (:attr:`pytest_aaco.eps.Ep.telemetry`) -> reader of (this process's MB, device-wide used MB)
READERS = {eps.NVIDIA: _nvidia_read, eps.AMD: _amd_read}


#: reads (this process's MB, device-wide used MB) of a device id for a pid; None where not read
Reader: TypeAlias = Callable[[int, int], tuple[float | None, float | None]]


def reader_for(provider_short: str) -> Reader | None:
    """The device-memory reader of EP *provider_short* (:data:`READERS`), or None where nothing reads it."""
    telemetry = eps.get(provider_short).telemetry
    return READERS.get(telemetry) if telemetry else None


@dataclass
class DeviceMemoryProbe:
    """The device memory an item adds: call :meth:`start` before its InferenceSession is built
    and :meth:`stop` after its measured rounds; :meth:`stop` returns ``(MB, method)``.

    The figure is this process's own device memory growth (*method* ``"process"``) when the
    driver lists this process, else the device-wide used memory's growth over the same window
    (``"device-difference"``), else None. Release any earlier session of the item (the first look
    before a confirmation) before :meth:`start`, so it does not count. *reader* is injectable for
    tests: ``reader(device_id, pid) -> (process MB or None, device used MB or None)``.
    """

    provider_short: str
    device_id: int = 0
    reader: Reader | None = None
    _before: tuple[float | None, float | None] | None = None

    def _read(self) -> tuple[float | None, float | None]:
        reader = self.reader or reader_for(self.provider_short)
        if reader is None:
            return None, None
        try:
            return reader(self.device_id, os.getpid())
        except Exception:  # noqa: BLE001 - no NVML/amdsmi, no device: no figure, never an error
            return None, None

    def start(self) -> None:
        """Read the figures before the session is built."""
        self._before = self._read()

    def stop(self) -> tuple[float | None, str | None]:
        """The growth since :meth:`start` (MB, floored at 0) and how it was measured."""
        if self._before is None:
            return None, None
        after = self._read()
        for index, method in ((0, PROCESS), (1, DEVICE_DIFFERENCE)):
            was, now = self._before[index], after[index]
            if now is not None and (was is not None or index == 0):
                return max(now - (was or 0.0), 0.0), method
        return None, None


def record_own_vram(telemetry_summary: JSONDict, mb: float | None, method: str | None) -> None:
    """Add ``vram_own_mb`` (``{"max", "mean", "n", "method"}``) to a telemetry summary; nothing when
    *mb* is None. The memory gate compares it only with history runs of the same method."""
    if mb is None:
        return
    telemetry_summary["vram_own_mb"] = {"max": float(mb), "mean": float(mb), "n": 1, "method": method}
