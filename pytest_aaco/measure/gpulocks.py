"""The device locks of one GPU, for every session build and measurement on it: the physical GPU's
lock and the name an older pytest-aaco gave it.

Since physical GPUs are named in lock files (``gpu-<uuid or PCI bus id>.lock``,
:func:`pytest_aaco.samplers.visibility.lock_file_name`), a process of an older pytest-aaco on the same
host (another CI job, pinned to an earlier release) still takes ``gpu<N>.lock``, N the device id it was
given: without care the two would measure on one GPU at once. :func:`gpu_locks` takes both, the
physical GPU's first, then ``gpu<index>.lock`` (its NVML index / amdsmi position, the name the older
version used when no visibility variable remapped ids), so an older process and a newer one exclude
each other; processes of this version take them in that order, so they never deadlock. Both are
taken with :func:`pytest_aaco.measure.devicelock.hold_device` (its waiting and its warning when a lock
cannot be taken).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import pytest_aaco.samplers.gpus as gpus
from pytest_aaco.measure.devicelock import DeviceHold, hold_device
from pytest_aaco.measure.providers import ProviderSpec


def legacy_lock_name(provider_short: str, device_id: int, name: str) -> str | None:
    """``gpu<index>.lock``, the name an older pytest-aaco gave this GPU's lock, when this version's
    *name* for it is another (``gpu-<uuid>.lock``) and the GPU's index is known; None otherwise."""
    if not name.startswith("gpu-"):
        return None
    gpu = gpus.physical_gpu(provider_short, device_id)
    return None if gpu is None or gpu.index is None else f"gpu{gpu.index}.lock"


@contextmanager
def gpu_locks(provider: ProviderSpec, device_id: int, label: str, name: str | None = None,
              waiting: Callable[[str], None] | None = None) -> Iterator[DeviceHold]:
    """Hold the device locks of EP *provider*'s device *device_id* while the block runs: on a GPU
    EP its physical GPU's lock (*name*, else :func:`pytest_aaco.samplers.gpus.gpu_lock_name`), then
    the older version's name for it (:func:`legacy_lock_name`); on other EPs ``host.lock``. Yields the
    first's :class:`~pytest_aaco.measure.devicelock.DeviceHold` (truthy when held; its wait); *waiting* is
    told when a wait passes a second. Raises :class:`~pytest_aaco.measure.devicelock.DeviceLockTimeout`
    past ``--aaco-lock-timeout``."""
    with ExitStack() as stack:
        if provider.is_gpu and name is None:
            name = gpus.gpu_lock_name(provider.short, device_id)
        held = stack.enter_context(hold_device(provider.is_gpu, device_id, label, name, waiting))
        legacy = legacy_lock_name(provider.short, device_id, name) if provider.is_gpu and name else None
        if legacy is not None:
            stack.enter_context(hold_device(True, device_id, label, legacy, waiting))
        yield held
