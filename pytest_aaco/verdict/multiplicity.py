"""Multiplicity: batch (Benjamini-Hochberg) and online (LOND) false-discovery-rate control over a session's
items (no pytest, no I/O).

References:

* Benjamini, Y. & Hochberg, Y. (1995). "Controlling the false discovery rate." JRSS B 57, 289-300.
* Javanmard, A. & Montanari, A. (2018). "Online rules for control of false discovery rate and
  false discovery proportion." Annals of Statistics 46(2), 526-554 (LOND).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.verdict.stats import _as_1d, _check_prob

# ---------------------------------------------------------------------------------------------
# Multiplicity: batch (BH) and online (LOND) false-discovery-rate control
# ---------------------------------------------------------------------------------------------


def benjamini_hochberg(pvalues: npt.ArrayLike, q: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Benjamini-Hochberg step-up procedure over one family of p-values.

    Args:
        pvalues: 1-D array-like of p-values in [0, 1], shape ``(m,)``; may be empty.
        q: target false discovery rate, ``0 < q <= 1``.

    Returns:
        ``(rejected, adjusted)``, both shape ``(m,)`` in the input order: *adjusted* are the BH
        adjusted p-values (``min_{j>=i} p_(j) m / j``, capped at 1; equal to
        ``scipy.stats.false_discovery_control(p, method="bh")``) and ``rejected = adjusted <= q``,
        which is exactly the set the step-up rule rejects. Under independence or positive
        regression dependence the expected proportion of false rejections is at most ``q``.

    Raises:
        ValueError: *pvalues* is not 1-D, holds NaN or values outside [0, 1], or *q* is outside (0, 1].

    Source: Benjamini & Hochberg (1995).
    """
    if not 0.0 < q <= 1.0:
        raise ValueError(f"q must lie in (0, 1], got {q!r}")
    p = _as_1d(pvalues, "p-values", 0)
    if np.any((p < 0.0) | (p > 1.0)):
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    if m == 0:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=float)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted_sorted = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    adjusted = np.empty(m, dtype=float)
    adjusted[order] = adjusted_sorted
    return adjusted <= q, adjusted


class LondFdr:
    """Online FDR control with LOND ("significance Levels based On Number of Discoveries").

    The i-th test (1-based) is run at level ``alpha_i = alpha * gamma_i * (D_{i-1} + 1)`` where
    ``D_{i-1}`` is the number of discoveries among the first ``i - 1`` tests and
    ``gamma_i = 1/m`` for ``i <= m`` (``m`` = tests announced for the session), ``0`` beyond.
    Each decision is final when made, so a pytest item can fail at its own time while the
    session's FDR stays at most *alpha* for independent p-values. If fewer than ``m`` tests
    are run the procedure is only more conservative. Levels never exceed *alpha*.

    Usage: ``level = lond.next_level(); rejected = p <= level; lond.record(rejected)``.

    Raises ValueError for ``alpha`` outside (0, 1) or ``m < 1``.

    Source: Javanmard & Montanari, "Online rules for control of false discovery rate and
    false discovery proportion", Annals of Statistics 46(2), 2018.
    """

    def __init__(self, alpha: float, m: int) -> None:
        _check_prob(alpha, "alpha")
        if isinstance(m, bool) or int(m) != m or m < 1:
            raise ValueError(f"m (number of tests announced) must be an integer >= 1, got {m!r}")
        self.alpha = float(alpha)
        self.m = int(m)
        self._tests = 0
        self._discoveries = 0

    @property
    def tests(self) -> int:
        """Number of tests recorded so far."""
        return self._tests

    @property
    def discoveries(self) -> int:
        """Number of rejections recorded so far."""
        return self._discoveries

    def next_level(self) -> float:
        """Significance level for the next test; does not advance the state."""
        if self._tests >= self.m:
            return 0.0
        return self.alpha * (self._discoveries + 1) / self.m

    def record(self, rejected: bool) -> None:
        """Record the outcome of the test just run at :meth:`next_level`; advances to the next test."""
        self._tests += 1
        if rejected:
            self._discoveries += 1

    def to_dict(self) -> JSONDict:
        """JSON-ready state: method, alpha, m, tests, discoveries, next_level."""
        return {
            "method": "LOND",
            "alpha": self.alpha,
            "m": self.m,
            "tests": self._tests,
            "discoveries": self._discoveries,
            "next_level": self.next_level(),
        }

    def __repr__(self) -> str:
        return (
            f"LondFdr(alpha={self.alpha!r}, m={self.m!r}, tests={self._tests}, "
            f"discoveries={self._discoveries})"
        )
