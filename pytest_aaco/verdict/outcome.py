"""The outcome rule of a test: regression, improvement, no regression or inconclusive.

One rule for every metric and both gates (stored baselines and side by side); no pytest, no I/O.
"""

from __future__ import annotations

from typing import Protocol

from pytest_aaco.records import Outcome

REGRESSION = Outcome.REGRESSION
IMPROVEMENT = Outcome.IMPROVEMENT
NO_REGRESSION = Outcome.NO_REGRESSION
INCONCLUSIVE = Outcome.INCONCLUSIVE
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
