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
from typing import TYPE_CHECKING, Any

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
    (``--aaco-max-contention``, cores)."""

    cores: float
    limit: float

    def to_dict(self) -> JSONDict:
        return _json_fields(self)

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
    and ``device_time`` (the device-time look, :meth:`pytest_aaco.sidebyside.cycles.DeviceLook.to_dict`
    plus ``outcome`` and ``per_cycle``). ``figures``: every other key as written (per-cycle
    ``ratios``, ``looks``, ``sides``, ``footprint_mb`` in MB, ``spin_bleed`` ...), kept as is.
    """

    ref: str | None
    outcome: str | None
    cycles: int | None
    session_pairs: int | None
    first_look: SideBySideFirstLook | None = None
    device_time: dict[str, Any] | None = None
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> JSONDict:
        data = dict(self.figures)
        for key in _SUMMARY_KEYS:
            value = getattr(self, key)
            if value is not None:
                data[key] = value.to_dict() if isinstance(value, SideBySideFirstLook) else value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SideBySideSummary:
        """Inverse of :meth:`to_dict`."""
        first = data.get("first_look")
        return cls(ref=data.get("ref"), outcome=data.get("outcome"), cycles=data.get("cycles"),
                   session_pairs=data.get("session_pairs"),
                   first_look=SideBySideFirstLook.from_dict(first) if isinstance(first, dict) else None,
                   device_time=data.get("device_time"),
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
        ratio = _number(data.get("ratio"))
        if ratio is None:
            return None
        method, series = data.get("method"), data.get("series")
        return cls(metric=metric, outcome=Outcome.parse(data.get("outcome"), Outcome.INCONCLUSIVE), ratio=ratio,
                   threshold=_number(data.get("threshold")) or 0.0, level=_number(data.get("level")),
                   ci_low=_number(data.get("ci_low")), ci_high=_number(data.get("ci_high")),
                   lower_bound=_number(data.get("lower_bound")), upper_bound=_number(data.get("upper_bound")),
                   p_slower=_number(data.get("p_slower")), p_faster=_number(data.get("p_faster")),
                   mde=_number(data.get("mde")), series=series if isinstance(series, str) else None,
                   method=method if isinstance(method, str) else None, reason=str(data.get("reason") or ""))


def _number(value: object) -> float | None:
    """*value* as a float when it is a number (not a bool), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _typed(cls: Any, value: Any) -> Any:
    return cls.from_dict(value) if isinstance(value, dict) else None


@dataclass
class Verdict:
    """The outcome for one item, with the figures behind it (ratios, not percentages).

    ``ratio``/``ci_low``/``ci_high`` are current/baseline latency (95% two-sided CI);
    ``p_value`` is the one-sided p for a slowdown; ``level`` the α_i it was judged at;
    ``current_rounds``/``baseline_rounds`` the rounds on each side of Welch's t-test.
    ``reason`` is the whole message of a verdict without a comparison (no baseline, another
    fingerprint, a file error). ``message`` is rendered once from the other fields by
    :func:`pytest_aaco.verdict.finish.render_message`, after the last rule changed them.
    """

    outcome: Outcome
    label: str
    threshold: float
    message: str = ""
    reason: str | None = None
    method: str | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_faster: float | None = None
    level: float | None = None
    mde: float | None = None
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
    #: side-by-side figures (REF, cycles, per-cycle ratios, looks, each side's memory) when the item
    #: was gated side by side (``--aaco-compare``)
    side_by_side: SideBySideSummary | None = None
    #: the series tested: ``adjusted`` for the reference workload (a fitted slope), ``normalized`` by it, or ``raw``
    series: str | None = None
    #: current/baseline of the raw figures, whichever series was tested
    raw_ratio: float | None = None
    #: the reference workload's figures, None without a comparable reference
    reference: ReferenceDrift | None = None
    #: fingerprint fields that differ and are versions only (compared raw, with the change named)
    version_change: list[str] = field(default_factory=list)
    #: machine keys of other runners that have a baseline for the item, when this runner has none
    other_runners: list[str] = field(default_factory=list)
    #: device time against the stored history (:func:`pytest_aaco.history.judge.device_check`): ``outcome``,
    #: ``wall_outcome``, ``ratio``, ``ci_low``, ``ci_high``, ``p_slower``, ``level``, ``mde``, ``kernel_ms``,
    #: ``busy_ms``, ``kernels`` ({``baseline``, ``candidate``}), ``kernels_added``/``kernels_removed``;
    #: None where the item was not traced (then absent from :meth:`to_dict`, as in files written before it)
    device_time: dict[str, Any] | None = None
    #: geometric means (ms) of the raw round means whose ratio is :attr:`raw_ratio`: this run's, and
    #: ``current_geomean_ms / raw_ratio`` for the baseline; None in records written before them (then
    #: absent from :meth:`to_dict`)
    current_geomean_ms: float | None = None
    baseline_geomean_ms: float | None = None
    #: the one-sided bounds (ratios) the outcome rule compared (:func:`pytest_aaco.verdict.outcome.outcome_of`):
    #: ``lower_bound`` at the item's level (above 1 exactly when the slowdown is significant) and
    #: ``upper_bound`` at the no-regression level (below 1 + threshold for "no regression"); printed by
    #: :func:`pytest_aaco.verdict.percent.bound_text`. None in records written before them (then absent
    #: from :meth:`to_dict`, and the reports print the 95% CI instead)
    lower_bound: float | None = None
    upper_bound: float | None = None
    #: what changed in the item itself against what it is compared with (``model bytes``, ``inputs``,
    #: ``cuda provider options``, ``environment``): side by side, the item at REF; stored, the model
    #: file the baseline was recorded on. The diagnosis names it first. Empty in records written
    #: before it (then absent from :meth:`to_dict`)
    changed: list[str] = field(default_factory=list)
    #: what :attr:`changed` is against: ``origin/main`` (side by side), ``the baseline``; None when nothing changed
    changed_since: str | None = None

    def __post_init__(self) -> None:
        self.outcome = Outcome(self.outcome)

    @classmethod
    def judged(cls, wall: Judgement, label: str, **facts: Any) -> Verdict:
        """A verdict whose wall-time test is *wall* (:attr:`outcome` is its outcome until a rule changes it),
        with the item's *facts* (means, runs, paths, series figures ...) as keyword fields."""
        return cls(wall.outcome, label, wall.threshold, method=wall.method, ratio=wall.ratio, ci_low=wall.ci_low,
                   ci_high=wall.ci_high, p_value=wall.p_slower, p_faster=wall.p_faster, level=wall.level,
                   mde=wall.mde, series=wall.series, lower_bound=wall.lower_bound, upper_bound=wall.upper_bound,
                   **facts)

    @property
    def judgements(self) -> dict[str, Judgement]:
        """The tested metrics by name: :data:`LATENCY` (wall time: the verdict's own figures, with
        :attr:`wall_outcome`) and :data:`DEVICE_TIME` (:attr:`device`) where each was compared."""
        found = {}
        if self.ratio is not None:
            found[LATENCY] = Judgement(
                LATENCY, self.wall_outcome, self.ratio, self.threshold, self.level, self.ci_low, self.ci_high,
                self.lower_bound, self.upper_bound, self.p_value, self.p_faster, self.mde,
                self.series or ("paired" if self.side_by_side is not None else None), self.method)
        dev = self.device
        judged = Judgement.from_dict(DEVICE_TIME, dev) if dev is not None else None
        if judged is not None:
            found[DEVICE_TIME] = replace(judged, outcome=self.device_outcome or judged.outcome,
                                         series=judged.series or "paired")
        return found

    @property
    def reference_drift(self) -> float | None:
        """How much slower (fraction, > 0) or faster (< 0) the reference ran than in the history:
        the machine's own change of speed; None without a comparable reference."""
        return None if self.reference is None else self.reference.drift

    @property
    def device(self) -> dict[str, Any] | None:
        """Device time's figures, stored (:attr:`device_time`) or side by side (``side_by_side["device_time"]``):
        ``ratio``, ``ci_low``, ``ci_high``, ``mde``, ``outcome``, ``kernels`` ... ; None when not compared."""
        found = self.device_time or (self.side_by_side.device_time if self.side_by_side is not None else None)
        return found if isinstance(found, dict) and isinstance(found.get("ratio"), (int, float)) else None

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1) * 100

    # ------------------------------------------------------------ the one "which metrics failed" rule

    @property
    def wall_outcome(self) -> Outcome:
        """Wall time's own outcome: the side-by-side summary's, else the stored device-time record's
        ``wall_outcome``, else :attr:`outcome`. A wall-time regression the verdict no longer stands by
        (withheld for contention, not confirmed, in an older record) reads as the verdict's outcome."""
        found: object = None
        if self.side_by_side is not None:
            found = self.side_by_side.outcome
        elif isinstance(self.device_time, dict):
            found = self.device_time.get("wall_outcome")
        wall = Outcome.parse(found, self.outcome) if found else self.outcome
        return self.outcome if wall == Outcome.REGRESSION and self.outcome != Outcome.REGRESSION else wall

    @property
    def device_outcome(self) -> Outcome | None:
        """Device time's outcome (stored or side by side), None when device time was not compared;
        a device-time regression the verdict does not stand by reads as the verdict's outcome."""
        dev = self.device
        if dev is None:
            return None
        found = Outcome.parse(dev.get("outcome"), Outcome.INCONCLUSIVE)
        return self.outcome if found == Outcome.REGRESSION and self.outcome != Outcome.REGRESSION else found

    @property
    def regressions(self) -> list[str]:
        """The metrics with a regression, in the order the failure names them: :data:`LATENCY` (wall
        time) and :data:`DEVICE_TIME` whose :attr:`judgements` regressed, :data:`P99`, :data:`MEMORY`. Read
        by :attr:`failed_metrics` and by the confirmation and contention rules (:mod:`pytest_aaco.verdict.finish`)."""
        judged = self.judgements
        found = [m for m in (LATENCY, DEVICE_TIME) if m in judged and judged[m].outcome == Outcome.REGRESSION]
        if self.outcome == Outcome.REGRESSION and not found:  # a record that names neither (older bundles)
            found.append(LATENCY)
        if self.p99_regressed:
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
        """The verdict as JSON (the typed parts as their own ``to_dict()``), with ``change_pct`` and
        ``reference_drift`` added."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in _TYPED_PARTS:
            part = getattr(self, name)
            data[name] = None if part is None else part.to_dict()
        for name in _LISTS:
            data[name] = list(data[name])
        data["outcome"] = self.outcome.value
        data["change_pct"] = self.change_pct
        data["reference_drift"] = self.reference_drift
        for name in ("device_time", "current_geomean_ms", "baseline_geomean_ms", "lower_bound", "upper_bound",
                     "changed", "changed_since"):
            if not data[name]:  # absent, as in files written before them
                del data[name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """Inverse of :meth:`to_dict`; keys it does not know are dropped, missing ones take defaults."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["outcome"] = Outcome.parse(data.get("outcome"), Outcome.INCONCLUSIVE)
        kwargs.setdefault("label", "")
        kwargs.setdefault("threshold", 0.0)
        for name in _LISTS:
            kwargs[name] = list(kwargs.get(name) or [])
        for name, part in _TYPED_PARTS.items():
            kwargs[name] = _typed(part, kwargs.get(name))
        return cls(**kwargs)


#: the verdict's typed parts, by field name
_TYPED_PARTS: dict[str, Any] = {"p99": QuantileComparison, "first_look": FirstLook, "contention": Contention,
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
    result: dict[str, Any] | None = None
    verdict: Verdict | None = None
    fingerprint: dict[str, Any] | None = None
    outcome: Outcome = Outcome.PASSED
    error: str | None = None
    diagnosis: dict[str, Any] | None = None
    derived: dict[str, Any] | None = None
    placement: dict[str, Any] | None = None
    #: what the terminal must warn about (a baseline moved aside, a history archived), each naming the files
    warnings: list[str] = field(default_factory=list)
    profile: dict[str, Any] | None = None
    kernels: dict[str, Any] | None = None
    cold_start: dict[str, Any] | None = None
    insight_notes: list[str] = field(default_factory=list)
    #: the physical GPU the item ran on (``PhysicalGpu.to_dict()``: uuid, pci_bus_id, name, clocks ...);
    #: None on the CPU or where it could not be read (then absent from the JSON)
    gpu: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.outcome = Outcome(self.outcome)

    # ------------------------------------------------------------ the one outcome rule

    @property
    def cold_start_verdict(self) -> dict[str, Any]:
        """``ColdStartVerdict.to_dict()`` of the item, or {} when cold start was not judged."""
        return dict((self.cold_start or {}).get("verdict") or {})

    @property
    def cold_start_fails(self) -> bool:
        """The cold-start verdict is a regression (it fails the item like a latency regression)."""
        return bool(self.cold_start_verdict.get("fails"))

    @property
    def cold_start_withheld(self) -> bool:
        """The cold-start verdict withheld a regression (measured under CPU contention, stored gate only)."""
        verdict = self.cold_start_verdict
        figures = (verdict.get("metrics") or {}).values()
        return any(isinstance(f, dict) and f.get("withheld") for f in figures) or (
            "CPU contention" in str(verdict.get("message") or "") and verdict.get("outcome") == Outcome.INCONCLUSIVE)

    @property
    def effective_outcome(self) -> Outcome:
        """The verdict's outcome when the item was judged (``regression`` when only its cold start
        regressed), else pytest's outcome of the item."""
        if self.verdict is None:
            return self.outcome
        return Outcome.REGRESSION if self.cold_start_fails else self.verdict.outcome

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
            lines.append(str(self.cold_start_verdict.get("message")))
        comparison = (self.profile or {}).get("comparison") or {}
        if self.fails and comparison.get("message"):
            lines.append(str(comparison["message"]))
        return lines

    def explanation(self, with_recommendation: bool = True) -> str:
        """:attr:`message`, the :meth:`insight_lines`, the verdict's :attr:`Verdict.report_notes` (one
        ``note:`` line each), and the likely cause (and what to try) when there is a diagnosis."""
        notes = self.verdict.report_notes if self.verdict is not None else []
        text = "\n".join([self.message, *self.insight_lines(), *(f"note: {n}" for n in notes)])
        d = self.diagnosis
        if d:
            text += f"\nlikely cause: {d.get('category')}: " + "; ".join(d.get("evidence") or [])
            if with_recommendation and d.get("recommendation"):
                text += f"\ntry: {d['recommendation']}"
        return text

    @property
    def summary(self) -> dict[str, Any]:
        """The result's summary figures (``mean_ms``, ``p50_ms``, ``p99_ms``, ``throughput`` ...), or {}."""
        return dict((self.result or {}).get("summary") or {})

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
    def from_dict(cls, data: dict[str, Any]) -> ItemRecord:
        """Inverse of :meth:`to_dict` (keys it does not know go to ``extra``); tolerant of missing keys."""
        known = {f.name for f in fields(cls)} - {"extra"}
        kwargs = {k: v for k, v in data.items() if k in known}
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
    fdr_control: dict[str, Any] | None = None

    @classmethod
    def of(cls, records: list[ItemRecord], fdr_control: dict[str, Any] | None = None) -> SessionSummary:
        counts: dict[str, int] = {}
        for record in records:
            key = record.effective_outcome.value
            counts[key] = counts.get(key, 0) + 1
        return cls(len(records), counts, fdr_control)

    @property
    def counts_text(self) -> str:
        """``1 no-regression, 1 regression`` (sorted by outcome), or ``no items``."""
        return ", ".join(f"{n} {k}" for k, n in sorted(self.verdicts.items())) or "no items"

    def to_dict(self) -> JSONDict:
        return {"items": self.items, "verdicts": dict(self.verdicts), "fdr_control": self.fdr_control}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SessionSummary:
        data = data or {}
        fdr = data.get("fdr_control")
        return cls(int(data.get("items") or 0), dict(data.get("verdicts") or {}),
                   fdr if isinstance(fdr, dict) else None)

