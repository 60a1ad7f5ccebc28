"""The verdict records: the gate's decision for one item (:class:`Verdict`) and its typed parts (device
time against the stored history, the reference workload's drift, the first look, CPU contention, the p99
comparison, the side-by-side summary)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.records.base import (
    _JUDGEMENT_KEYS,
    DEVICE_TIME,
    LATENCY,
    MEMORY,
    P99,
    Contention,
    FastestIteration,
    Judgement,
    Outcome,
    Pair,
    QuantileComparison,
    _array,
    _FromDict,
    _json_fields,
    _known,
    _number,
    _typed,
    p99_judgement,
)


@dataclass(frozen=True)
class ReferenceDrift:
    """The reference workload's change between the history and now, in a verdict
    (:func:`pytest_aaco.history.series.choose_series`): the machine's own change of speed.

    ``name``/``id``: the reference workload; ``mean_ms``: its mean iteration now (ms); ``share``:
    its fraction of the measured time; ``drift``: current/history - 1 (a fraction, > 0 slower) with
    its 95% CI ``ci_low``/``ci_high`` (fractions) and two-sided ``p_value`` (Welch 1947); ``runs``:
    history runs with this reference; ``sensitivity``: the item's fitted slope on the reference,
    only for the reference-adjusted test (absent from the JSON otherwise).
    """

    name: str
    id: str
    mean_ms: float
    share: float | None
    drift: float
    ci_low: float
    ci_high: float
    p_value: float
    runs: int
    sensitivity: float | None = None

    def to_dict(self) -> JSONDict:
        return _json_fields(self, omit_none=("sensitivity",))

    @classmethod
    def from_dict(cls, data: JSONDict) -> ReferenceDrift:
        """Inverse of :meth:`to_dict`; a missing key reads as None."""
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class FirstLook:
    """The first look of a regression that a second measurement confirmed or did not
    (:func:`pytest_aaco.verdict.finish.confirm`): ``ratio`` current/baseline, ``p_value`` one-sided."""

    ratio: float | None
    p_value: float | None

    def to_dict(self) -> JSONDict:
        return _json_fields(self)

    @classmethod
    def from_dict(cls, data: JSONDict) -> FirstLook:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class SideBySideFirstLook:
    """The first look of a side-by-side regression that fresh sessions then confirmed or not:
    ``ratio`` candidate/baseline, over ``cycles`` cycles, ``p_slower`` one-sided."""

    ratio: float
    cycles: int
    p_slower: float

    def to_dict(self) -> JSONDict:
        return _json_fields(self)

    @classmethod
    def from_dict(cls, data: JSONDict) -> SideBySideFirstLook:
        return cls(**_known(cls, data))


#: the keys of a side-by-side summary that :class:`SideBySideSummary` types; the others are figures
_SUMMARY_KEYS = ("ref", "outcome", "cycles", "session_pairs", "first_look", "device_time")


@dataclass(frozen=True)
class SideBySideSummary:
    """The side-by-side figures of a verdict gated with ``--aaco-compare``
    (:meth:`pytest_aaco.sidebyside.cycles.SideBySide.to_dict`).

    Typed, the parts the verdict's message reads: ``ref`` (the display name of the compared
    revision), ``outcome`` of the wall-time test, ``cycles``, ``session_pairs`` (fresh session
    pairs), ``first_look`` (:class:`SideBySideFirstLook`, when fresh sessions were asked to confirm)
    and ``device_time`` (:class:`DeviceTimeRecord` of the device-time look,
    :meth:`pytest_aaco.sidebyside.cycles.DeviceLook.to_dict` plus ``outcome`` and ``per_cycle``).
    ``figures``: every other key as written (per-cycle
    ``ratios``, ``looks``, ``sides``, ``footprint_mb`` in MB, ``spin_bleed`` ...), kept as is.
    """

    ref: str | None
    outcome: str | None
    cycles: int | None
    session_pairs: int | None
    first_look: SideBySideFirstLook | None = None
    device_time: DeviceTimeRecord | None = None
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> JSONDict:
        data = dict(self.figures)
        for key in _SUMMARY_KEYS:
            value = getattr(self, key)
            if value is not None:
                data[key] = value.to_dict() if isinstance(value, (SideBySideFirstLook, DeviceTimeRecord)) else value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SideBySideSummary:
        """Inverse of :meth:`to_dict`."""
        first = data.get("first_look")
        return cls(ref=data.get("ref"), outcome=data.get("outcome"), cycles=data.get("cycles"),
                   session_pairs=data.get("session_pairs"),
                   first_look=SideBySideFirstLook.from_dict(first) if isinstance(first, dict) else None,
                   device_time=DeviceTimeRecord.from_dict(data.get("device_time")),
                   figures={k: v for k, v in data.items() if k not in _SUMMARY_KEYS})


def _kernel_counts(value: object) -> tuple[tuple[str, float], ...]:
    """``[[name, launches per run], ...]`` as pairs; malformed entries left out."""
    return tuple((str(e[0]), float(e[1])) for e in _array(value)
                 if isinstance(e, list) and len(e) == 2 and _number(e[1]) is not None)


#: the keys of a device-time record that :class:`DeviceTimeRecord` types besides its judgement's; the
#: verdict's ``wall_outcome`` (stored gate) is the wall-time judgement's, written beside them by
#: :meth:`Verdict.to_dict`
_DEVICE_FACTS = ("kernel_ms", "busy_ms", "kernels", "kernels_added", "kernels_removed", "first_outcome", "wall_outcome")


@dataclass(frozen=True)
class DeviceTimeRecord:
    """Device time compared, stored (:func:`pytest_aaco.history.judge.device_check`) or side by side
    (:meth:`pytest_aaco.sidebyside.cycles.DeviceLook.to_dict`): its :class:`Judgement` and the kernel
    figures behind it.

    ``judgement``: the device-time test (ratio current/baseline of device time per run, bounds, p,
    level, MDE, threshold, series, outcome); None when the test could not run, with ``reason`` saying
    why. ``kernel_ms``/``busy_ms``: kernel time and busy time per run on both sides (ms);
    ``kernels``: kernels per run on both sides; ``kernels_added``/``kernels_removed``: ``(kernel
    name, launches per run)`` against the other side; ``first_outcome``: the first look's outcome
    when the confirmation look did not confirm it. ``figures``: every other key as written (``runs``,
    ``reference``, ``pooled``, ``cycles``, ``per_cycle``, ``traced_s`` in s, ``skipped`` ...).
    """

    judgement: Judgement | None
    reason: str = ""
    kernel_ms: Pair | None = None
    busy_ms: Pair | None = None
    kernels: Pair | None = None
    kernels_added: tuple[tuple[str, float], ...] = ()
    kernels_removed: tuple[tuple[str, float], ...] = ()
    first_outcome: Outcome | None = None
    figures: JSONDict = field(default_factory=dict)

    @property
    def compared(self) -> bool:
        """Device time was tested (there is a judgement): what :attr:`Verdict.device` hands the reports."""
        return self.judgement is not None

    @property
    def outcome(self) -> Outcome:
        return Outcome.INCONCLUSIVE if self.judgement is None else self.judgement.outcome

    @property
    def ratio(self) -> float | None:
        return None if self.judgement is None else self.judgement.ratio

    @property
    def series(self) -> str | None:
        return None if self.judgement is None else self.judgement.series

    @property
    def threshold(self) -> float | None:
        return None if self.judgement is None else self.judgement.threshold

    @property
    def mde(self) -> float | None:
        return None if self.judgement is None else self.judgement.mde

    def with_outcome(self, outcome: Outcome, first_outcome: Outcome | None = None) -> DeviceTimeRecord:
        """This record with its judgement's outcome set to *outcome* (a rule changed it), keeping the first
        look's in *first_outcome* when given."""
        if self.judgement is None:
            return self
        return replace(self, judgement=replace(self.judgement, outcome=outcome),
                       first_outcome=first_outcome or self.first_outcome)

    def to_dict(self) -> JSONDict:
        """The judgement's keys (:meth:`Judgement.to_dict`, bounds left out when None), the kernel figures,
        :attr:`figures` as written, ``first_outcome``; ``{"outcome": "inconclusive", "reason"}`` and the
        figures when the test could not run."""
        if self.judgement is None:
            data: JSONDict = {"outcome": str(Outcome.INCONCLUSIVE), "reason": self.reason}
        else:
            data = {k: v for k, v in self.judgement.to_dict().items()
                    if v is not None or k not in ("lower_bound", "upper_bound")}
        for name in ("kernel_ms", "busy_ms", "kernels"):
            pair = getattr(self, name)
            if pair is not None:
                data[name] = pair.to_dict()
        if self.judgement is not None:
            data["kernels_added"] = [[n, c] for n, c in self.kernels_added]
            data["kernels_removed"] = [[n, c] for n, c in self.kernels_removed]
        data.update(self.figures)
        if self.first_outcome is not None:
            data["first_outcome"] = str(self.first_outcome)
        return data

    @classmethod
    def from_dict(cls, data: object) -> DeviceTimeRecord | None:
        """Inverse of :meth:`to_dict`; None when *data* is not a JSON object. A record without a numeric
        ``ratio`` (the test could not run) has no judgement."""
        if not isinstance(data, dict):
            return None
        first, judged = data.get("first_outcome"), Judgement.from_dict(DEVICE_TIME, data)
        return cls(judged, "" if judged is not None else str(data.get("reason") or ""),
                   Pair.from_dict(data.get("kernel_ms")), Pair.from_dict(data.get("busy_ms")),
                   Pair.from_dict(data.get("kernels")), _kernel_counts(data.get("kernels_added")),
                   _kernel_counts(data.get("kernels_removed")),
                   Outcome.parse(first, Outcome.INCONCLUSIVE) if first else None,
                   {k: v for k, v in data.items() if k not in _JUDGEMENT_KEYS and k not in _DEVICE_FACTS})


#: the JSON keys of a verdict's wall-time judgement, written as the verdict's own keys (the layout of
#: every bundle and baseline written so far), with the :class:`Judgement` field each holds
_WALL_KEYS = {"method": "method", "ratio": "ratio", "ci_low": "ci_low", "ci_high": "ci_high", "p_value": "p_slower",
              "p_faster": "p_faster", "level": "level", "mde": "mde", "series": "series", "lower_bound": "lower_bound",
              "upper_bound": "upper_bound"}
#: a verdict's JSON keys in the order they are written (``change_pct`` and ``reference_drift`` follow)
_VERDICT_KEYS = ("outcome", "label", "threshold", "message", "reason", "method", "ratio", "ci_low", "ci_high",
                 "p_value", "p_faster", "level", "mde", "current_mean_ms", "baseline_mean_ms", "current_rounds",
                 "baseline_rounds",
                 "baseline_runs", "baseline_path", "fingerprint_id", "fingerprint_diff", "p99", "memory", "unstable",
                 "confirmed", "first_look", "unconfirmed_by", "contention", "notes", "fails", "side_by_side", "series",
                 "raw_ratio", "reference", "version_change", "other_runners", "device_time", "current_geomean_ms",
                 "baseline_geomean_ms", "lower_bound", "upper_bound", "changed", "changed_since", "rounds_kept",
                 "withheld", "baseline_runner", "fastest_iteration")
#: keys written only when set (absent, as in files written before them)
_WHEN_SET = ("device_time", "current_geomean_ms", "baseline_geomean_ms", "lower_bound", "upper_bound", "changed",
             "changed_since", "rounds_kept", "withheld", "baseline_runner", "fastest_iteration")


class WallFigures:
    """Wall time's figures read as the verdict's own (the layout of earlier versions): :class:`Verdict`'s
    base, reading its ``wall`` judgement (:class:`~pytest_aaco.records.base.Judgement`); each is None
    without a comparison."""

    wall: Judgement | None

    @property
    def ratio(self) -> float | None:
        """Wall time, current/baseline (the tested series'); None without a comparison."""
        return None if self.wall is None else self.wall.ratio

    @property
    def ci_low(self) -> float | None:
        return None if self.wall is None else self.wall.ci_low

    @property
    def ci_high(self) -> float | None:
        return None if self.wall is None else self.wall.ci_high

    @property
    def p_value(self) -> float | None:
        """Wall time's one-sided p for a slowdown."""
        return None if self.wall is None else self.wall.p_slower

    @property
    def p_faster(self) -> float | None:
        return None if self.wall is None else self.wall.p_faster

    @property
    def level(self) -> float | None:
        """The item's α_i that wall time was judged at."""
        return None if self.wall is None else self.wall.level

    @property
    def mde(self) -> float | None:
        """Wall time's minimum detectable slowdown (fraction, power 0.8)."""
        return None if self.wall is None else self.wall.mde

    @property
    def method(self) -> str | None:
        return None if self.wall is None else self.wall.method

    @property
    def series(self) -> str | None:
        """The wall-time series tested: ``adjusted`` for the reference workload (a fitted slope),
        ``normalized`` by it, or ``raw``; None side by side (paired)."""
        return None if self.wall is None else self.wall.series

    @property
    def lower_bound(self) -> float | None:
        """The one-sided lower bound (ratio) at the item's level that the outcome rule compared
        (:func:`pytest_aaco.verdict.outcome.outcome_of`); None in records written before it."""
        return None if self.wall is None else self.wall.lower_bound

    @property
    def upper_bound(self) -> float | None:
        """The one-sided upper bound (ratio) at the no-regression level that the rule compared."""
        return None if self.wall is None else self.wall.upper_bound


@dataclass
class Verdict(WallFigures):
    """The outcome for one item: its judgements by metric, and the item's facts behind them.

    The judgements (:class:`Judgement`, ratios not percentages): ``wall`` (wall time's test, None
    without a comparison), ``device_time`` (device time against the stored history, a
    :class:`DeviceTimeRecord`; side by side it is ``side_by_side.device_time``) and ``p99``
    (:class:`QuantileComparison`, read as a judgement through :attr:`judgements`). :attr:`judgements`
    gives them by metric; :attr:`failed_metrics` is the one rule for which of them failed the item.

    ``outcome`` is the word of the whole verdict, which the rules after the test may change
    (confirmation, contention, device time deciding an inconclusive wall time); each judgement keeps its
    own. The wall-time figures read as the verdict's own (:attr:`ratio`, :attr:`ci_low`, :attr:`p_value`
    ...) and are written so in the JSON, the layout of earlier versions. ``current_rounds``/
    ``baseline_rounds``: the rounds on each side of the test. ``reason`` is the whole message of a
    verdict without a comparison (no baseline, another fingerprint, a file error). ``message`` is
    rendered once from the other fields by :func:`pytest_aaco.verdict.finish.render_message`, after the
    last rule changed them.
    """

    outcome: Outcome
    label: str
    threshold: float
    message: str = ""
    reason: str | None = None
    #: wall time's test (:data:`LATENCY`); None without a comparison
    wall: Judgement | None = None
    current_mean_ms: float | None = None
    baseline_mean_ms: float | None = None
    current_rounds: int | None = None
    baseline_rounds: int | None = None
    baseline_runs: int = 0
    baseline_path: str | None = None
    fingerprint_id: str | None = None
    fingerprint_diff: list[str] = field(default_factory=list)
    p99: QuantileComparison | None = None
    memory: list[str] = field(default_factory=list)
    unstable: list[str] = field(default_factory=list)
    confirmed: bool | None = None
    #: the first look of a confirmed or unconfirmed regression
    first_look: FirstLook | None = None
    #: the message of the confirmation look that did not confirm the first
    unconfirmed_by: str | None = None
    #: the CPU contention a regression was withheld for
    contention: Contention | None = None
    notes: list[str] = field(default_factory=list)
    fails: bool = False
    #: side-by-side figures (REF, cycles, per-cycle ratios, looks, each side's memory, device time) when the
    #: item was gated side by side (``--aaco-compare``)
    side_by_side: SideBySideSummary | None = None
    #: current/baseline of the raw figures, whichever series was tested
    raw_ratio: float | None = None
    #: the reference workload's figures, None without a comparable reference
    reference: ReferenceDrift | None = None
    #: fingerprint fields that differ and are versions only (compared raw, with the change named)
    version_change: list[str] = field(default_factory=list)
    #: machine keys of other runners that have a baseline for the item, when this runner has none
    other_runners: list[str] = field(default_factory=list)
    #: device time against the stored history (:func:`pytest_aaco.history.judge.device_check`); None where
    #: the item was not traced (then absent from :meth:`to_dict`, as in files written before it)
    device_time: DeviceTimeRecord | None = None
    #: geometric means (ms) of the raw round means whose ratio is :attr:`raw_ratio`: this run's, and
    #: ``current_geomean_ms / raw_ratio`` for the baseline; None in records written before them (then
    #: absent from :meth:`to_dict`)
    current_geomean_ms: float | None = None
    baseline_geomean_ms: float | None = None
    #: the share of each run's rounds (its fastest, :func:`pytest_aaco.verdict.stats.fastest_rounds`) whose
    #: mean is the run's level in the stored wall-time test and in the geometric means above; None where all
    #: rounds count (side by side, and records written before it: then absent from :meth:`to_dict`)
    rounds_kept: float | None = None
    #: why a wall-time regression or improvement was withheld because the machine changed speed since the
    #: history (:func:`pytest_aaco.history.judge.withheld_by_regime`), e.g. ``the machine ran 187% slower than
    #: in the history (reference workload mix, p=1e-05)``: the item is not judged, and its message and the
    #: summary's first line say why. None otherwise (and absent from :meth:`to_dict`)
    withheld: str | None = None
    #: what changed in the item itself against what it is compared with (``model bytes``, ``inputs``,
    #: ``cuda provider options``, ``environment``): side by side, the item at REF; stored, the model
    #: file the baseline was recorded on. The diagnosis names it first. Empty in records written
    #: before it (then absent from :meth:`to_dict`)
    changed: list[str] = field(default_factory=list)
    #: what :attr:`changed` is against: ``origin/main`` (side by side), ``the baseline``; None when nothing changed
    changed_since: str | None = None
    #: the runner key whose history judged the item when it is another runner's (``--aaco-baseline-runner``,
    #: :mod:`pytest_aaco.history.across`); None for this runner's own (then absent from :meth:`to_dict`)
    baseline_runner: str | None = None
    #: the run's fastest iteration against the history's, the witness that a slowdown measured while the
    #: machine was busy is the item's own; None where the history has none (then absent from :meth:`to_dict`)
    fastest_iteration: FastestIteration | None = None

    def __post_init__(self) -> None:
        self.outcome = Outcome(self.outcome)

    @classmethod
    def judged(cls, wall: Judgement, label: str, **facts: Any) -> Verdict:
        """A verdict whose wall-time test is *wall* (:attr:`outcome` is its outcome until a rule changes it),
        with the item's *facts* (means, runs, paths, series figures ...) as keyword fields."""
        return cls(wall.outcome, label, wall.threshold, wall=wall, **facts)

    def set_wall_outcome(self, outcome: Outcome) -> None:
        """Set wall time's own outcome (a rule after the test changed it: withheld, not confirmed)."""
        if self.wall is not None:
            self.wall = replace(self.wall, outcome=outcome)

    # ------------------------------------------------------------ the judgements by metric

    @property
    def judgements(self) -> dict[str, Judgement]:
        """The tested metrics by name: :data:`LATENCY` (wall time), :data:`DEVICE_TIME` (:attr:`device`) and
        :data:`P99` (:attr:`p99`, see :func:`p99_judgement`) where each was compared. A judgement's
        regression the verdict no longer stands by (withheld, not confirmed, in an older record) reads
        as the verdict's outcome."""
        found = {}
        if self.wall is not None:
            found[LATENCY] = replace(self.wall, outcome=self.wall_outcome,
                                     series=self.wall.series or ("paired" if self.side_by_side is not None else None))
        dev = self.device
        if dev is not None and dev.judgement is not None:
            found[DEVICE_TIME] = replace(dev.judgement, outcome=self._stood_by(dev.judgement.outcome),
                                         series=dev.judgement.series or "paired")
        if self.p99 is not None and self.level is not None:
            found[P99] = p99_judgement(self.p99, self.threshold, self.level)
        return found

    def _stood_by(self, outcome: Outcome) -> Outcome:
        return self.outcome if outcome == Outcome.REGRESSION and self.outcome != Outcome.REGRESSION else outcome

    @property
    def reference_drift(self) -> float | None:
        """How much slower (fraction, > 0) or faster (< 0) the reference ran than in the history:
        the machine's own change of speed; None without a comparable reference."""
        return None if self.reference is None else self.reference.drift

    @property
    def device(self) -> DeviceTimeRecord | None:
        """Device time compared, stored (:attr:`device_time`) or side by side (``side_by_side.device_time``);
        None when not compared (not traced, or the test could not run)."""
        found = self.device_time or (self.side_by_side.device_time if self.side_by_side is not None else None)
        return found if found is not None and found.compared else None

    @property
    def change_pct(self) -> float | None:
        """Wall time's change of the tested series (per cent, from :attr:`ratio`)."""
        return None if self.ratio is None else (self.ratio - 1) * 100

    # ------------------------------------------------------------ the one "which metrics failed" rule

    @property
    def wall_outcome(self) -> Outcome:
        """Wall time's own outcome (:attr:`wall`'s), else :attr:`outcome`. A wall-time regression the
        verdict no longer stands by reads as the verdict's outcome."""
        return self.outcome if self.wall is None else self._stood_by(self.wall.outcome)

    @property
    def device_outcome(self) -> Outcome | None:
        """Device time's outcome (stored or side by side), None when device time was not compared;
        a device-time regression the verdict does not stand by reads as the verdict's outcome."""
        dev = self.device
        return None if dev is None else self._stood_by(dev.outcome)

    @property
    def regressions(self) -> list[str]:
        """The metrics with a regression, in the order the failure names them: :data:`LATENCY` (wall
        time), :data:`DEVICE_TIME` and :data:`P99` whose :attr:`judgements` regressed, :data:`MEMORY`. Read
        by :attr:`failed_metrics` and by the confirmation and contention rules (:mod:`pytest_aaco.verdict.finish`)."""
        judged = self.judgements
        found = [m for m in (LATENCY, DEVICE_TIME) if m in judged and judged[m].outcome == Outcome.REGRESSION]
        if self.outcome == Outcome.REGRESSION and not found:  # a record that names neither (older bundles)
            found.append(LATENCY)
        if P99 in judged and judged[P99].outcome == Outcome.REGRESSION:
            found.append(P99)
        if self.memory:
            found.append(MEMORY)
        return found

    @property
    def failed_metrics(self) -> list[str]:
        """The one rule for which metrics failed the item (the message, the headline, every table and
        writer, the summary count and :attr:`ItemRecord.fails` read it): :attr:`regressions`, and
        :data:`LATENCY` for an inconclusive or improved wall time that fails by the user's choice
        (``--aaco-strict-inconclusive``, ``--aaco-fail-on-improvement``). Empty for a verdict that
        does not fail, or fails as an error (an unreadable baseline)."""
        if not self.fails or self.outcome == Outcome.ERROR:
            return []
        found = self.regressions
        if not found and self.outcome in (Outcome.INCONCLUSIVE, Outcome.IMPROVEMENT):
            found.append(LATENCY)
        return found

    @property
    def decided_by(self) -> str | None:
        """:data:`DEVICE_TIME` when device time decided the outcome word and wall time did not (wall
        time inconclusive: ``no regression (device time)``; a regression of device time alone), else None."""
        dev = self.device_outcome
        if dev is None or dev != self.outcome or self.wall_outcome == self.outcome:
            return None
        return DEVICE_TIME

    def metric_word(self, metric: str) -> str:
        """How reports name *metric*: :data:`LATENCY` is ``wall time`` beside device time, else ``latency``."""
        return "wall time" if metric == LATENCY and self.device is not None else metric

    @property
    def report_notes(self) -> list[str]:
        """How the verdict was reached and what to do about it, for the report and the bundle (not the
        one-line :attr:`message`): the minimum detectable effect of an inconclusive verdict with what
        raises the power, what to do about an improvement, then :attr:`notes` (the method, the series
        and why, the reference workload, withheld outcomes, confirmations) and :attr:`unstable`."""
        found = []
        if self.outcome == Outcome.INCONCLUSIVE and self.mde is not None:
            how = ("raise --aaco-compare-budget, or run on a quieter runner (--aaco-intra-op-threads=1 helps on a"
                   " shared one)" if self.side_by_side is not None else
                   "add rounds or history (--aaco-rounds, --aaco-save-baseline)")
            found.append(f"minimum detectable effect {self.mde:.1%}: {how}")
        if self.outcome == Outcome.IMPROVEMENT:
            found.append("if intended, refresh the baseline with --aaco-save-baseline")
        return found + list(self.notes) + [f"unstable: {line}" for line in self.unstable]

    @property
    def p99_regressed(self) -> bool:
        return self.p99 is not None and bool(self.p99.regression)

    @property
    def regressed_besides(self) -> bool:
        """A memory or p99 regression besides the latency outcome
        (read by :func:`pytest_aaco.verdict.outcome.fails`)."""
        return bool(self.memory) or self.p99_regressed

    def to_dict(self) -> JSONDict:
        """The verdict as JSON, in the layout of earlier versions: the wall-time judgement as the verdict's
        own keys (``ratio``, ``ci_low``, ``p_value`` ...), the typed parts as their own ``to_dict()`` (the
        stored device-time record with ``wall_outcome``, wall time's own outcome), with ``change_pct``
        and ``reference_drift`` added."""
        return _verdict_json(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """Inverse of :meth:`to_dict`; keys it does not know are dropped, missing ones take defaults.
        Wall time's own outcome is read from the side-by-side summary's ``outcome``, else the stored
        device-time record's ``wall_outcome``, else the verdict's."""
        return _verdict_from_json(cls, data)


def _verdict_json(verdict: Verdict) -> JSONDict:
    """:meth:`Verdict.to_dict`."""
    data: dict[str, Any] = {}
    for key in _VERDICT_KEYS:
        if key in _WALL_KEYS:
            value: Any = None if verdict.wall is None else getattr(verdict.wall, _WALL_KEYS[key])
        else:
            value = getattr(verdict, key)
        if key in _TYPED_PARTS or key == "device_time":
            value = None if value is None else value.to_dict()
        elif key in _LISTS:
            value = list(value)
        if key in _WHEN_SET and not value:
            continue
        data[key] = value
    data["outcome"] = verdict.outcome.value
    if "device_time" in data and verdict.wall is not None:
        data["device_time"]["wall_outcome"] = str(verdict.wall.outcome)
    data["change_pct"] = verdict.change_pct
    data["reference_drift"] = verdict.reference_drift
    return data


def _verdict_from_json(cls: type[Verdict], data: dict[str, Any]) -> Verdict:
    """:meth:`Verdict.from_dict`."""
    known = {f.name for f in fields(cls)}
    kwargs = {k: v for k, v in data.items() if k in known}
    outcome = Outcome.parse(data.get("outcome"), Outcome.INCONCLUSIVE)
    kwargs["outcome"] = outcome
    kwargs.setdefault("label", "")
    kwargs.setdefault("threshold", 0.0)
    for name in _LISTS:
        kwargs[name] = list(kwargs.get(name) or [])
    for name, part in _TYPED_PARTS.items():
        kwargs[name] = _typed(part, kwargs.get(name))
    device = data.get("device_time")
    kwargs["device_time"] = DeviceTimeRecord.from_dict(device)
    sbs = kwargs["side_by_side"]
    wall_word: object = (sbs.outcome if sbs is not None else
                         device.get("wall_outcome") if isinstance(device, dict) else None)
    flat = {field_name: data.get(key) for key, field_name in _WALL_KEYS.items()}
    wall = Judgement.from_dict(LATENCY, {**flat, "outcome": wall_word or outcome.value,
                                         "threshold": kwargs["threshold"]})
    if wall is not None:
        kwargs["wall"] = wall
    return cls(**kwargs)


#: the verdict's typed parts, by field name (``device_time`` is read and written on its own: its JSON
#: carries wall time's ``wall_outcome``)
_TYPED_PARTS: dict[str, _FromDict] = {"p99": QuantileComparison, "first_look": FirstLook, "contention": Contention,
                                "side_by_side": SideBySideSummary, "reference": ReferenceDrift,
                                "fastest_iteration": FastestIteration}
#: the verdict's list fields
_LISTS = ("fingerprint_diff", "memory", "unstable", "notes", "version_change", "other_runners", "changed")
