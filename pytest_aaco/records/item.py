"""The item record (:class:`ItemRecord`: what the reports need about one item, the JSON of a bundle's
``items/*.json``), side by side the baseline side's measurement (:class:`BaselineSide`), the session's
summary (:class:`SessionSummary`), its LOND state (:class:`FdrRecord`) and metadata (:class:`SessionMeta`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.records.base import COLD_START, MEMORY, Outcome, _array, _drop_none, _number, _object, _text
from pytest_aaco.records.device import (
    ColdStartRecord,
    ColdStartVerdictRecord,
    DiagnosisRecord,
    Figures,
    GpuRecord,
    KernelsRecord,
    ProfileRecord,
    ResultRecord,
    RoundFigures,
    _blocks,
    _is_span,
    _rounds,
)
from pytest_aaco.records.verdict import DeviceTimeRecord, Verdict


@dataclass
class ItemRecord:
    """What the reports need about one item: ids, the result summary, the verdict, the fingerprint.

    ``outcome`` is pytest's outcome of the item (passed, failed, skipped); ``result`` is
    ``BenchmarkResult.to_dict(raw=True)`` (latencies in ms); ``diagnosis`` is
    ``Diagnosis.to_dict()``; ``derived`` is :func:`pytest_aaco.verdict.metrics.derived_metrics`;
    ``placement`` is the node placement of a device EP (``Placement.to_dict()``); ``profile`` is
    ``OpProfile.to_dict()`` with ``comparison`` (``ProfileComparison.to_dict()``) against the
    baseline's; ``kernels`` is ``KernelMetrics.to_dict()``; ``cold_start`` is ``ColdStart.to_dict()``
    with ``verdict`` (``ColdStartVerdict.to_dict()``); ``insight_notes`` say why an extra pass failed;
    ``gpu`` is the physical GPU it ran on (:class:`pytest_aaco.samplers.visibility.PhysicalGpu`).
    """

    nodeid: str
    model: str
    provider: str
    label: str
    result: JSONDict | None = None
    verdict: Verdict | None = None
    fingerprint: JSONDict | None = None
    outcome: Outcome = Outcome.PASSED
    error: str | None = None
    diagnosis: JSONDict | None = None
    derived: JSONDict | None = None
    placement: JSONDict | None = None
    #: what the terminal must warn about (a baseline moved aside, a history archived), each naming the files
    warnings: list[str] = field(default_factory=list)
    profile: JSONDict | None = None
    kernels: JSONDict | None = None
    cold_start: JSONDict | None = None
    insight_notes: list[str] = field(default_factory=list)
    #: the physical GPU the item ran on (``PhysicalGpu.to_dict()``: uuid, pci_bus_id, name, clocks ...);
    #: None on the CPU or where it could not be read (then absent from the JSON)
    gpu: dict[str, Any] | None = None
    extra: JSONDict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.outcome = Outcome(self.outcome)

    # ------------------------------------------------------------ the one outcome rule

    @property
    def cold_start_verdict(self) -> ColdStartVerdictRecord:
        """The item's cold-start verdict (``ColdStartVerdict.to_dict()`` read back), empty when cold start
        was not judged."""
        return ColdStartVerdictRecord.from_dict(_object(self.cold_start).get("verdict"))

    @property
    def cold_start_fails(self) -> bool:
        """The cold-start verdict is a regression (it fails the item like a latency regression)."""
        return self.cold_start_verdict.fails

    @property
    def cold_start_withheld(self) -> bool:
        """The cold-start verdict withheld a regression (measured under CPU contention, stored gate only)."""
        return self.cold_start_verdict.withheld

    @property
    def effective_outcome(self) -> Outcome:
        """The verdict's outcome when the item was judged (``regression`` when only its cold start or its
        memory regressed, so the table's word is the message's), else pytest's outcome of the item."""
        if self.verdict is None:
            return self.outcome
        if self.cold_start_fails or MEMORY in self.verdict.failed_metrics:
            return Outcome.REGRESSION
        return self.verdict.outcome

    @property
    def failed_metrics(self) -> list[str]:
        """The metrics that failed the item: :attr:`Verdict.failed_metrics`, then :data:`COLD_START`
        when its cold-start verdict fails. Empty for an item that did not fail on a metric."""
        found = self.verdict.failed_metrics if self.verdict is not None else []
        return found + [COLD_START] if self.cold_start_fails else found

    @property
    def fails(self) -> bool:
        """The item failed: pytest's outcome is ``failed`` (a provider error, a failing verdict), a
        metric failed (:attr:`failed_metrics`), or its verdict fails as an error. Gathers the decisions
        stored in the records, each made by the one rule, :func:`pytest_aaco.verdict.outcome.fails`."""
        return (self.outcome == Outcome.FAILED or bool(self.failed_metrics)
                or (self.verdict is not None and self.verdict.fails))

    @property
    def is_regression(self) -> bool:
        """A wall-time, device-time, p99, memory or cold-start regression (not a provider error or a
        strict inconclusive): :attr:`Verdict.regressions` or a failing cold start."""
        return self.cold_start_fails or (self.verdict is not None and bool(self.verdict.regressions))

    @property
    def is_warning(self) -> bool:
        """Not failed, but inconclusive or flagged unstable."""
        v = self.verdict
        return not self.fails and v is not None and (v.outcome == Outcome.INCONCLUSIVE or bool(v.unstable))

    @property
    def worth_a_line(self) -> bool:
        """Whether summaries print the verdict's message: anything a person may act on (failed,
        regression, improvement, inconclusive, not gated, unstable)."""
        v = self.verdict
        return self.cold_start_fails or self.cold_start_withheld or v is not None and (
            v.fails or bool(v.unstable) or v.outcome in (
            Outcome.REGRESSION, Outcome.IMPROVEMENT, Outcome.INCONCLUSIVE, Outcome.MISMATCH))

    @property
    def message(self) -> str:
        """The verdict's message, else the error, else the outcome word."""
        if self.verdict is not None and self.verdict.message:
            return self.verdict.message
        return self.error or str(self.outcome)

    def insight_lines(self) -> list[str]:
        """For a failing item: the cold-start regression (or one withheld for contention), and the
        operator types that grew against the baseline's profile (``operators: Conv +31% ...``) when
        the item was profiled."""
        lines = []
        if self.cold_start_fails or self.cold_start_withheld:  # a withheld regression is said, not hidden
            lines.append(str(self.cold_start_verdict.message))
        profile = self.profile_record
        if self.fails and profile is not None and profile.comparison_message:
            lines.append(profile.comparison_message)
        return lines

    def explanation(self, with_recommendation: bool = True) -> str:
        """:attr:`message`, the :meth:`insight_lines`, the verdict's :attr:`Verdict.report_notes` (one
        ``note:`` line each), and the likely cause (and what to try) when there is a diagnosis."""
        notes = self.verdict.report_notes if self.verdict is not None else []
        text = "\n".join([self.message, *self.insight_lines(), *(f"note: {n}" for n in notes)])
        d = self.diagnosis_record
        if d is not None:
            text += f"\nlikely cause: {d.category}: " + "; ".join(d.evidence)
            if with_recommendation and d.recommendation:
                text += f"\ntry: {d.recommendation}"
        return text

    @property
    def summary(self) -> JSONDict:
        """The result's summary figures (``mean_ms``, ``p50_ms``, ``p99_ms``, ``throughput`` ...), or {}."""
        return dict(_object(_object(self.result).get("summary")))

    @property
    def gpu_key(self) -> str | None:
        """The physical GPU's UUID, else its PCI bus id, else ``index<N>``; None when not recorded."""
        gpu = self.gpu or {}
        if gpu.get("uuid") or gpu.get("pci_bus_id"):
            return str(gpu.get("uuid") or gpu.get("pci_bus_id"))
        return f"index{gpu['index']}" if gpu.get("index") is not None else None

    @property
    def gpu_label(self) -> str:
        """A short GPU cell for tables: ``<device id>:<first 12 characters of the key>``
        (``1:GPU-8a1b2c3d``), ``-`` when no GPU was recorded."""
        key = self.gpu_key
        return "-" if key is None else f"{(self.gpu or {}).get('logical_id', '?')}:{key[:12]}"

    # ------------------------------------------------------------ typed parts (records at the edge, below)

    @property
    def result_record(self) -> ResultRecord | None:
        """The result as :class:`ResultRecord`; None without a result. Read once per :attr:`result` (every
        writer asks for it, and a result holds every latency): kept until another dict is assigned."""
        if self.result is None:
            return None
        kept = self.__dict__.get("_result_record")
        if kept is None or kept[0] is not self.result:
            kept = (self.result, ResultRecord.from_dict(self.result))
            self.__dict__["_result_record"] = kept
        return kept[1]

    @property
    def cold_start_record(self) -> ColdStartRecord | None:
        """Cold start, with its verdict, as :class:`ColdStartRecord`; None when not measured."""
        return None if not self.cold_start else ColdStartRecord.from_dict(self.cold_start)

    @property
    def kernels_record(self) -> KernelsRecord | None:
        """The GPU kernel figures as :class:`KernelsRecord`; None when no kernel pass ran."""
        return None if not self.kernels else KernelsRecord.from_dict(self.kernels)

    @property
    def profile_record(self) -> ProfileRecord | None:
        """The operator profile as :class:`ProfileRecord`; None when not profiled."""
        return None if not self.profile else ProfileRecord.from_dict(self.profile)

    @property
    def diagnosis_record(self) -> DiagnosisRecord | None:
        return DiagnosisRecord.from_dict(self.diagnosis)

    @property
    def gpu_record(self) -> GpuRecord | None:
        """The physical GPU as :class:`GpuRecord`; None on the CPU or where it was not read."""
        return None if not self.gpu else GpuRecord.from_dict(self.gpu)

    @property
    def device_record(self) -> DeviceTimeRecord | None:
        """Device time compared (:attr:`Verdict.device`, stored or side by side); None when not compared."""
        return None if self.verdict is None else self.verdict.device

    @property
    def baseline_side(self) -> BaselineSide | None:
        """Side by side, the baseline side's measurement; None for an item gated against stored baselines."""
        return BaselineSide.of(self.verdict)

    # ------------------------------------------------------------ serialization

    def to_dict(self) -> JSONDict:
        data: JSONDict = {
            "nodeid": self.nodeid, "model": self.model, "provider": self.provider, "label": self.label,
            "result": self.result, "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "fingerprint": self.fingerprint, "outcome": self.outcome.value, "error": self.error,
            "diagnosis": self.diagnosis, **self.extra,
        }
        if self.derived is not None:
            data["derived"] = self.derived
        if self.placement is not None:
            data["placement"] = self.placement
        if self.warnings:
            data["warnings"] = list(self.warnings)
        for key in ("profile", "kernels", "cold_start", "gpu"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.insight_notes:
            data["insight_notes"] = list(self.insight_notes)
        return data

    @classmethod
    def from_dict(cls, data: JSONDict) -> ItemRecord:
        """Inverse of :meth:`to_dict` (keys it does not know go to ``extra``); tolerant of missing keys."""
        known = {f.name for f in fields(cls)} - {"extra"}
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in known}
        verdict = data.get("verdict")
        kwargs["verdict"] = Verdict.from_dict(verdict) if isinstance(verdict, dict) and verdict else None
        kwargs["outcome"] = Outcome.parse(data.get("outcome"), Outcome.PASSED)
        nodeid = str(data.get("nodeid") or "")
        for name in ("model", "provider"):
            kwargs[name] = str(data.get(name) or "-")
        kwargs["nodeid"] = nodeid
        kwargs["label"] = str(data.get("label") or nodeid)
        warnings = data.get("warnings")
        kwargs["warnings"] = [str(w) for w in warnings] if isinstance(warnings, list) else []
        return cls(**kwargs, extra={k: v for k, v in data.items() if k not in known})


def several_gpus(records: list[ItemRecord] | tuple[ItemRecord, ...]) -> bool:
    """Whether *records* ran on more than one physical GPU: then the reports show a GPU column."""
    return len({r.gpu_key for r in records if r.gpu_key is not None}) > 1


@dataclass(frozen=True)
class SessionSummary:
    """Counts of effective outcomes and the LOND state (``LondFdr.to_dict()``) of one session."""

    items: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    fdr_control: JSONDict | None = None

    @classmethod
    def of(cls, records: list[ItemRecord], fdr_control: JSONDict | None = None) -> SessionSummary:
        counts: dict[str, int] = {}
        for record in records:
            key = record.effective_outcome.value
            counts[key] = counts.get(key, 0) + 1
        return cls(len(records), counts, fdr_control)

    @property
    def fdr(self) -> FdrRecord | None:
        """The LOND state as :class:`FdrRecord`; None when the session did not control the FDR."""
        return FdrRecord.from_dict(self.fdr_control)

    @property
    def counts_text(self) -> str:
        """``1 no-regression, 1 regression`` (sorted by outcome), or ``no items``."""
        return ", ".join(f"{n} {k}" for k, n in sorted(self.verdicts.items())) or "no items"

    def to_dict(self) -> JSONDict:
        return {"items": self.items, "verdicts": dict(self.verdicts), "fdr_control": self.fdr_control}

    @classmethod
    def from_dict(cls, data: JSONDict | None) -> SessionSummary:
        data = data or {}
        fdr, items = data.get("fdr_control"), _number(data.get("items"))
        counts = {str(k): _number(n) for k, n in _object(data.get("verdicts")).items()}
        verdicts = {k: int(n) for k, n in counts.items() if n is not None}
        return cls(0 if items is None else int(items), verdicts, fdr if isinstance(fdr, dict) else None)

#: the key of an item record's ``extra`` holding its side-by-side triage
#: (:meth:`pytest_aaco.sidebyside.unchanged.Triage.to_dict`), and the triage that found the compute unchanged
TRIAGE_KEY, TRIAGE_SAME_COMPUTE = "compare_triage", "same-compute"


@dataclass(frozen=True)
class BaselineSide:
    """Side by side, the baseline side's measurement (``side_by_side["baseline_side"]``): its blocks'
    latencies and round figures (ms), its summary figures, and the windows of each side's blocks
    (``{"baseline": [(start_ns, end_ns), ...], "candidate": [...]}``, ``perf_counter_ns``)."""

    latencies_ms: tuple[tuple[float, ...], ...] = ()
    rounds: tuple[RoundFigures, ...] = ()
    summary: Figures = field(default_factory=Figures)
    windows: dict[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, verdict: Verdict | None) -> BaselineSide | None:
        """The baseline side of *verdict*'s side-by-side figures; None when it was not gated side by side."""
        if verdict is None or verdict.side_by_side is None:
            return None
        return cls.from_dict(verdict.side_by_side.figures.get("baseline_side"))

    def to_dict(self) -> JSONDict:
        return {"latencies_ms": [list(b) for b in self.latencies_ms], "rounds": [r.to_dict() for r in self.rounds],
                "summary": self.summary.to_dict(),
                "windows": {k: [list(span) for span in v] for k, v in self.windows.items()}}

    @classmethod
    def from_dict(cls, data: object) -> BaselineSide:
        d = _object(data)
        windows = {str(side): tuple((float(span[0]), float(span[1])) for span in spans if _is_span(span))
                   for side, spans in _object(d.get("windows")).items() if isinstance(spans, list)}
        return cls(_blocks(d.get("latencies_ms")), _rounds(d.get("rounds")), Figures.from_dict(d.get("summary")),
                   windows)


@dataclass(frozen=True)
class FdrRecord:
    """The session's false-alarm control (``LondFdr.to_dict()`` of :mod:`pytest_aaco.verdict.stats`):
    the ``method`` (``LOND``), the FDR ``alpha``, the ``m`` benchmark items it spreads over, the
    ``tests`` made and the ``discoveries`` (regressions of wall or device time)."""

    method: str | None
    alpha: float | None
    m: float | None
    tests: float | None
    discoveries: float | None

    def to_dict(self) -> JSONDict:
        return _drop_none({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_dict(cls, data: object) -> FdrRecord | None:
        """None for an empty or missing state."""
        d = _object(data)
        if not d:
            return None
        return cls(_text(d.get("method")) or None, _number(d.get("alpha")), _number(d.get("m")),
                   _number(d.get("tests")), _number(d.get("discoveries")))


@dataclass(frozen=True)
class SessionMeta:
    """A session bundle's ``session_meta.json`` as ``aaco ls`` and ``aaco report`` show it: when the
    session started (ISO, UTC; the bundle's start for a bundle that never finished its head), its
    execution providers, the project's commit (``commit_info``; ``has_commit``: the key was written,
    even as unknown), the summary (None before the session finished), when the bundle was finished
    (ISO, UTC; None while it is not), and the items written so far."""

    started_at: str | None = None
    providers: tuple[str, ...] = ()
    commit_info: JSONDict | None = None
    has_commit: bool = False
    summary: SessionSummary | None = None
    finished_at: str | None = None
    items_written: float | None = None

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def to_dict(self) -> JSONDict:
        data = _drop_none({"started_at": self.started_at, "providers": list(self.providers),
                           "summary": None if self.summary is None else self.summary.to_dict(),
                           "items_written": self.items_written})
        if self.has_commit:
            data["commit_info"] = self.commit_info
        if self.finished_at is not None:
            data["bundle_finished_at"] = self.finished_at
        return data

    @classmethod
    def from_dict(cls, data: object) -> SessionMeta:
        d = _object(data)
        info, summary = d.get("commit_info"), d.get("summary")
        return cls(_text(d.get("started_at") or d.get("bundle_started_at")) or None,
                   tuple(map(str, _array(d.get("providers")))), info if isinstance(info, dict) else None,
                   "commit_info" in d, SessionSummary.from_dict(summary) if isinstance(summary, dict) and summary
                   else None, _text(d.get("bundle_finished_at")) or None, _number(d.get("items_written")))
