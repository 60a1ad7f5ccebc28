"""Paired statistics for side-by-side comparisons (no pytest, no I/O).

The unit is the **cycle** of an interleaved measurement (:mod:`pytest_aaco.measure.interleave`): one block
of the baseline side A and one of the candidate side B, in balanced random order. Its summary is
``d = mean ln(B block latency ms) - mean ln(A block latency ms)``, so ``exp(mean d)`` estimates
the latency ratio B / A and ``d > 0`` means the candidate is slower.

* :func:`paired_t`: the one-sample t-test on ``d`` (equal to ``scipy.stats.ttest_1samp(d, 0)``),
  with an optional second level for the session: on device EPs each fresh pair of sessions has its
  own algorithm choices (cuDNN/MIOpen search, TensorRT tactics), so the cycles of one session pair
  share an offset, and the standard error must contain the spread of those offsets.
* :func:`signed_rank`: the Wilcoxon signed-rank test on ``d`` with the Hodges-Lehmann estimate and
  its distribution-free confidence interval: robust to a cycle that a neighbour process hit.
* :class:`SequentialPlan`: the looks at the data while the result is inconclusive (cycles are
  added in steps, as Chromium Pinpoint adds attempts), with the significance level of each look
  taken from an alpha-spending function so the repeated looks keep the overall false-alarm
  probability at or below alpha.

References:

* Student (1908); the paired t-test, e.g. Hollander, Wolfe & Chicken, *Nonparametric
  Statistical Methods*, 3rd ed., Wiley 2014, ch. 3 (signed-rank test, section 3.1; Hodges-Lehmann
  estimator and its confidence interval from the Walsh averages, sections 3.2-3.3).
* Hodges, J. L. & Lehmann, E. L. (1963). "Estimates of location based on rank tests."
  Ann. Math. Statist. 34, 598-611.
* Lan, K. K. G. & DeMets, D. L. (1983). "Discrete sequential boundaries for clinical trials."
  Biometrika 70, 659-663 (alpha-spending functions; the O'Brien-Fleming-type and, with
  Kim & DeMets 1987, the Pocock-type spending functions).
* Jennison, C. & Turnbull, B. W. (2000). *Group Sequential Methods with Applications to
  Clinical Trials*, Chapman & Hall, ch. 7 (spending functions) and ch. 9 (repeated confidence
  intervals).
* Searle, Casella & McCulloch (1992). *Variance Components*, ch. 3 (one-way random effects,
  the between-session variance).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.verdict.stats import SE_FLOOR, Comparison, _as_1d, _check_prob

__all__ = [
    "EXACT_SIGNED_RANK_MAX_N",
    "SequentialPlan",
    "SignedRank",
    "obrien_fleming_spending",
    "paired_t",
    "pocock_spending",
    "signed_rank",
    "signed_rank_null_cdf",
]

#: up to this many cycles the signed-rank null distribution is exact; beyond, normal approximation
EXACT_SIGNED_RANK_MAX_N = 300
#: :func:`paired_t` weighs its session prior only while the moment estimate of the between-pair sd
#: is at most this many times the prior sd (studies/device_session_prior.py: with the prior weighted
#: at any size, sessions differing by 2% gave 13% false regressions per look, 3% with the data alone)
PRIOR_CONFLICT = 3.0


# ---------------------------------------------------------------------------------------------
# Paired t-test, optionally with the session as a second level
# ---------------------------------------------------------------------------------------------


def paired_t(d_by_session: Sequence[npt.ArrayLike], session_sd: float = 0.0, session_df: float = 0.0) -> Comparison:
    """One-sided paired t-test of per-cycle log-ratios, with the session pair as a level.

    Args:
        d_by_session: one 1-D array-like of per-cycle ``d`` (ln units) per session pair, shape
            ``(n_s,)`` each, every pair with >= 2 cycles. With one pair this is the classic paired
            t-test: ``estimate = mean(d)``, ``se = sd(d)/sqrt(n)``, ``df = n - 1``, and the
            p-values equal ``scipy.stats.ttest_1samp(d, 0, alternative=...)``.
        session_sd: prior sd (ln units) of the offset a fresh session pair adds to all its cycles
            (0 on CPU, where sessions make the same choices). Used with two or more pairs.
        session_df: the weight of that prior, in pseudo session pairs (0: the prior is only a floor).

    With ``S >= 2`` session pairs (a one-way random-effects model, cycles within session pairs):
    ``estimate`` is the mean of the pairs' means ``m_s``; the within-pair variance ``w`` is pooled
    (df ``sum(n_s - 1)``); the between-pair variance is ``tau^2 = max(var(m_s) - w * mean(1/n_s),
    session_sd^2)`` (moment estimate, floored at the prior); ``se^2 = w * sum(1/n_s) / S^2 +
    tau^2 / S``. The df are the within df when the prior sets ``tau``, else the
    Welch-Satterthwaite df of the two terms (the between term with ``S - 1`` df).

    With ``session_df = d0 > 0`` and a moment estimate above the prior, ``tau^2`` is instead the
    weighted mean ``(d0 * session_sd^2 + (S - 1) * tau_hat^2) / (d0 + S - 1)`` with ``d0 + S - 1``
    df for the between term: the prior counts as ``d0`` earlier session pairs, so two pairs that
    happen to disagree do not leave the between term with a single df (a t quantile of 31.8 at
    1%). This is the moderated variance of Smyth (2004), "Linear models and empirical Bayes
    methods for assessing differential expression in microarray experiments", Stat. Appl. Genet.
    Mol. Biol. 3(1), with the prior from measured sessions rather than fitted. A moment estimate
    over :data:`PRIOR_CONFLICT` times the prior sd is taken as the prior being wrong for these
    sessions, and the data alone decide (``S - 1`` df), as without a weight.

    Returns a :class:`pytest_aaco.verdict.stats.Comparison` with ``method="paired-t"`` (or
    ``"paired-t, session level"``), ``n_current = n_baseline = total cycles``; its ``ci``,
    ``upper`` and ``mde`` give ratio bounds and the minimum detectable effect.

    Raises ValueError for no session pair, a pair with fewer than 2 cycles, NaN/inf values or a
    negative *session_sd* or *session_df*.

    Source: Student's paired t-test; the between-session term as in Searle, Casella & McCulloch
    (1992), ch. 3, and Kalibera & Jones (ISMM 2013) for benchmarking.
    """
    import scipy.stats

    groups = [_as_1d(d, f"session pair {i} log-ratios", 2) for i, d in enumerate(d_by_session)]
    if not groups:
        raise ValueError("paired_t needs at least one session pair of cycles")
    if not (math.isfinite(session_sd) and session_sd >= 0):
        raise ValueError(f"session_sd must be finite and >= 0, got {session_sd!r}")
    if not (math.isfinite(session_df) and session_df >= 0):
        raise ValueError(f"session_df must be finite and >= 0, got {session_df!r}")
    sizes = np.array([g.size for g in groups], dtype=float)
    means = np.array([g.mean() for g in groups])
    df_within = float(np.sum(sizes - 1))
    within = float(sum(np.sum((g - g.mean()) ** 2) for g in groups)) / df_within
    n_total = int(sizes.sum())
    if len(groups) == 1:
        estimate = float(means[0])
        se = max(math.sqrt(within / sizes[0]), SE_FLOOR)
        df, method = df_within, "paired-t"
    else:
        s = len(groups)
        estimate = float(means.mean())
        within_term = within * float(np.sum(1.0 / sizes)) / s**2
        tau_hat_sq = max(float(np.var(means, ddof=1)) - within * float(np.mean(1.0 / sizes)), 0.0)
        tau_sq = max(tau_hat_sq, session_sd**2)
        df_between = float(s - 1)
        if session_sd**2 < tau_hat_sq <= (PRIOR_CONFLICT * session_sd) ** 2 and session_df > 0:
            tau_sq = (session_df * session_sd**2 + (s - 1) * tau_hat_sq) / (session_df + s - 1)
            df_between = session_df + s - 1
        between_term = tau_sq / s
        se = max(math.sqrt(within_term + between_term), SE_FLOOR)
        if tau_hat_sq > session_sd**2:
            denom = within_term**2 / df_within + between_term**2 / df_between
            df = (within_term + between_term) ** 2 / denom if denom > 0 else df_within
        else:
            df = df_within
        method = "paired-t, session level"
    t = estimate / se
    p_slower, p_faster = float(scipy.stats.t.sf(t, df)), float(scipy.stats.t.cdf(t, df))
    return Comparison(method, estimate, se, float(df), p_slower, p_faster, n_total, n_total)


# ---------------------------------------------------------------------------------------------
# Wilcoxon signed-rank test with the Hodges-Lehmann estimate and interval
# ---------------------------------------------------------------------------------------------


def signed_rank_null_cdf(n: int) -> np.ndarray:
    """``P(T+ <= k)`` for ``k = 0 .. n(n+1)/2`` under H0 (no ties), shape ``(n(n+1)/2 + 1,)``.

    ``T+`` is the sum of the ranks of the positive values among ``n`` symmetric-about-0 values;
    its distribution is that of ``sum(i * B_i)``, ``B_i`` fair coins, computed exactly by
    multiplying the generating polynomials ``(1 + x^i) / 2``. Raises ValueError for ``n < 1``.
    Source: Hollander, Wolfe & Chicken (2014), section 3.1.
    """
    if n < 1:
        raise ValueError(f"the signed-rank distribution needs n >= 1, got {n}")
    top = n * (n + 1) // 2
    counts = np.zeros(top + 1, dtype=float)
    counts[0] = 1.0
    for i in range(1, n + 1):
        counts[i:] = counts[i:] + counts[:-i].copy()
        counts *= 0.5  # keep the numbers small: the sum stays 1
    return np.minimum(np.cumsum(counts), 1.0)


def _signed_rank_k(n: int, alpha: float) -> int:
    """The largest ``k`` with ``P(T+ <= k - 1) <= alpha`` (0 when none): the Walsh-average index of
    the one-sided bound at level ``1 - alpha``."""
    if n <= EXACT_SIGNED_RANK_MAX_N:
        cdf = signed_rank_null_cdf(n)
        return int(np.searchsorted(cdf, alpha, side="right"))  # count of k-1 with cdf <= alpha
    import scipy.stats

    mean, sd = n * (n + 1) / 4.0, math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    return max(int(math.floor(mean + 0.5 + sd * float(scipy.stats.norm.ppf(alpha)))), 0)


@dataclass(frozen=True)
class SignedRank:
    """Wilcoxon signed-rank test and Hodges-Lehmann interval of per-cycle log-ratios ``d``.

    ``estimate``: Hodges-Lehmann estimate (median of the Walsh averages), ln units; ``ci_low``,
    ``ci_high``: two-sided bounds at ``level`` (ln; ``-inf``/``inf`` when ``n`` is too small for
    that level); ``p_slower``/``p_faster``: one-sided p-values; ``n``: cycles.
    """

    estimate: float
    ci_low: float
    ci_high: float
    level: float
    p_slower: float
    p_faster: float
    n: int
    walsh: np.ndarray

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate)

    def upper(self, alpha: float) -> float:
        """One-sided upper bound of the ratio at confidence ``1 - alpha`` (``inf`` when too few cycles)."""
        _check_prob(alpha, "alpha")
        k = _signed_rank_k(self.n, alpha)
        return math.inf if k < 1 else math.exp(float(self.walsh[self.walsh.size - k]))

    def lower(self, alpha: float) -> float:
        """One-sided lower bound of the ratio at confidence ``1 - alpha`` (0 when too few cycles)."""
        _check_prob(alpha, "alpha")
        k = _signed_rank_k(self.n, alpha)
        return 0.0 if k < 1 else math.exp(float(self.walsh[k - 1]))

    def to_dict(self) -> JSONDict:
        """JSON-ready figures (ln units, and the ratio)."""
        return {"method": "wilcoxon signed-rank, Hodges-Lehmann", "estimate": self.estimate, "ratio": self.ratio,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "level": self.level,
                "p_slower": self.p_slower, "p_faster": self.p_faster, "n": self.n}


def signed_rank(d: npt.ArrayLike, level: float = 0.95) -> SignedRank:
    """Wilcoxon signed-rank test of ``d`` against 0, with the Hodges-Lehmann estimate and CI.

    Args:
        d: 1-D array-like of per-cycle log-ratios, >= 2 values.
        level: confidence of the two-sided interval, in (0, 1).

    ``T+`` counts the Walsh averages ``(d_i + d_j)/2, i <= j`` above 0 (equal to the sum of the
    positive ranks when no two ``|d|`` tie and none is 0; timings as floats make ties vanishingly
    rare, and a zero counts half). ``p_slower = P(T+ >= observed)``, exact up to
    :data:`EXACT_SIGNED_RANK_MAX_N` cycles (equal to ``scipy.stats.wilcoxon(d,
    alternative="greater", method="exact")``), normal approximation with continuity correction
    beyond. The interval is ``[W_(k), W_(M+1-k)]`` of the sorted Walsh averages, ``M = n(n+1)/2``,
    with ``k`` the largest index with ``P(T+ <= k-1) <= (1-level)/2``: the set of shifts the
    two-sided test does not reject (Hollander, Wolfe & Chicken 2014, section 3.3).

    Raises ValueError for fewer than 2 values, NaN/inf, or *level* outside (0, 1).
    Source: Wilcoxon (1945); Hodges & Lehmann (1963).
    """
    x = _as_1d(d, "per-cycle log-ratios", 2)
    _check_prob(level, "level")
    n = x.size
    i, j = np.triu_indices(n)
    walsh = np.sort((x[i] + x[j]) / 2.0)
    top = walsh.size
    positive = float(np.count_nonzero(walsh > 0) + 0.5 * np.count_nonzero(walsh == 0))
    if n <= EXACT_SIGNED_RANK_MAX_N:
        cdf = signed_rank_null_cdf(n)
        # P(T+ >= t) = P(T+ <= M - t) by symmetry; a half-integer t (a zero) rounds to the safe side
        p_slower = float(cdf[int(math.floor(top - positive))])
        p_faster = float(cdf[int(math.floor(positive))])
    else:
        import scipy.stats

        mean, sd = top / 2.0, math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
        p_slower = float(scipy.stats.norm.sf((positive - 0.5 - mean) / sd))
        p_faster = float(scipy.stats.norm.cdf((positive + 0.5 - mean) / sd))
    k = _signed_rank_k(n, (1.0 - level) / 2.0)
    lo = float(walsh[k - 1]) if k >= 1 else -math.inf
    hi = float(walsh[top - k]) if k >= 1 else math.inf
    return SignedRank(float(np.median(walsh)), lo, hi, level, min(p_slower, 1.0), min(p_faster, 1.0), n, walsh)


# ---------------------------------------------------------------------------------------------
# Repeated looks: alpha spending
# ---------------------------------------------------------------------------------------------


def obrien_fleming_spending(t: float, alpha: float) -> float:
    """Lan-DeMets O'Brien-Fleming-type spending function for a one-sided level *alpha*:
    ``2 - 2 Phi(z_{1-alpha/2} / sqrt(t))`` at information fraction ``t`` in (0, 1]; 0 at ``t = 0``
    and *alpha* at ``t = 1``. Spends almost nothing early, so early looks need overwhelming
    evidence and the last look keeps nearly all of alpha. Source: Lan & DeMets (1983), eq. (2.3)."""
    import scipy.stats

    _check_prob(alpha, "alpha")
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    return float(2.0 * scipy.stats.norm.sf(scipy.stats.norm.isf(alpha / 2.0) / math.sqrt(t)))


def pocock_spending(t: float, alpha: float) -> float:
    """Pocock-type spending function ``alpha * ln(1 + (e - 1) t)``: spends evenly across the looks.
    Source: Lan & DeMets (1983); Kim & DeMets (1987); Jennison & Turnbull (2000), section 7.2."""
    _check_prob(alpha, "alpha")
    if t <= 0:
        return 0.0
    return float(alpha * math.log1p((math.e - 1.0) * min(t, 1.0)))


@dataclass(frozen=True)
class SequentialPlan:
    """When to look at the cycles, and at which level each look judges.

    ``looks``: cumulative cycle counts at which the data are tested, increasing, e.g.
    ``(10, 20, 30, 40)``; the last is the maximum number of cycles, and ``len(looks)`` the maximum
    number of looks. The information fraction of look ``k`` is ``looks[k] / looks[-1]``.
    ``spending``: ``"pocock"`` (default) or ``"obrien-fleming"``, the spending function ``a``.

    * The regression claim at look ``k`` uses the level ``a(t_k) - a(t_{k-1})`` of the item's
      level (its LOND level). Pocock-type spending is the default: a CI job wants a clear
      slowdown called at the first look, and with 10 cycles the t-test has only 9 df, whose heavy
      tail the O'Brien-Fleming-type first-look level (about 1e-7 of 0.01) would turn into a
      requirement of t > 20; the price is a smaller level at the last look (0.18 alpha of 4).
    * The no-regression claim (the one-sided upper bound of the slowdown below the threshold)
      uses the increments of the same spending function of its own alpha (0.05), so stopping early
      as "no regression" is as honest as stopping early as "regression" (repeated confidence
      bounds, Jennison & Turnbull 2000, ch. 9).

    Each look is tested at its increment, so by the union bound the probability of any false claim
    over all looks is at most the spent total (the Bonferroni form of the spending rule: exact
    group-sequential boundaries, which use the correlation of the looks, would be slightly less
    conservative). Looks not taken (the time budget ran out) leave their alpha unspent.
    Source: Lan & DeMets (1983); Jennison & Turnbull (2000), ch. 7.
    """

    looks: tuple[int, ...]
    spending: str = "pocock"

    def __post_init__(self) -> None:
        if self.spending not in SPENDING:
            raise ValueError(f"spending must be one of {', '.join(SPENDING)}, got {self.spending!r}")
        looks = tuple(int(n) for n in self.looks)
        if not looks or looks[0] < 2 or any(b <= a for a, b in zip(looks, looks[1:], strict=False)):
            raise ValueError(f"looks must be increasing cycle counts starting at >= 2, got {self.looks}")
        object.__setattr__(self, "looks", looks)

    @classmethod
    def steps(cls, first: int, step: int, maximum: int, spending: str = "pocock") -> SequentialPlan:
        """Looks at *first*, *first* + *step*, ... up to *maximum* cycles (the last look at *maximum*)."""
        if first < 2 or step < 1 or maximum < first:
            raise ValueError(f"need first >= 2, step >= 1 and maximum >= first, got {first}, {step}, {maximum}")
        looks = list(range(first, maximum + 1, step))
        if looks[-1] != maximum:
            looks.append(maximum)
        return cls(tuple(looks), spending)

    def fraction(self, look: int) -> float:
        """Information fraction of look *look* (0-based)."""
        return self.looks[look] / self.looks[-1]

    def level(self, look: int, alpha: float) -> float:
        """Level of a test at look *look* (0-based) spending *alpha*: ``a(t_k) - a(t_{k-1})``."""
        spend = SPENDING[self.spending]
        before = spend(self.fraction(look - 1), alpha) if look else 0.0
        return max(spend(self.fraction(look), alpha) - before, 1e-12)


#: spending functions by name, for :class:`SequentialPlan`
SPENDING = {"pocock": pocock_spending, "obrien-fleming": obrien_fleming_spending}
