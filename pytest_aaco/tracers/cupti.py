"""NVIDIA kernel tracing through CUPTI's activity API, in this process, with NVIDIA's ``cupti-python``.

Optional (``pip install 'pytest-aaco[cuda]'``) and imported lazily (:func:`load_cupti`). A trace
enables ``ActivityKind.CONCURRENT_KERNEL``, makes the runs between two ``cupti.get_timestamp()``
readings (the clock the activity records use), disables the activity and flushes the buffers,
so the blocks before and after run without CUPTI's per-launch bookkeeping.

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

from pytest_aaco import eps
from pytest_aaco.tracers.base import DeviceBlock, KernelSpan, TracerError, TracerMissing, block_of

INSTALL_HINT = "pip install 'pytest-aaco[cuda]' (NVIDIA's cupti-python; its CUDA major must match the driver's)"
#: CUPTI activity buffer size (bytes) handed out on request
BUFFER_BYTES = 8 * 1024 * 1024


def load_cupti() -> ModuleType:
    """The ``cupti.cupti`` bindings module. Raises :class:`~pytest_aaco.tracers.base.TracerMissing`
    with :data:`INSTALL_HINT` when cupti-python does not import."""
    try:
        from cupti import cupti
    except ImportError as exc:
        raise TracerMissing(f"CUPTI kernel tracing needs cupti-python: {INSTALL_HINT} ({exc})") from exc
    return cupti


class Collector:
    """Receives CUPTI's completed activity buffers. CUPTI takes one pair of buffer callbacks per
    process, so there is one collector per process (:func:`collector`), shared by every trace."""

    def __init__(self, cupti: ModuleType) -> None:
        self.kernel_kind = int(cupti.ActivityKind.CONCURRENT_KERNEL)
        self.records: list[KernelSpan] = []
        self.lock = threading.Lock()

    def requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def completed(self, activities: list[Any]) -> None:
        found = [KernelSpan(str(a.name), int(a.start), int(a.end), str(getattr(a, "device_id", 0)),
                            str(getattr(a, "stream_id", 0)))
                 for a in activities if int(a.kind) == self.kernel_kind]
        with self.lock:
            self.records.extend(found)

    def take(self) -> list[KernelSpan]:
        """The kernels so far; empties the list."""
        with self.lock:
            records, self.records = self.records, []
        return records


_COLLECTORS: dict[int, Collector] = {}


def collector(cupti: ModuleType) -> Collector:
    """This process's :class:`Collector`, registered with CUPTI on first use."""
    found = _COLLECTORS.get(id(cupti))
    if found is None:
        found = Collector(cupti)
        cupti.activity_register_callbacks(found.requested, found.completed)
        _COLLECTORS[id(cupti)] = found
    return found


def traced_spans(cupti: ModuleType, run: Callable[[], object], runs: int) -> tuple[list[KernelSpan], int]:
    """Run *run* *runs* times with CUPTI's kernel activity on; ``(spans, wall ns)`` of that window,
    on CUPTI's clock. Raises :class:`~pytest_aaco.tracers.base.TracerError` when CUPTI refuses (a
    driver too old for the package, or profiling not permitted: ``NVreg_RestrictProfilingToAdminUsers``)."""
    kind = cupti.ActivityKind.CONCURRENT_KERNEL
    try:
        col = collector(cupti)
        col.take()  # drop what an earlier, interrupted trace left
        cupti.activity_enable(kind)
    except Exception as exc:  # noqa: BLE001 - cupti.cuptiError and friends
        raise TracerError(f"CUPTI refused to trace kernels: {exc}") from exc
    try:
        start = int(cupti.get_timestamp())
        for _ in range(runs):
            run()
        end = int(cupti.get_timestamp())
    finally:
        # disable first, then flush: a forced flush while the kind is still enabled took 216 ms
        # per block on the H100, after disabling 0.07 ms, with the same records
        # (the cupti_overhead.py study, in git history at
        # commit 7ecd489); the runs are synchronous, so their kernels have completed
        try:
            cupti.activity_disable(kind)
        finally:
            cupti.activity_flush_all(1)
    return [s for s in col.take() if start <= s.start_ns <= end], max(end - start, 1)


class CuptiTracer:
    """The :class:`~pytest_aaco.tracers.base.InProcessTracer` of NVIDIA GPUs.
    *cupti*: the bindings (default :func:`load_cupti`, which raises
    :class:`~pytest_aaco.tracers.base.TracerMissing`)."""

    kind = eps.CUPTI
    source = "cupti"
    install_hint = INSTALL_HINT
    in_process = True

    def __init__(self, cupti: ModuleType | None = None) -> None:
        self.cupti = cupti if cupti is not None else load_cupti()

    def spans(self, run: Callable[[], object], runs: int) -> tuple[list[KernelSpan], int]:
        """The kernels of *runs* calls of *run* and their wall time (ns, CUPTI's clock). Raises
        :class:`~pytest_aaco.tracers.base.TracerError` when CUPTI refuses or recorded no kernel."""
        found, wall_ns = traced_spans(self.cupti, run, runs)
        if not found:
            raise TracerError(f"CUPTI recorded no GPU kernel in {runs} runs: the session does not run on a CUDA"
                              " device, or CUPTI could not attach to its context (a cupti-python/nvidia-cuda-cupti"
                              " newer than the driver's CUDA version)")
        return found, wall_ns

    def trace(self, run: Callable[[], object], runs: int) -> DeviceBlock:
        """One traced block of *runs* calls of *run*. Raises :class:`~pytest_aaco.tracers.base.TracerError`."""
        return block_of(self.spans(run, runs)[0], runs)
