"""NVIDIA kernel tracing through CUPTI's activity API, with NVIDIA's ``cupti-python`` package.

Optional (``pip install pytest-aaco[cupti]``) and imported lazily. :func:`trace_runs` is a short
extra phase after the measured rounds, never during them: it enables
``ActivityKind.CONCURRENT_KERNEL``, makes *runs* model runs between two ``cupti.get_timestamp()``
readings (the clock the activity records use), flushes the buffers and disables the activity,
so the rounds before and after run without CUPTI's per-launch bookkeeping.

API as documented for cupti-python (https://docs.nvidia.com/cupti-python/): ``activity_enable``,
``activity_register_callbacks(buffer_requested, buffer_completed)`` where ``buffer_requested()``
returns ``(buffer size in bytes, max records)`` and ``buffer_completed(activities)`` receives the
records (``kind``, ``name``, ``start``, ``end`` in ns, ``device_id``, ``stream_id``),
``activity_flush_all(1)``, ``activity_disable``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from pytest_aaco.measure import device_time
from pytest_aaco.measure.device_time import BUFFER_BYTES as BUFFER_BYTES
from pytest_aaco.measure.device_time import CUPTI_INSTALL_HINT, DeviceTimeUnavailable
from pytest_aaco.passes.kernels import KernelMetrics, KernelRecord, kernel_metrics

INSTALL_HINT = CUPTI_INSTALL_HINT
TRACED_RUNS = 10


class CuptiError(RuntimeError):
    """cupti-python is missing or CUPTI refused to trace; the message says what to do."""


def load_cupti() -> ModuleType:
    """The ``cupti.cupti`` bindings module. Raises :class:`CuptiError` with :data:`INSTALL_HINT` when absent."""
    try:
        return device_time.load_cupti()
    except DeviceTimeUnavailable as exc:
        raise CuptiError(f"CUPTI kernel tracing needs cupti-python: {INSTALL_HINT} ({exc.__cause__})") from exc


def trace_runs(run: Callable[[], object], runs: int = TRACED_RUNS, *, node_count: int | None = None,
               sync: Callable[[], object] | None = None) -> KernelMetrics:
    """Trace the GPU kernels of *runs* calls of *run* and return their :class:`KernelMetrics` (``source="cupti"``).

    *run*: one model run (the item's bound runner); *sync*: called after the last run when *run*
    does not wait for the device itself (e.g. IO binding with device outputs). Wall time is
    measured on CUPTI's own clock, so kernels and wall time line up. Raises :class:`CuptiError`
    when cupti-python is missing or CUPTI refuses (``cuptiError``: a driver too old for the
    package, or profiling not permitted to this user: ``NVreg_RestrictProfilingToAdminUsers``) and
    when it recorded no kernel at all.
    """
    cupti = load_cupti()

    def window() -> None:
        for _ in range(runs):
            run()
        if sync is not None:
            sync()

    try:
        found, span_ns = device_time.traced_spans(cupti, window, 1)
    except DeviceTimeUnavailable as exc:
        raise CuptiError(str(exc)) from exc
    records = [KernelRecord(*r) for r in found]
    if not records:
        raise CuptiError(f"CUPTI recorded no GPU kernel in {runs} runs: the session does not run on a CUDA device,"
                         " or CUPTI could not attach to its context (a cupti-python/nvidia-cuda-cupti newer than"
                         " the driver's CUDA version)")
    return kernel_metrics(records, runs, span_ns, node_count, source="cupti")
