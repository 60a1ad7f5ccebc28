"""Rule-based bottleneck classifier: why was this run slow or noisy?

Each category has weighted indicators. An indicator has a *strength* in [0, 1], a linear ramp
between a threshold where it starts to count and one where it is certain (:func:`ramp`); a
category's score is ``min(1, sum(weight * strength))``. :func:`classify_bottleneck` returns the best
category if its score reaches :data:`THRESHOLD`, else None. Weights are set so that no single
*setting* (a governor, a perf level) diagnoses a run alone: an observed effect must agree.

This is a triage aid in the spirit of the USE method (Gregg, "Thinking Methodically about
Performance", CACM 2013: check utilisation, saturation and errors of each resource) and of
Roofline-style launch/compute classification (Williams, Waterman, Patterson, CACM 2009). It
names the likeliest cause with the numbers behind it; it proves nothing.

Inputs: *telemetry* is :meth:`pytest_aaco.samplers.TelemetrySession.to_dict`, *derived* is
:func:`pytest_aaco.verdict.metrics.derived_metrics`, *kernel_data* (optional) is
:meth:`pytest_aaco.passes.kernels.KernelMetrics.to_diagnosis` (``busy_ms``, ``kernel_time_ms``, ``wall_ms``,
``kernel_count``, ``microkernel_share``, ``kar``; per run) from CUPTI or rocprof; the older
``{"kernel_time_ms", "wall_ms", "kernel_count"}`` form still works.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict, JSONValue
from pytest_aaco.samplers.clocks import FIX_AMD_PERF_LEVEL, FIX_CPU_GOVERNOR
from pytest_aaco.samplers.nvidia import POWER_REASONS, THERMAL_REASONS

#: minimum score for :func:`classify_bottleneck` to name a category
THRESHOLD = 0.5
#: GPU utilisation (%) above which a GPU clock reading counts as "under load"
BUSY_GPU_PERCENT = 50.0

#: the category of a regression whose item changed against what it is compared with (model bytes,
#: inputs, provider options): named first, before any telemetry category (:func:`change_first`)
CHANGE_AT_REF = "change_at_ref"

#: what to try, per category, when the execution provider is unknown (names every EP's remedy)
RECOMMENDATIONS = {
    "cpu_contention": (
        "Other work competes for the CPU cores: run benchmarks on a dedicated runner, stop background "
        "jobs, do not run several benchmark workers (pytest-xdist) on the same machine, or set "
        "--aaco-intra-op-threads below the number of idle cores and pin the process (taskset)."
    ),
    "frequency_scaling": (
        f"Clocks changed during the measurement. Pin them: {FIX_CPU_GOVERNOR}; for AMD GPUs "
        f"{FIX_AMD_PERF_LEVEL}; for NVIDIA GPUs lock the clocks (nvidia-smi -lgc <min,max>) and check "
        "the power limit (nvidia-smi -q -d POWER)."
    ),
    "thermal_throttling": (
        "The device got hot enough to slow its clocks: improve cooling or airflow, pause between items "
        "to let it cool down, and compare only runs measured under the same thermal conditions."
    ),
    "warmup_instability": (
        "The run had not reached a steady state: raise --aaco-warmup until the last warmup "
        "iterations are within a few percent of the median, add rounds (--aaco-rounds), and cache one-off "
        "work (--aaco-compile-cache: TensorRT engine cache, MIGraphX compiled-model cache)."
    ),
    "memory_growth": (
        "Memory grew during steady-state inference: look for per-run allocations (bind preallocated "
        "outputs with --aaco-iobinding=all, --aaco-provider-option arena_extend_strategy=kSameAsRequested) "
        "or a leak; a growing arena also slows runs down as it maps new pages."
    ),
    "launch_bound": (
        "The GPU waits on the host between kernels: keep data on the device (--aaco-iobinding=all), "
        "replay the graph (--aaco-graph=on: CUDA graphs, HIP graphs), and batch more work per run."
    ),
    "compute_bound": (
        "The GPU is busy almost all the time, so speed-ups must come from the kernels: lower precision "
        "(FP16/INT8), a tuned EP (TensorRT, MIGraphX with tuning), or a smaller model."
    ),
    CHANGE_AT_REF: (
        "The item itself changed: compare what changed (the model file, its inputs, the provider options) "
        "before suspecting the machine; if the slowdown is intended, record a new baseline "
        "(--aaco-save-baseline)."
    ),
}

_NVIDIA_CLOCKS = "lock the GPU clocks (nvidia-smi -lgc <min,max>) and check the power limit (nvidia-smi -q -d POWER)"
_WARMUP = ("The run had not reached a steady state: raise --aaco-warmup until the last warmup "
           "iterations are within a few percent of the median, add rounds (--aaco-rounds)")
_LAUNCH = "The GPU waits on the host between kernels: keep data on the device (--aaco-iobinding=all), "
_LAUNCH_END = "and batch more work per run."
_COMPUTE = ("The GPU is busy almost all the time, so speed-ups must come from the kernels: lower "
            "precision (FP16/INT8), ")

#: how to pin a GPU's clocks, by the library that reports it (:attr:`pytest_aaco.eps.Ep.telemetry`)
_DEVICE_CLOCKS = {eps.NVIDIA: _NVIDIA_CLOCKS, eps.AMD: FIX_AMD_PERF_LEVEL}
#: advice for an EP whose record names no remedy of its own (cpu, openvino, dml ...): EP-neutral
_NEUTRAL = {
    "frequency_scaling": (f"Clocks changed during the measurement. Pin them: {FIX_CPU_GOVERNOR}, "
                          "and lock the device's clocks."),
    "warmup_instability": _WARMUP + ".",
    "launch_bound": _LAUNCH + _LAUNCH_END,
    "compute_bound": _COMPUTE + "a smaller model.",
}


def _for_ep(category: str, ep: eps.Ep) -> str | None:
    """The advice for *category* on *ep*, built from its record's remedies (:attr:`pytest_aaco.eps.Ep.advice`,
    its telemetry for the clocks): only that EP's own options, so a CPU run is never told about TensorRT or
    MIGraphX. None where the EP changes nothing."""
    own = ep.advice.get(category)
    if category == "frequency_scaling":
        clocks = _DEVICE_CLOCKS.get(ep.telemetry or "")
        if clocks or ep.host_only:
            pin = FIX_CPU_GOVERNOR + (f"; {clocks}" if clocks else "")
            return f"Clocks changed during the measurement. Pin them: {pin}."
        return None
    if own is None:
        return None
    if category == "warmup_instability":
        return _WARMUP + f", and cache one-off work ({own})."
    if category == "launch_bound":
        return _LAUNCH + own + ", " + _LAUNCH_END
    if category == "compute_bound":
        return _COMPUTE + own + ", or a smaller model."
    return None


def recommendation(category: str, provider: str | None = None) -> str:
    """What to try for *category* on the execution provider *provider* (short or full EP name).

    Names only the remedies of that EP: a CPU run hears nothing of TensorRT engine caches or
    MIGraphX compiled models. Without a provider, the advice of :data:`RECOMMENDATIONS`.
    """
    if not provider or not provider.strip():
        return RECOMMENDATIONS[category]
    ep = eps.lookup(provider) or eps.lookup(provider.strip() + "ExecutionProvider")
    found = _for_ep(category, ep) if ep is not None else None
    return found or _NEUTRAL.get(category, RECOMMENDATIONS[category])


@dataclass
class Diagnosis:
    """The likeliest bottleneck of one run.

    ``category``: one of the keys of :data:`RECOMMENDATIONS`; ``score``: 0..1;
    ``evidence``: sentences that quote the numbers behind the score; ``recommendation``: what to
    try; ``scores``: the score of every category that had any evidence.
    """

    category: str
    score: float
    evidence: list[str]
    recommendation: str
    scores: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> JSONDict:
        """JSON-ready ``{"category", "score", "evidence", "recommendation", "scores"}``."""
        return {
            "category": self.category,
            "score": round(self.score, 4),
            "evidence": list(self.evidence),
            "recommendation": self.recommendation,
            "scores": {k: round(v, 4) for k, v in self.scores.items()},
        }


def ramp(value: float, start: float, full: float) -> float:
    """0 at or below *start*, 1 at or above *full*, linear between (NaN gives 0)."""
    if value is None or isinstance(value, float) and math.isnan(value):
        return 0.0
    if full == start:
        return 1.0 if value >= full else 0.0
    return min(1.0, max(0.0, (value - start) / (full - start)))


# -- reading the telemetry dict -------------------------------------------------------------
class _Telemetry:
    """Accessors over a ``TelemetrySession.to_dict()`` record (tolerant of missing parts)."""

    def __init__(self, data: dict[str, Any] | None) -> None:
        self.data = data or {}
        self.samples: list[dict[str, Any]] = []
        for record in (self.data.get("samplers") or {}).values():
            self.samples.extend(record.get("samples") or [])
        self.samples.sort(key=lambda s: s.get("t_ns", 0))

    def series(self, name: str) -> list[tuple[int, JSONValue]]:
        """``[(t_ns, value)]`` of every non-None reading of *name*, in time order."""
        return [(s.get("t_ns", 0), s[name]) for s in self.samples if s.get(name) is not None]

    def numbers(self, name: str) -> list[float]:
        return [float(v) for _, v in self.series(name) if isinstance(v, (int, float)) and not isinstance(v, bool)]

    def stat(self, name: str, key: str = "mean") -> float | None:
        entry = (self.data.get("summary") or {}).get(name)
        if entry and entry.get(key) is not None:
            return float(entry[key])
        values = self.numbers(name)
        if not values:
            return None
        return {"mean": sum(values) / len(values), "max": max(values), "min": min(values)}.get(key)

    def duration_s(self) -> float | None:
        start, end = self.data.get("start_ns"), self.data.get("end_ns")
        if isinstance(start, int) and isinstance(end, int) and end > start:
            return (end - start) / 1e9
        times = [s["t_ns"] for s in self.samples if isinstance(s.get("t_ns"), int)]
        if len(times) >= 2 and max(times) > min(times):
            return (max(times) - min(times)) / 1e9
        return None

    def clock_state(self) -> JSONDict:
        return self.data.get("clock_state") or {}

    def busy_gpu_clocks(self) -> list[float]:
        """GPU clock readings (MHz) taken while the GPU was at least :data:`BUSY_GPU_PERCENT` busy."""
        return [
            float(s["gfx_clock_mhz"])
            for s in self.samples
            if s.get("gfx_clock_mhz") is not None and (s.get("gpu_util_percent") or 0) >= BUSY_GPU_PERCENT
        ]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _ends(values: list[float], share: float = 0.2) -> tuple[float, float] | None:
    """Medians of the first and last *share* of *values* (at least 1 each; None under 2 values)."""
    if len(values) < 2:
        return None
    k = max(1, int(len(values) * share))
    return _median(values[:k]), _median(values[-k:])


def _reason_fraction(t: _Telemetry, reasons: frozenset[str]) -> tuple[float, int, list[str]]:
    lists = [v for _, v in t.series("clock_event_reasons") if isinstance(v, list)]
    if not lists:
        return 0.0, 0, []
    hits = [set(v) & reasons for v in lists]
    seen = sorted(set().union(*hits))
    return sum(1 for h in hits if h) / len(lists), len(lists), seen


Indicator = tuple[float, str]  # (weight * strength, evidence)


class _Found(list[Indicator]):
    """The indicators one rule found, in the order it checked them."""

    def add(self, weight: float, strength: float, evidence: str) -> None:
        """Keep ``(weight * strength, evidence)`` when the indicator has any strength."""
        if strength > 0:
            self.append((weight * strength, evidence))


# -- rules --------------------------------------------------------------------------------------
def _cpu_contention(t: _Telemetry, d: JSONDict, cpu_count: int, k: JSONDict | None) -> list[Indicator]:
    found = _Found()
    load = t.stat("load_avg_1m", "max")
    if load is not None and cpu_count > 0:
        ratio = load / cpu_count
        found.add(0.5, ramp(ratio, 1.0, 1.5),
                  f"1-minute load average reached {load:.2f} on {cpu_count} logical cores "
                  f"({ratio:.0%} of capacity): more runnable tasks than cores")
    invol = t.numbers("ctx_switches_involuntary")
    duration = t.duration_s()
    if len(invol) >= 2 and duration and duration >= 0.5:
        delta = invol[-1] - invol[0]
        rate = delta / duration
        found.add(0.5, ramp(rate, 50.0, 500.0),
                  f"involuntary context switches climbed by {delta:.0f} in {duration:.1f} s "
                  f"({rate:.0f}/s): the scheduler preempted this process's threads")
    system = t.stat("system_cpu_percent")
    process = t.stat("process_cpu_percent")
    if system is not None and process is not None and cpu_count > 0:
        other = system * cpu_count - process  # in percent of one core
        found.add(0.4, ramp(other, 50.0, 150.0),
                  f"other processes used {other / 100:.1f} cores on average (host CPU "
                  f"{system:.0f}% of {cpu_count} cores, this process {process:.0f}% of one core)")
    return found


def _frequency_scaling(t: _Telemetry, d: JSONDict, cpu_count: int, k: JSONDict | None) -> list[Indicator]:
    found = _Found()
    governor = t.clock_state().get("cpu_governor")
    if governor not in (None, "performance"):
        found.add(0.25, 1.0, f"CPU frequency governor is '{governor}', not 'performance'")
    for what, clocks in (("CPU clock", t.numbers("cpu_freq_mhz")), ("GPU clock under load", t.busy_gpu_clocks())):
        if len(clocks) >= 2:
            mean = sum(clocks) / len(clocks)
            spread = (max(clocks) - min(clocks)) / mean if mean > 0 else 0.0
            found.add(0.5, ramp(spread, 0.05, 0.25),
                      f"{what} varied between {min(clocks):.0f} and {max(clocks):.0f} MHz "
                      f"({spread:.0%} of its mean {mean:.0f} MHz)")
    fraction, n, seen = _reason_fraction(t, POWER_REASONS)
    found.add(0.5, ramp(fraction, 0.0, 0.5),
              f"GPU reported power clock-event reasons ({', '.join(seen)}) in {fraction:.0%} of {n} samples")
    levels = {v for _, v in t.series("perf_level") if isinstance(v, str)}
    if "auto" in levels or t.clock_state().get("gpu_perf_level") == "auto":
        found.add(0.15, 1.0, "AMD GPU performance level is 'auto': clocks follow the load")
    return found


def _thermal_throttling(t: _Telemetry, d: JSONDict, cpu_count: int, k: JSONDict | None) -> list[Indicator]:
    found = _Found()
    fraction, n, seen = _reason_fraction(t, THERMAL_REASONS)
    found.add(0.8, ramp(fraction, 0.0, 0.25),
              f"GPU reported thermal clock-event reasons ({', '.join(seen)}) in {fraction:.0%} of {n} samples")
    junction = t.stat("temp_junction_c", "max")
    edge = t.stat("temp_edge_c", "max")
    parts = [f"{name} {temp:.0f} °C" for name, temp in (("junction", junction), ("edge", edge)) if temp is not None]
    found.add(0.4, max(ramp(junction or 0.0, 90.0, 105.0), ramp(edge or 0.0, 80.0, 90.0)),
              f"GPU temperature reached {' and '.join(parts)}, near the slowdown limit")
    temps = t.numbers("temp_junction_c") or t.numbers("temp_edge_c")
    c_ends, t_ends = _ends(t.busy_gpu_clocks(), 1 / 3), _ends(temps, 1 / 3)
    if c_ends and t_ends and c_ends[0] > 0:
        drop = (c_ends[0] - c_ends[1]) / c_ends[0]
        rise = t_ends[1] - t_ends[0]
        if rise >= 3.0:
            found.add(0.4, ramp(drop, 0.03, 0.10),
                      f"GPU clock under load fell {drop:.0%} ({c_ends[0]:.0f} -> {c_ends[1]:.0f} MHz) "
                      f"while the temperature rose {rise:.0f} °C")
    return found


def _warmup_instability(t: _Telemetry, d: dict[str, Any], cpu_count: int, k: JSONDict | None) -> list[Indicator]:
    found = _Found()
    tail, drift, cov, ratio = (d.get(key) for key in ("warmup_tail_ratio", "drift_ratio", "cov", "warmup_ratio"))
    if tail is not None:
        found.add(0.5, ramp(tail, 1.05, 1.3),
                  f"the last warmup iterations were {tail:.2f}x the measured median: "
                  "the warmup ended before the steady state")
    if drift is not None:
        found.add(0.4, ramp(abs(drift), 0.03, 0.10),
                  f"latency drifted {drift:+.1%} from the first to the last tenth of the measured iterations")
    if cov is not None:
        found.add(0.3, ramp(cov, 0.05, 0.20),
                  f"coefficient of variation {cov:.1%} (std {d.get('std_ms', float('nan')):.2f} ms "
                  f"over mean {d.get('mean_ms', float('nan')):.2f} ms)")
    if ratio is not None:
        found.add(0.15, ramp(ratio, 5.0, 50.0), f"first run took {ratio:.1f}x the steady-state median")
    return found


def _growth(values: list[float], what: str, duration: float | None) -> tuple[float, str]:
    """``(strength, evidence)`` of a memory series that grew from its first to its last fifth."""
    ends = _ends(values)
    if ends is None or ends[1] <= ends[0]:
        return 0.0, ""
    first, last = ends
    growth = last - first
    relative = growth / first if first > 0 else float("inf")
    strength = max(ramp(growth, 16.0, 128.0), ramp(relative, 0.05, 0.25)) if growth >= 8.0 else 0.0
    over = f" over {duration:.1f} s" if duration else ""
    return strength, f"{what} grew from {first:.0f} MB to {last:.0f} MB (+{growth:.0f} MB, {relative:+.0%}){over}"


def _memory_growth(t: _Telemetry, d: JSONDict, cpu_count: int, k: JSONDict | None) -> list[Indicator]:
    found = _Found()
    duration = t.duration_s()
    for name, what in (("rss_mb", "process RSS"), ("vram_used_mb", "GPU memory in use")):
        found.add(0.7, *_growth(t.numbers(name), what, duration))
    major = t.numbers("page_faults_major")
    if len(major) >= 2:
        delta = major[-1] - major[0]
        found.add(0.2, ramp(delta, 0.0, 100.0),
                  f"{delta:.0f} major page faults during the phase (pages read from disk or swap)")
    return found


@dataclass(frozen=True)
class _Kernels:
    """Profiler figures of one run (:meth:`pytest_aaco.passes.kernels.KernelMetrics.to_diagnosis`): time the
    GPU was busy (the union of kernel intervals; summed kernel time when only that is known), wall
    time, kernels per run, the share of kernels under 10 µs and KAR (kernels per ONNX node)."""

    busy_ms: float
    wall_ms: float
    count: float
    mean_us: float | None  # None without a kernel count
    micro_share: float | None
    kar: float | None

    @property
    def busy(self) -> float:
        return min(self.busy_ms / self.wall_ms, 1.0)

    def busy_evidence(self) -> str:
        return (f"kernels kept the GPU busy {self.busy:.0%} of the wall time "
                f"({self.busy_ms:.2f} of {self.wall_ms:.2f} ms)")


def _optional(k: JSONDict, key: str) -> float | None:
    value = k.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _kernels(k: dict[str, Any] | None) -> _Kernels | None:
    if not k:
        return None
    try:
        busy_ms = float(k["busy_ms"] if k.get("busy_ms") is not None else k["kernel_time_ms"])
        wall_ms = float(k["wall_ms"])
    except (KeyError, TypeError, ValueError):
        return None
    if wall_ms <= 0:
        return None
    count = _optional(k, "kernel_count") or 0.0
    kernel_ms = _optional(k, "kernel_time_ms")
    mean_us = (kernel_ms if kernel_ms is not None else busy_ms) * 1000.0 / count if count else None
    return _Kernels(busy_ms, wall_ms, count, mean_us, _optional(k, "microkernel_share"), _optional(k, "kar"))


def _launch_bound(t: _Telemetry, d: JSONDict, cpu_count: int, k: JSONDict | None) -> list[Indicator]:
    found = _Found()
    kernels = _kernels(k)
    if kernels is None:
        return found
    found.add(0.6, ramp(0.8 - kernels.busy, 0.1, 0.5), kernels.busy_evidence())
    if kernels.busy >= 0.7:
        return found
    if kernels.micro_share is not None:
        found.add(0.3, ramp(kernels.micro_share, 0.3, 0.7),
                  f"{kernels.micro_share:.0%} of {kernels.count:.0f} kernels per run ran under 10 µs: "
                  "launch overhead is comparable to their work")
    elif kernels.mean_us is not None:
        found.add(0.3, ramp(20.0 - kernels.mean_us, 0.0, 15.0),
                  f"{kernels.count:.0f} kernels averaging {kernels.mean_us:.1f} µs each: "
                  "launch overhead is comparable to the work")
    if kernels.kar is not None:
        found.add(0.1, ramp(kernels.kar, 1.5, 4.0),
                  f"{kernels.kar:.1f} kernels per ONNX node (KAR): operators split into many launches")
    return found


def _compute_bound(t: _Telemetry, d: JSONDict, cpu_count: int, k: JSONDict | None) -> list[Indicator]:
    found = _Found()
    kernels = _kernels(k)
    if kernels is None:
        return found
    found.add(0.8, ramp(kernels.busy, 0.8, 0.95), kernels.busy_evidence())
    util = t.stat("gpu_util_percent")
    if util is not None and kernels.busy >= 0.8:
        found.add(0.2, ramp(util, 80.0, 95.0), f"GPU utilisation averaged {util:.0f}%")
    return found


RULES: dict[str, Callable[[_Telemetry, JSONDict, int, JSONDict | None], list[Indicator]]] = {
    "cpu_contention": _cpu_contention,
    "frequency_scaling": _frequency_scaling,
    "thermal_throttling": _thermal_throttling,
    "warmup_instability": _warmup_instability,
    "memory_growth": _memory_growth,
    "launch_bound": _launch_bound,
    "compute_bound": _compute_bound,
}


def score_all(
    telemetry: JSONDict | None,
    derived: JSONDict | None,
    cpu_count: int,
    kernel_data: JSONDict | None = None,
) -> dict[str, tuple[float, list[str]]]:
    """``{category: (score, evidence)}`` for every category with any evidence (score > 0)."""
    t = _Telemetry(telemetry)
    d = derived or {}
    results: dict[str, tuple[float, list[str]]] = {}
    for category, rule in RULES.items():
        indicators = [(w, e) for w, e in rule(t, d, int(cpu_count or 0), kernel_data) if w > 0]
        if indicators:
            indicators.sort(key=lambda item: -item[0])
            score = min(1.0, math.fsum(w for w, _ in indicators))
            results[category] = (score, [e for _, e in indicators])
    return results


def classify_bottleneck(
    telemetry: JSONDict | None,
    derived: JSONDict | None,
    cpu_count: int,
    kernel_data: JSONDict | None = None,
    provider: str | None = None,
) -> Diagnosis | None:
    """The likeliest bottleneck, or None when no category scores :data:`THRESHOLD` or more.

    *telemetry*: ``TelemetrySession.to_dict()``; *derived*: ``derived_metrics(...)``;
    *cpu_count*: logical cores of the host; *kernel_data*: ``KernelMetrics.to_diagnosis()`` from a
    profiler, which enables ``launch_bound`` / ``compute_bound``; *provider*: the item's execution
    provider (``cpu``, ``CUDAExecutionProvider`` ...), so that the advice names only its remedies.
    Ties go to the category listed first in :data:`RULES`. Never raises on missing fields.
    """
    scored = score_all(telemetry, derived, cpu_count, kernel_data)
    if not scored:
        return None
    order = list(RULES)
    best = max(scored, key=lambda c: (scored[c][0], -order.index(c)))
    score, evidence = scored[best]
    if score < THRESHOLD:
        return None
    return Diagnosis(
        category=best,
        score=score,
        evidence=evidence,
        recommendation=recommendation(best, provider),
        scores={c: s for c, (s, _) in scored.items()},
    )


def change_first(changed: list[str], since: str, found: Diagnosis | None) -> Diagnosis:
    """The diagnosis of a regression whose item changed (*changed*: ``model bytes``, ``inputs``,
    ``cuda provider options``) against *since* (``origin/main``, ``the baseline``): the change is
    named first (:data:`CHANGE_AT_REF`, score 1), before what the telemetry showed (*found*, kept as
    later evidence and in ``scores``), so a changed model is never blamed on a busy runner."""
    evidence = [f"{', '.join(changed)} changed since {since}"]
    scores = {CHANGE_AT_REF: 1.0}
    if found is not None:
        evidence.append(f"also seen ({found.category}): " + "; ".join(found.evidence))
        scores.update(found.scores)
    return Diagnosis(CHANGE_AT_REF, 1.0, evidence, RECOMMENDATIONS[CHANGE_AT_REF], scores)
