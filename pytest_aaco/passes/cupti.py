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

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pytest_aaco.passes.kernels import KernelMetrics, KernelRecord, kernel_metrics

INSTALL_HINT = "pip install 'pytest-aaco[cupti]' (NVIDIA's cupti-python; its CUDA major must match the driver's)"
#: CUPTI activity buffer size (bytes) handed out on request
BUFFER_BYTES = 8 * 1024 * 1024
TRACED_RUNS = 10


class CuptiError(RuntimeError):
    """cupti-python is missing or CUPTI refused to trace; the message says what to do."""


def load_cupti() -> ModuleType:
    """The ``cupti.cupti`` bindings module. Raises :class:`CuptiError` with :data:`INSTALL_HINT` when absent."""
    try:
        from cupti import cupti
    except ImportError as exc:
        raise CuptiError(f"CUPTI kernel tracing needs cupti-python: {INSTALL_HINT} ({exc})") from exc
    return cupti


class _Collector:
    """Receives CUPTI's completed buffers. CUPTI takes one pair of buffer callbacks per process,
    so there is one collector per process, registered on first use (:func:`_collector`)."""

    def __init__(self, cupti: ModuleType) -> None:
        self.kernel_kind = int(cupti.ActivityKind.CONCURRENT_KERNEL)
        self.records: list[KernelRecord] = []
        self.lock = threading.Lock()

    def requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def completed(self, activities: list[Any]) -> None:
        found = [KernelRecord(str(a.name), int(a.start), int(a.end), str(getattr(a, "device_id", 0)),
                              str(getattr(a, "stream_id", 0)))
                 for a in activities if int(a.kind) == self.kernel_kind]
        with self.lock:
            self.records.extend(found)

    def take(self) -> list[KernelRecord]:
        with self.lock:
            records, self.records = self.records, []
        return records


_COLLECTORS: dict[int, _Collector] = {}


def _collector(cupti: ModuleType) -> _Collector:
    collector = _COLLECTORS.get(id(cupti))
    if collector is None:
        collector = _Collector(cupti)
        cupti.activity_register_callbacks(collector.requested, collector.completed)
        _COLLECTORS[id(cupti)] = collector
    return collector


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
    kind = cupti.ActivityKind.CONCURRENT_KERNEL
    try:
        collector = _collector(cupti)
        collector.take()  # drop what an earlier, interrupted trace left
        cupti.activity_enable(kind)
    except Exception as exc:  # cupti.cuptiError and friends
        raise CuptiError(f"CUPTI refused to trace kernels: {exc}") from exc
    try:
        start = int(cupti.get_timestamp())
        for _ in range(runs):
            run()
        if sync is not None:
            sync()
        end = int(cupti.get_timestamp())
    finally:
        try:
            cupti.activity_flush_all(1)
        finally:
            cupti.activity_disable(kind)
    records = [r for r in collector.take() if start <= r.start_ns <= end]
    if not records:
        raise CuptiError(f"CUPTI recorded no GPU kernel in {runs} runs: the session does not run on a CUDA device,"
                         " or CUPTI could not attach to its context (a cupti-python/nvidia-cuda-cupti newer than"
                         " the driver's CUDA version)")
    return kernel_metrics(records, runs, max(end - start, 1), node_count, source="cupti")
