"""GPU kernel records and the metrics derived from them, whichever tracer produced them.

The kernel pass is a short extra phase after the measured rounds, never during them. The EP's
tracer (:attr:`pytest_aaco.eps.Ep.tracer`) yields :class:`~pytest_aaco.tracers.base.KernelSpan` s for a
known number of model runs and the wall time of those runs, the same spans device time is made of:
CUPTI in this process (:func:`cupti_pass`, ``--aaco-cupti``), rocprofv3 around the one traced child
(:func:`rocprof_pass`, ``--aaco-rocprof``; :func:`pytest_aaco.measure.traced_child.trace_pass`).
:func:`kernel_metrics` turns them into the figures of the AACO design:

* **kernels per run**, and **KAR** (kernel-to-ONNX-node ratio): kernels per run over the model's
  node count. Far above 1: ops split into many small kernels; below 1: fusion.
* **GPU active ratio**: the union of kernel intervals (overlapping kernels on several streams
  count once) over the wall time of the runs. Low: the GPU waits on the host (launch-bound).
* **microkernel share**: the fraction of kernels shorter than :data:`MICROKERNEL_US` (10 µs),
  whose launch costs about as much as their work.
* **top kernels** by total time.

These feed :mod:`pytest_aaco.verdict.diagnosis` (``launch_bound`` / ``compute_bound``) through
:meth:`KernelMetrics.to_diagnosis`. The launch-bound reading of a low active ratio and of many
short kernels follows NVIDIA's CUDA C++ Best Practices Guide (sections on kernel launch overhead
and CUDA Graphs) and the Roofline model's split of compute- vs. overhead-bound work (Williams,
Waterman & Patterson, CACM 2009).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.providers import ProviderSpec
from pytest_aaco.measure.traced_child import PASS_GAP_S, ChildSide, trace_pass
from pytest_aaco.tracers.base import KernelSpan, TracerError, union_ns
from pytest_aaco.tracers.cupti import CuptiTracer

if TYPE_CHECKING:
    import numpy as np

#: kernels shorter than this (µs) are microkernels
MICROKERNEL_US = 10.0
#: kernels listed in reports
TOP_KERNELS = 10
#: model runs the CUPTI pass traces
TRACED_RUNS = 10


def busy_ns(records: Iterable[KernelSpan]) -> int:
    """Length (ns) of the union of the records' ``[start, end)`` intervals: time at least one kernel ran
    (:func:`pytest_aaco.tracers.base.union_ns`)."""
    return union_ns((r.start_ns, r.end_ns) for r in records)


def after_last_gap(records: list[KernelSpan], gap_ns: int) -> list[KernelSpan]:
    """The records that start after the last pause of at least *gap_ns* between kernels (all of
    them when there is none): how a tracer's output is cut to the runs that follow a deliberate
    pause, whatever clock its timestamps use."""
    ordered = sorted(records, key=lambda r: r.start_ns)
    cut, latest_end = 0, None
    for i, record in enumerate(ordered):
        if latest_end is not None and record.start_ns - latest_end >= gap_ns:
            cut = i
        latest_end = record.end_ns if latest_end is None else max(latest_end, record.end_ns)
    return ordered[cut:]


@dataclass
class KernelMetrics:
    """Kernel figures of *runs* model runs (ms unless stated).

    ``kernels``: all kernels of the runs; ``kernels_per_run``; ``node_count``: ONNX nodes of the
    model (None when unknown) and ``kar`` = kernels per run / node count; ``kernel_ms``: summed
    kernel time per run; ``busy_ms``: the union of kernel intervals per run; ``wall_ms``: wall
    time per run; ``active_ratio`` = busy / wall (0..1); ``microkernel_share``: fraction of kernels
    under :data:`MICROKERNEL_US`; ``top``: ``{"name", "count", "total_ms", "share"}`` per kernel
    name, slowest first; ``source``: the tracer (``cupti``, ``rocprofv3``, ``rocprof``).
    """

    runs: int
    kernels: int
    kernels_per_run: float
    kernel_ms: float
    busy_ms: float
    wall_ms: float
    active_ratio: float
    microkernel_share: float
    node_count: int | None = None
    kar: float | None = None
    top: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""

    def to_dict(self) -> JSONDict:
        """JSON-ready dict of every field (floats rounded)."""
        def r(value: float | None, digits: int = 4) -> float | None:
            return None if value is None else round(value, digits)

        return {"source": self.source, "runs": self.runs, "kernels": self.kernels,
                "kernels_per_run": r(self.kernels_per_run, 2), "node_count": self.node_count, "kar": r(self.kar, 3),
                "kernel_ms": r(self.kernel_ms), "busy_ms": r(self.busy_ms), "wall_ms": r(self.wall_ms),
                "active_ratio": r(self.active_ratio), "microkernel_share": r(self.microkernel_share),
                "top": [dict(t) for t in self.top]}

    def to_diagnosis(self) -> JSONDict:
        """The *kernel_data* of :func:`pytest_aaco.verdict.diagnosis.classify_bottleneck`."""
        return {"kernel_time_ms": self.kernel_ms, "busy_ms": self.busy_ms, "wall_ms": self.wall_ms,
                "kernel_count": self.kernels_per_run, "microkernel_share": self.microkernel_share,
                "kar": self.kar, "source": self.source}

    def describe(self) -> str:
        """One line: ``312 kernels/run (KAR 2.55), GPU active 41%, 68% under 10 µs; top: ...``."""
        kar = f" (KAR {self.kar:.2f})" if self.kar is not None else ""
        top = ", ".join(f"{t['name'][:60]} {t['share']:.0%}" for t in self.top[:3])
        return (f"{self.kernels_per_run:.0f} kernels/run{kar}, GPU active {self.active_ratio:.0%}, "
                f"{self.microkernel_share:.0%} under {MICROKERNEL_US:.0f} µs" + (f"; top: {top}" if top else ""))


def kernel_metrics(records: list[KernelSpan], runs: int, wall_ns: int, node_count: int | None = None,
                   source: str = "", top: int = TOP_KERNELS) -> KernelMetrics:
    """Metrics of *records*, the kernels of *runs* model runs that took *wall_ns* ns of wall time in all.

    *node_count*: ONNX nodes of the model, for KAR (None: no KAR). Raises ValueError for
    ``runs < 1`` or ``wall_ns <= 0``; no records give zero counts and a 0 active ratio.
    """
    if runs < 1 or wall_ns <= 0:
        raise ValueError(f"kernel metrics need runs >= 1 and a positive wall time, got runs={runs}, wall_ns={wall_ns}")
    total_ns = sum(r.duration_ns for r in records)
    busy = busy_ns(records)
    per_name: dict[str, list[int]] = {}
    for record in records:
        per_name.setdefault(record.name, []).append(record.duration_ns)
    ranked = sorted(per_name.items(), key=lambda kv: (-sum(kv[1]), kv[0]))[:top]
    top_list = [{"name": name, "count": len(durs), "total_ms": round(sum(durs) / 1e6, 4),
                 "share": round(sum(durs) / total_ns, 4) if total_ns else 0.0} for name, durs in ranked]
    micro = sum(1 for r in records if r.duration_ns < MICROKERNEL_US * 1000)
    per_run = len(records) / runs
    return KernelMetrics(
        runs=runs,
        kernels=len(records),
        kernels_per_run=per_run,
        kernel_ms=total_ns / runs / 1e6,
        busy_ms=busy / runs / 1e6,
        wall_ms=wall_ns / runs / 1e6,
        active_ratio=min(busy / wall_ns, 1.0),
        microkernel_share=micro / len(records) if records else 0.0,
        node_count=node_count,
        kar=per_run / node_count if node_count else None,
        top=top_list,
        source=source,
    )


def onnx_node_count(model_path: str | Path) -> int | None:
    """Nodes of the model's main graph (``len(graph.node)``), or None when the file cannot be read.

    Counted in the ONNX file, before ORT's fusions: KAR says how many kernels the EP made of the
    graph the user wrote.
    """
    import onnx

    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except Exception:  # noqa: BLE001 - a count is optional
        return None
    return len(model.graph.node) or None


def cupti_pass(run: Callable[[], object], runs: int = TRACED_RUNS, *, node_count: int | None = None,
               sync: Callable[[], object] | None = None, tracer: CuptiTracer | None = None) -> KernelMetrics:
    """The kernel pass on NVIDIA GPUs: the :class:`KernelMetrics` (``source="cupti"``) of *runs* calls
    of *run* traced by CUPTI in this process (*tracer*, default a new
    :class:`~pytest_aaco.tracers.cupti.CuptiTracer`).

    *run*: one model run (the item's bound runner); *sync*: called after the last run when *run*
    does not wait for the device itself (e.g. IO binding with device outputs). Wall time is
    measured on CUPTI's own clock, so kernels and wall time line up. Raises
    :class:`~pytest_aaco.tracers.base.TracerError` (``TracerMissing`` without cupti-python) when
    CUPTI cannot trace or recorded no kernel.
    """
    cupti = tracer if tracer is not None else CuptiTracer()

    def window() -> None:
        for _ in range(runs):
            run()
        if sync is not None:
            sync()

    spans, wall_ns = cupti.spans(window, 1)
    return kernel_metrics(spans, runs, wall_ns, node_count, source=cupti.source)


def rocprof_pass(model_path: str | Path, provider: ProviderSpec, feeds: Mapping[str, np.ndarray], *,
                 device_id: int = 0, node_count: int | None = None, exe: str = "rocprofv3",
                 compile_s: float = 0.0, output_format: str | None = None) -> KernelMetrics:
    """The kernel pass on AMD GPUs: the :class:`KernelMetrics` of the traced child's one block
    (:func:`pytest_aaco.measure.traced_child.trace_pass`; ``source``: the trace layout read,
    ``rocpd``, ``rocprofv3``, ``rocprof-v2`` or ``rocprof-v1``), its kernels those after the pause
    before the block (:func:`after_last_gap`). *feeds*: the item's inputs (name -> array);
    *compile_s*: the item's session creation (s), which lengthens the time limit. Raises
    :class:`~pytest_aaco.tracers.base.TracerError`, also for a trace with no kernel after the pause.
    """
    side = ChildSide("item", Path(model_path), provider, feeds)
    trace, runs, wall_ns = trace_pass(side, device_id=device_id, exe=exe, compile_s=compile_s,
                                      output_format=output_format)
    spans = after_last_gap(trace.kernels, int(PASS_GAP_S * 1e9 / 2))
    if not spans:
        raise TracerError(f"{trace.path}: no kernel in the profile pass of {Path(model_path).name}: the session"
                          " does not run on the GPU rocprofv3 traced")
    return kernel_metrics(spans, runs, max(wall_ns, 1), node_count, source=trace.layout)
