"""Node-level placement: which execution provider ran each node, read from an ORT profile.

``InferenceSession.get_providers()`` only says which EPs a session *may* use, so a CUDA session
whose heavy nodes were assigned to the CPU EP (an op the CUDA EP has no kernel for, a dtype it
does not support) still lists ``CUDAExecutionProvider`` first and would be recorded as a CUDA
result. The profile says where each node really ran: with ``SessionOptions.enable_profiling``
ORT writes a Chrome-trace JSON list of events, one ``{"cat": "Node", "name":
"<node>_kernel_time", "dur": µs, "args": {"op_name": ..., "provider": ...}}`` per node per run,
beside ``{"cat": "Session", "name": "model_run"}`` per run
(https://onnxruntime.ai/docs/performance/tune-performance/profiling-tools.html).

* :func:`profile_details` (pure): events -> ``{EP name: node count}`` and op types per EP for the
  first run, kernel time per EP for the last (the first one carries cuDNN's algorithm search), as
  :class:`Placement`.
* :func:`placement_report`: a profiled pass in its own session
  (:func:`pytest_aaco.measure.ortprofile.profiled_events`), parsed.
* :func:`fallback_problem`: the message that refuses a GPU result whose compute fell to the CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.gpulocks import gpu_locks
from pytest_aaco.measure.ortprofile import (
    ProfileError,
    event_list,
    kernel_events,
    profiled_events,
    run_windows,
)
from pytest_aaco.measure.providers import ProviderSpec

if TYPE_CHECKING:
    import numpy as np

CPU_EP = "CPUExecutionProvider"
#: a GPU item is refused when CPU-EP kernels take more than this share of a run's wall time
MAX_CPU_TIME_SHARE = 0.05
#: ops ORT places on the CPU on purpose in GPU sessions (shape arithmetic): never counted as fallback
SHAPE_OPS = frozenset({"Shape", "Size"})
#: copies ORT inserts where the graph crosses between the device EP and the CPU EP
COPY_OPS = frozenset({"MemcpyToHost", "MemcpyFromHost"})
#: profiled runs: node counts come from the first, times from the last (warm) one
PROFILE_RUNS = 3


#: the profiling run could not be made or its profile could not be read (one error for every profile reader)
PlacementError = ProfileError


@dataclass
class Placement:
    """Where the nodes of one run went, per EP: node count and op types (first profiled run) and
    kernel time in µs (last profiled run, warm).

    ``run_us`` is the wall time of that last run (its ``model_run`` event), 0 when absent.
    Kernel time of a GPU EP is mostly launch time (kernels run asynchronously), but the host↔device
    copies at a partition boundary (:data:`COPY_OPS`) wait for the device, and kernel time of the
    CPU EP is real compute: ``cpu_time_share`` = (CPU-EP kernels + boundary copies) / run wall time.
    """

    nodes: dict[str, int] = field(default_factory=dict)
    time_us: dict[str, int] = field(default_factory=dict)
    ops: dict[str, dict[str, int]] = field(default_factory=dict)
    run_us: int = 0
    copy_us: int = 0

    @property
    def total_nodes(self) -> int:
        return sum(self.nodes.values())

    @property
    def cpu_nodes(self) -> int:
        return self.nodes.get(CPU_EP, 0)

    @property
    def cpu_compute_ops(self) -> dict[str, int]:
        """Op types that ran on the CPU EP, minus :data:`SHAPE_OPS`."""
        return {op: n for op, n in self.ops.get(CPU_EP, {}).items() if op not in SHAPE_OPS}

    @property
    def cpu_time_share(self) -> float:
        """(CPU-EP kernel time + boundary copy time) over the run's wall time (over all kernel
        time when the profile has no run event)."""
        cpu = self.time_us.get(CPU_EP, 0) + self.copy_us
        total = self.run_us or sum(self.time_us.values())
        return min(cpu / total, 1.0) if total else 0.0

    def to_dict(self) -> JSONDict:
        return {
            "nodes": dict(self.nodes),
            "time_us": dict(self.time_us),
            "ops": {ep: dict(ops) for ep, ops in self.ops.items()},
            "run_us": self.run_us,
            "copy_us": self.copy_us,
            "cpu_nodes": self.cpu_nodes,
            "cpu_time_share": round(self.cpu_time_share, 4),
        }


def profile_details(events: object) -> Placement:
    """Parse ORT profile *events* (the JSON list, or ``{"traceEvents": [...]}``) into a :class:`Placement`.

    Counts the ``cat == "Node"`` kernel events that carry ``args.provider``: node counts and op
    types from the first ``model_run``, times from the last one (all events when the profile has
    no run events). Raises :class:`PlacementError` for something that is not a list of events.
    """
    events = event_list(events)
    windows = run_windows(events)
    placement = Placement()
    for event in kernel_events(events, windows[0] if windows else None):
        args = event["args"]
        ep, op = str(args["provider"]), str(args.get("op_name", "?"))
        placement.nodes[ep] = placement.nodes.get(ep, 0) + 1
        ops = placement.ops.setdefault(ep, {})
        ops[op] = ops.get(op, 0) + 1
    last = windows[-1] if windows else None
    for event in kernel_events(events, last):
        args = event["args"]
        ep, dur = str(args["provider"]), int(event.get("dur", 0))
        placement.time_us[ep] = placement.time_us.get(ep, 0) + dur
        if args.get("op_name") in COPY_OPS:
            placement.copy_us += dur
    placement.run_us = int(last[1] - last[0]) if last else 0
    return placement


def placement_report(model_path: str | Path, provider_spec: ProviderSpec, device_id: int = 0, *,
                     feeds: Mapping[str, np.ndarray] | None = None, dims: Mapping[str, int] | None = None,
                     keep_profile: str | Path | None = None, runs: int = PROFILE_RUNS) -> Placement:
    """Profile one run of *model_path* on *provider_spec* (a :class:`~pytest_aaco.measure.providers.ProviderSpec`).

    Builds a separate InferenceSession with profiling on (through
    :func:`pytest_aaco.measure.inference.build_session`, so options and the CPU fallback EP are the
    benchmark's), runs it *runs* times on *feeds* (generated from the model's inputs and *dims*
    when None), calls ``end_profiling()`` and parses the file, which is deleted unless
    *keep_profile* names where to copy it. Raises :class:`~pytest_aaco.measure.inference.SessionError` when the session
    cannot be built or run, :class:`PlacementError` when the profile cannot be read.
    """
    # on a GPU, under the device lock like an item's session: building and profiling it would slow
    # another worker's rounds on the same GPU (--aaco-device-id 0,0)
    with (gpu_locks(provider_spec, device_id, f"placement check of {Path(model_path).name}")
          if provider_spec.is_gpu else nullcontext(False)):
        events = profiled_events(model_path, provider_spec, device_id, feeds=feeds, dims=dims,
                                 keep_profile=keep_profile, runs=runs)
    return profile_details(events)


def fallback_problem(placement: Placement, provider_spec: ProviderSpec,
                     max_cpu_time_share: float = MAX_CPU_TIME_SHARE) -> str | None:
    """Why a result on *provider_spec* must not be recorded as that EP's, or None.

    Only for device EPs (``provider_spec.is_gpu``): a problem when no node ran on the requested
    EP, or when CPU-EP kernels (other than :data:`SHAPE_OPS`) and the copies around them took more
    than *max_cpu_time_share* of a warm run's wall time. A few cheap CPU nodes below that share
    are not a problem: report them (``Placement.cpu_nodes``) and warn.
    """
    if not getattr(provider_spec, "is_gpu", False):
        return None
    ep = provider_spec.ep_name
    compute = placement.cpu_compute_ops
    cpu_count = sum(compute.values())
    ops = ", ".join(f"{op}×{n}" for op, n in sorted(compute.items()))
    if placement.nodes.get(ep, 0) == 0 and placement.total_nodes:
        return (f"no node ran on {ep}: {placement.total_nodes} nodes ran on"
                f" {', '.join(sorted(placement.nodes))} (ONNX Runtime fell back): not recorded as a"
                f" {provider_spec.short} result")
    share = placement.cpu_time_share
    if cpu_count and share > max_cpu_time_share:
        return (f"{cpu_count} of {placement.total_nodes} nodes ran on {CPU_EP} ({ops}): with the copies around"
                f" them {share:.0%} of the run's wall time (limit {max_cpu_time_share:.0%}); {ep} has no kernel for"
                f" them with these inputs: not recorded as a {provider_spec.short} result")
    return None


def describe_placement(placement: Placement) -> str:
    """One line for reports: ``CUDAExecutionProvider 120 nodes, CPUExecutionProvider 1 node (Hardmax)``."""
    parts = []
    for ep, count in sorted(placement.nodes.items(), key=lambda kv: -kv[1]):
        text = f"{ep} {count} node{'s' * (count != 1)}"
        if ep == CPU_EP and placement.total_nodes != count:
            text += f" ({', '.join(sorted(placement.ops.get(ep, {})))}; {placement.cpu_time_share:.0%} of run time)"
        parts.append(text)
    return ", ".join(parts) or "no node events in the profile"
