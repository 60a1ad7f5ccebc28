"""Typed records shared by the session, the gate and the reports (imports only :mod:`pytest_aaco.jsonio` here).

* :class:`Outcome`: every outcome word pytest-aaco writes (the verdict's and the item's).
* :class:`Judgement`: one tested metric (wall time, device time): the test's estimate, bounds, p, level,
  MDE, threshold and outcome; built by :func:`pytest_aaco.verdict.outcome.judgement_of`.
* :class:`Verdict`: the gate's decision for one item, with the figures behind it: its judgements by
  metric (:attr:`Verdict.judgements`) and the item's facts.
* :class:`ItemRecord`: what the reports need about one item; :meth:`ItemRecord.to_dict` is the
  JSON of a bundle's ``items/*.json`` and :meth:`ItemRecord.from_dict` reads it back.
* :class:`SessionSummary`: verdict counts and the LOND state of one session.
* What an item counts as in the reports: :attr:`ItemRecord.effective_outcome`,
  :attr:`ItemRecord.fails` (the stored decisions of :func:`pytest_aaco.verdict.outcome.fails`),
  :attr:`ItemRecord.is_regression`, :attr:`ItemRecord.worth_a_line`.
* The keys under which items and pytest-xdist processes exchange these records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from pytest_aaco.jsonio import JSONDict

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: name under which the session object is registered with pytest's plugin manager
PLUGIN_NAME = "aaco-plugin"

#: the metrics a verdict judges, as :attr:`Verdict.failed_metrics` names them (``latency`` is wall time)
LATENCY, DEVICE_TIME, P99, MEMORY, COLD_START = "latency", "device time", "p99", "memory", "cold start"


class Outcome(str, Enum):
    """Outcome words. The first ten are the gate's verdicts (``unchanged`` and ``new``: side by side,
    an item identical at the compared revision, or absent there, is not measured against it); the
    last three are pytest's own outcome of an item, used when an item has no verdict (a provider
    error, a skip)."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_REGRESSION = "no-regression"
    INCONCLUSIVE = "inconclusive"
    NO_BASELINE = "no-baseline"
    MISMATCH = "fingerprint-mismatch"
    SAVED = "saved"
    ERROR = "error"
    UNCHANGED = "unchanged"
    NEW = "new"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def parse(cls, value: object, default: Outcome) -> Outcome:
        """*value* as an Outcome; *default* for None or a word this version does not know."""
        try:
            return cls(value)
        except ValueError:
            return default


def _json_fields(obj: DataclassInstance, omit_none: tuple[str, ...] = ()) -> JSONDict:
    """The fields of the dataclass *obj* as a JSON object; those named in *omit_none* only when set."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)
            if not (f.name in omit_none and getattr(obj, f.name) is None)}


def _known(cls: type[DataclassInstance], data: JSONDict) -> dict[str, Any]:
    """The keys of *data* that are fields of *cls*; a missing field is None (values are kept as
    read, never converted, so a record dumps to the bytes it was read from)."""
    return {f.name: data.get(f.name) for f in fields(cls)}


@dataclass(frozen=True)
class ReferenceDrift:
    """The reference workload's change between the history and now, in a verdict
    (:func:`pytest_aaco.history.judge.choose_series`): the machine's own change of speed.

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
class Contention:
    """Why a regression was withheld (:func:`pytest_aaco.verdict.finish.under_contention`): other
    processes kept ``cores`` CPU cores busy (mean over the measured phase), above ``limit``
    (``--aaco-max-contention``, cores); ``explained``: the slowdown (current/baseline ratio) contention
    could explain in that run (:func:`pytest_aaco.verdict.finish.contention_bound`), None where not measured
    (and in records written before it)."""

    cores: float
    limit: float
    explained: float | None = None

    def to_dict(self) -> JSONDict:
        data = _json_fields(self)
        if data.get("explained") is None:  # records written before the bound existed stay byte-identical
            data.pop("explained", None)
        return data

    @classmethod
    def from_dict(cls, data: JSONDict) -> Contention:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class QuantileComparison:
    """Ratio of a latency percentile, current / baseline, with a cluster-bootstrap interval
    (:func:`pytest_aaco.verdict.stats.bootstrap_quantile_ratio`); the verdict's ``p99`` part
    (:func:`pytest_aaco.history.judge.p99_check`, ``q`` = 99.0) is one.

    ``q``: the percentile, 0..100; ``ratio``: the percentile of the pooled current iterations over the
    baseline's; ``ci_low``/``ci_high``: percentile-bootstrap bounds of the ratio; ``p_slower``:
    one-sided bootstrap p-value for "the current percentile is larger"; ``n_boot``: resamples;
    ``regression``: the percentile gate failed (False until a gate judged it).
    Bundles and baselines written with the earlier ``P99Comparison`` hold the same keys, in this order.
    """

    q: float
    ratio: float
    ci_low: float
    ci_high: float
    p_slower: float
    n_boot: int
    regression: bool = False

    def to_dict(self) -> JSONDict:
        """All fields, values as held (a record read from JSON dumps to the bytes it was read from)."""
        return _json_fields(self)

    @classmethod
    def from_dict(cls, data: JSONDict) -> QuantileComparison:
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


#: the keys of a :class:`Judgement` in its JSON, in the order a device-time record writes them
_JUDGEMENT_KEYS = ("outcome", "ratio", "threshold", "ci_low", "ci_high", "lower_bound", "upper_bound", "p_slower",
                   "p_faster", "level", "mde", "method", "series", "reason")


@dataclass(frozen=True)
class Judgement:
    """One tested metric (:data:`LATENCY`, which is wall time, or :data:`DEVICE_TIME`) and what the outcome
    rule (:func:`pytest_aaco.verdict.outcome.outcome_of`) decided from it; ratios, not percentages.

    ``metric``; ``series`` tested (``raw``, ``normalized``, ``adjusted``, ``paired``); ``ratio``: the
    estimate, current / baseline; the interval whose bound is compared: ``lower_bound`` (one-sided at
    ``level``: above 1 exactly when the slowdown is significant) and ``upper_bound`` (one-sided at the
    no-regression level: below 1 + ``threshold`` for "no regression"), with ``ci_low``/``ci_high`` the 95%
    two-sided interval; ``p_slower``/``p_faster``: one-sided p-values; ``level``: the item's α_i; ``mde``:
    the minimum detectable slowdown (fraction, power 0.8); ``threshold`` (fraction); ``outcome``;
    ``method``: the test; ``reason``: why raw figures were tested ('' otherwise).

    One constructor, :func:`pytest_aaco.verdict.outcome.judgement_of` (from a test's comparison); one JSON,
    :meth:`to_dict` (the keys of a verdict's device-time record; the wall-time judgement is written as the
    verdict's own fields, as before). :meth:`from_dict` reads either back.
    """

    metric: str
    outcome: Outcome
    ratio: float
    threshold: float
    level: float | None
    ci_low: float | None
    ci_high: float | None
    lower_bound: float | None
    upper_bound: float | None
    p_slower: float | None
    p_faster: float | None
    mde: float | None
    series: str | None = None
    method: str | None = None
    reason: str = ""

    def to_dict(self) -> JSONDict:
        """``{"outcome", "ratio", "threshold", "ci_low", "ci_high", "lower_bound", "upper_bound", "p_slower",
        "p_faster", "level", "mde", "method", "series", "reason"}`` (the metric is the key it is kept under)."""
        data = {key: getattr(self, key) for key in _JUDGEMENT_KEYS}
        data["outcome"] = str(self.outcome)
        return data

    @classmethod
    def from_dict(cls, metric: str, data: Mapping[str, object]) -> Judgement | None:
        """Inverse of :meth:`to_dict` for *metric*; None without a numeric ``ratio`` (nothing was compared)."""
        ratio = _float(data.get("ratio"))
        if ratio is None:
            return None
        method, series = data.get("method"), data.get("series")
        return cls(metric=metric, outcome=Outcome.parse(data.get("outcome"), Outcome.INCONCLUSIVE), ratio=ratio,
                   threshold=_float(data.get("threshold")) or 0.0, level=_float(data.get("level")),
                   ci_low=_float(data.get("ci_low")), ci_high=_float(data.get("ci_high")),
                   lower_bound=_float(data.get("lower_bound")), upper_bound=_float(data.get("upper_bound")),
                   p_slower=_float(data.get("p_slower")), p_faster=_float(data.get("p_faster")),
                   mde=_float(data.get("mde")), series=series if isinstance(series, str) else None,
                   method=method if isinstance(method, str) else None, reason=str(data.get("reason") or ""))


def _float(value: object) -> float | None:
    """*value* as a float when it is a number (not a bool), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Pair:
    """One figure on both sides: the ``baseline``'s and the ``candidate``'s (this run's)."""

    baseline: float | None
    candidate: float | None

    def to_dict(self) -> JSONDict:
        return {"baseline": self.baseline, "candidate": self.candidate}

    @classmethod
    def from_dict(cls, data: object) -> Pair | None:
        if not isinstance(data, dict):
            return None
        return cls(_number(data.get("baseline")), _number(data.get("candidate")))


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


class _FromDict(Protocol):
    """A record class read back from its JSON object (``from_dict``), as :data:`_TYPED_PARTS` holds them."""

    def from_dict(self, data: JSONDict, /) -> object: ...


def _typed(cls: _FromDict, value: object) -> object:
    return cls.from_dict(value) if isinstance(value, dict) else None


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
                 "withheld", "baseline_runner")
#: keys written only when set (absent, as in files written before them)
_WHEN_SET = ("device_time", "current_geomean_ms", "baseline_geomean_ms", "lower_bound", "upper_bound", "changed",
             "changed_since", "rounds_kept", "withheld", "baseline_runner")


@dataclass
class Verdict:
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

    def __post_init__(self) -> None:
        self.outcome = Outcome(self.outcome)

    @classmethod
    def judged(cls, wall: Judgement, label: str, **facts: Any) -> Verdict:
        """A verdict whose wall-time test is *wall* (:attr:`outcome` is its outcome until a rule changes it),
        with the item's *facts* (means, runs, paths, series figures ...) as keyword fields."""
        return cls(wall.outcome, label, wall.threshold, wall=wall, **facts)

    # ------------------------------------------------------------ wall time's figures, as the verdict's own

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
        data: dict[str, Any] = {}
        for key in _VERDICT_KEYS:
            if key in _WALL_KEYS:
                value: Any = None if self.wall is None else getattr(self.wall, _WALL_KEYS[key])
            else:
                value = getattr(self, key)
            if key in _TYPED_PARTS or key == "device_time":
                value = None if value is None else value.to_dict()
            elif key in _LISTS:
                value = list(value)
            if key in _WHEN_SET and not value:
                continue
            data[key] = value
        data["outcome"] = self.outcome.value
        if "device_time" in data and self.wall is not None:
            data["device_time"]["wall_outcome"] = str(self.wall.outcome)
        data["change_pct"] = self.change_pct
        data["reference_drift"] = self.reference_drift
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """Inverse of :meth:`to_dict`; keys it does not know are dropped, missing ones take defaults.
        Wall time's own outcome is read from the side-by-side summary's ``outcome``, else the stored
        device-time record's ``wall_outcome``, else the verdict's."""
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


def p99_judgement(comp: QuantileComparison, threshold: float, level: float) -> Judgement:
    """The :data:`P99` judgement of a percentile comparison judged at *level* against *threshold* (a
    fraction; :func:`pytest_aaco.history.judge.p99_check`). The bootstrap interval is two-sided at
    ``1 - 2·level`` (:func:`pytest_aaco.verdict.stats.bootstrap_quantile_ratio`), so its ends are the
    one-sided bounds at *level*: the lower one above 1 exactly when ``p_slower <= level``. The outcome
    is a regression when the gate found one (``comp.regression``, which a confirmation look may have
    cleared), no regression when the upper bound lies below ``1 + threshold``, else inconclusive."""
    if comp.regression:
        outcome = Outcome.REGRESSION
    else:
        outcome = Outcome.NO_REGRESSION if comp.ci_high - 1 < threshold else Outcome.INCONCLUSIVE
    return Judgement(metric=P99, outcome=outcome, ratio=comp.ratio, threshold=threshold, level=level,
                     ci_low=None, ci_high=None, lower_bound=comp.ci_low, upper_bound=comp.ci_high,
                     p_slower=comp.p_slower, p_faster=None, mde=None, series="raw",
                     method=f"cluster bootstrap of the p{comp.q:g} ({comp.n_boot} resamples)")


#: the verdict's typed parts, by field name (``device_time`` is read and written on its own: its JSON
#: carries wall time's ``wall_outcome``)
_TYPED_PARTS: dict[str, _FromDict] = {"p99": QuantileComparison, "first_look": FirstLook, "contention": Contention,
                                "side_by_side": SideBySideSummary, "reference": ReferenceDrift}
#: the verdict's list fields
_LISTS = ("fingerprint_diff", "memory", "unstable", "notes", "version_change", "other_runners", "changed")


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



# ================================================================ typed records at the edge
#
# What the session writes as JSON (a bundle's ``items/*.json``, a baseline file) and the report
# writers and the ``aaco`` command read: device time, cold start, GPU kernels, the operator profile,
# telemetry, the diagnosis, the result's figures, the physical GPU and the baseline's history. Each
# is a frozen record read once, tolerantly, from the JSON (:meth:`from_dict`: a missing or
# mistyped key reads as None or empty, so bundles and baselines of earlier versions load) and
# written back with :meth:`to_dict`. :class:`ItemRecord` keeps the JSON as it was read, so a
# bundle dumps to the bytes it was read from; its properties (:attr:`ItemRecord.cold`,
# :attr:`ItemRecord.kernel_figures` ...) hand the writers these records.


def _number(value: object) -> float | None:
    """*value* when it is a JSON number (not a bool; an integer stays one), else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _object(value: object) -> JSONDict:
    """*value* when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _array(value: object) -> list[object]:
    """*value* when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def _numbers(value: object) -> tuple[float, ...]:
    """The numbers of a JSON array (other elements left out)."""
    return tuple(x for x in map(_number, _array(value)) if x is not None)


def _drop_none(data: JSONDict) -> JSONDict:
    return {k: v for k, v in data.items() if v is not None}


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
    """One measured round: ``n`` iterations, ``mean_ms`` (ms) and ``log_mean`` (mean of ln ms)."""

    n: float | None
    mean_ms: float | None
    log_mean: float | None

    def to_dict(self) -> JSONDict:
        return _drop_none({"n": self.n, "mean_ms": self.mean_ms, "log_mean": self.log_mean})

    @classmethod
    def from_dict(cls, data: object) -> RoundFigures:
        d = _object(data)
        return cls(_number(d.get("n")), _number(d.get("mean_ms")), _number(d.get("log_mean")))


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

#: the key of an item record's ``extra`` holding its side-by-side triage
#: (:meth:`pytest_aaco.sidebyside.unchanged.Triage.to_dict`), and the triage that found the compute unchanged
TRIAGE_KEY, TRIAGE_SAME_COMPUTE = "compare_triage", "same-compute"
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


class ColdStartComparison(Protocol):
    """A cold start compared side by side (:class:`pytest_aaco.passes.coldstart.SideBySideColdStart`),
    as the run carries it to the extra passes: :meth:`record` is the item record's ``cold_start``."""

    def record(self) -> JSONDict: ...
