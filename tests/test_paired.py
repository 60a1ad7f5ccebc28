"""Paired statistics of side-by-side cycles, checked against scipy.stats on deterministic samples."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from pytest_aaco.verdict.paired import (
    SequentialPlan,
    obrien_fleming_spending,
    paired_t,
    pocock_spending,
    signed_rank,
    signed_rank_null_cdf,
)


def sample(n: int, shift: float, sd: float = 0.01, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(shift, sd, n)


@pytest.mark.parametrize("shift", [-0.01, 0.0, 0.004, 0.03])
def test_paired_t_is_scipys_one_sample_t_test(shift: float) -> None:
    d = sample(17, shift)
    comp = paired_t([d])
    assert comp.method == "paired-t" and comp.n_current == 17 and comp.df == 16
    assert comp.estimate == pytest.approx(d.mean())
    assert comp.p_slower == pytest.approx(scipy.stats.ttest_1samp(d, 0, alternative="greater").pvalue)
    assert comp.p_faster == pytest.approx(scipy.stats.ttest_1samp(d, 0, alternative="less").pvalue)
    ci = scipy.stats.ttest_1samp(d, 0).confidence_interval(0.95)
    assert comp.ci(0.95) == pytest.approx((math.exp(ci.low), math.exp(ci.high)))


def test_session_level_widens_the_interval_when_pairs_disagree() -> None:
    # two session pairs whose offsets differ by 4%: pooled cycles would look very precise
    a, b = sample(12, 0.0, seed=1), sample(12, 0.04, seed=2)
    pooled = paired_t([np.concatenate([a, b])])
    two_level = paired_t([a, b])
    assert two_level.method == "paired-t, session level"
    assert two_level.estimate == pytest.approx((a.mean() + b.mean()) / 2)
    assert two_level.se > 2 * pooled.se
    # the between-pair term is the moment estimate: var(means) - within * mean(1/n)
    within = (np.var(a, ddof=1) + np.var(b, ddof=1)) / 2
    tau_sq = np.var([a.mean(), b.mean()], ddof=1) - within / 12
    assert two_level.se == pytest.approx(math.sqrt(within * (2 / 12) / 4 + tau_sq / 2))
    assert two_level.df < 5  # the between term has one df


def test_session_prior_floors_the_between_term() -> None:
    a, b = sample(12, 0.01, seed=3), sample(12, 0.01, seed=4)
    floored = paired_t([a, b], session_sd=0.02)
    assert floored.se > paired_t([a, b]).se
    within = (np.var(a, ddof=1) + np.var(b, ddof=1)) / 2
    assert floored.se == pytest.approx(math.sqrt(within * (2 / 12) / 4 + 0.02**2 / 2))
    assert floored.df == 22


@pytest.mark.parametrize("bad", [[], [[0.1]], [[0.1, float("nan")]]])
def test_paired_t_refuses_bad_input(bad: list) -> None:
    with pytest.raises(ValueError):
        paired_t(bad)
    with pytest.raises(ValueError, match="session_sd"):
        paired_t([[0.1, 0.2]], session_sd=-1)


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_signed_rank_null_distribution_is_exact(n: int) -> None:
    # brute force over all 2^n sign patterns
    ranks = np.arange(1, n + 1)
    sums = [int(ranks[[bool(m >> i & 1) for i in range(n)]].sum()) for m in range(2**n)]
    expected = np.cumsum(np.bincount(sums, minlength=n * (n + 1) // 2 + 1)) / 2**n
    np.testing.assert_allclose(signed_rank_null_cdf(n), expected)


@pytest.mark.parametrize("n, shift", [(8, 0.0), (15, 0.005), (24, 0.02), (40, -0.003)])
def test_signed_rank_p_values_are_scipys_exact_wilcoxon(n: int, shift: float) -> None:
    d = sample(n, shift, seed=n)
    result = signed_rank(d)
    assert result.p_slower == pytest.approx(scipy.stats.wilcoxon(d, alternative="greater", method="exact").pvalue)
    assert result.p_faster == pytest.approx(scipy.stats.wilcoxon(d, alternative="less", method="exact").pvalue)


def test_signed_rank_large_n_uses_the_normal_approximation() -> None:
    d = sample(400, 0.001, seed=9)
    result = signed_rank(d)
    ref = scipy.stats.wilcoxon(d, alternative="greater", method="approx", correction=True).pvalue
    assert result.p_slower == pytest.approx(ref, rel=1e-3)
    assert math.log(result.upper(0.05)) > result.estimate > math.log(result.lower(0.05))


@pytest.mark.parametrize("n", [10, 24])
def test_hodges_lehmann_interval_inverts_the_test(n: int) -> None:
    # the bounds are where scipy's one-sided test of the shifted sample changes its decision
    d = sample(n, 0.02, seed=n + 100)
    result = signed_rank(d, level=0.90)
    walsh = np.sort([(d[i] + d[j]) / 2 for i in range(n) for j in range(i, n)])
    assert result.estimate == pytest.approx(np.median(walsh))
    eps = 1e-12
    p = lambda theta, alt: scipy.stats.wilcoxon(d - theta, alternative=alt, method="exact").pvalue  # noqa: E731
    assert p(result.ci_low - eps, "greater") <= 0.05 < p(result.ci_low + eps, "greater")
    assert p(result.ci_high + eps, "less") <= 0.05 < p(result.ci_high - eps, "less")
    assert result.ci_low < result.estimate < result.ci_high


def test_signed_rank_interval_is_unbounded_with_too_few_cycles() -> None:
    result = signed_rank([0.01, 0.02, 0.03], level=0.95)  # P(T+ <= 0) = 1/8 > 0.025
    assert result.ci_low == -math.inf and result.ci_high == math.inf and result.upper(0.05) == math.inf


def test_spending_functions_reach_alpha_and_grow() -> None:
    for spend in (obrien_fleming_spending, pocock_spending):
        values = [spend(t, 0.05) for t in (0.0, 0.25, 0.5, 0.75, 1.0)]
        assert values[0] == 0 and values[-1] == pytest.approx(0.05)
        assert all(b > a for a, b in zip(values, values[1:], strict=False))
    # O'Brien-Fleming spends almost nothing at the first quarter; Pocock a large share
    assert obrien_fleming_spending(0.25, 0.05) < 1e-4 < 0.01 < pocock_spending(0.25, 0.05)
    assert obrien_fleming_spending(0.5, 0.05) == pytest.approx(2 * scipy.stats.norm.sf(1.959964 / math.sqrt(0.5)))


def test_plan_levels_add_up_to_alpha() -> None:
    plan = SequentialPlan.steps(10, 10, 40)
    assert plan.looks == (10, 20, 30, 40)
    assert sum(plan.level(k, 0.01) for k in range(4)) == pytest.approx(0.01)
    assert plan.level(0, 0.01) > plan.level(3, 0.01)  # Pocock spends most at the first look
    obf = SequentialPlan.steps(10, 10, 40, spending="obrien-fleming")
    assert sum(obf.level(k, 0.05) for k in range(4)) == pytest.approx(0.05)
    assert obf.level(0, 0.05) < obf.level(3, 0.05)
    assert SequentialPlan.steps(8, 10, 30).looks == (8, 18, 28, 30)
    with pytest.raises(ValueError, match="spending"):
        SequentialPlan((10,), spending="haybittle")


@pytest.mark.parametrize("spending", ["pocock", "obrien-fleming"])
def test_repeated_looks_keep_the_false_alarm_rate(spending: str) -> None:
    # null cycles, four looks: testing each look at alpha would inflate the false alarms; the plan does not
    plan, alpha = SequentialPlan.steps(10, 10, 40, spending), 0.05
    rng = np.random.default_rng(0)
    runs = 20000
    d = rng.normal(0, 0.01, (runs, 40))
    ps = np.stack([scipy.stats.ttest_1samp(d[:, :n], 0, axis=1, alternative="greater").pvalue for n in plan.looks])
    levels = np.array([plan.level(k, alpha) for k in range(len(plan.looks))])[:, None]
    assert np.mean((ps <= alpha).any(axis=0)) > 0.08  # about 0.1 for four looks
    assert np.mean((ps <= levels).any(axis=0)) <= alpha + 0.005


@pytest.mark.parametrize("looks", [(), (1, 5), (10, 10), (20, 10)])
def test_bad_plans_are_refused(looks: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="looks"):
        SequentialPlan(looks)


def test_session_prior_weight_moderates_the_between_term() -> None:
    # two pairs whose offsets differ by 0.8%, against a 0.3% prior worth 4 pairs
    a, b = sample(3, 0.07, sd=0.0005, seed=5), sample(3, 0.078, sd=0.0005, seed=6)
    within = (np.var(a, ddof=1) + np.var(b, ddof=1)) / 2
    tau_hat_sq = np.var([a.mean(), b.mean()], ddof=1) - within / 3
    assert 0.003**2 < tau_hat_sq < (3 * 0.003) ** 2
    plain, moderated = paired_t([a, b], session_sd=0.003), paired_t([a, b], session_sd=0.003, session_df=4)
    tau_sq = (4 * 0.003**2 + 1 * tau_hat_sq) / 5
    within_term, between_term = within * (2 / 3) / 4, tau_sq / 2
    assert moderated.se == pytest.approx(math.sqrt(within_term + between_term))
    # Welch-Satterthwaite df with 4 + 2 - 1 = 5 df for the between term
    df = (within_term + between_term) ** 2 / (within_term**2 / 4 + between_term**2 / 5)
    assert moderated.df == pytest.approx(df)
    assert moderated.p_slower == pytest.approx(scipy.stats.t.sf(moderated.estimate / moderated.se, df))
    # the one-df interval of the plain estimate is far wider than the moderated one
    assert plain.df < 1.5 < 4 < moderated.df
    assert plain.ci(0.95)[0] < moderated.ci(0.95)[0]
    # no effect while the pairs agree (the prior is a floor, the within df stay)
    c, d = sample(3, 0.07, sd=0.0005, seed=7), sample(3, 0.0705, sd=0.0005, seed=8)
    assert paired_t([c, d], 0.003, 4).se == pytest.approx(paired_t([c, d], 0.003).se)
    assert paired_t([c, d], 0.003, 4).df == 4
    # pairs 3% apart: the prior is wrong for these sessions, and the data alone decide
    e, f = sample(3, 0.07, sd=0.0005, seed=9), sample(3, 0.10, sd=0.0005, seed=10)
    assert paired_t([e, f], 0.003, 4).se == pytest.approx(paired_t([e, f], 0.003).se)
    assert paired_t([e, f], 0.003, 4).df == pytest.approx(paired_t([e, f], 0.003).df)
    with pytest.raises(ValueError, match="session_df"):
        paired_t([a, b], 0.003, -1)
