"""How every report writes a change: the one per-cent helper, and the bound a rule compared.

* :func:`pct`: a ratio as a signed per cent (``1.102`` -> ``+10.2%``); every per cent a user sees
  (messages, tables, the HTML, ``aaco diff``, cold start) is written by it.
* :func:`limit`: a threshold (a fraction) as a per cent without trailing zeros (``0.1`` -> ``10%``).
* :func:`bound_text`: the one-sided bound the outcome rule (:func:`pytest_aaco.verdict.outcome.outcome_of`)
  compared, with its side and what it was compared with: ``upper bound +7.7% < 10%`` (no
  regression), ``upper bound +10.6% >= 10%`` (why not), ``lower bound +4.1% > 0, +12.0% >= 10%``
  (a regression: significant, and the estimate at or beyond the threshold).

No imports beyond the standard library: every layer may use it.
"""

from __future__ import annotations

import math


def pct(ratio: object, digits: int = 1) -> str:
    """*ratio* (current/baseline) as a signed change with *digits* decimals (``1.102`` -> ``+10.2%``,
    ``0.5`` -> ``-50.0%``); ``-`` for None, a non-number or a non-finite value."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio):
        return "-"
    return f"{(ratio - 1) * 100:+.{digits}f}%"


def limit(threshold: float) -> str:
    """A threshold (fraction) as a per cent without trailing zeros: ``0.1`` -> ``10%``, ``0.025`` -> ``2.5%``."""
    return f"{threshold * 100:.2f}".rstrip("0").rstrip(".") + "%"


def bound_text(ratio: float, lower: float | None, upper: float | None, threshold: float) -> str:
    """The bound the outcome rule compared, with its side (ratios current/baseline, *threshold* a
    fraction): the figures of a regression (one-sided lower bound above no change, and the estimate
    at or beyond *threshold*) give ``lower bound +4.1% > 0, +12.0% >= 10%``; otherwise the one-sided
    upper bound against *threshold*, ``upper bound +7.7% < 10%`` (no regression) or ``upper bound
    +10.6% >= 10%`` (not shown to be below it). '' when the verdict stored no bound (records written
    before bounds were stored)."""
    if lower is not None and lower > 1 and ratio - 1 >= threshold:
        return f"lower bound {pct(lower)} > 0, {pct(ratio)} >= {limit(threshold)}"
    if upper is None:
        return ""
    relation = "<" if upper - 1 < threshold else ">="
    return f"upper bound {pct(upper)} {relation} {limit(threshold)}"


def kept_text(fraction: float | None) -> str:
    """The rounds a stored wall-time level keeps, in words: ``fastest quarter of rounds`` for 0.25,
    ``fastest 40% of rounds`` otherwise, ``rounds`` for None (all of them)."""
    if not fraction:
        return "rounds"
    return "fastest quarter of rounds" if abs(fraction - 0.25) < 1e-9 else f"fastest {fraction:.0%} of rounds"
