"""Unit tests for pytest_aaco.verdict.stats: known answers from scipy, hand computations, calibration."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
import scipy.stats

from pytest_aaco.verdict import stats
from pytest_aaco.verdict.stats import (
    Comparison,
    DriftResult,
    LondFdr,
    QuantileComparison,
    benjamini_hochberg,
    bootstrap_quantile_ratio,
    drift,
    prediction_interval_test,
    spread_ratio,
    summarize_history,
    welch_rounds,
)

# Round log-means (ln ms) of two runs, fixed so failures are reproducible.
CUR = np.log([41.2, 40.8, 41.9, 42.3, 40.5, 41.1, 41.7, 42.0])
BASE = np.log([38.0, 38.6, 37.5, 39.1, 38.2, 37.9])


# ---------------------------------------------------------------------------------------------
# welch_rounds
# ---------------------------------------------------------------------------------------------


def _welch_df(a: np.ndarray, b: np.ndarray) -> float:
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    return (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_welch_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cur = rng.normal(3.7, 0.02, size=7)
    base = rng.normal(3.69, 0.05, size=12)
    cmp = welch_rounds(cur, base)
    greater = scipy.stats.ttest_ind(cur, base, equal_var=False, alternative="greater")
    less = scipy.stats.ttest_ind(cur, base, equal_var=False, alternative="less")
    assert cmp.method == "welch"
    assert cmp.p_slower == pytest.approx(greater.pvalue, rel=1e-10, abs=1e-15)
    assert cmp.p_faster == pytest.approx(less.pvalue, rel=1e-10, abs=1e-15)
    assert cmp.df == pytest.approx(greater.df, rel=1e-12)
    assert cmp.df == pytest.approx(_welch_df(cur, base), rel=1e-12)
    assert cmp.estimate / cmp.se == pytest.approx(greater.statistic, rel=1e-12)
    assert cmp.estimate == pytest.approx(cur.mean() - base.mean(), abs=1e-15)
    assert cmp.se == pytest.approx(math.sqrt(cur.var(ddof=1) / 7 + base.var(ddof=1) / 12), rel=1e-12)
    assert (cmp.n_current, cmp.n_baseline) == (7, 12)
    assert cmp.p_slower + cmp.p_faster == pytest.approx(1.0)


def test_welch_known_slowdown() -> None:
    cmp = welch_rounds(CUR, BASE)
    # ln(41.4 / 38.2) ~ 0.08: the fixture is about 8% slower and very clearly so.
    assert cmp.ratio == pytest.approx(math.exp(CUR.mean() - BASE.mean()))
    assert 1.07 < cmp.ratio < 1.10
    assert cmp.p_slower < 1e-6
    assert cmp.p_faster > 1 - 1e-6
    ref = scipy.stats.ttest_ind(CUR, BASE, equal_var=False, alternative="greater")
    assert cmp.p_slower == pytest.approx(ref.pvalue, rel=1e-9)


def test_welch_zero_variance_does_not_warn_or_divide_by_zero() -> None:
    same = welch_rounds([3.0, 3.0, 3.0], [3.0, 3.0])
    assert same.se == stats.SE_FLOOR
    assert same.estimate == 0.0
    assert same.df == 3.0  # n_c + n_b - 2 fallback
    assert same.p_slower == pytest.approx(0.5)
    shifted = welch_rounds([3.1, 3.1, 3.1], [3.0, 3.0])
    assert shifted.p_slower < 1e-12
    assert shifted.ratio == pytest.approx(math.exp(0.1))


@pytest.mark.parametrize(
    ("current", "baseline", "match"),
    [
        ([1.0], [1.0, 2.0], "at least 2"),
        ([1.0, 2.0], [3.0], "at least 2"),
        ([1.0, float("nan")], [1.0, 2.0], "NaN"),
        ([[1.0, 2.0], [3.0, 4.0]], [1.0, 2.0], "1-D"),
    ],
)
def test_welch_rejects_bad_input(current: object, baseline: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        welch_rounds(current, baseline)


# ---------------------------------------------------------------------------------------------
# Comparison bounds
# ---------------------------------------------------------------------------------------------


def test_comparison_bounds_match_t_quantiles() -> None:
    cmp = Comparison(
        "welch", estimate=0.05, se=0.02, df=9.0, p_slower=0.0, p_faster=1.0, n_current=5, n_baseline=6
    )
    t975 = scipy.stats.t.ppf(0.975, 9.0)
    t95 = scipy.stats.t.ppf(0.95, 9.0)
    t80 = scipy.stats.t.ppf(0.80, 9.0)
    lo, hi = cmp.ci(0.95)
    assert lo == pytest.approx(math.exp(0.05 - t975 * 0.02), rel=1e-12)
    assert hi == pytest.approx(math.exp(0.05 + t975 * 0.02), rel=1e-12)
    assert cmp.upper(0.05) == pytest.approx(math.exp(0.05 + t95 * 0.02), rel=1e-12)
    assert cmp.lower(0.05) == pytest.approx(math.exp(0.05 - t95 * 0.02), rel=1e-12)
    assert cmp.mde(0.05) == pytest.approx(math.exp((t95 + t80) * 0.02) - 1, rel=1e-12)
    assert cmp.mde(0.05, power=0.9) > cmp.mde(0.05)
    # Hand check of the magnitudes: t_{0.975,9} = 2.262, so the CI is exp(0.05 -/+ 0.04524)
    # = 1.00477 .. 1.09993.
    assert lo == pytest.approx(1.00477, abs=1e-5)
    assert hi == pytest.approx(1.09993, abs=1e-5)
    assert lo < cmp.lower(0.05) < cmp.ratio < cmp.upper(0.05) < hi


def test_comparison_to_dict_is_json_ready() -> None:
    cmp = welch_rounds(CUR, BASE)
    d = cmp.to_dict()
    assert set(d) == {
        "method",
        "estimate",
        "se",
        "df",
        "p_slower",
        "p_faster",
        "n_current",
        "n_baseline",
        "ratio",
    }
    assert json.loads(json.dumps(d)) == d
    assert d["ratio"] == pytest.approx(cmp.ratio)
    assert type(d["n_current"]) is int and type(d["se"]) is float


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5])
def test_comparison_rejects_bad_levels(bad: float) -> None:
    cmp = welch_rounds(CUR, BASE)
    for call in (lambda: cmp.ci(bad), lambda: cmp.upper(bad), lambda: cmp.lower(bad), lambda: cmp.mde(bad)):
        with pytest.raises(ValueError, match="between 0 and 1"):
            call()


# ---------------------------------------------------------------------------------------------
# prediction_interval_test
# ---------------------------------------------------------------------------------------------


def test_prediction_interval_hand_computed() -> None:
    history = np.array([1.0, 2.0, 3.0, 4.0])  # mean 2.5, sd sqrt(5/3)
    current = np.array([5.0, 6.0])  # mean 5.5
    cmp = prediction_interval_test(current, history)
    se = math.sqrt(5.0 / 3.0) * math.sqrt(1.0 + 1.0 / 4.0)  # 1.443376
    t = 3.0 / se  # 2.078461
    assert cmp.method == "prediction-interval"
    assert cmp.estimate == pytest.approx(3.0)
    assert cmp.se == pytest.approx(se, rel=1e-12)
    assert cmp.se == pytest.approx(1.443376, abs=1e-6)
    assert cmp.estimate / cmp.se == pytest.approx(2.078461, abs=1e-6)
    assert cmp.df == 3.0
    assert cmp.p_slower == pytest.approx(scipy.stats.t.sf(t, 3), rel=1e-12)
    assert cmp.p_slower == pytest.approx(0.0645, abs=5e-4)
    assert cmp.p_faster == pytest.approx(1 - cmp.p_slower, rel=1e-12)
    assert (cmp.n_current, cmp.n_baseline) == (2, 4)


def test_prediction_interval_single_round_and_flat_history() -> None:
    cmp = prediction_interval_test([3.0], [3.0, 3.0, 3.0])
    assert cmp.se == stats.SE_FLOOR and cmp.p_slower == pytest.approx(0.5)
    assert cmp.n_current == 1


def test_prediction_interval_input_errors() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        prediction_interval_test([1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least 1"):
        prediction_interval_test([], [1.0, 2.0, 3.0])


def test_calibration_random_effects_model() -> None:
    """Why the history matters: with drift between runs, only the history-based test holds alpha.

    Model: ln latency of round r in run j = mu + u_j + e_jr, u_j ~ N(0, 0.04), e_jr ~ N(0, 0.03),
    10 rounds per run, 20 earlier runs, nothing changed. The prediction-interval test must flag
    about 5% of unchanged runs; Welch on rounds against one earlier run cannot see u_j and flags
    far more (about a third).
    """
    rng = np.random.default_rng(20240601)
    n_sims, n_hist, n_rounds, alpha = 2000, 20, 10, 0.05
    run_effect = rng.normal(0.0, 0.04, size=(n_sims, n_hist + 1, 1))
    rounds = np.log(38.0) + run_effect + rng.normal(0.0, 0.03, size=(n_sims, n_hist + 1, n_rounds))
    history, current = rounds[:, :n_hist, :], rounds[:, n_hist, :]
    history_means = history.mean(axis=2)

    pi_alarms = sum(
        prediction_interval_test(current[i], history_means[i]).p_slower < alpha for i in range(n_sims)
    )
    welch_alarms = sum(welch_rounds(current[i], history[i, -1]).p_slower < alpha for i in range(n_sims))
    pi_rate, welch_rate = pi_alarms / n_sims, welch_alarms / n_sims
    assert 0.03 <= pi_rate <= 0.07, pi_rate
    assert welch_rate > 0.2, welch_rate

    # The history summary recovers the two sources of variation.
    summary = summarize_history(list(history[0]))
    assert summary["within_run_sd"] == pytest.approx(0.03, rel=0.3)
    assert summary["between_run_sd"] == pytest.approx(math.sqrt(0.04**2 + 0.03**2 / n_rounds), rel=0.4)


# ---------------------------------------------------------------------------------------------
# benjamini_hochberg
# ---------------------------------------------------------------------------------------------


def test_bh_matches_scipy_and_hand_example() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005, 0.5, 0.2])
    rejected, adjusted = benjamini_hochberg(p, q=0.05)
    np.testing.assert_allclose(adjusted, scipy.stats.false_discovery_control(p, method="bh"), rtol=1e-12)
    # By hand: sorted 0.005, 0.01, 0.03, 0.04, 0.2, 0.5 against k*0.05/6 = 0.0083, 0.0167, 0.025, 0.033, ...
    # the largest k with p_(k) <= k q / m is k = 2, so only 0.005 and 0.01 are rejected; adjusted
    # p_(k) m / k = 0.03, 0.03, 0.06, 0.06, 0.24, 0.5 (already monotone).
    assert rejected.tolist() == [True, False, False, True, False, False]
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.03, 0.5, 0.24], rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_bh_random_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(size=40), rng.uniform(0, 0.002, size=10)])
    rejected, adjusted = benjamini_hochberg(p, q=0.1)
    expected = scipy.stats.false_discovery_control(p, method="bh")
    np.testing.assert_allclose(adjusted, expected, rtol=1e-12)
    np.testing.assert_array_equal(rejected, expected <= 0.1)
    assert rejected[40:].all()


def test_bh_empty_and_errors() -> None:
    rejected, adjusted = benjamini_hochberg([])
    assert rejected.shape == (0,) and rejected.dtype == bool
    assert adjusted.shape == (0,)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        benjamini_hochberg([0.1, 1.2])
    with pytest.raises(ValueError, match="q must"):
        benjamini_hochberg([0.1], q=0.0)


# ---------------------------------------------------------------------------------------------
# LondFdr
# ---------------------------------------------------------------------------------------------


def _decide(lond: LondFdr, p_value: float) -> bool:
    """What the gate does with one p-value: test it at the next level, record the decision."""
    rejected = p_value <= lond.next_level()
    lond.record(rejected)
    return rejected


def test_lond_levels_by_hand() -> None:
    lond = LondFdr(alpha=0.05, m=10)
    assert lond.next_level() == pytest.approx(0.005)
    assert lond.next_level() == pytest.approx(0.005)  # does not advance
    lond.record(True)
    assert (lond.tests, lond.discoveries) == (1, 1)
    assert lond.next_level() == pytest.approx(0.01)
    lond.record(False)
    assert lond.next_level() == pytest.approx(0.01)
    assert _decide(lond, 0.009) is True
    assert lond.next_level() == pytest.approx(0.015)
    assert _decide(lond, 0.02) is False
    assert (lond.tests, lond.discoveries) == (4, 2)
    for _ in range(6):
        lond.record(False)
    assert lond.tests == 10
    assert lond.next_level() == 0.0  # gamma_i = 0 beyond the announced m tests
    assert _decide(lond, 0.0) is True  # p = 0 still "rejects" at level 0, by the p <= level rule
    d = lond.to_dict()
    assert d == {"method": "LOND", "alpha": 0.05, "m": 10, "tests": 11, "discoveries": 3, "next_level": 0.0}
    assert json.loads(json.dumps(d)) == d


def test_lond_level_never_exceeds_alpha() -> None:
    lond = LondFdr(0.1, 5)
    levels = []
    for _ in range(5):
        levels.append(lond.next_level())
        lond.record(True)
    assert levels == pytest.approx([0.02, 0.04, 0.06, 0.08, 0.1])


@pytest.mark.parametrize(("alpha", "m"), [(0.0, 5), (1.0, 5), (0.05, 0), (0.05, -1)])
def test_lond_rejects_bad_arguments(alpha: float, m: int) -> None:
    with pytest.raises(ValueError):
        LondFdr(alpha, m)


def test_lond_controls_fdr_in_simulation() -> None:
    """Independent tests, 20% true effects: the mean false discovery proportion stays <= alpha."""
    rng = np.random.default_rng(7)
    n_sims, m, alpha = 400, 50, 0.1
    is_null = rng.uniform(size=(n_sims, m)) > 0.2
    z = rng.normal(size=(n_sims, m)) + np.where(is_null, 0.0, 3.5)
    p = scipy.stats.norm.sf(z)
    fdp = []
    for i in range(n_sims):
        lond = LondFdr(alpha, m)
        rejected = np.array([_decide(lond, float(pv)) for pv in p[i]])
        fdp.append((rejected & is_null[i]).sum() / max(1, rejected.sum()))
    assert np.mean(fdp) <= alpha
    assert np.mean(fdp) > 0.0  # the test can fail: some false discoveries do happen


# ---------------------------------------------------------------------------------------------
# bootstrap_quantile_ratio
# ---------------------------------------------------------------------------------------------


def _rounds(seed: int, n_rounds: int = 10, n_iter: int = 200, scale: float = 1.0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    offsets = rng.normal(0.0, 0.03, size=(n_rounds, 1))
    lat = 38.0 * scale * np.exp(offsets + rng.normal(0.0, 0.05, size=(n_rounds, n_iter)))
    return list(lat)


def test_weighted_percentile_equals_pooled_percentile() -> None:
    rng = np.random.default_rng(3)
    rounds = [rng.gamma(5.0, 2.0, size=n) for n in (7, 13, 5, 9)]  # unequal lengths on purpose
    values = np.concatenate(rounds)
    labels = np.repeat(np.arange(4), [r.size for r in rounds])
    order = np.argsort(values)
    counts = rng.multinomial(4, [0.25] * 4, size=50)
    for q in (0.0, 37.5, 50.0, 99.0, 100.0):
        got = stats._weighted_percentile(values[order], counts[:, labels[order]], q)
        want = [
            np.percentile(np.concatenate([r for r, c in zip(rounds, row, strict=True) for _ in range(c)]), q)
            for row in counts
        ]
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    cur, base = _rounds(1), _rounds(2)
    a = bootstrap_quantile_ratio(cur, base, seed=5)
    b = bootstrap_quantile_ratio(cur, base, seed=5)
    c = bootstrap_quantile_ratio(cur, base, seed=6)
    assert a == b
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high)
    assert a.ratio == c.ratio  # the point estimate does not depend on the resampling
    pooled_ratio = np.percentile(np.concatenate(cur), 99) / np.percentile(np.concatenate(base), 99)
    assert a.ratio == pytest.approx(pooled_ratio)


def test_bootstrap_detects_2x_slower_tail() -> None:
    cur, base = _rounds(1, scale=2.0), _rounds(2)
    res = bootstrap_quantile_ratio(cur, base, q=99.0, n_boot=2000, seed=0)
    assert isinstance(res, QuantileComparison)
    assert res.ratio == pytest.approx(2.0, rel=0.1)
    assert res.ci_low > 1.5 and res.ci_high < 2.5
    assert res.ci_low <= res.ratio <= res.ci_high
    assert res.p_slower == pytest.approx(1 / 2001)  # no bootstrap ratio is <= 1
    assert res.n_boot == 2000 and res.q == 99.0
    d = res.to_dict()
    assert json.loads(json.dumps(d)) == d and d["ratio"] == res.ratio


def test_bootstrap_identical_sides() -> None:
    rounds = _rounds(4)
    res = bootstrap_quantile_ratio(rounds, rounds, q=50.0, seed=1)
    assert res.ratio == 1.0
    assert res.ci_low < 1.0 < res.ci_high
    assert 0.2 < res.p_slower < 0.8


def test_bootstrap_resamples_rounds_not_iterations() -> None:
    """Rounds offset from each other widen the interval; an iteration bootstrap would not see it."""
    rng = np.random.default_rng(11)
    flat = [38.0 * np.exp(rng.normal(0.0, 0.02, size=100)) for _ in range(6)]
    shifted = [r * math.exp(o) for r, o in zip(flat, [-0.1, 0.1, -0.1, 0.1, -0.1, 0.1], strict=True)]
    narrow = bootstrap_quantile_ratio(flat, flat, q=50.0, seed=0)
    wide = bootstrap_quantile_ratio(shifted, shifted, q=50.0, seed=0)
    assert (wide.ci_high - wide.ci_low) > 3 * (narrow.ci_high - narrow.ci_low)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"current_rounds": [np.ones(5)]}, "at least 2 rounds"),
        ({"current_rounds": [np.ones(5), np.array([1.0, 0.0])]}, "<= 0"),
        ({"current_rounds": [np.ones(5), np.array([])]}, "at least 1"),
        ({"q": 101.0}, "percentile"),
        ({"level": 1.0}, "level"),
        ({"n_boot": 0}, "n_boot"),
    ],
)
def test_bootstrap_input_errors(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {
        "current_rounds": [np.ones(5), np.ones(5)],
        "baseline_rounds": [np.ones(5), np.ones(5)],
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        bootstrap_quantile_ratio(**args)


# ---------------------------------------------------------------------------------------------
# drift, spread_ratio, summarize_history
# ---------------------------------------------------------------------------------------------


def test_drift() -> None:
    assert drift([3.0, 3.1, 3.2]) is None
    x = np.array([3.60, 3.61, 3.59, 3.60, 3.70, 3.69, 3.71, 3.70])
    res = drift(x)
    assert isinstance(res, DriftResult)
    assert res.ratio == pytest.approx(math.exp(0.1), rel=1e-12)
    ref = scipy.stats.ttest_ind(x[4:], x[:4], equal_var=False)
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert res.p_value < 1e-4
    # Odd length: the middle round belongs to neither half.
    odd = drift([1.0, 1.1, 5.0, 1.0, 1.1])
    assert odd is not None and odd.ratio == pytest.approx(1.0) and odd.p_value == pytest.approx(1.0)
    assert json.loads(json.dumps(res.to_dict())) == res.to_dict()


def test_spread_ratio() -> None:
    cur = [0.0, 0.1, 0.2]  # sd 0.1
    assert spread_ratio(cur, [0.05, 0.02, np.nan, 0.1]) == pytest.approx(0.1 / 0.05)
    assert spread_ratio(cur, []) is None
    assert spread_ratio(cur, [np.nan]) is None
    assert spread_ratio([0.1], [0.05]) is None
    assert spread_ratio(cur, [0.0, 0.0, 1.0]) is None


def test_summarize_history() -> None:
    runs = [[1.0, 2.0, 3.0], [2.0, 4.0], [5.0]]
    s = summarize_history(runs)
    np.testing.assert_allclose(s["run_means"], [2.0, 3.0, 5.0])
    np.testing.assert_allclose(s["round_sds"][:2], [1.0, math.sqrt(2.0)])
    assert math.isnan(s["round_sds"][2])
    assert s["between_run_sd"] == pytest.approx(np.std([2.0, 3.0, 5.0], ddof=1))
    assert s["within_run_sd"] == pytest.approx((1.0 + math.sqrt(2.0)) / 2)

    one = summarize_history([[5.0]])
    assert math.isnan(one["between_run_sd"]) and math.isnan(one["within_run_sd"])
    empty = summarize_history([])
    assert empty["run_means"].shape == (0,) and math.isnan(empty["within_run_sd"])
    with pytest.raises(ValueError, match="history run 1"):
        summarize_history([[1.0], []])


# ---------------------------------------------------------------- run-to-run term


def test_welch_run_term_adds_exactly_its_variance():
    rng = np.random.default_rng(7)
    cur, base = rng.normal(0.1, 0.01, 10), rng.normal(0.0, 0.01, 20)
    plain = stats.welch_rounds(cur, base)
    wide = stats.welch_rounds(cur, base, run_sd=0.02, baseline_runs=2)
    assert wide.estimate == plain.estimate and wide.df == plain.df
    assert wide.se == pytest.approx(np.sqrt(plain.se**2 + 0.02**2 * 1.5))
    assert wide.p_slower > plain.p_slower
    with pytest.raises(ValueError):
        stats.welch_rounds(cur, base, run_sd=-0.01)


def test_run_offset_sd_recovers_the_between_run_sd():
    rng = np.random.default_rng(11)
    runs = [rng.normal(rng.normal(0, 0.04), 0.01, 10) for _ in range(400)]
    assert stats.run_offset_sd(runs) == pytest.approx(0.04, rel=0.1)
    steady = [rng.normal(0, 0.01, 10) for _ in range(400)]
    assert stats.run_offset_sd(steady) < 0.002  # no offsets: only round noise, which is subtracted
    assert np.isnan(stats.run_offset_sd(runs[:1]))


# ---------------------------------------------------------------- variance moderation across items (Smyth 2004)


def test_variance_prior_recovers_a_common_variance_and_moderates():
    rng = np.random.default_rng(0)
    true_var, df = 0.02**2, 4
    variances = true_var * rng.chisquare(df, 300) / df  # 300 items, each with 5 runs, one common variance
    prior = stats.fit_variance_prior(variances, np.full(300, df))
    assert prior is not None and prior.s0_sq == pytest.approx(true_var, rel=0.1)
    assert prior.d0 > 30  # the items agree: the prior is strong
    s_sq, d = prior.moderate(0.05**2, df)
    assert d > df and s_sq == pytest.approx(true_var, rel=0.1)  # an unlucky item is pulled to the others


def test_variance_prior_is_weak_when_items_differ():
    rng = np.random.default_rng(4)
    variances = np.exp(rng.normal(np.log(0.02**2), 1.5, 300)) * rng.chisquare(4, 300) / 4
    prior = stats.fit_variance_prior(variances, np.full(300, 4))
    assert prior is not None and prior.d0 < 5


def test_variance_prior_needs_three_items_and_positive_variances():
    assert stats.fit_variance_prior([1e-4, 2e-4], [4, 4]) is None
    assert stats.fit_variance_prior([1e-4, 0.0, 2e-4], [4, 4, 4]) is None


def test_trigamma_inverse_inverts_scipy():
    from scipy.special import polygamma

    for y in (0.05, 0.7, 3.0, 40.0):
        assert stats._trigamma_inverse(float(polygamma(1, y))) == pytest.approx(y, rel=1e-6)


def test_moderated_prediction_interval_gains_power_with_a_short_history():
    """5 runs and a LOND-sized level: alone, 4 df need t > 5.6; with a strong prior from the runner's
    other items a 6% slowdown becomes significant."""
    history = np.log(10.0) + np.array([0.01, -0.015, 0.02, -0.005, -0.01])
    current = np.full(10, np.log(10.6))
    plain = stats.prediction_interval_test(current, history)
    prior = stats.VariancePrior(s0_sq=0.015**2, d0=60.0, items=20)
    moderated = stats.prediction_interval_test(current, history, prior)
    assert moderated.df == pytest.approx(64.0) and plain.df == 4.0
    assert plain.p_slower > 0.0025 > moderated.p_slower


def test_prediction_interval_with_a_prior_accepts_one_or_two_earlier_runs():
    """One run adds no variance of its own: the prior's alone, with its d0 df; two runs add theirs with 1 df."""
    import scipy.stats

    prior = stats.VariancePrior(s0_sq=0.1**2, d0=4.0, items=0)
    one = stats.prediction_interval_test([np.log(13.0)], [np.log(10.0)], prior)
    assert one.df == 4.0 and one.se == pytest.approx(0.1 * np.sqrt(2.0))
    assert one.p_slower == pytest.approx(scipy.stats.t.sf(np.log(1.3) / (0.1 * np.sqrt(2.0)), 4))
    two = stats.prediction_interval_test([0.5], [0.0, 0.2], prior)
    s_sq = (4 * 0.01 + 1 * np.var([0.0, 0.2], ddof=1)) / 5
    assert two.df == 5.0 and two.se == pytest.approx(np.sqrt(s_sq * 1.5))
    with pytest.raises(ValueError, match="at least 3"):
        stats.prediction_interval_test([0.5], [0.0, 0.2])


# ---------------------------------------------------------------- reference-adjusted prediction interval


REF_X = np.log([2.0, 2.1, 1.9, 2.3, 2.05, 1.95])
ITEM_Y = 3.0 + 0.4 * REF_X + np.array([0.004, -0.006, 0.002, 0.001, -0.003, 0.002])


def test_fit_reference_without_prior_is_scipy_linregress() -> None:
    fit = stats.fit_reference(ITEM_Y, REF_X, slope_prior_sd=math.inf)
    expected = scipy.stats.linregress(REF_X, ITEM_Y)
    assert fit.slope == pytest.approx(expected.slope, rel=1e-9)
    assert fit.intercept == pytest.approx(expected.intercept, rel=1e-9)
    # linregress's stderr of the slope is sqrt(s² / Sxx) with s² on n - 2 df
    assert math.sqrt(fit.slope_var_at(fit.residual_var)) == pytest.approx(expected.stderr, rel=1e-9)


def test_fit_reference_prior_holds_the_slope_near_one_when_the_reference_never_moved() -> None:
    flat = np.full(5, np.log(2.0))
    fit = stats.fit_reference([3.0, 3.01, 2.99, 3.0, 3.005], flat)
    assert fit.slope == pytest.approx(1.0)
    assert fit.slope_var_at(fit.residual_var) == pytest.approx(stats.SLOPE_PRIOR_SD**2)
    with pytest.raises(ValueError, match="ran at the same speed in every history run"):
        stats.fit_reference([3.0, 3.01, 2.99, 3.0], flat[:4], slope_prior_sd=math.inf)


def test_fit_reference_posterior_slope_is_the_precision_weighted_mean() -> None:
    """With the residual variance fixed, the posterior slope mixes the data's and the prior's."""
    fit = stats.fit_reference(ITEM_Y, REF_X, slope_prior_sd=0.3)
    xc, yc = REF_X - REF_X.mean(), ITEM_Y - ITEM_Y.mean()
    sxx, sxy = (xc * xc).sum(), (xc * yc).sum()
    s_sq = ((yc - fit.slope * xc) ** 2).sum() / (len(REF_X) - 2)
    precision = sxx / s_sq + 1 / 0.3**2
    assert fit.slope == pytest.approx((sxy / s_sq + 1 / 0.3**2) / precision, rel=1e-3)
    assert scipy.stats.linregress(REF_X, ITEM_Y).slope < fit.slope < 1.0


def test_reference_fit_test_matches_the_regression_prediction_interval() -> None:
    """Against the textbook interval of ordinary least squares (Montgomery et al. 2.5), without the
    slope's prior, computed here from scipy.stats.linregress and scipy.stats.t."""
    current, current_ref = np.array([3.0 + 0.4 * np.log(2.6) + 0.05] * 4), np.array([np.log(2.6)] * 4)
    comp = stats.fit_reference(ITEM_Y, REF_X, slope_prior_sd=math.inf).test(current, current_ref)
    lr = scipy.stats.linregress(REF_X, ITEM_Y)
    n, x0 = len(REF_X), np.log(2.6)
    s_sq = lr.stderr**2 * ((REF_X - REF_X.mean()) ** 2).sum()
    se = math.sqrt(s_sq * (1 + 1 / n) + (x0 - REF_X.mean()) ** 2 * lr.stderr**2)
    estimate = current.mean() - (lr.intercept + lr.slope * x0)
    assert comp.method == "reference-adjusted" and comp.df == n - 2 and comp.n_baseline == n
    assert comp.estimate == pytest.approx(estimate, rel=1e-9)
    assert comp.se == pytest.approx(se, rel=1e-9)
    assert comp.p_slower == pytest.approx(scipy.stats.t.sf(estimate / se, n - 2), rel=1e-9)


def test_reference_fit_input_errors() -> None:
    with pytest.raises(ValueError, match="needs at least 4 values"):
        stats.fit_reference(ITEM_Y[:3], REF_X[:3])
    with pytest.raises(ValueError, match="6 item run means but 5 reference run means"):
        stats.fit_reference(ITEM_Y, REF_X[:5])


def test_reference_fit_test_moderates_the_residual_variance_with_a_prior() -> None:
    """A runner prior (Smyth 2004) replaces s² (H - 2 df) by the moderated variance and adds d0 df."""
    prior = stats.VariancePrior(s0_sq=0.01**2, d0=8.0, items=6)
    current, current_ref = [3.3], [np.log(2.2)]
    fit = stats.fit_reference(ITEM_Y, REF_X)
    plain = fit.test(current, current_ref)
    moderated = fit.test(current, current_ref, prior=prior)
    s_sq = (8.0 * 0.01**2 + 4 * fit.residual_var) / 12
    assert moderated.df == 12 and plain.df == 4
    assert moderated.estimate == pytest.approx(plain.estimate)
    assert moderated.se == pytest.approx(math.sqrt(fit.prediction_var(np.log(2.2), s_sq)), rel=1e-12)
    assert moderated.p_slower == pytest.approx(scipy.stats.t.sf(moderated.estimate / moderated.se, 12), rel=1e-9)
