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


def test_unchanged_cold_start_never_fails():
    short = cold_start_verdict(cold(101, 20.2), history(3), "m[cpu]")
    # 3 runs cannot rule out +20% with a 10% run-to-run prior: inconclusive, never a failure
    assert short.outcome == "inconclusive" and not short.fails
    assert short.metrics["session_create_ms"]["ratio"] == pytest.approx(1.0, abs=0.02)
    long = cold_start_verdict(cold(101, 20.2), history(6), "m[cpu]")
    assert long.outcome == "no-regression" and long.message.startswith("cold start: no regression m[cpu]")


def test_twice_slower_session_creation_is_a_regression_that_names_it():
    verdict = cold_start_verdict(cold(200, 20), history(), "m[cpu]")
    assert verdict.outcome == "regression" and verdict.fails
    assert verdict.metrics["session_create_ms"]["outcome"] == "regression"
    assert verdict.metrics["first_run_ms"]["outcome"] != "regression"
    assert verdict.message.startswith("COLD START REGRESSION m[cpu] (session creation): session creation 200.0 ms vs"
                                      " 100.6 ms (+99%, 95% CI +53% .. +158%")
    assert "threshold 20%" in verdict.message


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


def test_a_slowdown_below_the_threshold_never_fails():
    verdict = cold_start_verdict(cold(112, 20), history(), "m[cpu]")  # +11%, clearly significant
    assert not verdict.fails and verdict.outcome != "regression"


def test_p_value_is_welchs_on_log_values_without_a_run_term():
    current, base = cold(130, 20), cold(100, 20, SPREAD[::-1] * 1.01)
    verdict = cold_start_verdict(current, [base], "m", run_noise=0.0)
    expected = scipy.stats.ttest_ind(np.log(current.session_create_ms), np.log(base.session_create_ms),
                                     equal_var=False, alternative="greater").pvalue
    assert verdict.metrics["session_create_ms"]["p_value"] == pytest.approx(expected, rel=1e-9)


def test_run_noise_makes_a_single_history_run_less_certain():
    strict = cold_start_verdict(cold(130, 20), history(1), "m", run_noise=0.0)
    noisy = cold_start_verdict(cold(130, 20), history(1), "m", run_noise=0.10)
    assert noisy.metrics["session_create_ms"]["p_value"] > 10 * strict.metrics["session_create_ms"]["p_value"]


def test_the_prediction_interval_takes_over_with_a_long_history():
    verdict = cold_start_verdict(cold(200, 20), history(6), "m", min_history=5)
    assert verdict.metrics["session_create_ms"]["method"] == "prediction-interval"
    assert verdict.outcome == "regression"


def test_too_few_samples_are_inconclusive_not_an_error():
    verdict = cold_start_verdict(ColdStart([150.0], [20.0]), history(1), "m", run_noise=0.0)
    assert verdict.outcome == "inconclusive" and not verdict.fails
    assert "needs at least 2 values" in verdict.message


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
    light_runs = [measure_cold_start(tiny_model_path, cpu, feeds, sessions=3) for _ in range(2)]
    assert len(light_runs[0].session_create_ms) == 3 and min(light_runs[0].first_run_ms) > 0
    assert light_runs[0].others_cores is not None and light_runs[0].others_cores >= 0
    candidate = measure_cold_start(heavy, cpu, feeds, sessions=3)
    verdict = cold_start_verdict(candidate, light_runs, "tiny[cpu]")
    assert verdict.outcome == "regression"
    assert verdict.metrics["session_create_ms"]["ratio"] > 3


def test_default_session_count():
    assert COLD_SESSIONS == 5
