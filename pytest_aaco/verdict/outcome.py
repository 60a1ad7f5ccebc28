"""The outcome rules: what a test's outcome is, and whether a judged item fails.

* :func:`outcome_of`: regression, improvement, no regression or inconclusive, one rule for every
  metric and both gates (stored baselines and side by side);
* :func:`judgement_of`: the one constructor of a :class:`~pytest_aaco.records.Judgement` (one tested
  metric) from a test's comparison;
* :func:`confirmed_outcome`: the one confirmation rule (intersection-union) for a metric judged on two looks;
* :func:`fails`: the one rule for whether a judged record (a latency :class:`~pytest_aaco.records.Verdict`,
  a cold-start verdict) fails the item. Each verdict stores its decision (``fails`` in its JSON);
  :attr:`pytest_aaco.records.ItemRecord.fails` only gathers the stored decisions of an item's records.

No pytest, no onnxruntime, no I/O.
"""

from __future__ import annotations

from typing import Protocol

from pytest_aaco.options import GateSettings
from pytest_aaco.records import Judgement, Outcome
from pytest_aaco.verdict.blind import not_judged_reason

REGRESSION = Outcome.REGRESSION
IMPROVEMENT = Outcome.IMPROVEMENT
NO_REGRESSION = Outcome.NO_REGRESSION
INCONCLUSIVE = Outcome.INCONCLUSIVE
ERROR = Outcome.ERROR
NO_BASELINE = Outcome.NO_BASELINE
#: one-sided level of the upper bound that must lie below the threshold for "no regression"; the
#: side-by-side gate spends the same level across its sequential looks
NO_REGRESSION_ALPHA = 0.05


class Compared(Protocol):
    """What :func:`outcome_of` reads of a comparison: :class:`~pytest_aaco.verdict.stats.Comparison`,
    or any result with the same four members."""

    @property
    def ratio(self) -> float: ...

    @property
    def p_slower(self) -> float: ...

    @property
    def p_faster(self) -> float: ...

    def upper(self, alpha: float) -> float: ...


def outcome_of(comp: Compared, threshold: float, level: float, faster_level: float | None = None,
               upper_alpha: float | None = None) -> Outcome:
    """The outcome rule on a Comparison: *regression* when p(slower) <= *level* and the slowdown
    >= *threshold*; *improvement* likewise with p(faster) <= *faster_level* (default *level*);
    *no-regression* when the one-sided 95% upper bound of the slowdown is below *threshold* (a claim
    of no change is not a discovery, so it needs no false-discovery control); else *inconclusive*.
    *upper_alpha* sets the upper bound's level instead (a sequential look spends its share of it).
    *comp* needs ``ratio``, ``p_slower``, ``p_faster`` and ``upper(alpha)``."""
    slowdown = comp.ratio - 1
    if comp.p_slower <= level and slowdown >= threshold:
        return REGRESSION
    if comp.p_faster <= (level if faster_level is None else faster_level) and -slowdown >= threshold:
        return IMPROVEMENT
    if comp.upper(max(level, NO_REGRESSION_ALPHA) if upper_alpha is None else upper_alpha) - 1 < threshold:
        return NO_REGRESSION
    return INCONCLUSIVE


class Bounded(Compared, Protocol):
    """What :func:`judgement_of` reads of a comparison besides :class:`Compared`: its one-sided lower bound."""

    def lower(self, alpha: float) -> float: ...


def judgement_of(metric: str, comp: Bounded, threshold: float, level: float, *, series: str | None,
                 method: str | None = None, reason: str = "", ci: tuple[float, float] | None = None,
                 mde: float | None = None, upper_alpha: float | None = None, outcome: Outcome | None = None
                 ) -> Judgement:
    """The :class:`~pytest_aaco.records.Judgement` of *metric* tested by *comp* at *level* (the item's α_i)
    against *threshold* (a fraction): the outcome by :func:`outcome_of` (or *outcome*, where the gate
    decided over several looks: side by side), the bounds that rule compares (``lower(level)``,
    ``upper(upper_alpha or max(level, NO_REGRESSION_ALPHA))``), the 95% interval (*ci*, else ``comp.ci(0.95)``)
    and the MDE (*mde*, else ``comp.mde(level)``); *series*, *method* (else ``comp.method``) and *reason*
    as the gate names them. Raises AttributeError when *comp* has no ``ci``/``mde`` and none is given."""
    upper = max(level, NO_REGRESSION_ALPHA) if upper_alpha is None else upper_alpha
    lo, hi = ci if ci is not None else comp.ci(0.95)  # type: ignore[attr-defined]
    return Judgement(
        metric=metric, outcome=outcome or outcome_of(comp, threshold, level, upper_alpha=upper_alpha),
        ratio=float(comp.ratio), threshold=threshold, level=float(level), ci_low=float(lo), ci_high=float(hi),
        lower_bound=float(comp.lower(level)), upper_bound=float(comp.upper(upper)), p_slower=float(comp.p_slower),
        p_faster=float(comp.p_faster), mde=float(mde if mde is not None else comp.mde(level)),  # type: ignore[attr-defined]
        series=series, method=method if method is not None else getattr(comp, "method", None), reason=reason)


def confirmed_outcome(first: str, second: str) -> Outcome:
    """The intersection-union rule for one metric judged on a first look and a confirmation look (fresh
    sessions): a regression stands only when both looks found it; a regression found by one look only
    is ``inconclusive``; otherwise the second look's outcome. The false-alarm probability is at most
    that of one look at the item's level (Berger 1982, intersection-union tests), so confirming spends
    no extra level. Both gates call it: the stored gate (:func:`pytest_aaco.verdict.finish.confirm`) and
    side by side (wall time, in-process and traced-child device time)."""
    if (first == REGRESSION) != (second == REGRESSION):
        return INCONCLUSIVE
    return Outcome(second)


class Judged(Protocol):
    """What :func:`fails` reads of a judged record: its outcome, and whether it found a regression
    besides its outcome (memory growth, a p99 regression). :class:`~pytest_aaco.records.Verdict` and
    :class:`~pytest_aaco.passes.coldstart.ColdStartVerdict` are such records."""

    @property
    def outcome(self) -> Outcome: ...

    @property
    def regressed_besides(self) -> bool: ...


#: no opt-in: only regressions and errors fail (the cold-start gate's rule, and the default)
NO_OPT_IN = GateSettings()


def fails(judged: Judged, settings: GateSettings = NO_OPT_IN) -> bool:
    """Whether the item must fail for *judged*: a regression (its outcome, or memory or p99 growth
    besides it) and an error (an unreadable baseline) always; an improvement only with
    ``settings.fail_on_improvement`` (``--aaco-fail-on-improvement``) and an inconclusive result only
    with ``settings.strict_inconclusive`` (``--aaco-strict-inconclusive``), or with ``settings.fail_blind``
    (``--aaco-fail-blind``) when it is blind or was withheld for CPU contention or a machine speed change (not
    judged); no baseline
    only with ``settings.require_baseline`` (``--aaco-require-baseline``). Every other outcome
    (no regression, no baseline, another fingerprint, saved, unchanged, new) passes."""
    if judged.outcome in (REGRESSION, ERROR) or judged.regressed_besides:
        return True
    if judged.outcome == IMPROVEMENT and settings.fail_on_improvement:
        return True
    if judged.outcome == NO_BASELINE and getattr(settings, "require_baseline", False):  # --aaco-require-baseline
        return True
    if judged.outcome == INCONCLUSIVE and getattr(settings, "fail_blind", False):  # --aaco-fail-blind
        if not_judged_reason(judged) is not None:  # withheld (contention, machine speed), blind, not comparable
            return True
    return judged.outcome == INCONCLUSIVE and settings.strict_inconclusive
