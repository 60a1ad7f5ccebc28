"""The device and cold-start records of an item, and the other typed records at the edge that the item
record hands the writers: cold start (:class:`ColdStartRecord`, :class:`ColdStartVerdictRecord`), GPU kernels
(:class:`KernelsRecord`), the operator profile (:class:`ProfileRecord`), the physical GPU (:class:`GpuRecord`),
the result's figures (:class:`ResultRecord`), telemetry, the diagnosis and the baseline file's history
(:class:`BaselineRecord`). Each is read tolerantly from its JSON (:meth:`from_dict`) and written back
(:meth:`to_dict`); of the package, imports only :mod:`pytest_aaco.records.base` and :mod:`pytest_aaco.jsonio`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Protocol

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.records.base import (
    COLD_START,
    Judgement,
    Outcome,
    _array,
    _drop_none,
    _number,
    _numbers,
    _object,
    _text,
)

# The typed records at the edge.
#
# What the session writes as JSON (a bundle's ``items/*.json``, a baseline file) and the report
# writers and the ``aaco`` command read: cold start, GPU kernels, the operator profile, telemetry,
# the diagnosis, the result's figures, the physical GPU and the baseline's history. Each is a frozen
# record read once, tolerantly, from the JSON (:meth:`from_dict`: a missing or mistyped key reads as
# None or empty, so bundles and baselines of earlier versions load) and written back with
# :meth:`to_dict`. :class:`~pytest_aaco.records.item.ItemRecord` keeps the JSON as it was read, so a
# bundle dumps to the bytes it was read from; its properties
# (:attr:`~pytest_aaco.records.item.ItemRecord.cold_start_record`,
# :attr:`~pytest_aaco.records.item.ItemRecord.kernels_record` ...) hand the writers these records.


@dataclass(frozen=True)
class Figures:
    """Named numbers: a result's ``summary`` (``mean_ms``, ``p50_ms``, ``p99_ms``, ``throughput``
    (samples/s), ``rounds`` ...; :meth:`pytest_aaco.measure.results.BenchmarkResult.summary`).
    :meth:`of` is None for a name that is absent or not a number."""

    values: dict[str, float] = field(default_factory=dict)

    def of(self, name: str) -> float | None:
        return self.values[name] if name in self.values else None

    def __bool__(self) -> bool:
        return bool(self.values)

    def to_dict(self) -> JSONDict:
        return dict(self.values)

    @classmethod
    def from_dict(cls, data: object) -> Figures:
        found = {str(k): _number(v) for k, v in _object(data).items()}
        return cls({k: v for k, v in found.items() if v is not None})


@dataclass(frozen=True)
class RoundFigures:
    """One measured round: ``n`` iterations, ``mean_ms`` (ms), ``log_mean`` (mean of ln ms) and ``min_ms``,
    its fastest iteration (ms; None in records written before it)."""

    n: float | None
    mean_ms: float | None
    log_mean: float | None
    min_ms: float | None = None

    def to_dict(self) -> JSONDict:
        return _drop_none({"n": self.n, "mean_ms": self.mean_ms, "log_mean": self.log_mean, "min_ms": self.min_ms})

    @classmethod
    def from_dict(cls, data: object) -> RoundFigures:
        d = _object(data)
        return cls(_number(d.get("n")), _number(d.get("mean_ms")), _number(d.get("log_mean")), _number(d.get("min_ms")))


def _rounds(value: object) -> tuple[RoundFigures, ...]:
    return tuple(RoundFigures.from_dict(r) for r in _array(value) if isinstance(r, dict))


def _blocks(value: object) -> tuple[tuple[float, ...], ...]:
    """Per-round (or per-block) latencies in ms: an array of arrays of numbers."""
    return tuple(_numbers(r) for r in _array(value) if isinstance(r, list))


@dataclass(frozen=True)
class SamplerSeries:
    """One telemetry sampler's readings over the measured phase: ``samples`` (each ``t_ns``,
    ``perf_counter_ns``, and the fields read then) and the ``error`` that stopped it, if any."""

    name: str
    samples: tuple[dict[str, float], ...] = ()
    error: str | None = None

    def to_dict(self) -> JSONDict:
        return _drop_none({"samples": [dict(s) for s in self.samples], "error": self.error})

    @classmethod
    def from_dict(cls, name: str, data: object) -> SamplerSeries:
        d = _object(data)
        samples = []
        for sample in _array(d.get("samples")):
            values = {str(k): _number(v) for k, v in _object(sample).items()}
            if values.get("t_ns") is not None:
                samples.append({k: v for k, v in values.items() if v is not None})
        return cls(name, tuple(samples), _text(d.get("error")))


@dataclass(frozen=True)
class FieldSummary:
    """A telemetry field over the measured phase: its ``mean`` and ``max`` (the field's unit)."""

    mean: float | None
    max: float | None


@dataclass(frozen=True)
class TelemetryRecord:
    """A result's ``telemetry`` (:mod:`pytest_aaco.samplers`): the phase start ``start_ns``
    (``perf_counter_ns``), each sampler's series, and the summary per field (``mean``, ``max``)."""

    start_ns: float | None = None
    samplers: tuple[SamplerSeries, ...] = ()
    summary: dict[str, FieldSummary] = field(default_factory=dict)

    def to_dict(self) -> JSONDict:
        return _drop_none({"start_ns": self.start_ns, "samplers": {s.name: s.to_dict() for s in self.samplers},
                           "summary": {k: {"mean": v.mean, "max": v.max} for k, v in self.summary.items()}})

    @classmethod
    def from_dict(cls, data: object) -> TelemetryRecord:
        d = _object(data)
        samplers = tuple(SamplerSeries.from_dict(str(k), v) for k, v in _object(d.get("samplers")).items())
        summary = {str(k): FieldSummary(_number(v.get("mean")), _number(v.get("max")))
                   for k, v in _object(d.get("summary")).items() if isinstance(v, dict)}
        return cls(_number(d.get("start_ns")), samplers, summary)


@dataclass(frozen=True)
class ResultRecord:
    """A bundle item's ``result`` (``BenchmarkResult.to_dict(raw=True)``): the rounds, the raw
    iterations per round and of the warmup (ms), the summary figures, the telemetry, and the
    summary of the confirmation measurement (None when no fresh session measured again)."""

    rounds: tuple[RoundFigures, ...] = ()
    latencies_ms: tuple[tuple[float, ...], ...] = ()
    warmup_latencies_ms: tuple[float, ...] = ()
    summary: Figures = field(default_factory=Figures)
    telemetry: TelemetryRecord = field(default_factory=TelemetryRecord)
    confirmation: Figures | None = None

    def to_dict(self) -> JSONDict:
        return _drop_none({
            "rounds": [r.to_dict() for r in self.rounds], "latencies_ms": [list(r) for r in self.latencies_ms],
            "warmup_latencies_ms": list(self.warmup_latencies_ms), "summary": self.summary.to_dict(),
            "telemetry": self.telemetry.to_dict(),
            "confirmation": None if self.confirmation is None else {"summary": self.confirmation.to_dict()}})

    @classmethod
    def from_dict(cls, data: object) -> ResultRecord:
        d = _object(data)
        confirmation = d.get("confirmation")
        return cls(_rounds(d.get("rounds")), _blocks(d.get("latencies_ms")), _numbers(d.get("warmup_latencies_ms")),
                   Figures.from_dict(d.get("summary")), TelemetryRecord.from_dict(d.get("telemetry")),
                   Figures.from_dict(confirmation.get("summary")) if isinstance(confirmation, dict) else None)


@dataclass(frozen=True)
class ColdStartFigures:
    """One cold-start metric as its verdict judged it: the baseline's figure ``baseline_ms`` (ms),
    ``ratio`` current/baseline, its ``outcome``, whether a regression was ``withheld``, and, compared
    side by side, the geometric means of both sides (ms); ``phases``: the baseline's figure of each
    phase of session creation (ms; not gated); ``judgement``: the metric's test (:class:`Judgement`:
    bounds, p, level, MDE, threshold), None for the "with compile" figure (a fixed limit, not a test)
    and in records written before cold-start judgements."""

    baseline_ms: float | None = None
    ratio: float | None = None
    outcome: str | None = None
    withheld: bool = False
    geomean_current_ms: float | None = None
    geomean_baseline_ms: float | None = None
    phases: dict[str, float] = field(default_factory=dict)
    judgement: Judgement | None = None

    def to_dict(self) -> JSONDict:
        judged = {} if self.judgement is None else self.judgement.to_dict()
        return {**judged, **_drop_none({"baseline_ms": self.baseline_ms, "ratio": self.ratio, "outcome": self.outcome,
                           "withheld": self.withheld or None, "geomean_current_ms": self.geomean_current_ms,
                           "geomean_baseline_ms": self.geomean_baseline_ms,
                           "phases": {k: {"baseline_ms": v} for k, v in self.phases.items()} or None})}

    @classmethod
    def from_dict(cls, data: object, metric: str = COLD_START) -> ColdStartFigures:
        """Inverse of :meth:`to_dict`; the judgement (of *metric*) where the figures hold a tested ``level``."""
        d = _object(data)
        phases = {str(k): _number(_object(v).get("baseline_ms")) for k, v in _object(d.get("phases")).items()}
        judged = Judgement.from_dict(metric, d) if _number(d.get("level")) is not None else None
        return cls(_number(d.get("baseline_ms")), _number(d.get("ratio")), _text(d.get("outcome")),
                   bool(d.get("withheld")), _number(d.get("geomean_current_ms")), _number(d.get("geomean_baseline_ms")),
                   {k: v for k, v in phases.items() if v is not None}, judged)


@dataclass(frozen=True)
class ColdStartVerdictRecord:
    """The cold-start verdict (``ColdStartVerdict.to_dict()`` of :mod:`pytest_aaco.passes.coldstart`):
    ``outcome``, whether it ``fails`` the item, its ``message``, the ``method`` (``side-by-side`` when
    paired), the compared revision ``ref``, and the figures per metric (``first_run_ms``,
    ``session_create_ms``)."""

    outcome: str | None = None
    fails: bool = False
    message: str | None = None
    method: str | None = None
    ref: str | None = None
    metrics: dict[str, ColdStartFigures] = field(default_factory=dict)

    @property
    def withheld(self) -> bool:
        """A regression withheld (measured under CPU contention): a metric says so, or (records
        written before ``withheld``) an inconclusive message naming CPU contention."""
        return any(f.withheld for f in self.metrics.values()) or (
            "CPU contention" in (self.message or "") and self.outcome == Outcome.INCONCLUSIVE)

    def figures(self, metric: str) -> ColdStartFigures:
        return self.metrics.get(metric) or ColdStartFigures()

    def to_dict(self) -> JSONDict:
        return _drop_none({"outcome": self.outcome, "fails": self.fails, "message": self.message,
                           "method": self.method, "ref": self.ref,
                           "metrics": {k: v.to_dict() for k, v in self.metrics.items()}})

    @classmethod
    def from_dict(cls, data: object) -> ColdStartVerdictRecord:
        d = _object(data)
        metrics = {str(k): ColdStartFigures.from_dict(v, str(k)) for k, v in _object(d.get("metrics")).items()
                   if isinstance(v, dict)}
        return cls(_text(d.get("outcome")), bool(d.get("fails")), _text(d.get("message")), _text(d.get("method")),
                   _text(d.get("ref")), metrics)
#: the gated cold-start figures, as (key, words for messages) (:mod:`pytest_aaco.passes.coldstart`)
COLD_START_METRICS = (("session_create_ms", "session creation"), ("first_run_ms", "first run"))
#: the split of session creation read from ORT's profiler, as (key, words)
#: (:func:`pytest_aaco.passes.coldstart.creation_phases`)
COLD_START_PHASES = (("load_ms", "model load"), ("init_ms", "session initialization"))


@dataclass(frozen=True)
class ColdStartRecord:
    """Cold start (``ColdStart.to_dict()`` of :mod:`pytest_aaco.passes.coldstart`): every fresh
    session's figure per metric or phase (``samples``, ms), the fastest (``minima``, the ``min_*``
    keys without the prefix, ms), what the figures include (``compiles``), the baseline side's cold
    start when compared side by side, the ``label`` and ``timestamp`` of a history run, and the verdict."""

    samples: dict[str, tuple[float, ...]] = field(default_factory=dict)
    minima: dict[str, float] = field(default_factory=dict)
    compiles: str | None = None
    baseline_side: ColdStartRecord | None = None
    label: str | None = None
    timestamp: str | None = None
    verdict: ColdStartVerdictRecord | None = None

    def values(self, key: str) -> tuple[float, ...]:
        return self.samples.get(key, ())

    def minimum(self, key: str) -> float | None:
        return self.minima.get(key)

    def to_dict(self) -> JSONDict:
        """The JSON the record was read from, less keys it does not type."""
        data: JSONDict = {k: list(v) for k, v in self.samples.items()}
        data.update({f"min_{k}": v for k, v in self.minima.items()})
        data.update(_drop_none({"compiles": self.compiles, "label": self.label, "timestamp": self.timestamp,
                                "baseline_side": None if self.baseline_side is None else self.baseline_side.to_dict(),
                                "verdict": None if self.verdict is None else self.verdict.to_dict()}))
        return data

    def labelled(self, label: str | None = None, timestamp: str | None = None) -> ColdStartRecord:
        """This cold start named for a plot: a baseline side's *label*, a history run's *timestamp*."""
        return ColdStartRecord(self.samples, self.minima, self.compiles, None, label, timestamp, None)

    @classmethod
    def from_dict(cls, data: object) -> ColdStartRecord:
        d = _object(data)
        samples = {str(k): _numbers(v) for k, v in d.items() if isinstance(v, list)}
        minima = {str(k)[4:]: _number(v) for k, v in d.items() if str(k).startswith("min_")}
        side = d.get("baseline_side")
        verdict = d.get("verdict")
        return cls(samples, {k: v for k, v in minima.items() if v is not None},
                   _text(d.get("compiles")) if d.get("compiles") else None,
                   cls.from_dict(side) if isinstance(side, dict) else None, _text(d.get("label")),
                   _text(d.get("timestamp")),
                   ColdStartVerdictRecord.from_dict(verdict) if isinstance(verdict, dict) else None)


@dataclass(frozen=True)
class KernelTop:
    """One of the kernels that took the most time: its ``name``, launches ``count``, ``total_ms``
    and ``share`` of the kernel time (fraction)."""

    name: str
    count: float | None
    total_ms: float | None
    share: float | None


@dataclass(frozen=True)
class KernelsRecord:
    """GPU kernel figures (``KernelMetrics.to_dict()`` of :mod:`pytest_aaco.passes.kernels`): the
    tracer (``source``: ``cupti``, ``rocprofv3``), traced ``runs``, ``kernels_per_run``, ``kar``
    (kernels per ONNX node), ``active_ratio`` and ``microkernel_share`` (fractions), ``kernel_ms``
    and ``wall_ms`` per run (ms), and the ``top`` kernels."""

    source: str | None = None
    runs: float | None = None
    kernels_per_run: float | None = None
    kar: float | None = None
    active_ratio: float | None = None
    microkernel_share: float | None = None
    kernel_ms: float | None = None
    wall_ms: float | None = None
    top: tuple[KernelTop, ...] = ()

    def to_dict(self) -> JSONDict:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "top"}
        data["top"] = [{"name": t.name, "count": t.count, "total_ms": t.total_ms, "share": t.share} for t in self.top]
        return _drop_none(data)

    @classmethod
    def from_dict(cls, data: object) -> KernelsRecord:
        d = _object(data)
        top = tuple(KernelTop(str(t.get("name")), _number(t.get("count")), _number(t.get("total_ms")),
                              _number(t.get("share"))) for t in _array(d.get("top")) if isinstance(t, dict))
        return cls(_text(d.get("source")), _number(d.get("runs")), _number(d.get("kernels_per_run")),
                   _number(d.get("kar")), _number(d.get("active_ratio")), _number(d.get("microkernel_share")),
                   _number(d.get("kernel_ms")), _number(d.get("wall_ms")), top)


@dataclass(frozen=True)
class OpTime:
    """An operator type (or, with ``node``, one node) in the ORT profile: ``op`` type, ``ep`` (the
    execution provider that ran it), ``nodes`` of that type, ``time_us`` per run (µs) and its
    ``share`` of the run (fraction)."""

    op: str
    ep: str
    time_us: float | None = None
    share: float | None = None
    nodes: float | None = None
    node: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.op, self.ep

    def to_dict(self) -> JSONDict:
        return _drop_none({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_dict(cls, data: object) -> OpTime:
        d = _object(data)
        return cls(str(d.get("op")), str(d.get("ep") or ""), _number(d.get("time_us")), _number(d.get("share")),
                   _number(d.get("nodes")), _text(d.get("node")))


@dataclass(frozen=True)
class ProfileRecord:
    """The operator profile (``OpProfile.to_dict()`` of :mod:`pytest_aaco.passes.opprofile`): op
    types and the slowest nodes, the nodes placed on the CPU EP, profiled ``runs``, and the message
    of the comparison with the baseline's profile."""

    ops: tuple[OpTime, ...] = ()
    nodes: tuple[OpTime, ...] = ()
    cpu_nodes: tuple[str, ...] = ()
    runs: float | None = None
    comparison_message: str | None = None

    def to_dict(self) -> JSONDict:
        return _drop_none({"ops": [o.to_dict() for o in self.ops], "nodes": [n.to_dict() for n in self.nodes],
                           "cpu_nodes": list(self.cpu_nodes), "runs": self.runs,
                           "comparison": None if self.comparison_message is None
                           else {"message": self.comparison_message}})

    @classmethod
    def from_dict(cls, data: object) -> ProfileRecord:
        d = _object(data)
        return cls(tuple(OpTime.from_dict(o) for o in _array(d.get("ops")) if isinstance(o, dict)),
                   tuple(OpTime.from_dict(n) for n in _array(d.get("nodes")) if isinstance(n, dict)),
                   tuple(map(str, _array(d.get("cpu_nodes")))), _number(d.get("runs")),
                   _text(_object(d.get("comparison")).get("message")) or None)


@dataclass(frozen=True)
class DiagnosisRecord:
    """The likeliest bottleneck (``Diagnosis.to_dict()`` of :mod:`pytest_aaco.verdict.diagnosis`):
    ``category``, its ``score`` and every category's ``scores`` (0..1), the ``evidence`` sentences
    and the ``recommendation``."""

    category: str
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)
    evidence: tuple[str, ...] = ()
    recommendation: str | None = None

    def to_dict(self) -> JSONDict:
        return _drop_none({"category": self.category, "score": self.score, "scores": dict(self.scores),
                           "evidence": list(self.evidence), "recommendation": self.recommendation})

    @classmethod
    def from_dict(cls, data: object) -> DiagnosisRecord | None:
        d = _object(data)
        if not d:
            return None
        scores = {str(k): _number(v) for k, v in _object(d.get("scores")).items()}
        return cls(str(d.get("category")), _number(d.get("score")), {k: v for k, v in scores.items() if v is not None},
                   tuple(map(str, _array(d.get("evidence")))), _text(d.get("recommendation")) or None)


@dataclass(frozen=True)
class GpuRecord:
    """The physical GPU an item ran on (``PhysicalGpu.to_dict()`` of :mod:`pytest_aaco.samplers.visibility`):
    ``uuid``, ``pci_bus_id``, ``name``, the device id the EP was given (``logical_id``), the NVML or
    amdsmi ``index``, how it was mapped (``mapped_by``) and why the mapping is ``ambiguous``."""

    uuid: str | None = None
    pci_bus_id: str | None = None
    name: str | None = None
    logical_id: int | None = None
    index: int | None = None
    mapped_by: str | None = None
    ambiguous: str | None = None

    @property
    def key(self) -> str | None:
        """The UUID, else the PCI bus id, else ``index<N>``; None when none was read."""
        if self.uuid or self.pci_bus_id:
            return self.uuid or self.pci_bus_id
        return None if self.index is None else f"index{self.index}"

    def to_dict(self) -> JSONDict:
        return _drop_none({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_dict(cls, data: object) -> GpuRecord:
        d = _object(data)
        logical, index = _number(d.get("logical_id")), _number(d.get("index"))
        return cls(_text(d.get("uuid")) or None, _text(d.get("pci_bus_id")) or None, _text(d.get("name")) or None,
                   None if logical is None else int(logical), None if index is None else int(index),
                   _text(d.get("mapped_by")) or None, _text(d.get("ambiguous")) or None)


def _is_span(value: object) -> bool:
    """Whether *value* is a ``[start, end]`` pair of numbers (a measuring window); anything else is left out."""
    return (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value))


@dataclass(frozen=True)
class HistoryRun:
    """One run of a baseline's history, as the reports show it: ``timestamp`` (ISO, UTC), the short
    ``commit`` id (``commit`` or ``commit_info.id``), the rounds, the summary figures, and the
    profile and cold start recorded with it."""

    timestamp: str | None = None
    commit: str | None = None
    rounds: tuple[RoundFigures, ...] = ()
    summary: Figures = field(default_factory=Figures)
    profile: ProfileRecord | None = None
    cold_start: ColdStartRecord | None = None
    device_time: Figures | None = None
    commit_info: JSONDict | None = None

    def to_dict(self) -> JSONDict:
        return _drop_none({
            "timestamp": self.timestamp, "commit": self.commit if self.commit_info is None else None,
            "commit_info": self.commit_info, "rounds": [r.to_dict() for r in self.rounds],
            "summary": self.summary.to_dict(), "profile": None if self.profile is None else self.profile.to_dict(),
            "cold_start": None if self.cold_start is None else self.cold_start.to_dict(),
            "device_time": None if self.device_time is None else self.device_time.to_dict()})

    @classmethod
    def from_dict(cls, data: object) -> HistoryRun:
        d = _object(data)
        info = d.get("commit_info")
        commit = d.get("commit") or (info.get("id") if isinstance(info, dict) else None)
        cold = d.get("cold_start")
        device = d.get("device_time")
        return cls(_text(d.get("timestamp")), commit if isinstance(commit, str) and commit else None,
                   _rounds(d.get("rounds")), Figures.from_dict(d.get("summary")),
                   ProfileRecord.from_dict(d["profile"]) if isinstance(d.get("profile"), dict) else None,
                   ColdStartRecord.from_dict(cold) if isinstance(cold, dict) else None,
                   Figures.from_dict(device) if isinstance(device, dict) else None,
                   info if isinstance(info, dict) else None)


@dataclass(frozen=True)
class BaselineRecord:
    """What the reports show of a baseline file: its history runs (oldest first) and the raw
    iterations of its latest run (ms, per round)."""

    history: tuple[HistoryRun, ...] = ()
    latest_latencies_ms: tuple[tuple[float, ...], ...] = ()

    def to_dict(self) -> JSONDict:
        return {"history": [r.to_dict() for r in self.history],
                "latest_latencies_ms": [list(r) for r in self.latest_latencies_ms]}

    @classmethod
    def from_dict(cls, data: object) -> BaselineRecord:
        """From a baseline file's JSON (``Baseline.to_dict()`` of :mod:`pytest_aaco.history.store`)."""
        d = _object(data)
        return cls(tuple(HistoryRun.from_dict(r) for r in _array(d.get("history")) if isinstance(r, dict)),
                   _blocks(d.get("latest_latencies_ms")))


class ColdStartComparison(Protocol):
    """A cold start compared side by side (:class:`pytest_aaco.passes.coldstart.SideBySideColdStart`),
    as the run carries it to the extra passes: :meth:`record` is the item record's ``cold_start``."""

    def record(self) -> JSONDict: ...
