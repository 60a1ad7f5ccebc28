"""Within-run diagnostics and history summaries: drift inside a run, the spread of its rounds, the offset
between runs, and a baseline history's figures (no pytest, no I/O). Conventions as in
:mod:`pytest_aaco.verdict.stats` (latencies in ms, round log-means, the natural-log scale).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.verdict.stats import _as_1d, welch_rounds

# ---------------------------------------------------------------------------------------------
# Within-run diagnostics and history summaries
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DriftResult:
    """Drift within one run: second half of the rounds against the first half.

    Attributes:
        ratio: ``exp(mean(second half) - mean(first half))`` of round log-means.
        p_value: two-sided Welch p-value between the halves.
    """

    ratio: float
    p_value: float

    def to_dict(self) -> JSONDict:
        """JSON-ready dict of all fields."""
        return {"ratio": float(self.ratio), "p_value": float(self.p_value)}


def drift(round_log_means: npt.ArrayLike) -> DriftResult | None:
    """Did latency drift during a run (thermal throttling, a neighbour starting)?

    Args:
        round_log_means: 1-D array-like of round log-means in the order the rounds ran, shape ``(K,)``.

    Returns:
        None when ``K < 4``; otherwise a :class:`DriftResult` comparing the last ``K // 2`` rounds
        with the first ``K // 2`` (for odd K the middle round belongs to neither half), with the
        two-sided p-value of :func:`welch_rounds`.

    Raises:
        ValueError: input not 1-D or holds NaN/inf.

    Source: Welch (1947); halves-split as a simple stationarity check, cf. Kalibera & Jones,
    "Rigorous benchmarking in reasonable time" (ISMM 2013).
    """
    x = _as_1d(round_log_means, "round log-means", 0)
    if x.size < 4:
        return None
    half = x.size // 2
    cmp = welch_rounds(x[x.size - half :], x[:half])
    p_two = min(1.0, 2.0 * min(cmp.p_slower, cmp.p_faster))
    return DriftResult(ratio=cmp.ratio, p_value=p_two)


def _median_ignoring_nan(values: np.ndarray) -> float:
    finite = values[~np.isnan(values)]
    return float(np.median(finite)) if finite.size else float("nan")


def spread_ratio(current_round_log_means: npt.ArrayLike, history_round_sds: npt.ArrayLike) -> float | None:
    """How noisy this run's rounds are compared with earlier runs' rounds.

    Args:
        current_round_log_means: 1-D array-like, this run's round log-means.
        history_round_sds: 1-D array-like, one within-run sd of round log-means per earlier run
            (as ``summarize_history(...)["round_sds"]``); NaN entries (runs with < 2 rounds) are ignored.

    Returns:
        ``sd(current, ddof=1) / median(history_round_sds)``, or None when the history has no
        finite entry, *current* has fewer than 2 values, or the median is 0. A value well above 1
        says this run was noisier than usual (e.g. a busy runner).

    Raises:
        ValueError: an input is not 1-D, or *current* holds NaN/inf.

    Source: descriptive; a ratio of standard deviations (cf. Kalibera & Jones 2013 on
    comparing variation between and within runs).
    """
    cur = _as_1d(current_round_log_means, "current round log-means", 0)
    hist = np.asarray(history_round_sds, dtype=float)
    if hist.ndim != 1:
        raise ValueError(f"history round sds must be 1-D, got an array of shape {hist.shape}")
    if cur.size < 2:
        return None
    med = _median_ignoring_nan(hist)
    if not math.isfinite(med) or med == 0.0:
        return None
    return float(np.std(cur, ddof=1)) / med


def run_offset_sd(runs: Sequence[Sequence[float] | np.ndarray]) -> float:
    """The sd (ln units) of the per-run offset, estimated from a history of runs.

    Args:
        runs: one sequence of round log-means per earlier run; runs with < 2 rounds are skipped.

    Returns:
        The one-way random-effects (ANOVA) estimate ``sqrt(max(var(run means) - mean(s_i^2 / K_i), 0))``:
        the spread of run means beyond what their rounds' own noise explains. NaN with fewer than 2 runs.

    Source: method-of-moments estimator of the between-group variance (Searle, Casella &
    McCulloch, "Variance Components", 1992, ch. 3); Kalibera & Jones (ISMM 2013).
    """
    arrays = [np.asarray(r, dtype=float) for r in runs if len(r) >= 2]
    if len(arrays) < 2:
        return float("nan")
    means = np.array([a.mean() for a in arrays])
    within = float(np.mean([np.var(a, ddof=1) / a.size for a in arrays]))
    return math.sqrt(max(float(np.var(means, ddof=1)) - within, 0.0))


def summarize_history(runs: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Summaries of a baseline history.

    Args:
        runs: one sequence of round log-means per earlier run (``H`` runs); every run needs at
            least one round.

    Returns:
        ``{"run_means": ndarray (H,), "round_sds": ndarray (H,), "between_run_sd": float,
        "within_run_sd": float}`` where *run_means* are the per-run means of round log-means,
        *round_sds* the per-run sds of round log-means (ddof=1; NaN for a run with < 2 rounds),
        *between_run_sd* the sd of *run_means* (ddof=1; NaN if ``H < 2``) and *within_run_sd* the
        median of the finite *round_sds* (NaN if there is none). Comparing the two sds tells
        whether run-to-run drift dominates (then only :func:`prediction_interval_test` is calibrated).

    Raises:
        ValueError: a run is empty or holds NaN/inf.

    Source: descriptive; the between/within split of a one-way random-effects model
    (Kalibera & Jones 2013).
    """
    arrays = [_as_1d(r, f"history run {i}", 1) for i, r in enumerate(runs)]
    run_means = np.array([a.mean() for a in arrays], dtype=float)
    round_sds = np.array([np.std(a, ddof=1) if a.size >= 2 else np.nan for a in arrays], dtype=float)
    between = float(np.std(run_means, ddof=1)) if run_means.size >= 2 else float("nan")
    return {
        "run_means": run_means,
        "round_sds": round_sds,
        "between_run_sd": between,
        "within_run_sd": _median_ignoring_nan(round_sds),
    }


def common_offset(log_changes: Sequence[float], min_items: int = 3, agreement: float = 0.8) -> float | None:
    """The slowdown (fraction) shared by a session's items: the machine's change of speed.

    Args:
        log_changes: per item already judged in this session, its raw ``ln(current / baseline)``.
        min_items: fewer finite values than this give None.
        agreement: the fraction of items that must share the sign of the median.

    Returns:
        ``exp(median) - 1`` when at least *min_items* items are given and at least *agreement* of
        them moved in the median's direction; None otherwise (no shared offset). A model change
        slows one item; a machine change moves them all, which is what this looks for.

    Source: the sign test's idea (Conover, *Practical Nonparametric Statistics*, 3rd ed., 1999,
    section 3.4) used as a descriptive rule, not a test: the verdict only withholds raw
    regressions on it, it never declares one.
    """
    values = np.asarray([v for v in log_changes if math.isfinite(v)], dtype=float)
    if values.size < max(min_items, 1):
        return None
    med = float(np.median(values))
    if med == 0.0 or float(np.mean(np.sign(values) == np.sign(med))) < agreement:
        return None
    return math.expm1(med)
