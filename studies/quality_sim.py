"""Noise model and vectorised simulation for the verdict-quality study.

Model of one item's log latency (natural log of ms), iteration t of round r of run j in session s::

    y = ln(ms) + a_s,j + b_i,j + u_r + e_t

* ``a``: a session offset shared by every item of one pytest process (load, clocks), sd ``session_sd``;
* ``b``: the item's own run-to-run offset (fresh process, fresh InferenceSession), sd ``sd_run``;
* ``u``: a round offset, sd ``sd_round``;
* ``e``: AR(1) iteration noise with lag-1 autocorrelation ``rho`` and marginal sd ``sd_iter``,
  continuing across the rounds of a run.

:func:`fit_noise` estimates these from unchanged runs (between-run sd of run means, within-run sd of
round log-means, iteration sd and lag-1 autocorrelation inside rounds). :func:`simulate` draws
``H`` history runs, a current run and a confirmation run (a fresh session in the same process, whose
offset correlates with the current run's by ``confirm_corr``) for every item of many sessions.

The decision rules are vectorised copies of the plugin's: :func:`welch_rounds` and
:func:`prediction_interval` follow ``pytest_aaco.verdict.stats`` (checked against it by :func:`cross_check`),
:func:`classify` follows ``pytest_aaco.history.judge.judge_history`` and :func:`gate` adds LOND across the
session's items (``pytest_aaco.verdict.stats.LondFdr``) and the confirmation look
(``pytest_aaco.verdict.finish.confirm``). Naive rules: :func:`naive_welch` (Welch on pooled iterations in
ms, one-sided alpha 0.05, no threshold) and :func:`pb_mean_rule` (pytest-benchmark's
``mean:5%``: current mean / saved mean - 1 > 5%).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.signal
import scipy.stats

from pytest_aaco.options import default

DEFAULT_RUN_NOISE = default("run-noise")

NO_REGRESSION, INCONCLUSIVE, REGRESSION, IMPROVEMENT = 0, 1, 2, 3
OUTCOME_NAMES = {NO_REGRESSION: "no-regression", INCONCLUSIVE: "inconclusive", REGRESSION: "regression",
                 IMPROVEMENT: "improvement"}
SE_FLOOR = 1e-9
#: the short-history rule's run-to-run term: the --aaco-run-noise default (2%) as ln units;
#: with one history run the plugin cannot learn a larger one
SHORT_RUN_SD = math.log1p(DEFAULT_RUN_NOISE)


# ------------------------------------------------------------------ noise model


@dataclass(frozen=True)
class ItemNoise:
    """Noise of one item type; sds are in ln units (0.02 = about 2%)."""

    name: str
    ms: float
    n_iter: int
    sd_run: float
    sd_round: float
    sd_iter: float
    rho: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ar1_mean_var(sd: float, rho: float, n: int) -> float:
    """Variance of the mean of *n* consecutive values of a stationary AR(1) series."""
    if n <= 1:
        return sd * sd
    k = np.arange(1, n)
    factor = 1 + 2 * np.sum((1 - k / n) * rho ** k)
    return float(sd * sd / n * factor)


def lag1(x: np.ndarray) -> tuple[float, float]:
    """(sum of lag-1 cross products, sum of squares) of *x* about its mean."""
    d = x - x.mean()
    return float(np.sum(d[:-1] * d[1:])), float(np.sum(d * d))


def describe_runs(runs: list[list[np.ndarray]]) -> dict[str, float]:
    """Empirical noise figures of one item from its unchanged runs (each a list of rounds of ms).

    Returns between-run sd of run means, within-run sd of round log-means (root mean of the runs'
    variances), iteration sd inside rounds, pooled lag-1 autocorrelation inside rounds, median
    iterations per round, rounds per run and the geometric-mean latency.
    """
    run_means, round_vars, iter_vars, num, den, n_iters, k_rounds = [], [], [], 0.0, 0.0, [], []
    for run in runs:
        logs = [np.log(np.asarray(r, dtype=float)) for r in run]
        lm = np.array([x.mean() for x in logs])
        run_means.append(lm.mean())
        if lm.size > 1:
            round_vars.append(lm.var(ddof=1))
        k_rounds.append(lm.size)
        for x in logs:
            n_iters.append(x.size)
            if x.size > 2:
                iter_vars.append(x.var(ddof=1))
                a, b = lag1(x)
                num += a
                den += b
    rm = np.array(run_means)
    return {
        "runs": len(runs),
        "ms": float(np.exp(rm.mean())),
        "between_sd": float(rm.std(ddof=1)) if rm.size > 1 else float("nan"),
        "within_sd": float(math.sqrt(np.mean(round_vars))) if round_vars else float("nan"),
        "iter_sd": float(math.sqrt(np.mean(iter_vars))) if iter_vars else float("nan"),
        "rho": num / den if den > 0 else 0.0,
        "n_iter": int(np.median(n_iters)),
        "rounds": int(np.median(k_rounds)),
        "run_means": rm.tolist(),
    }


def noise_from_figures(name: str, fig: dict[str, float]) -> ItemNoise:
    """Model parameters from empirical figures: the round offset is what the within-run sd of round
    means has beyond the AR(1) mean's variance; the run offset what the between-run sd has beyond the
    within-run sd / sqrt(rounds)."""
    k, n = fig["rounds"], fig["n_iter"]
    rho = float(np.clip(fig["rho"], -0.9, 0.95))
    var_mean = ar1_mean_var(fig["iter_sd"], rho, n)
    sd_round = math.sqrt(max(fig["within_sd"] ** 2 - var_mean, 0.0))
    sd_run = math.sqrt(max(fig["between_sd"] ** 2 - fig["within_sd"] ** 2 / k, 0.0))
    return ItemNoise(name, fig["ms"], n, sd_run, sd_round, fig["iter_sd"], rho)


def session_component(run_means: np.ndarray) -> float:
    """sd of the offset shared by all items of a session, from run means of shape (sessions, items):
    one-way random effects on the deviations from each item's mean (floored at 0)."""
    d = run_means - run_means.mean(axis=0, keepdims=True)
    m = d.shape[1]
    per_item_var = d.var(axis=0, ddof=1)
    s = d.mean(axis=1)
    var_s = (s.var(ddof=1) - per_item_var.mean() / m) / (1 - 1 / m)
    return float(math.sqrt(min(max(var_s, 0.0), per_item_var.min())))


# ------------------------------------------------------------------ simulation


@dataclass
class SimData:
    """Simulated runs. ``logmeans``: (S, m, R, K) round log-means; ``mean_ms``/``var_ms``/``n``:
    (S, m, R) pooled-iteration mean, variance (ddof=1) and count. Runs 0..H-1 are the history,
    run H the current run, run H+1 the confirmation look, runs H+2 and H+3 independent extra runs."""

    logmeans: np.ndarray
    mean_ms: np.ndarray
    var_ms: np.ndarray
    n: np.ndarray
    history: int


def simulate(items: list[ItemNoise], sessions: int, history: int, rounds: int, session_sd: float,
             confirm_corr: float, rng: np.random.Generator, chunk: int = 500,
             offset_pools: list[np.ndarray] | None = None) -> SimData:
    """Draw *history* runs, the current run, the confirmation run and two more runs with
    independent offsets (fresh processes, for the proposed multi-run rules) of every item.

    With *offset_pools* (one 1-D array per item) the run offsets are not normal: each run's offset
    is drawn with replacement from the item's pool (observed run-mean deviations), and the
    confirmation look keeps the current run's offset with probability *confirm_corr*, else draws
    afresh; *session_sd* is then ignored. This keeps the episodic, heavy-tailed slow phases that a
    shared machine shows."""
    m, runs = len(items), history + 4
    logmeans = np.empty((sessions, m, runs, rounds))
    mean_ms = np.empty((sessions, m, runs))
    var_ms = np.empty((sessions, m, runs))
    n = np.empty((sessions, m, runs))
    # offsets: a (session, run) shared by all items, b (session, item, run) own
    a = rng.standard_normal((sessions, runs)) * session_sd
    c = float(np.clip(confirm_corr, 0.0, 1.0))
    a[:, history + 1] = c * a[:, history] + math.sqrt(1 - c * c) * a[:, history + 1]
    if offset_pools is not None:
        a[:] = 0.0
    for i, it in enumerate(items):
        if offset_pools is not None:
            b = rng.choice(np.asarray(offset_pools[i], dtype=float), size=(sessions, runs))
            keep = rng.random(sessions) < c
            b[keep, history + 1] = b[keep, history]
        else:
            own_sd = math.sqrt(max(it.sd_run ** 2 - session_sd ** 2, 0.0))
            b = rng.standard_normal((sessions, runs)) * own_sd
            b[:, history + 1] = c * b[:, history] + math.sqrt(1 - c * c) * b[:, history + 1]
        base = math.log(it.ms)
        length = rounds * it.n_iter
        for lo in range(0, sessions, chunk):
            hi = min(sessions, lo + chunk)
            w = rng.standard_normal((hi - lo, runs, length))
            w[..., 0] *= it.sd_iter
            w[..., 1:] *= it.sd_iter * math.sqrt(1 - it.rho ** 2)
            e = scipy.signal.lfilter([1.0], [1.0, -it.rho], w, axis=-1) if it.rho else w
            u = rng.standard_normal((hi - lo, runs, rounds)) * it.sd_round
            y = e.reshape(hi - lo, runs, rounds, it.n_iter)
            y += (base + a[lo:hi, :, None, None] + b[lo:hi, :, None, None] + u[..., None])
            logmeans[lo:hi, i] = y.mean(axis=-1)
            ms = np.exp(y.reshape(hi - lo, runs, length))
            mean_ms[lo:hi, i] = ms.mean(axis=-1)
            var_ms[lo:hi, i] = ms.var(axis=-1, ddof=1)
            n[lo:hi, i] = length
    return SimData(logmeans, mean_ms, var_ms, n, history)


# ------------------------------------------------------------------ rules, vectorised


def welch_rounds(cur: np.ndarray, base: np.ndarray, run_sd: float = 0.0, baseline_runs: int = 1
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, se, df) of pytest_aaco.verdict.stats.welch_rounds over the last axis, with its run-to-run
    term ``run_sd² (1 + 1/baseline_runs)`` added to se²."""
    nc, nb = cur.shape[-1], base.shape[-1]
    vc = cur.var(axis=-1, ddof=1) / nc
    vb = base.var(axis=-1, ddof=1) / nb
    est = cur.mean(axis=-1) - base.mean(axis=-1)
    se = np.maximum(np.sqrt(vc + vb + run_sd ** 2 * (1 + 1 / baseline_runs)), SE_FLOOR)
    denom = vc * vc / (nc - 1) + vb * vb / (nb - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denom > 0, (vc + vb) ** 2 / np.where(denom > 0, denom, 1.0), float(nc + nb - 2))
    return est, se, df


def prediction_interval(cur: np.ndarray, hist_means: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, se, df) of pytest_aaco.verdict.stats.prediction_interval_test: cur (..., K), hist_means (..., H)."""
    h = hist_means.shape[-1]
    est = cur.mean(axis=-1) - hist_means.mean(axis=-1)
    se = np.maximum(hist_means.std(axis=-1, ddof=1) * math.sqrt(1 + 1 / h), SE_FLOOR)
    return est, se, np.full(est.shape, float(h - 1))


def moderated_prior(s2: np.ndarray, d: float) -> tuple[np.ndarray, np.ndarray]:
    """Empirical-Bayes prior (s0², d0) for the variances *s2* of shape (S, m) with *d* degrees of
    freedom each, estimated across the m items of each session by moments of log s² (Smyth 2004,
    "Linear models and empirical Bayes methods for assessing differential expression", SAGMB 3(1),
    section 6.2). d0 = inf when the items' variances are no more spread than sampling alone makes them."""
    from scipy.optimize import brentq
    from scipy.special import digamma, polygamma

    z = np.log(np.maximum(s2, 1e-300))
    e = z - digamma(d / 2) + np.log(d / 2)
    ebar = e.mean(axis=1)
    m = s2.shape[1]
    excess = ((e - ebar[:, None]) ** 2).sum(axis=1) / (m - 1) - float(polygamma(1, d / 2))
    d0 = np.full(excess.shape, np.inf)
    s0 = np.exp(ebar)
    for k in np.flatnonzero(excess > 1e-12):
        d0[k] = 2 * brentq(lambda x, v=excess[k]: float(polygamma(1, x)) - v, 1e-8, 1e8)
    finite = np.isfinite(d0)
    s0[finite] = np.exp(ebar[finite] + digamma(d0[finite] / 2) - np.log(d0[finite] / 2))
    return s0, d0


def moderated_pi(cur: np.ndarray, hist_means: np.ndarray, n_current: int = 1
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prediction-interval test with the history variance moderated across the session's items:
    ``s~² = (d0 s0² + d s²) / (d0 + d)``, df ``d0 + d`` (``d = H - 1``). *cur*: (S, m, n_current)
    run means of the current measurement (averaged), *hist_means*: (S, m, H)."""
    h = hist_means.shape[-1]
    d = float(h - 1)
    s2 = hist_means.var(axis=-1, ddof=1)
    s0, d0 = moderated_prior(s2, d)
    d0 = d0[:, None]
    with np.errstate(invalid="ignore"):
        post = np.where(np.isinf(d0), s0[:, None], (d0 * s0[:, None] + d * s2) / (d0 + d))
    df = np.where(np.isinf(d0), 1e6, d0 + d) * np.ones_like(s2)
    est = cur.mean(axis=-1) - hist_means.mean(axis=-1)
    se = np.maximum(np.sqrt(post * (1 / n_current + 1 / h)), SE_FLOOR)
    return est, se, np.minimum(df, 1e6)


def classify(est: np.ndarray, se: np.ndarray, df: np.ndarray, level: Any, delta: float,
             delta_est: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Outcome codes and MDE of pytest_aaco.history.judge.judge_history for one look at *level* (α_i).
    *delta_est*: the estimated slowdown a regression needs (default *delta*, as the plugin)."""
    t = est / se
    p_slower = scipy.stats.t.sf(t, df)
    p_faster = scipy.stats.t.cdf(t, df)
    slowdown = np.expm1(est)
    tq = scipy.stats.t.ppf(1 - np.asarray(level), df)
    reg = (p_slower <= level) & (slowdown >= (delta if delta_est is None else delta_est))
    imp = ~reg & (p_faster <= level) & (-slowdown >= delta)
    upper = np.exp(est + tq * se) - 1
    nor = ~reg & ~imp & (upper < delta)
    out = np.full(est.shape, INCONCLUSIVE)
    out[nor] = NO_REGRESSION
    out[imp] = IMPROVEMENT
    out[reg] = REGRESSION
    mde = np.expm1((tq + scipy.stats.t.ppf(0.8, df)) * se)
    return out, mde


def gate(first: tuple[np.ndarray, ...], second: tuple[np.ndarray, ...] | None, delta: float, q: float,
         delta_est: float | None = None) -> dict[str, np.ndarray]:
    """The plugin's session: items judged in order with LOND levels ``q (D + 1) / m``; a first-look
    regression is re-measured (*second*) and fails only if that look also says regression.
    Inputs are (estimate, se, df), each of shape (S, m). Returns outcome, fails, level, mde, first (S, m)
    and noreg05: where a one-sided 95% upper bound (instead of 1 - α_i) would already be below δ."""
    est, se, df = first
    s, m = est.shape
    upper05 = np.expm1(est + scipy.stats.t.ppf(0.95, df) * se)
    discoveries = np.zeros(s)
    out = np.empty((s, m), dtype=int)
    first_out = np.empty((s, m), dtype=int)
    level = np.empty((s, m))
    mde = np.empty((s, m))
    for i in range(m):
        lv = q * (discoveries + 1) / m
        o1, md = classify(est[:, i], se[:, i], df[:, i], lv, delta, delta_est)
        final = o1.copy()
        if second is not None:
            o2, _ = classify(second[0][:, i], second[1][:, i], second[2][:, i], lv, delta, delta_est)
            final = np.where(o1 == REGRESSION, np.where(o2 == REGRESSION, REGRESSION, INCONCLUSIVE), o1)
        out[:, i], first_out[:, i], level[:, i], mde[:, i] = final, o1, lv, md
        discoveries += final == REGRESSION
    return {"outcome": out, "fails": out == REGRESSION, "level": level, "mde": mde, "first": first_out,
            "noreg05": (out != REGRESSION) & (upper05 < delta)}


def naive_welch(mean_c: np.ndarray, var_c: np.ndarray, n_c: np.ndarray, mean_b: np.ndarray, var_b: np.ndarray,
                n_b: np.ndarray, alpha: float = 0.05) -> np.ndarray:
    """Welch's t-test on pooled iterations (ms), one-sided 'slower' at *alpha*, no threshold."""
    vc, vb = var_c / n_c, var_b / n_b
    t = (mean_c - mean_b) / np.sqrt(vc + vb)
    df = (vc + vb) ** 2 / (vc * vc / (n_c - 1) + vb * vb / (n_b - 1))
    return scipy.stats.t.sf(t, df) <= alpha


def pb_mean_rule(mean_c: np.ndarray, mean_b: np.ndarray, percent: float = 5.0) -> np.ndarray:
    """pytest-benchmark ``--benchmark-compare-fail=mean:5%``."""
    return mean_c / mean_b * 100 - 100 > percent


# ------------------------------------------------------------------ applying rules to simulated data


def _pi_runs(runs: np.ndarray, hist_means: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prediction interval for the mean of r independent current runs: se = s sqrt(1/r + 1/H)."""
    r, h = runs.shape[-1], hist_means.shape[-1]
    est = runs.mean(axis=-1) - hist_means.mean(axis=-1)
    se = np.maximum(hist_means.std(axis=-1, ddof=1) * math.sqrt(1 / r + 1 / h), SE_FLOOR)
    return est, se, np.full(est.shape, float(h - 1))


def evaluate(sim: SimData, shift: np.ndarray, delta: float = 0.05, q: float = 0.05,
             history: int | None = None, proposals: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """All rules on *sim* with a true slowdown ``shift`` (ln units, shape (S, m)) added to the current
    and confirmation runs. ``history``: use only the last so many history runs for the plugin's
    long-history rule. Returns rule -> {"fails": (S, m) bool, ...}."""
    h = sim.history
    use = h if history is None else history
    lm = sim.logmeans
    cur = lm[:, :, h] + shift[..., None]
    conf = lm[:, :, h + 1] + shift[..., None]
    hist_means = lm[:, :, h - use:h].mean(axis=-1)
    last = lm[:, :, h - 1]
    res: dict[str, dict[str, np.ndarray]] = {}
    long1 = prediction_interval(cur, hist_means) if use >= 3 else welch_rounds(cur, lm[:, :, h - use:h].reshape(
        *cur.shape[:2], -1))
    long2 = prediction_interval(conf, hist_means) if use >= 3 else welch_rounds(conf, lm[:, :, h - use:h].reshape(
        *cur.shape[:2], -1))
    res["aaco"] = gate(long1, long2, delta, q)
    res["aaco_first_look"] = gate(long1, None, delta, q)
    short1 = welch_rounds(cur, last, SHORT_RUN_SD, 1)
    short2 = welch_rounds(conf, last, SHORT_RUN_SD, 1)
    res["aaco_h1"] = gate(short1, short2, delta, q)
    factor = np.exp(shift)
    mc, vc = sim.mean_ms[:, :, h] * factor, sim.var_ms[:, :, h] * factor ** 2
    mb, vb = sim.mean_ms[:, :, h - 1], sim.var_ms[:, :, h - 1]
    if proposals and use >= 3:
        hist_runs = lm[:, :, h - use:h].mean(axis=-1)
        extra = lm[:, :, h + 2] + shift[..., None]
        run_cur, run_conf, run_extra = cur.mean(axis=-1), conf.mean(axis=-1), extra.mean(axis=-1)
        res["mod"] = gate(moderated_pi(run_cur[..., None], hist_runs),
                          moderated_pi(run_conf[..., None], hist_runs), delta, q)
        both = np.stack([run_cur, run_extra], axis=-1)
        res["mod_2runs"] = gate(moderated_pi(both, hist_runs, 2), None, delta, q)
        three = np.concatenate([both, (lm[:, :, h + 3] + shift[..., None]).mean(axis=-1)[..., None]], axis=-1)
        res["mod_3runs"] = gate(moderated_pi(three, hist_runs, 3), None, delta, q)
        res["mod_3runs_half"] = gate(moderated_pi(three, hist_runs, 3), None, delta, q, delta_est=delta / 2)
        res["pi_2runs"] = gate(_pi_runs(both, hist_runs), None, delta, q)
    res["naive_welch"] = {"fails": naive_welch(mc, vc, sim.n[:, :, h], mb, vb, sim.n[:, :, h - 1])}
    slower = naive_welch(mc, vc, sim.n[:, :, h], mb, vb, sim.n[:, :, h - 1], alpha=0.025)
    faster = naive_welch(mb, vb, sim.n[:, :, h - 1], mc, vc, sim.n[:, :, h], alpha=0.025)
    res["naive_welch_2s"] = {"fails": slower | faster}
    res["pb_mean5"] = {"fails": pb_mean_rule(mc, mb)}
    return res


def cross_check(sim: SimData, rng: np.random.Generator, samples: int = 200) -> dict[str, float]:
    """Max absolute differences between the vectorised rules and pytest_aaco.verdict.stats / LondFdr."""
    from pytest_aaco.verdict import stats
    h = sim.history
    s_idx = rng.integers(0, sim.logmeans.shape[0], samples)
    i_idx = rng.integers(0, sim.logmeans.shape[1], samples)
    worst = {"welch_p": 0.0, "pi_p": 0.0, "welch_df": 0.0, "lond_level": 0.0}
    cur = sim.logmeans[s_idx, i_idx, h]
    hist = sim.logmeans[s_idx, i_idx, :h]
    e, se, df = welch_rounds(cur, hist[:, -1], SHORT_RUN_SD, 1)
    p = scipy.stats.t.sf(e / se, df)
    e2, se2, df2 = prediction_interval(cur, hist.mean(axis=-1))
    p2 = scipy.stats.t.sf(e2 / se2, df2)
    for k in range(samples):
        w = stats.welch_rounds(cur[k], hist[k, -1], run_sd=SHORT_RUN_SD, baseline_runs=1)
        worst["welch_p"] = max(worst["welch_p"], abs(w.p_slower - p[k]))
        worst["welch_df"] = max(worst["welch_df"], abs(w.df - df[k]))
        if h >= 3:
            pi = stats.prediction_interval_test(cur[k], hist[k].mean(axis=-1))
            worst["pi_p"] = max(worst["pi_p"], abs(pi.p_slower - p2[k]))
    # LOND: replay a few sessions' first looks (no confirmation) with LondFdr
    first = prediction_interval(sim.logmeans[:, :, h], sim.logmeans[:, :, :h].mean(axis=-1)) if h >= 3 else \
        welch_rounds(sim.logmeans[:, :, h], sim.logmeans[:, :, h - 1])
    g = gate(first, None, 0.0, 0.05)
    m = sim.logmeans.shape[1]
    for srow in range(min(20, sim.logmeans.shape[0])):
        lond = stats.LondFdr(0.05, m)
        for i in range(m):
            lv = lond.next_level()
            worst["lond_level"] = max(worst["lond_level"], abs(lv - g["level"][srow, i]))
            lond.record(bool(g["fails"][srow, i]))
    return worst
