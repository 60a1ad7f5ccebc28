"""Pure statistical functions for performance verdicts (no pytest, no I/O).

Its neighbours: :mod:`pytest_aaco.verdict.multiplicity` (BH and LOND), :mod:`pytest_aaco.verdict.bootstrap`
(tail latency) and :mod:`pytest_aaco.verdict.run_stats` (within-run diagnostics, history summaries).

Conventions used throughout:

* Latencies are in milliseconds (ms).
* A *round* is a block of consecutive iterations. Its summary is the mean of ``ln(latency_ms)``,
  called the *round log-mean*. Rounds, not iterations, are the unit of every test here:
  consecutive iterations are autocorrelated, and runs drift by more than iterations vary
  (studies/RESULTS.md).
* A *run* summary is the mean of its round log-means; the stored gate's wall time keeps only the
  run's fastest quarter of rounds for it (:func:`fastest_rounds`). A baseline *history* is a list
  of earlier runs.
* Estimates are on the natural-log scale: ``ratio = exp(estimate)`` (current / baseline) and
  ``slowdown fraction = ratio - 1``.

References:

* Welch, B. L. (1947). "The generalization of 'Student's' problem when several different
  population variances are involved." Biometrika 34, 28-35.
* Hahn, G. J. & Meeker, W. Q. (1991). *Statistical Intervals*, Wiley, ch. 4 (prediction
  interval for one future observation); Bencher's t-test thresholds
  (https://bencher.dev/docs/explanation/thresholds/).
* Benjamini, Y. & Hochberg, Y. (1995). "Controlling the false discovery rate." JRSS B 57, 289-300.
* Javanmard, A. & Montanari, A. (2018). "Online rules for control of false discovery rate and
  false discovery proportion." Annals of Statistics 46(2), 526-554 (LOND).
* Chen, J. & Revels, J. (2016). "Robust benchmarking in noisy environments." arXiv:1608.04295
  (timing noise on a shared machine only adds time, so the fastest measurements estimate the
  cost best).
* Davison, A. C. & Hinkley, D. V. (1997). *Bootstrap Methods and their Application*, CUP,
  section 3.8 (resampling clustered data).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.records.base import QuantileComparison

__all__ = [
    "SE_FLOOR",
    "Comparison",
    "QuantileComparison",
    "prediction_interval_test",
    "welch_rounds",
]

#: Smallest standard error (ln units) a :class:`Comparison` carries; it keeps ``t = estimate / se``
#: finite when both samples have zero variance (e.g. a quantised timer).
SE_FLOOR = 1e-9


#: the share of a run's rounds the stored gate's wall-time level keeps: its fastest quarter
FASTEST_ROUNDS = 0.25


def fastest_rounds(round_log_means: npt.ArrayLike, fraction: float = FASTEST_ROUNDS) -> np.ndarray:
    """The fastest *fraction* of a run's rounds: its round log-means (ln ms, shape ``(rounds,)``)
    sorted, the lowest ``ceil(fraction x rounds)`` kept (at least 2, at most all of them).

    The stored gate compares runs by the mean of these (a run's *level*) instead of the mean of all its
    rounds. On a shared machine, interference only adds time, in phases of a few seconds that hit some
    rounds of a run and not others; the mean of all rounds carries them, the fastest rounds do not.
    On the 2-core study VM (quiet, ResNet-50, 1 intra-op thread, 10 rounds), 5 saved runs' means
    spread by sd 3.0% and their fastest quarters by 0.3%; a +7.9% slowdown then read +1.5% and
    +20.4% on the mean, +7.9% and +19.7% on the fastest quarter (studies/stored_calibration.py).
    The prediction interval, the pooled and reference-adjusted tests and the test between processes
    compare levels (their unit is the run); a history shorter than ``--aaco-min-history`` is tested by
    :func:`level_test`, the levels' difference with every round's noise, since the spread of the kept
    rounds alone would understate it.
    Source: Chen & Revels (2016), who argue for the minimum; a quarter keeps several rounds, so one
    lucky round does not set the level. Both sides of a comparison keep the same share, so a change
    that slows every iteration moves the level as it moves the mean. Raises ValueError for NaN/inf."""
    x = np.asarray(round_log_means, dtype=float).ravel()
    if x.size and not np.all(np.isfinite(x)):
        raise ValueError("round log-means must be finite")
    keep = min(x.size, max(2, math.ceil(fraction * x.size)))
    return np.sort(x)[:keep]


def _as_1d(values: npt.ArrayLike, name: str, min_len: int) -> np.ndarray:
    """*values* as a finite 1-D float array with at least *min_len* entries, else ValueError."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of numbers, got an array of shape {arr.shape}")
    if arr.size < min_len:
        raise ValueError(f"{name} needs at least {min_len} values, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _check_prob(value: float, name: str) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")


# ---------------------------------------------------------------------------------------------
# Two-sample comparisons on the log scale
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """Result of comparing a current run with its baseline, on the ln(latency) scale.

    Attributes:
        method: ``"welch"`` or ``"prediction-interval"``.
        estimate: point estimate of ``ln(current / baseline)``.
        se: standard error of *estimate* (ln units), at least :data:`SE_FLOOR`.
        df: degrees of freedom of the Student t reference distribution.
        p_slower: one-sided p-value for H1 "current is slower" (``estimate > 0``).
        p_faster: one-sided p-value for H1 "current is faster" (``estimate < 0``).
        n_current: number of current round log-means used.
        n_baseline: number of baseline values used (rounds for Welch, runs for the prediction interval).

    All bounds are *ratios* (current / baseline) obtained as ``exp`` of a t-interval on the log scale.
    """

    method: str
    estimate: float
    se: float
    df: float
    p_slower: float
    p_faster: float
    n_current: int
    n_baseline: int

    @property
    def ratio(self) -> float:
        """Point estimate of current / baseline: ``exp(estimate)``."""
        return math.exp(self.estimate)

    def _tq(self, prob: float) -> float:
        from scipy.stats import t as student_t

        return float(student_t.ppf(prob, self.df))

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """Two-sided confidence bounds of the ratio: ``exp(estimate -/+ t_{(1+level)/2, df} * se)``.

        Raises ValueError unless ``0 < level < 1``.
        """
        _check_prob(level, "level")
        half = self._tq((1.0 + level) / 2.0) * self.se
        return math.exp(self.estimate - half), math.exp(self.estimate + half)

    def upper(self, alpha: float) -> float:
        """One-sided upper ratio bound at confidence ``1 - alpha``: ``exp(estimate + t_{1-alpha,df} se)``.

        Raises ValueError unless ``0 < alpha < 1``.
        """
        _check_prob(alpha, "alpha")
        return math.exp(self.estimate + self._tq(1.0 - alpha) * self.se)

    def lower(self, alpha: float) -> float:
        """One-sided lower ratio bound at confidence ``1 - alpha``: ``exp(estimate - t_{1-alpha,df} se)``.

        Raises ValueError unless ``0 < alpha < 1``.
        """
        _check_prob(alpha, "alpha")
        return math.exp(self.estimate - self._tq(1.0 - alpha) * self.se)

    def mde(self, alpha: float, power: float = 0.8) -> float:
        """Minimum detectable slowdown, as a fraction: ``exp((t_{1-alpha,df} + t_{power,df}) * se) - 1``.

        The smallest true slowdown that a one-sided level-*alpha* test with this standard error
        would detect with probability *power* (normal-theory approximation with t quantiles).
        Report it for inconclusive results instead of guessing. Raises ValueError unless
        *alpha* and *power* lie in (0, 1).
        """
        _check_prob(alpha, "alpha")
        _check_prob(power, "power")
        return math.expm1((self._tq(1.0 - alpha) + self._tq(power)) * self.se)

    def to_dict(self) -> JSONDict:
        """JSON-ready dict: method, estimate, se, df, p_slower, p_faster, n_current, n_baseline, ratio."""
        return {
            "method": self.method,
            "estimate": float(self.estimate),
            "se": float(self.se),
            "df": float(self.df),
            "p_slower": float(self.p_slower),
            "p_faster": float(self.p_faster),
            "n_current": int(self.n_current),
            "n_baseline": int(self.n_baseline),
            "ratio": self.ratio,
        }


def _t_pvalues(estimate: float, se: float, df: float) -> tuple[float, float]:
    """(p_slower, p_faster) of ``t = estimate / se`` against Student t with *df* degrees of freedom."""
    from scipy.stats import t as student_t

    t = estimate / se
    return float(student_t.sf(t, df)), float(student_t.cdf(t, df))


def welch_rounds(current: npt.ArrayLike, baseline: npt.ArrayLike, run_sd: float = 0.0,
                 baseline_runs: int = 1) -> Comparison:
    """Welch's unequal-variance t-test on round log-means, optionally with a run-to-run term.

    Args:
        current: 1-D array-like of this run's round log-means (mean of ln(latency ms) per round), >= 2 values.
        baseline: 1-D array-like of baseline round log-means, >= 2 values.
        run_sd: sd (ln units) of the offset each run (process, session) adds to all its rounds.
            Rounds inside one run cannot show it, so with a short history it comes from a prior or
            from :func:`run_offset_sd`. The variance ``run_sd^2 * (1 + 1/baseline_runs)`` (this
            run's offset, plus the mean offset of the baseline's runs) is added to ``se^2``, and the
            df stay those of the sample terms. 0 gives the classic test.
        baseline_runs: how many runs the *baseline* rounds come from (>= 1).

    Returns:
        A :class:`Comparison` with ``method="welch"``, ``estimate = mean(current) - mean(baseline)``,
        ``se = sqrt(s_c^2/n_c + s_b^2/n_b)`` (sample variances, ddof=1; floored at :data:`SE_FLOOR`) and
        the Welch-Satterthwaite degrees of freedom
        ``df = (v_c + v_b)^2 / (v_c^2/(n_c-1) + v_b^2/(n_b-1))`` with ``v = s^2/n``. When both samples
        have zero variance, df falls back to ``n_c + n_b - 2``. p-values equal
        ``scipy.stats.ttest_ind(current, baseline, equal_var=False, alternative=...)``.

    Raises:
        ValueError: an input is not 1-D, has fewer than 2 values, or holds NaN/inf.

    Note: the rounds of *one* baseline run cannot show run-to-run drift, so against a single
    earlier run the classic test (``run_sd=0``) is anti-conservative on a drifting runner; hence
    the ``run_sd`` term, and :func:`prediction_interval_test` once a history exists.

    Source: Welch (1947); the run term is the between-run variance of a one-way random-effects
    model (Kalibera & Jones, ISMM 2013).
    """
    c = _as_1d(current, "current round log-means", 2)
    b = _as_1d(baseline, "baseline round log-means", 2)
    if not (math.isfinite(run_sd) and run_sd >= 0) or baseline_runs < 1:
        raise ValueError(f"run_sd must be finite and >= 0 and baseline_runs >= 1, got {run_sd}, {baseline_runs}")
    nc, nb = c.size, b.size
    vc = float(np.var(c, ddof=1)) / nc
    vb = float(np.var(b, ddof=1)) / nb
    estimate = float(c.mean() - b.mean())
    se = max(math.sqrt(vc + vb + run_sd**2 * (1 + 1 / baseline_runs)), SE_FLOOR)
    denom = vc * vc / (nc - 1) + vb * vb / (nb - 1)
    df = (vc + vb) ** 2 / denom if denom > 0.0 else float(nc + nb - 2)
    p_slower, p_faster = _t_pvalues(estimate, se, df)
    return Comparison("welch", estimate, se, float(df), p_slower, p_faster, nc, nb)


@dataclass(frozen=True)
class VariancePrior:
    """A scaled inverse-chi-square prior for the run-to-run variance of the items on one runner.

    ``s0_sq``: prior variance (ln units²); ``d0``: its degrees of freedom (``math.inf`` when the
    items' variances look like one common variance); ``items``: how many items it was fitted on.
    """

    s0_sq: float
    d0: float
    items: int

    def moderate(self, s_sq: float, df: float) -> tuple[float, float]:
        """Posterior variance and df: ``((d0 s0² + df s²) / (d0 + df), d0 + df)``; ``(s0², inf)`` for ``d0 = inf``."""
        if math.isinf(self.d0):
            return self.s0_sq, math.inf
        return (self.d0 * self.s0_sq + df * s_sq) / (self.d0 + df), self.d0 + df

    def to_dict(self) -> JSONDict:
        return {"s0_sq": self.s0_sq, "d0": self.d0, "items": self.items}


def level_test(current: npt.ArrayLike, history_runs: Sequence[npt.ArrayLike], run_sd: float = 0.0,
               keep: Callable[[npt.ArrayLike], np.ndarray] = fastest_rounds) -> Comparison:
    """Welch's test with the run term (:func:`welch_rounds`) on run levels: a short history's test.

    *current*: this run's round log-means (ln ms, >= 2); *history_runs*: one 1-D array of round
    log-means per earlier run (>= 1 run, >= 2 rounds in all). The estimate is this run's level minus
    the mean of the earlier runs' levels, a level being the mean of the rounds *keep* keeps
    (:func:`fastest_rounds`); the standard error and df are :func:`welch_rounds`' on every round with the
    run term ``run_sd`` (ln units) over ``len(history_runs)`` runs, so the noise of the rounds, slow
    phases included, stays in the interval while the slow phases leave the estimate. Returns a
    :class:`Comparison` with ``method="welch"``. Raises ValueError as :func:`welch_rounds` does.
    """
    runs = [a for r in history_runs if (a := np.asarray(r, dtype=float).ravel()).size]
    if not runs:
        raise ValueError("history run round log-means needs at least 1 run")
    base = welch_rounds(current, np.concatenate(runs), run_sd=run_sd, baseline_runs=len(runs))
    estimate = float(keep(current).mean() - np.mean([keep(r).mean() for r in runs]))
    p_slower, p_faster = _t_pvalues(estimate, base.se, base.df)
    return Comparison("welch", estimate, base.se, base.df, p_slower, p_faster, base.n_current, base.n_baseline)


def level_offset_sd(runs: Sequence[npt.ArrayLike], keep: Callable[[npt.ArrayLike], np.ndarray] = fastest_rounds
                    ) -> float:
    """The sd (ln units, ddof=1) of the earlier runs' levels (the means of the rounds *keep* keeps): what the
    history shows of the run-to-run term a short history's test adds (:func:`level_test`). NaN with fewer
    than 2 runs of 2 or more rounds. Unlike :func:`run_offset_sd` it subtracts no within-run share: the
    level's own noise is part of what the next run will differ by."""
    levels = [float(keep(a).mean()) for r in runs if (a := np.asarray(r, dtype=float).ravel()).size >= 2]
    return float(np.std(levels, ddof=1)) if len(levels) >= 2 else float("nan")


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x, by Newton's method as in limma's ``trigammaInverse`` (Smyth 2004)."""
    from scipy.special import polygamma

    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        step = tri * (1.0 - tri / x) / float(polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def fit_variance_prior(variances: npt.ArrayLike, dfs: npt.ArrayLike) -> VariancePrior | None:
    """Fit the prior that moderates each item's variance towards the others' (empirical Bayes).

    Args:
        variances: shape ``(G,)``, each item's sample variance of its history's run means (ln units²).
        dfs: shape ``(G,)``, their degrees of freedom (runs - 1, each >= 1).

    Returns:
        A :class:`VariancePrior`, or None with fewer than 3 items or a zero variance among them.
        Moment estimator of Smyth (2004): ``e_g = ln s_g² - digamma(d_g/2) + ln(d_g/2)``;
        ``trigamma(d0/2) = mean((e - ē)² G/(G-1) - trigamma(d_g/2))`` (``d0 = inf`` when that is <= 0);
        ``s0² = exp(ē + digamma(d0/2) - ln(d0/2))``.

    Source: G. K. Smyth, "Linear models and empirical Bayes methods for assessing differential
    expression in microarray experiments", Stat. Appl. Genet. Mol. Biol. 3(1), 2004, section 6.2.
    """
    from scipy.special import digamma, polygamma

    v = np.asarray(variances, dtype=float)
    d = np.asarray(dfs, dtype=float)
    if v.ndim != 1 or v.shape != d.shape or v.size < 3 or np.any(d < 1) or np.any(~np.isfinite(v)) or np.any(v <= 0):
        return None
    e = np.log(v) - digamma(d / 2) + np.log(d / 2)
    e_bar = float(e.mean())
    target = float(np.mean((e - e_bar) ** 2 * v.size / (v.size - 1) - polygamma(1, d / 2)))
    if target <= 0:
        return VariancePrior(math.exp(e_bar), math.inf, int(v.size))
    d0 = 2.0 * _trigamma_inverse(target)
    s0_sq = math.exp(e_bar + float(digamma(d0 / 2)) - math.log(d0 / 2))
    return VariancePrior(s0_sq, d0, int(v.size))


def prediction_interval_test(current: npt.ArrayLike, history_run_means: npt.ArrayLike,
                             prior: VariancePrior | None = None) -> Comparison:
    """Is this run's mean outside the prediction interval of earlier runs' means?

    Args:
        current: 1-D array-like of this run's round log-means, >= 1 value; only its mean ``x`` is used.
        history_run_means: shape ``(H,)``, one value per earlier run (that run's mean of round
            log-means), ``H >= 3``; with a *prior*, ``H >= 1`` (a single run adds no variance of its
            own: the prior's alone is used, with its ``d0`` df).
        prior: optional :class:`VariancePrior` fitted on the other items of the same runner: the
            history's variance ``s²`` (df ``H-1``) becomes the moderated ``(d0 s0² + (H-1) s²)/(d0+H-1)``
            with ``d0 + H - 1`` df (Smyth 2004), which keeps a short history from collapsing the
            test's power (t at 4 df and a LOND level of 0.0025 needs t > 5.6).

    Returns:
        A :class:`Comparison` with ``method="prediction-interval"``: ``estimate = x - m``,
        ``se = s * sqrt(1 + 1/H)`` (floored at :data:`SE_FLOOR`), ``df = H - 1``, where ``m`` and
        ``s`` are the mean and sd (ddof=1) of the history. ``n_current = len(current)``,
        ``n_baseline = H``. Because ``s`` is estimated from whole runs, it contains the
        run-to-run drift as well as the within-run noise, so the test stays calibrated on a runner
        whose runs differ by more than their rounds do. It assumes the current run has about as
        many rounds as the historical runs.

    Raises:
        ValueError: *current* is empty, *history_run_means* has fewer than 3 values (1 with a
            prior), an input is not 1-D, or holds NaN/inf.

    Source: Hahn & Meeker, *Statistical Intervals* (1991), prediction interval for one future
    observation; the t-test thresholds of Bencher (https://bencher.dev/docs/explanation/thresholds/).
    """
    c = _as_1d(current, "current round log-means", 1)
    h = _as_1d(history_run_means, "history run means", 1 if prior is not None else 3)
    n_hist = h.size
    x = float(c.mean())
    m = float(h.mean())
    s_sq = float(np.var(h, ddof=1)) if n_hist > 1 else 0.0
    df = float(n_hist - 1)
    if prior is not None:
        s_sq, df = prior.moderate(s_sq, df)
        df = min(df, 1e6)
    se = max(math.sqrt(s_sq) * math.sqrt(1.0 + 1.0 / n_hist), SE_FLOOR)
    estimate = x - m
    p_slower, p_faster = _t_pvalues(estimate, se, df)
    return Comparison("prediction-interval", estimate, se, df, p_slower, p_faster, int(c.size), int(n_hist))


def between_run_test(current: npt.ArrayLike, history_run_means: npt.ArrayLike) -> Comparison:
    """This run's mean against the history's run means, with the run-to-run variance from the saved runs only.

    The unit is the run (one process): ``x`` = mean of *current* (this run's round log-means, 1-D,
    >= 1 value), *history_run_means* shape ``(H,)``, ``H >= 2``, one mean per saved run. ``estimate =
    x - m``, ``se = s sqrt(1 + 1/H)`` with ``m``, ``s`` the mean and sd (ddof=1) of the history, Student t
    with ``H - 1`` df: the two-sample t-test of the one new run against the ``H`` saved runs
    (``scipy.stats.ttest_ind([x], history)`` gives the same t and df), which is the prediction interval for
    one future observation (Hahn & Meeker, *Statistical Intervals*, 1991, section 4.7). Unlike
    :func:`welch_rounds` it takes no within-run figure and no prior: a difference between processes
    (a GPU's clocks, a host's allocator state) that the rounds of one run cannot show is in ``s``. With 2
    saved runs it is wide (1 df): it is the test a wall-time claim beside a decided device time must pass.
    Returns a :class:`Comparison` with ``method="between-run"``.

    Raises:
        ValueError: *current* is empty, fewer than 2 history run means, or a value is not finite.
    """
    c = _as_1d(current, "current round log-means", 1)
    h = _as_1d(history_run_means, "history run means", 2)
    n_hist = h.size
    s_sq = float(np.var(h, ddof=1))
    se = max(math.sqrt(s_sq * (1.0 + 1.0 / n_hist)), SE_FLOOR)
    estimate = float(c.mean()) - float(h.mean())
    df = float(n_hist - 1)
    p_slower, p_faster = _t_pvalues(estimate, se, df)
    return Comparison("between-run", estimate, se, df, p_slower, p_faster, int(c.size), int(n_hist))


#: prior of the item's sensitivity to the machine's speed as the reference sees it: slope 1 (item and
#: reference slow down alike) with this sd. A history whose reference barely moved cannot tell the
#: slope, so the prior holds it near 1 and widens the prediction for a machine that moved since; a
#: history that spans the machine's phases outweighs it (measured slopes: 0.3 to 1.4, studies/RESULTS.md)
SLOPE_PRIOR_SD = 0.3


@dataclass(frozen=True)
class ReferenceFit:
    """The line of the item's run means on the reference's run means over a history.

    ``intercept`` and ``slope`` (the posterior mean of the item's *sensitivity* to the machine's
    speed, as the reference sees it: 1 when both slow down alike), ``residual_var`` (ln units²,
    ``H - 2`` df), ``x_mean`` (the reference's mean run mean, ln ms), ``sxx`` (its sum of squared
    deviations), ``prior_precision`` (``1/sd²`` of the slope's prior, 0 without) and ``runs`` (H).
    """

    intercept: float
    slope: float
    residual_var: float
    x_mean: float
    sxx: float
    prior_precision: float
    runs: int

    def slope_var_at(self, residual_var: float) -> float:
        """The slope's posterior variance ``1 / (Sxx/s² + 1/sd²)`` with the residual variance
        *residual_var* as ``s²``."""
        return 1.0 / (self.sxx / residual_var + self.prior_precision)

    def predict(self, x: float) -> float:
        """The item's expected run mean (ln ms) when the reference's run mean is *x* (ln ms)."""
        return self.intercept + self.slope * x

    def prediction_var(self, x: float, residual_var: float | None = None) -> float:
        """Variance (ln units²) of a new run's mean around :meth:`predict` at *x*: the new run's own
        residual, the intercept's and the slope's uncertainty, ``s²(1 + 1/H) + (x - x̄)² var(b)``;
        *residual_var* replaces ``s²`` (a moderated one, :class:`VariancePrior`)."""
        s_sq = self.residual_var if residual_var is None else residual_var
        return s_sq * (1.0 + 1.0 / self.runs) + (x - self.x_mean) ** 2 * self.slope_var_at(s_sq)

    def test(self, current: npt.ArrayLike, current_reference: Any, prior: VariancePrior | None = None) -> Comparison:
        """Is this run's mean outside the prediction interval of the history's regression on the reference?

        The machine's speed moves the item and the reference measured alongside it together, but not
        one for one: on the project's 2-core machine a small reference moved 2.5 times as much as
        ResNet-50 from process to process, Inception 0.7 times (correlation 0.93 in both cases,
        studies/RESULTS.md). Dividing by the reference (``ln(item) - ln(reference)``, a slope
        of 1) then adds noise; fitting the slope over the history removes it. This is regression
        adjustment by a concurrent covariate (CUPED: Deng, Xu, Kohavi & Walker, WSDM 2013) with the
        prediction interval for one new observation of a simple linear regression (Montgomery, Peck &
        Vining, *Introduction to Linear Regression Analysis*, 5th ed., section 2.5; Hahn & Meeker 1991),
        the slope held near 1 by a prior (:func:`fit_reference`, :data:`SLOPE_PRIOR_SD`) so a history
        recorded at one machine speed does not extrapolate an unknown slope. The line is this fit,
        over the history's ``H >= 4`` runs.

        Args:
            current: this run's item round log-means, shape ``(rounds,)``; only the mean ``y0`` is used.
            current_reference: this run's reference block log-means, shape ``(rounds,)``; mean ``x0``.
            prior: optional :class:`VariancePrior` of the runner's items' *residual* variances
                (:func:`pytest_aaco.history.store.runner_priors`): ``s²`` with ``H - 2`` df becomes the
                moderated ``(d0 s0² + (H-2) s²)/(d0 + H - 2)`` with ``d0 + H - 2`` df (Smyth 2004), as in
                :func:`prediction_interval_test`.

        Returns:
            A :class:`Comparison` with ``method="reference-adjusted"``, ``estimate = y0 - (a + b x0)``,
            ``se = sqrt(s²(1 + 1/H) + (x0 - x̄)² var(b))`` (floored at :data:`SE_FLOOR`), ``df = H - 2``,
            ``n_current = rounds``, ``n_baseline = H``. ``exp(estimate)`` is the item's change at the
            machine speed the reference measured now.

        Raises:
            ValueError: an empty/non-finite current series.
        """
        c = _as_1d(current, "current round log-means", 1)
        x0 = float(_as_1d(current_reference, "current reference log-means", 1).mean())
        s_sq, df = self.residual_var, float(self.runs - 2)
        if prior is not None:
            s_sq, df = prior.moderate(s_sq, df)
            df = min(df, 1e6)
        se = max(math.sqrt(self.prediction_var(x0, s_sq)), SE_FLOOR)
        estimate = float(c.mean()) - self.predict(x0)
        p_slower, p_faster = _t_pvalues(estimate, se, df)
        return Comparison("reference-adjusted", estimate, se, df, p_slower, p_faster, int(c.size), self.runs)


def fit_reference(history_run_means: npt.ArrayLike, history_reference_means: npt.ArrayLike,
                  slope_prior_sd: float = SLOPE_PRIOR_SD) -> ReferenceFit:
    """Fit ``item = a + b * reference`` over the history's runs, with a normal prior on the slope.

    Args:
        history_run_means: shape ``(H,)``, the item's run means of round log-means, ``H >= 4``.
        history_reference_means: shape ``(H,)``, the reference's run means in the same runs.
        slope_prior_sd: sd of the slope's prior ``N(1, sd²)``; ``math.inf`` gives ordinary least
            squares (then equal to ``scipy.stats.linregress(reference, item)``'s slope and intercept).

    The intercept has a flat prior; with the residual variance ``s²`` plugged in, the slope's
    posterior is normal with precision ``P = Sxx/s² + 1/sd²`` and mean ``(Sxy/s² + 1/sd²)/P``
    (conjugate normal linear regression: Gelman et al., *Bayesian Data Analysis*, 3rd ed., §14.2,
    with the prior as one extra observation). ``s²`` is the residual variance around that line,
    ``H - 2`` df, starting from the least-squares (or slope-1) residuals.

    Raises ValueError for fewer than 4 runs, unequal lengths, or NaN/inf.
    """
    y = _as_1d(history_run_means, "history run means", 4)
    x = _as_1d(history_reference_means, "history reference run means", 4)
    if x.size != y.size:
        raise ValueError(f"the history has {y.size} item run means but {x.size} reference run means")
    xc, yc = x - x.mean(), y - y.mean()
    sxx, sxy = float((xc * xc).sum()), float((xc * yc).sum())
    prior_precision = 0.0 if math.isinf(slope_prior_sd) else 1.0 / slope_prior_sd**2
    if sxx <= 1e-12 and prior_precision == 0.0:
        raise ValueError("the reference workload ran at the same speed in every history run: its slope is undefined")
    slope = sxy / sxx if sxx > 1e-12 else 1.0
    dof = y.size - 2
    for _ in range(3):  # s² and the slope depend on each other; three passes settle both
        s_sq = max(float(((yc - slope * xc) ** 2).sum()) / dof, SE_FLOOR**2)
        precision = sxx / s_sq + prior_precision
        slope = (sxy / s_sq + prior_precision) / precision
    s_sq = max(float(((yc - slope * xc) ** 2).sum()) / dof, SE_FLOOR**2)
    return ReferenceFit(float(y.mean()) - slope * float(x.mean()), slope, s_sq, float(x.mean()), sxx,
                        prior_precision, int(y.size))
