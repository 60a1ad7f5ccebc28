"""Result records of one benchmark: rounds of iterations and their summaries.

Units: every latency is in milliseconds (ms); throughput is in samples per second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.tracers.base import DeviceSeries


def percentile_ms(latencies_ms: np.ndarray, q: float) -> float:
    """The *q*-th percentile (0..100) of *latencies_ms* with numpy's default linear interpolation."""
    if latencies_ms.size == 0:
        return float("nan")
    return float(np.percentile(latencies_ms, q))


@dataclass(frozen=True)
class RoundResult:
    """One round: a block of consecutive iterations timed with ``time.perf_counter_ns``.

    ``latencies_ms`` has shape ``(n_iterations,)``. ``start_ns``/``end_ns`` are on the
    ``perf_counter_ns`` clock, the one the telemetry samplers use, so both line up.
    """

    index: int
    latencies_ms: np.ndarray
    start_ns: int
    end_ns: int

    @property
    def n(self) -> int:
        return int(self.latencies_ms.size)

    @property
    def mean_ms(self) -> float:
        return float(self.latencies_ms.mean())

    @property
    def log_mean(self) -> float:
        """Mean of ln(latency in ms): the round-level summary the regression test runs on."""
        return float(np.log(self.latencies_ms).mean())

    @property
    def p50_ms(self) -> float:
        return percentile_ms(self.latencies_ms, 50)

    @property
    def p99_ms(self) -> float:
        return percentile_ms(self.latencies_ms, 99)

    def summary(self) -> JSONDict:
        """The round as stored in baselines: ``n``, ``mean_ms``, ``log_mean``, ``p50_ms``, ``p99_ms`` and
        ``min_ms``, its fastest iteration (the stored gate's witness under CPU contention,
        :func:`pytest_aaco.history.judge.fastest_iteration`)."""
        return {
            "n": self.n,
            "mean_ms": self.mean_ms,
            "log_mean": self.log_mean,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "min_ms": float(self.latencies_ms.min()),
        }


@dataclass(frozen=True)
class ReferenceSeries:
    """The reference workload's blocks, one per item round (:mod:`pytest_aaco.measure.reference_workload`).

    ``log_means``: mean ln(ms) of each reference block, shape ``(rounds,)``; ``normalized``: per
    round pair ``ln(item) - ln(reference)`` (the item round's log-mean minus the reference
    block's), shape ``(rounds,)``; ``mean_ms``: mean reference latency (ms); ``iterations``:
    measured iterations per reference block; ``share``: the reference's fraction of the measured
    time (0.17 = 17%); ``id``: name and content hash of the reference model; ``device``: its
    device time, one traced block after each reference block, when a tracer ran (None otherwise).
    """

    name: str
    id: str
    log_means: np.ndarray
    normalized: np.ndarray
    mean_ms: float
    iterations: int
    share: float
    device: DeviceSeries | None = None
    min_ms: float | None = None

    def to_dict(self) -> JSONDict:
        """As stored in baselines and bundles (lists of floats); ``device_time`` only when traced,
        ``min_ms`` only when measured."""
        data: JSONDict = {
            "name": self.name,
            "id": self.id,
            "log_means": [float(v) for v in self.log_means],
            "normalized": [float(v) for v in self.normalized],
            "mean_ms": self.mean_ms,
            "iterations": self.iterations,
            "share": self.share,
        }
        if self.device is not None:
            data["device_time"] = self.device.to_dict()
        if self.min_ms is not None:
            data["min_ms"] = self.min_ms
        return data


@dataclass
class BenchmarkResult:
    """Everything measured for one (model, execution provider) item.

    The fields of the classic InferenceResult are properties over the measured iterations:
    ``latencies_ms`` (shape ``(rounds * iterations,)``), ``mean_ms``, ``std_ms``, ``p50_ms``,
    ``p90_ms``, ``p99_ms``, ``throughput`` (samples/s = batch size * 1000 / mean ms),
    ``warmup_iterations`` and ``measure_iterations``. With a reference workload measured
    alongside, ``rounds`` are still the item's own blocks and ``reference`` holds the rest. With a
    device tracer (:mod:`pytest_aaco.measure.device_time`), ``device`` holds the item's traced blocks
    (one after each round; their wall time is never judged) and ``device_note`` says why there is
    none where a tracer was wanted but unavailable.
    """

    model: str
    provider: str
    rounds: list[RoundResult]
    warmup_iterations: int
    warmup_latencies_ms: np.ndarray
    session_create_ms: float
    first_run_ms: float
    providers_used: list[str]
    batch_size: int = 1
    iobinding: str = "none"
    telemetry: dict[str, Any] = field(default_factory=dict)
    confirmation: BenchmarkResult | None = None
    reference: ReferenceSeries | None = None
    #: whether the session compiled its program (``miss``) or loaded it from the compile cache (``hit``);
    #: None without a plugin-owned cache (:mod:`pytest_aaco.measure.compile_cache`)
    compile_cache: str | None = None
    device: DeviceSeries | None = None
    device_note: str | None = None
    #: seconds this measurement waited for the device lock (another benchmark on the device); None: not taken
    lock_wait_s: float | None = None
    #: the physical GPU it ran on (``uuid``, ``pci_bus_id`` ...), set by the gate for the GPU offsets
    gpu: dict[str, Any] | None = None

    @property
    def latencies_ms(self) -> np.ndarray:
        if not self.rounds:
            return np.empty(0)
        return np.concatenate([r.latencies_ms for r in self.rounds])

    @property
    def measure_iterations(self) -> int:
        return sum(r.n for r in self.rounds)

    @property
    def mean_ms(self) -> float:
        return float(self.latencies_ms.mean())

    @property
    def std_ms(self) -> float:
        lat = self.latencies_ms
        return float(lat.std(ddof=1)) if lat.size > 1 else 0.0

    @property
    def p50_ms(self) -> float:
        return percentile_ms(self.latencies_ms, 50)

    @property
    def p90_ms(self) -> float:
        return percentile_ms(self.latencies_ms, 90)

    @property
    def p99_ms(self) -> float:
        return percentile_ms(self.latencies_ms, 99)

    @property
    def throughput(self) -> float:
        """Samples per second at the mean latency: ``batch_size * 1000 / mean_ms``."""
        return self.batch_size * 1000.0 / self.mean_ms

    @property
    def round_log_means(self) -> np.ndarray:
        """Shape ``(rounds,)``: mean ln(ms) of each round."""
        return np.array([r.log_mean for r in self.rounds])

    @property
    def duration_s(self) -> float:
        """Wall time of the measured phase in seconds."""
        if not self.rounds:
            return 0.0
        return (self.rounds[-1].end_ns - self.rounds[0].start_ns) / 1e9

    def summary(self) -> JSONDict:
        """Scalar figures of the run, in ms and samples/s."""
        return {
            "mean_ms": self.mean_ms,
            "std_ms": self.std_ms,
            "p50_ms": self.p50_ms,
            "p90_ms": self.p90_ms,
            "p99_ms": self.p99_ms,
            "throughput": self.throughput,
            "warmup_iterations": self.warmup_iterations,
            "measure_iterations": self.measure_iterations,
            "rounds": len(self.rounds),
            "session_create_ms": self.session_create_ms,
            "first_run_ms": self.first_run_ms,
        }

    def to_dict(self, raw: bool = True) -> JSONDict:
        """JSON-ready record. With *raw*, the per-iteration latencies are included."""
        data: JSONDict = {
            "model": self.model,
            "provider": self.provider,
            "providers_used": list(self.providers_used),
            "batch_size": self.batch_size,
            "iobinding": self.iobinding,
            "summary": self.summary(),
            "rounds": [r.summary() for r in self.rounds],
            "telemetry": self.telemetry,
        }
        if raw:
            data["latencies_ms"] = [r.latencies_ms.round(6).tolist() for r in self.rounds]
            data["warmup_latencies_ms"] = self.warmup_latencies_ms.round(6).tolist()
        if self.reference is not None:
            data["reference"] = self.reference.to_dict()
        if self.device is not None:
            data["device_time"] = self.device.to_dict()
        if self.confirmation is not None:
            data["confirmation"] = self.confirmation.to_dict(raw=raw)
        if self.compile_cache is not None:
            data["compile_cache"] = self.compile_cache
        if self.lock_wait_s is not None:
            data["lock_wait_s"] = round(self.lock_wait_s, 3)
        return data


@dataclass(frozen=True)
class FreshSample:
    """One fresh InferenceSession: its creation and its first ``run()`` (ms), and the split of its
    creation from ORT's profiler (:func:`creation_phases`; None when not read)."""

    create_ms: float
    first_run_ms: float
    load_ms: float | None = None
    init_ms: float | None = None
    #: compile cache of the session: ``hit`` / ``miss`` ... (None without one)
    compile_cache: str | None = None
    #: what compiling this session's program cost (creation + first run, ms), from the record the session that
    #: compiled it left in the cache folder (this run or an earlier one); None without a cache or a record
    compile_ms: float | None = None
