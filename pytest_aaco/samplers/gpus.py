"""The physical GPU behind an execution provider's device id, for records, locks and ``--aaco-device-id all``.

:func:`physical_gpu` reads it afresh (its clocks change); :func:`gpu_lock_name` is read once per
process and device (the lock must name the same file for the whole session). Both go through
:mod:`pytest_aaco.samplers.visibility`, which honours ``CUDA_VISIBLE_DEVICES``,
``ROCR_VISIBLE_DEVICES`` and ``HIP_VISIBLE_DEVICES``. A mapping that may be wrong is warned about
once per GPU (:class:`~pytest_aaco.warnings.AacoProviderWarning`). Nothing here raises for a
missing library: the answer is then None (or the old ``gpu<N>.lock`` name).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from functools import lru_cache

from pytest_aaco import eps
from pytest_aaco.samplers.amd import amd_physical_gpu, import_amdsmi
from pytest_aaco.samplers.base import describe_exception
from pytest_aaco.samplers.nvidia import import_pynvml, nvidia_physical_gpu
from pytest_aaco.samplers.visibility import (
    NVIDIA,
    DriRoots,
    GpuMappingError,
    PhysicalGpu,
    amd_handle,
    lock_file_name,
    mask_text,
    visible_count,
)
from pytest_aaco.warnings import AacoProviderWarning

#: keys of the GPUs whose ambiguous mapping was already warned about in this process
_WARNED: set[str] = set()


def vendor_of(provider_short: str) -> str | None:
    """``"nvidia"`` for ``cuda``/``tensorrt``, ``"amd"`` for ``migraphx``/``rocm`` (the GPU vendor whose library
    maps the EP's device: :attr:`pytest_aaco.eps.Ep.telemetry`), else None."""
    return eps.get(provider_short).telemetry  # eps.NVIDIA / eps.AMD are visibility's NVIDIA / AMD


def physical_gpu(provider_short: str, device_id: int) -> PhysicalGpu | None:
    """The physical GPU that EP *provider_short*'s device *device_id* runs on, with its clocks now;
    None for EPs that do not run on an NVIDIA or AMD GPU, or when NVML / amdsmi is missing or
    the id names no GPU (the session then fails at InferenceSession creation with ORT's own error).
    Warns once per GPU when the mapping is ambiguous."""
    vendor = vendor_of(provider_short)
    if vendor is None:
        return None
    try:
        gpu = nvidia_physical_gpu(device_id) if vendor == NVIDIA else amd_physical_gpu(device_id)
    except Exception:  # noqa: BLE001 - no library, no driver, no such device: nothing to record
        return None
    if gpu is not None and gpu.ambiguous and gpu.key not in _WARNED:
        _WARNED.add(gpu.key)
        warnings.warn(AacoProviderWarning(
            f"device {device_id} of {provider_short} taken as GPU {gpu.key} ({gpu.name or 'unknown'}), but the"
            f" mapping is ambiguous: {gpu.ambiguous}. Telemetry, memory and the device lock read that GPU"),
            stacklevel=2)
    return gpu


@lru_cache(maxsize=32)
def gpu_lock_name(provider_short: str, device_id: int) -> str:
    """The device lock file's name for *device_id* of EP *provider_short*: ``gpu-<uuid or PCI bus
    id>.lock`` when the physical GPU is known, else ``gpu<N>.lock`` (N: the index the visibility
    variables point at, or the device id); read once per process."""
    gpu = physical_gpu(provider_short, device_id)
    return lock_file_name(gpu, device_id)


def visible_gpus(provider_short: str, environ: Mapping[str, str] | None = None) -> int | None:
    """How many GPUs EP *provider_short* can use: the visibility variable's length when one is set,
    else the count NVML gives (AMD: the GPUs whose render node this process may open, as
    :func:`pytest_aaco.samplers.visibility.amd_handle` finds them); None when unknown."""
    vendor = vendor_of(provider_short)
    if vendor is None:
        return None
    count = visible_count(vendor, environ)
    if count is not None:
        return count
    try:
        if vendor == NVIDIA:
            nvml = import_pynvml()
            nvml.nvmlInit()
            try:
                return int(nvml.nvmlDeviceGetCount())
            finally:
                nvml.nvmlShutdown()
        amdsmi = import_amdsmi()
        amdsmi.amdsmi_init()
        try:
            found = 0
            while True:  # the usable GPUs are numbered 0..n-1: count until one is missing
                try:
                    amd_handle(amdsmi, found, environ, DriRoots())
                except GpuMappingError:
                    return found
                found += 1
        finally:
            amdsmi.amdsmi_shut_down()
    except Exception:  # noqa: BLE001 - no library or driver
        return None


def count_problem(provider_short: str) -> str:
    """Why ``--aaco-device-id all`` could not count the GPUs of *provider_short*, for a usage error."""
    vendor = vendor_of(provider_short)
    library = "NVML (pip install nvidia-ml-py)" if vendor == NVIDIA else "amdsmi"
    try:
        (import_pynvml if vendor == NVIDIA else import_amdsmi)()
        reason = f"{library} gave no GPU count"
    except ImportError as exc:
        reason = describe_exception(exc)
    return f"cannot count the GPUs of {provider_short} ({reason}; {mask_text(vendor or '') or 'no mask set'})"


__all__ = ["count_problem", "gpu_lock_name", "physical_gpu", "vendor_of", "visible_gpus"]
