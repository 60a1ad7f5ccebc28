"""The stored gate's run level: each run's fastest quarter of rounds (verdict/stats.fastest_rounds).

A shared machine slows some rounds of a run by tens of per cent, in phases of seconds (the 2-core study
VM: ResNet-50's rounds at 56 ms, and 74-80 ms in its slow phases). Runs compared by the mean of all their
rounds then differ by the phases they caught; compared by their fastest rounds, they do not.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from finished import judge_history
from scipy import stats as scipy_stats

from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.store import Baseline, run_record
from pytest_aaco.options import GateSettings
from pytest_aaco.verdict import stats
from pytest_aaco.verdict.outcome import Outcome

FIELDS = {"model_sha256": "aa" * 32, "provider": "CPUExecutionProvider", "ort_version": "1.31.1",
          "inputs": "x:float32[1,3]", "intra_op_threads": 1}
FP = Fingerprint(dict(FIELDS))


@pytest.mark.parametrize("rounds, kept", [(10, 3), (8, 2), (4, 2), (2, 2), (1, 1), (40, 10)])
def test_the_fastest_quarter_keeps_at_least_two_rounds(rounds, kept):
    x = np.random.default_rng(rounds).standard_normal(rounds)
    got = stats.fastest_rounds(x)
    assert len(got) == kept
    assert list(got) == sorted(x)[:kept]


def test_a_non_finite_round_is_an_error():
    with pytest.raises(ValueError, match="finite"):
        stats.fastest_rounds([1.0, float("nan"), 2.0])


def _phased(center_ms: float, seed: int, slow: int, rounds: int = 10) -> list[float]:
    """Round means (ms) of one run: *slow* of its rounds caught a slow phase of the machine (+20% to +40%)."""
    rng = np.random.default_rng(seed)
    means = center_ms * np.exp(0.003 * rng.standard_normal(rounds))
    hit = rng.choice(rounds, size=slow, replace=False)
    means[hit] *= rng.uniform(1.2, 1.4, size=slow)
    return [float(m) for m in means]


def _history(result_factory, runs: int = 5) -> Baseline:
    records = [run_record(result_factory(_phased(56.0, seed, slow=seed % 4), iterations=6, noise=0.003, seed=seed))
               for seed in range(runs)]
    return Baseline(Path("/b/m.json"), "t.py::test_latency[m-cpu]", FP.fields, FP.id, records, [])


def test_slow_phases_neither_hide_a_slowdown_nor_fake_one(result_factory):
    """5 saved runs, each with 0 to 3 rounds in a slow phase. On the mean of all rounds the runs spread
    by several per cent, so an unchanged run with 3 slow rounds and a +8% run with none sit in the same
    interval; on the fastest quarter the unchanged run reads no regression and the +8% run a regression."""
    baseline = _history(result_factory)
    means = [np.mean(r) for r in baseline.run_round_log_means()]
    levels = [np.mean(stats.fastest_rounds(r)) for r in baseline.run_round_log_means()]
    assert np.std(levels, ddof=1) < np.std(means, ddof=1) / 4
    same = result_factory(_phased(56.0, 11, slow=3), iterations=6, noise=0.003, seed=11)
    slower = result_factory(_phased(56.0 * 1.08, 12, slow=0), iterations=6, noise=0.003, seed=12)
    settings = GateSettings()
    v_same = judge_history(same, baseline, FP, settings, 0.05, "m[cpu]")
    v_slow = judge_history(slower, baseline, FP, settings, 0.05, "m[cpu]")
    assert v_same.outcome == Outcome.NO_REGRESSION, v_same.message
    assert v_slow.outcome == Outcome.REGRESSION, v_slow.message
    assert v_slow.rounds_kept == stats.FASTEST_ROUNDS
    assert "fastest quarter of rounds" in v_slow.message
    # the ratio is that of the fastest quarters' geometric means, and the test is the prediction
    # interval on the run levels: scipy's two-sample t-test of the one new level against the saved ones
    now = np.mean(stats.fastest_rounds(slower.round_log_means))
    assert v_slow.ratio == pytest.approx(np.exp(now - np.mean(levels)))
    assert v_slow.current_geomean_ms / v_slow.baseline_geomean_ms == pytest.approx(v_slow.raw_ratio)
    t, p_two = scipy_stats.ttest_ind([now], levels)
    assert v_slow.p_value == pytest.approx(p_two / 2, rel=1e-6)


def test_a_short_history_tests_levels_with_every_rounds_noise(result_factory):
    """Fewer saved runs than --aaco-min-history: the estimate is the levels' difference, the standard
    error Welch's on every round plus the run term (the spread of the kept rounds alone would understate
    a round's noise), checked against scipy's Welch test on the same rounds."""
    from scipy import stats as sps

    baseline = _history(result_factory, runs=2)
    current = result_factory(_phased(56.0 * 1.08, 21, slow=2), iterations=6, noise=0.003, seed=21)
    v = judge_history(current, baseline, FP, GateSettings(run_noise=0.0), 0.05, "m[cpu]")
    runs = [np.asarray(r) for r in baseline.run_round_log_means()]
    level = np.mean(stats.fastest_rounds(current.round_log_means)) - np.mean(
        [np.mean(stats.fastest_rounds(r)) for r in runs])
    assert v.rounds_kept == stats.FASTEST_ROUNDS and "fastest quarter of rounds" in v.message
    assert v.ratio == pytest.approx(np.exp(level))
    welch = sps.ttest_ind(current.round_log_means, np.concatenate(runs), equal_var=False)
    se = (np.mean(current.round_log_means) - np.mean(np.concatenate(runs))) / welch.statistic
    learned = np.std([np.mean(stats.fastest_rounds(r)) for r in runs], ddof=1)  # the levels' own spread
    comp = stats.level_test(current.round_log_means, runs, run_sd=learned)
    assert comp.se == pytest.approx(np.sqrt(se ** 2 + learned ** 2 * 1.5))
    assert comp.df == pytest.approx(welch.df)
    assert v.outcome == Outcome.REGRESSION, v.message
