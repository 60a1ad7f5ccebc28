"""The outcome words, one tested metric's judgement (:class:`Judgement`), a percentile comparison
(:class:`QuantileComparison`, read as the :data:`P99` judgement by :func:`p99_judgement`), one figure on both
sides (:class:`Pair`), the CPU contention a regression was withheld for and the fastest iteration it stands
on instead (:class:`Contention`, :class:`FastestIteration`), the metric names and the JSON helpers every
record of :mod:`pytest_aaco.records` shares. It imports nothing of the package (a JSON object is
``dict[str, Any]`` here, :data:`pytest_aaco.jsonio.JSONDict` elsewhere), so the records above it stay few
import floors deep."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

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


def _json_fields(obj: DataclassInstance, omit_none: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of the dataclass *obj* as a JSON object; those named in *omit_none* only when set."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)
            if not (f.name in omit_none and getattr(obj, f.name) is None)}


def _known(cls: type[DataclassInstance], data: dict[str, Any]) -> dict[str, Any]:
    """The keys of *data* that are fields of *cls*; a missing field is None (values are kept as
    read, never converted, so a record dumps to the bytes it was read from)."""
    return {f.name: data.get(f.name) for f in fields(cls)}


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

    def to_dict(self) -> dict[str, Any]:
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


class _FromDict(Protocol):
    """A record class read back from its JSON object (``from_dict``), as :data:`_TYPED_PARTS` holds them."""

    def from_dict(self, data: dict[str, Any], /) -> object: ...


def _typed(cls: _FromDict, value: object) -> object:
    return cls.from_dict(value) if isinstance(value, dict) else None



def _number(value: object) -> float | None:
    """*value* when it is a JSON number (not a bool; an integer stays one), else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _object(value: object) -> dict[str, Any]:
    """*value* when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _array(value: object) -> list[object]:
    """*value* when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def _numbers(value: object) -> tuple[float, ...]:
    """The numbers of a JSON array (other elements left out)."""
    return tuple(x for x in map(_number, _array(value)) if x is not None)


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


@dataclass(frozen=True)
class QuantileComparison:
    """Ratio of a latency percentile, current / baseline, with a cluster-bootstrap interval
    (:func:`pytest_aaco.verdict.bootstrap.bootstrap_quantile_ratio`); the verdict's ``p99`` part
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

    def to_dict(self) -> dict[str, Any]:
        """All fields, values as held (a record read from JSON dumps to the bytes it was read from)."""
        return _json_fields(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QuantileComparison:
        return cls(**_known(cls, data))



def p99_judgement(comp: QuantileComparison, threshold: float, level: float) -> Judgement:
    """The :data:`P99` judgement of a percentile comparison judged at *level* against *threshold* (a
    fraction; :func:`pytest_aaco.history.judge.p99_check`). The bootstrap interval is two-sided at
    ``1 - 2·level`` (:func:`pytest_aaco.verdict.bootstrap.bootstrap_quantile_ratio`), so its ends are the
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

    def to_dict(self) -> dict[str, Any]:
        data = _json_fields(self)
        if data.get("explained") is None:  # records written before the bound existed stay byte-identical
            data.pop("explained", None)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Contention:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class FastestIteration:
    """The run's fastest iteration against the history's (:func:`pytest_aaco.history.judge.fastest_iteration`):
    the stored gate's witness that a slowdown measured under CPU contention is the item's own.

    Waiting for a CPU lengthens the iterations it interrupts, not the ones it does not; a change of the
    item's own work lengthens every iteration, the fastest included. ``current_ms``: this run's fastest
    iteration (ms); ``baseline_ms``: the slowest of the history runs' fastest iterations (ms, the
    conservative side); ``ratio``: current/baseline; ``lower_bound``: the ratio's lower bound at the item's
    level, with the spread of the history's fastest iterations (at least ``--aaco-run-noise``);
    ``reference_ratio``: the reference workload's fastest iteration now against its fastest in the history
    (what shared caches, memory bandwidth and clocks did to an iteration no wait interrupted), None without
    one; ``parallel_bound``: how much slower an uninterrupted iteration of a multi-threaded session can run
    when other processes leave it fewer cores than it used in its history (the cores it used then, at most
    their ratio to the cores it got now; 1 when it got as many), None where the CPU share was not sampled;
    ``runs``: history runs with a fastest iteration; ``stood``: a regression that contention or a machine
    speed change would have withheld stands on this figure (:meth:`stands`)."""

    current_ms: float
    baseline_ms: float
    ratio: float
    lower_bound: float
    reference_ratio: float | None
    runs: int
    parallel_bound: float | None = None
    stood: bool = False

    @property
    def explained(self) -> float | None:
        """The slowdown of an uninterrupted iteration the machine explains (a ratio, >= 1): the larger of the
        reference workload's and the parallel bound; None without both (then nothing bounds it)."""
        if self.reference_ratio is None or self.parallel_bound is None:
            return None
        return max(1.0, self.reference_ratio, self.parallel_bound)

    def stands(self, threshold: float) -> bool:
        """Whether the lower bound clears the *threshold* (a fraction, 0.05 = 5%) beyond what the machine
        explains (:attr:`explained`): ``lower_bound >= (1 + threshold) x explained``. A slower clock slows
        the reference's fastest iteration as it slows the item's, so the item's must move the threshold
        further."""
        explained = self.explained
        return explained is not None and self.lower_bound >= (1.0 + threshold) * explained

    def to_dict(self) -> dict[str, Any]:
        return _json_fields(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FastestIteration:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class Pair:
    """One figure on both sides: the ``baseline``'s and the ``candidate``'s (this run's)."""

    baseline: float | None
    candidate: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "candidate": self.candidate}

    @classmethod
    def from_dict(cls, data: object) -> Pair | None:
        if not isinstance(data, dict):
            return None
        return cls(_number(data.get("baseline")), _number(data.get("candidate")))
