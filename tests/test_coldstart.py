"""Cold start: measuring fresh sessions, and its verdict on deterministic samples and on real ORT."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from pytest_aaco.coldstart import (
    COLD_SESSIONS,
    ColdStart,
    cold_start_verdict,
    measure_cold_start,
)
from pytest_aaco.modelgen import add_folding_work, save_model_atomic
from pytest_aaco.providers import parse_provider

SPREAD = np.array([0.97, 1.0, 1.03, 0.99, 1.01])


def cold(create_ms: float, first_ms: float, spread=SPREAD) -> ColdStart:
    return ColdStart(list(create_ms * spread), list(first_ms * spread[::-1]))


def history(n: int = 3) -> list[ColdStart]:
    return [cold(100.0 * (1 + 0.02 * (i % 2)), 20.0) for i in range(n)]


def test_no_history_is_no_baseline():
    verdict = cold_start_verdict(cold(100, 20), [], "m[cpu]")
    assert verdict.outcome == "no-baseline" and not verdict.fails
    assert "--aaco-save-baseline" in verdict.message


def test_unchanged_cold_start_is_no_regression():
    short = cold_start_verdict(cold(101, 20.2), history(3), "m[cpu]")
    assert short.outcome == "inconclusive" and not short.fails  # 3 runs and the prior cannot rule out +20%
    verdict = cold_start_verdict(cold(101, 20.2), history(6), "m[cpu]")
    assert verdict.outcome == "no-regression" and not verdict.fails
    assert verdict.message.startswith("cold start: no regression m[cpu]: session creation 98.0 ms vs 98.0 ms")


def test_twice_slower_session_creation_is_a_regression_that_names_it():
    verdict = cold_start_verdict(cold(200, 20), history(), "m[cpu]")
    assert verdict.outcome == "regression" and verdict.fails
    assert verdict.metrics["session_create_ms"]["outcome"] == "regression"
    assert verdict.metrics["first_run_ms"]["outcome"] == "no-regression"
    assert verdict.message.startswith("COLD START REGRESSION m[cpu] (session creation): session creation 194.0 ms vs"
                                      " 97.6 ms (+99%")
    assert "fastest of 5 fresh sessions vs 3 earlier run(s), threshold 20%, level 0.005 per figure" in verdict.message


def test_a_regression_under_cpu_contention_is_withheld():
    busy = cold(200, 20)
    busy.others_cores = 0.8
    verdict = cold_start_verdict(busy, history(), "m[cpu]", max_contention=0.1)
    assert verdict.outcome == "inconclusive" and not verdict.fails
    assert "not failed: other processes kept 0.80 cores busy" in verdict.message
    busy.others_cores = 0.05
    assert cold_start_verdict(busy, history(), "m[cpu]", max_contention=0.1).fails


def test_others_cores_from_cpu_readings():
    from pytest_aaco.coldstart import others_cores

    assert others_cores((0.0, 10.0, 1.0), (2.0, 13.0, 2.0)) == pytest.approx(1.0)  # 3 host s - 1 own s over 2 s
    assert others_cores((0.0, 10.0, 1.0), (2.0, 11.0, 2.0)) == 0.0
    assert others_cores((0.0, 0.0, 0.0), (0.001, 1.0, 0.0)) is None


def test_a_slowdown_of_less_than_the_slack_never_fails():
    verdict = cold_start_verdict(cold(3, 0.2), [cold(1, 0.1) for _ in range(4)], "m[cpu]")  # 3x, +2 ms
    assert verdict.outcome == "no-regression" and not verdict.fails
    assert "under the 5 ms that count" in verdict.message
    assert cold_start_verdict(cold(3, 0.2), [cold(1, 0.1) for _ in range(4)], "m", slack_ms=1).fails


def test_a_slowdown_below_the_threshold_never_fails():
    verdict = cold_start_verdict(cold(112, 20), history(8), "m[cpu]")  # +11%
    assert not verdict.fails and verdict.outcome != "regression"


def test_p_value_is_the_moderated_prediction_interval_on_run_minima():
    runs = [cold(m, 20) for m in (100, 110, 95, 104)]
    current = cold(150, 20)
    verdict = cold_start_verdict(current, runs, "m", run_noise=0.1, prior_df=4)
    h = np.log([min(r.session_create_ms) for r in runs])
    s_sq = (4 * np.log1p(0.1) ** 2 + 3 * np.var(h, ddof=1)) / (4 + 3)
    t = (np.log(min(current.session_create_ms)) - h.mean()) / np.sqrt(s_sq * (1 + 1 / 4))
    assert verdict.metrics["session_create_ms"]["p_value"] == pytest.approx(scipy.stats.t.sf(t, 7), rel=1e-9)


def test_one_earlier_run_is_judged_with_the_prior_alone():
    one = cold_start_verdict(cold(200, 20), history(1), "m")
    assert one.outcome == "regression" and one.baseline_runs == 1
    noisy_prior = cold_start_verdict(cold(200, 20), history(1), "m", run_noise=0.4)
    assert noisy_prior.outcome == "inconclusive"  # a 40% run-to-run prior cannot call 2x at p <= 0.005


def test_a_noisy_history_widens_the_interval():
    quiet = [cold(100 * f, 20) for f in (1.0, 1.01, 0.99, 1.0, 1.02, 0.98)]
    noisy = [cold(100 * f, 20) for f in (1.0, 1.6, 0.8, 1.3, 0.9, 1.5)]
    p_quiet = cold_start_verdict(cold(140, 20), quiet, "m").metrics["session_create_ms"]["p_value"]
    p_noisy = cold_start_verdict(cold(140, 20), noisy, "m").metrics["session_create_ms"]["p_value"]
    assert p_quiet < 0.001 < 0.05 < p_noisy


def test_no_samples_are_inconclusive_not_an_error():
    verdict = cold_start_verdict(ColdStart([], []), history(1), "m")
    assert verdict.outcome == "inconclusive" and not verdict.fails
    assert "contains NaN" in verdict.message


def test_compiling_eps_say_their_figures_include_the_compile():
    current = cold(100, 20)
    current.compiles = "the MIGraphX compile"
    assert cold_start_verdict(current, history(), "m").message.endswith("include the MIGraphX compile")


def test_round_trip_and_bad_records():
    data = cold(100, 20).to_dict()
    assert data["median_session_create_ms"] == 100.0
    again = ColdStart.from_dict(data)
    assert again.session_create_ms == pytest.approx(list(100 * SPREAD))
    with pytest.raises(ValueError, match="'first_run_ms' must be a non-empty list of positive ms"):
        ColdStart.from_dict({"session_create_ms": [1.0], "first_run_ms": []})
    assert math.isnan(ColdStart([], []).median("first_run_ms"))


def test_real_sessions_catch_slower_creation_from_constant_folding(tiny_model_path, tmp_path):
    """The tiny model builds in a few ms; 12 constant 512x512 MatMuls folded at creation add ~3 GFLOP."""
    import onnx

    heavy = save_model_atomic(add_folding_work(onnx.load(str(tiny_model_path)), 12, 512), tmp_path / "fold.onnx")
    feeds = {"x": np.ones((1, 64), np.float32)}
    cpu = parse_provider("cpu")
    light_runs = [measure_cold_start(tiny_model_path, cpu, feeds, sessions=5) for _ in range(3)]
    assert len(light_runs[0].session_create_ms) == 5 and min(light_runs[0].first_run_ms) > 0
    assert light_runs[0].others_cores is not None and light_runs[0].others_cores >= 0
    candidate = measure_cold_start(heavy, cpu, feeds, sessions=5)
    verdict = cold_start_verdict(candidate, light_runs, "tiny[cpu]")
    assert verdict.outcome == "regression", verdict.message
    assert verdict.metrics["session_create_ms"]["ratio"] > 3


def test_default_session_count():
    assert COLD_SESSIONS == 5
