"""Where a run's time goes: time per operator type and per node, from one profiled pass.

``--aaco-profile`` runs the model a few more times in a separate InferenceSession with ORT's
profiler on (:func:`pytest_aaco.measure.ortprofile.profiled_events`, the machinery of the placement
check), never in the measured session and never during the measured rounds. The first profiled
run (allocations, algorithm search) is dropped; each node's time is its median over the other
runs, so one preempted run does not move an operator.

* :func:`op_profile` (pure): profile events -> :class:`OpProfile` (per EP and op type: time per
  run, share of the total, node count; the slowest nodes; nodes placed on the CPU EP beside a device EP).
* :func:`profile_model`: the profiled pass itself.
* :func:`compare_profiles` (pure): baseline vs current -> :class:`ProfileComparison`, whose
  :meth:`~ProfileComparison.message` reads like ``Conv +31% (...), everything else flat (within ±10%)``.

Times carry ORT's profiling overhead (a few µs per node), so compare them with other profiled
times, never with the benchmark's latencies. Shares are the readable figure: they hold when the
whole machine is slower.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.ortprofile import event_list, kernel_events, node_name, profiled_events, run_windows
from pytest_aaco.measure.providers import ProviderSpec

if TYPE_CHECKING:
    import numpy as np

CPU_EP = "CPUExecutionProvider"
#: profiled runs after the dropped first one: enough for a median, bounded in time (see :func:`profile_runs`)
MIN_RUNS, MAX_RUNS = 3, 20
#: aim the profiled runs at about this much time (s)
TARGET_PROFILE_S = 1.0
#: nodes and operators kept in reports
TOP_N = 10
#: an operator whose time changed less than this fraction is "flat"
FLAT = 0.10
#: an operator below this share of the run on both sides is never named (its µs are noise-sized)
NOTABLE_SHARE = 0.05
#: ... nor one that explains less than this fraction of the total growth
NOTABLE_GROWTH = 0.10


def short_ep(ep: str) -> str:
    """``CUDAExecutionProvider`` -> ``CUDA``."""
    return ep.removesuffix("ExecutionProvider") or ep


@dataclass(frozen=True)
class NodeTime:
    """One node: its name, op type, the EP that ran it and its median time per run (µs)."""

    node: str
    op: str
    ep: str
    time_us: float

    def to_dict(self) -> JSONDict:
        return {"node": self.node, "op": self.op, "ep": self.ep, "time_us": round(self.time_us, 3)}


@dataclass(frozen=True)
class OpTime:
    """One op type on one EP: summed node time per run (µs), node count and share of all node time (0..1)."""

    op: str
    ep: str
    nodes: int
    time_us: float
    share: float

    def to_dict(self) -> JSONDict:
        return {"op": self.op, "ep": self.ep, "nodes": self.nodes, "time_us": round(self.time_us, 3),
                "share": round(self.share, 5)}


@dataclass
class OpProfile:
    """Where one run's node time goes.

    ``runs``: profiled runs aggregated; ``run_us``: median wall time of one (µs, ``model_run``
    events; 0 when absent); ``ops``: every (op type, EP), slowest first; ``nodes``: the slowest
    nodes (all of them when parsed, :data:`TOP_N` after a round trip through :meth:`to_dict`);
    ``cpu_nodes``: names of nodes the CPU EP ran in a session that also used another EP.
    """

    runs: int
    run_us: float
    ops: list[OpTime] = field(default_factory=list)
    nodes: list[NodeTime] = field(default_factory=list)
    cpu_nodes: list[str] = field(default_factory=list)

    @property
    def total_us(self) -> float:
        """Node time of one run (µs), summed over every op type."""
        return math.fsum(o.time_us for o in self.ops)

    def top_ops(self, n: int = TOP_N) -> list[OpTime]:
        return self.ops[:n]

    def to_dict(self, top: int = TOP_N) -> JSONDict:
        """JSON-ready: every op type (few), the *top* slowest nodes, the CPU-placed node names."""
        return {
            "runs": self.runs,
            "run_us": round(self.run_us, 3),
            "total_us": round(self.total_us, 3),
            "ops": [o.to_dict() for o in self.ops],
            "nodes": [n.to_dict() for n in self.nodes[:top]],
            "cpu_nodes": list(self.cpu_nodes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpProfile:
        """The inverse of :meth:`to_dict` (nodes beyond its *top* are gone). Raises ValueError
        (naming the key) for a record that is not a profile."""
        try:
            ops = [OpTime(str(o["op"]), str(o["ep"]), int(o["nodes"]), float(o["time_us"]), float(o["share"]))
                   for o in data["ops"]]
            nodes = [NodeTime(str(n["node"]), str(n["op"]), str(n["ep"]), float(n["time_us"]))
                     for n in data.get("nodes") or []]
            return cls(int(data["runs"]), float(data.get("run_us") or 0.0), ops, nodes,
                       [str(n) for n in data.get("cpu_nodes") or []])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not an operator profile record: {type(exc).__name__}: {exc}") from None


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def op_profile(events: object) -> OpProfile:
    """Aggregate ORT profile *events* (a JSON list, or ``{"traceEvents": [...]}``) by op type and node.

    Runs are cut by their ``model_run`` events; the first is dropped when there are more than
    one. Each node's time is the median of its kernel-event durations over the kept runs (µs); an
    op type's time is the sum over its nodes; shares are over all node time. Without run events
    every kernel event counts as one run. Raises :class:`~pytest_aaco.measure.ortprofile.ProfileError`
    for something that is not a list of events.
    """
    events = event_list(events)
    windows = run_windows(events)
    kept: list[tuple[float, float] | None] = list(windows[1:] if len(windows) > 1 else windows) or [None]
    durations: dict[str, list[float]] = {}
    kinds: dict[str, tuple[str, str]] = {}
    for window in kept:
        for event in kernel_events(events, window):
            name = node_name(event)
            args = event["args"]
            kinds[name] = (str(args.get("op_name", "?")), str(args["provider"]))
            durations.setdefault(name, []).append(float(event.get("dur", 0)))
    nodes = sorted((NodeTime(name, *kinds[name], _median(times)) for name, times in durations.items()),
                   key=lambda n: (-n.time_us, n.node))
    total = math.fsum(n.time_us for n in nodes)
    grouped: dict[tuple[str, str], list[NodeTime]] = {}
    for node in nodes:
        grouped.setdefault((node.op, node.ep), []).append(node)
    ops = []
    for (op, ep), members in grouped.items():
        time_us = math.fsum(n.time_us for n in members)
        ops.append(OpTime(op, ep, len(members), time_us, time_us / total if total > 0 else 0.0))
    ops.sort(key=lambda o: (-o.time_us, o.op, o.ep))
    eps = {n.ep for n in nodes}
    cpu_nodes = sorted(n.node for n in nodes if n.ep == CPU_EP) if len(eps) > 1 else []
    run_us = _median([end - start for start, end in (windows[1:] or windows)]) if windows else 0.0
    return OpProfile(len(kept), run_us, ops, nodes, cpu_nodes)


def profile_runs(p50_ms: float | None) -> int:
    """Profiled runs for a model whose steady-state p50 is *p50_ms*: about :data:`TARGET_PROFILE_S`
    of runs, between :data:`MIN_RUNS` and :data:`MAX_RUNS` (the minimum when unknown)."""
    if not p50_ms or p50_ms <= 0 or not math.isfinite(p50_ms):
        return MIN_RUNS
    return int(min(MAX_RUNS, max(MIN_RUNS, round(TARGET_PROFILE_S * 1000.0 / p50_ms))))


def profile_model(model_path: str | Path, provider_spec: ProviderSpec, device_id: int = 0, *,
                  feeds: Mapping[str, np.ndarray] | None = None, dims: Mapping[str, int] | None = None,
                  runs: int = MIN_RUNS) -> OpProfile:
    """The operator profile of *runs* warm runs of *model_path* on *provider_spec*, in a new
    profiling InferenceSession (one more run is made first and dropped). Raises
    :class:`~pytest_aaco.measure.inference.SessionError` / :class:`~pytest_aaco.measure.ortprofile.ProfileError`
    as :func:`pytest_aaco.measure.ortprofile.profiled_events`."""
    events = profiled_events(model_path, provider_spec, device_id, feeds=feeds, dims=dims, runs=runs + 1)
    return op_profile(events)


# ---------------------------------------------------------------- baseline vs current


@dataclass(frozen=True)
class OpChange:
    """One op type on one EP in two profiles: time per run (µs) and share of the total (0..1) on each side."""

    op: str
    ep: str
    base_us: float
    cur_us: float
    base_share: float
    cur_share: float

    @property
    def growth_us(self) -> float:
        return self.cur_us - self.base_us

    @property
    def change(self) -> float:
        """``cur / base - 1``; ``inf`` for an op type the baseline did not run."""
        if self.base_us <= 0:
            return math.inf if self.cur_us > 0 else 0.0
        return self.cur_us / self.base_us - 1.0

    def to_dict(self) -> JSONDict:
        change = self.change
        return {"op": self.op, "ep": self.ep, "base_us": round(self.base_us, 3), "cur_us": round(self.cur_us, 3),
                "base_share": round(self.base_share, 5), "cur_share": round(self.cur_share, 5),
                "change": None if math.isinf(change) else round(change, 5)}


@dataclass
class ProfileComparison:
    """Op types of two profiles, the one that grew most (µs per run) first; ``flat`` as :data:`FLAT`."""

    changes: list[OpChange]
    base_total_us: float
    cur_total_us: float
    flat: float = FLAT
    several_eps: bool = False

    def _label(self, c: OpChange) -> str:
        return f"{c.op} on {short_ep(c.ep)}" if self.several_eps else c.op

    def _notable(self, c: OpChange) -> bool:
        return max(c.base_share, c.cur_share) >= NOTABLE_SHARE

    def grown(self) -> list[OpChange]:
        """Op types whose time grew by more than ``flat``, most µs first: those with at least
        :data:`NOTABLE_SHARE` of a run on one side and, when the total grew, at least
        :data:`NOTABLE_GROWTH` of that growth."""
        growth = self.cur_total_us - self.base_total_us
        return [c for c in self.changes if c.growth_us > 0 and c.change > self.flat and self._notable(c)
                and (growth <= 0 or c.growth_us >= NOTABLE_GROWTH * growth)]

    def message(self, limit: int = 3) -> str:
        """One line a person can act on (op types under :data:`NOTABLE_SHARE` are left out), e.g.
        ``operators: Conv +31% (1.20 -> 1.57 ms per run, share 40% -> 47%), everything else flat (within ±10%)``;
        ``""`` when the profiles hold no op."""
        if not self.changes:
            return ""
        growth = self.cur_total_us - self.base_total_us
        named = self.grown()[:limit]
        parts = []
        for c in named:
            change = "new" if math.isinf(c.change) else f"{c.change:+.0%}"
            part = (f"{self._label(c)} {change} ({c.base_us / 1000:.2f} -> {c.cur_us / 1000:.2f} ms per run,"
                    f" share {c.base_share:.0%} -> {c.cur_share:.0%}")
            if growth > 0 and c.growth_us <= growth * 1.5:
                part += f", {c.growth_us / growth:.0%} of the growth"
            parts.append(part + ")")
        rest = [c for c in self.changes if c not in named]
        moved = [c for c in rest if abs(c.change) > self.flat and self._notable(c)]
        if not moved:
            tail = f"everything else flat (within ±{self.flat:.0%})" if parts else \
                f"every operator flat (within ±{self.flat:.0%})"
        else:
            tail = "others: " + ", ".join(f"{self._label(c)} {'new' if math.isinf(c.change) else f'{c.change:+.0%}'}"
                                          for c in moved[:limit])
        return "operators: " + "; ".join(parts + [tail])

    def to_dict(self) -> JSONDict:
        return {"flat": self.flat, "base_total_us": round(self.base_total_us, 3),
                "cur_total_us": round(self.cur_total_us, 3), "message": self.message(),
                "changes": [c.to_dict() for c in self.changes]}


def compare_profiles(baseline: OpProfile, current: OpProfile, flat: float = FLAT) -> ProfileComparison:
    """Match the op types (per EP) of *baseline* and *current* and order them by growth (µs per run).

    An op type missing on one side counts 0 µs there. *flat*: a fraction; changes within it are
    called flat in the message. Pure; never raises for empty profiles.
    """
    base = {(o.op, o.ep): o for o in baseline.ops}
    cur = {(o.op, o.ep): o for o in current.ops}
    changes = []
    for key in base.keys() | cur.keys():
        b, c = base.get(key), cur.get(key)
        changes.append(OpChange(key[0], key[1], b.time_us if b else 0.0, c.time_us if c else 0.0,
                                b.share if b else 0.0, c.share if c else 0.0))
    changes.sort(key=lambda c: (-c.growth_us, c.op, c.ep))
    eps = {key[1] for key in base.keys() | cur.keys()}
    return ProfileComparison(changes, baseline.total_us, current.total_us, flat, len(eps) > 1)
