"""Calibrated claims of the stored gate (issue 43): wall time's spread between processes comes from the
saved runs, device time gives the word when it is decided, a reference series is tested only where the
history shows it steadier, and a memory regression's table word is the message's."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from finished import judge_history

from pytest_aaco.history.fingerprint import build_fingerprint
from pytest_aaco.history.judge import IMPROVEMENT, INCONCLUSIVE, NO_REGRESSION, REGRESSION
from pytest_aaco.history.series import ADJUSTED, RAW, Track, build_series
from pytest_aaco.history.store import Baseline, run_record
from pytest_aaco.options import GateSettings
from pytest_aaco.records.base import MEMORY, Outcome
from pytest_aaco.records.item import ItemRecord
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.verdict import stats
from tests.test_device_time_stored import _series


@pytest.mark.parametrize("history", [[0.1, 0.3], [0.0, 0.05, -0.02], [1.0, 1.2, 0.9, 1.05, 1.1]])
def test_between_run_test_is_scipys_two_sample_t_test_of_one_run_against_the_saved_runs(history):
    current = np.array([0.4, 0.42, 0.38, 0.41])
    comp = stats.between_run_test(current, history)
    ref = scipy.stats.ttest_ind([current.mean()], history, equal_var=True, alternative="greater")
    assert comp.estimate / comp.se == pytest.approx(ref.statistic, rel=1e-9)
    assert comp.df == len(history) - 1
    assert comp.p_slower == pytest.approx(ref.pvalue, rel=1e-9)
    less = scipy.stats.ttest_ind([current.mean()], history, equal_var=True, alternative="less")
    assert comp.p_faster == pytest.approx(less.pvalue, rel=1e-9)


def test_between_run_test_needs_two_saved_runs():
    with pytest.raises(ValueError, match="at least 2"):
        stats.between_run_test([0.1], [0.2])


def _fingerprint():
    return build_fingerprint(model_sha256="a", input_shapes={}, input_dtypes={}, provider="cpu",
                             ep_name="CPUExecutionProvider", provider_options={}, iobinding="none",
                             intra_op_threads=0)


def _two_runs(tmp_path, result_factory, wall_ms=(2.0, 2.03)):
    """Two saved runs whose wall time differs by 1.5% between processes, device time flat."""
    history = []
    for seed, ms in enumerate(wall_ms):
        result = result_factory([ms] * 10, seed=seed, noise=0.002)
        result.device = _series(0.818, seed=seed)
        history.append(run_record(result))
    baseline = Baseline(tmp_path / "b.json", "t::x", {"provider": "cpu"}, "fp", history)
    baseline.fingerprint = _fingerprint().fields
    return baseline


def test_a_wall_time_improvement_the_saved_runs_do_not_support_leaves_the_word_to_device_time(
        tmp_path, result_factory):
    # the rounds of one process are tight (0.2%), so Welch's test on rounds calls -10% an improvement;
    # over 2 saved runs 1.5% apart, the test between processes (1 df) cannot at the 1% level (p = 0.04);
    # device time is flat: no regression
    baseline = _two_runs(tmp_path, result_factory)
    current = result_factory([1.82] * 10, seed=9, noise=0.002)
    current.device = _series(0.818, seed=9)
    settings = GateSettings(run_noise=0.0)
    v = judge_history(current, baseline, _fingerprint(), settings, level=0.01, label="m[cuda]")
    assert v.device_outcome == NO_REGRESSION
    assert v.outcome == NO_REGRESSION and not v.fails
    assert v.wall_outcome == INCONCLUSIVE
    assert any("wall time improvement not claimed" in n and "1 df" in n for n in v.notes), v.notes
    # without device time the same wall figures keep wall time's own word (the CPU gate is unchanged)
    plain = result_factory([1.82] * 10, seed=9, noise=0.002)
    assert judge_history(plain, baseline, _fingerprint(), settings, 0.01, "m[cpu]").outcome == IMPROVEMENT


def test_a_device_time_regression_gives_the_word_whatever_wall_time_says(tmp_path, result_factory):
    baseline = _two_runs(tmp_path, result_factory, (2.0, 2.004))
    current = result_factory([1.9] * 10, seed=9, noise=0.002)  # wall time faster, device time 8% slower
    current.device = _series(0.818 * 1.08, seed=9)
    v = judge_history(current, baseline, _fingerprint(), GateSettings(run_noise=0.0), 0.05, "m[cuda]")
    assert v.device_outcome == REGRESSION and v.outcome == REGRESSION and v.fails
    assert v.message.startswith("REGRESSION m[cuda]: device time +"), v.message


def _track(item_means, ref_means, now_item, now_ref, ref_ms=2.0):
    rng = np.random.default_rng(0)
    rounds = [list(m + rng.normal(0, 0.001, 8)) for m in item_means]
    refs = [{"log_means": list(r + rng.normal(0, 0.001, 8))} for r in ref_means]
    current = np.array(now_item + rng.normal(0, 0.001, 8))
    ref_now = np.array(now_ref + rng.normal(0, 0.001, 8))

    class Blocks:
        log_means = ref_now

    return Track(current, rounds, float(np.exp(now_item)), "iteration", ref=Blocks(), ref_name="mix", ref_id="mix:1",
                 ref_mean_ms=ref_ms, pairs=list(zip(rounds, refs, strict=True)),
                 normalized=lambda: (current - ref_now, [list(np.subtract(a, r["log_means"])) for a, r in
                                                         zip(rounds, refs, strict=True)]))


def test_a_reference_series_noisier_than_the_raw_one_is_not_tested():
    # the item (sd 0.2%) and the reference (sd 0.5%) vary independently from run to run; the slope prior holds
    # the fitted sensitivity near 1 (0.82), so the adjusted series carries the reference's noise: 3.7x the variance
    item = [0.6937, 0.6946, 0.6937, 0.6904, 0.6948]
    ref = [0.7022, 0.6973, 0.7029, 0.7018, 0.7015]
    series = build_series(_track(item, ref, 0.78, 0.70), min_history=5)
    assert series.kind == RAW and "varied more between the saved runs than the raw one" in series.reason
    # two saved runs: normalized only if steadier; here it is not
    two = build_series(_track(item[3:], ref[3:], 0.78, 0.70), min_history=5)
    assert two.kind == RAW and "varied more" in two.reason


def test_a_reference_series_steadier_than_the_raw_one_is_tested():
    # the machine's speed moves item and reference alike from run to run: the adjusted series is steadier
    machine = [0.0, 0.05, -0.04, 0.03, -0.02]
    item = [0.693 + m for m in machine]
    ref = [0.70 + m for m in machine]
    series = build_series(_track(item, ref, 0.78, 0.70), min_history=5)
    assert series.kind == ADJUSTED


def test_a_memory_regression_reads_regression_in_the_table(result_factory):
    v = Verdict(Outcome.NO_REGRESSION, "vgg[cuda]", 0.05, memory=["own device memory 1308 MB vs baseline 1176 MB"])
    v.fails = True
    assert MEMORY in v.failed_metrics
    record = ItemRecord("t::vgg", "vgg", "cuda", "vgg[cuda]", verdict=v)
    assert record.effective_outcome == REGRESSION
    clean = Verdict(Outcome.NO_REGRESSION, "vgg[cuda]", 0.05)
    assert ItemRecord("t::vgg", "vgg", "cuda", "vgg[cuda]", verdict=clean).effective_outcome == NO_REGRESSION
