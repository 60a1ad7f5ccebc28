"""Issue 22, fault 8: an unchanged 6 us model failed as a *confirmed* +46% regression against a 1-run
history while other processes loaded the machine.

Two causes, both seen in the session bundles of the reproduction (a 64x64 MatMul chain, 3 rounds of
5 iterations, a 1-run history, two ``python -c "while True: pass"`` on the 2-core machine):

* the rounds last 0.03 ms, inside one scheduler time slice; under load they ran at 6.4 or 8.3 us
  per iteration (two states, 30% apart), so a run whose rounds all land in the slow state has a
  narrow confidence interval around +30%, and the 2% run-to-run prior does not cover it;
* the contention guard read 0.0 to 0.09 other cores (limit 0.1) on a fully loaded machine when the
  measured phase lasted 0.1 to 0.15 s: psutil keeps ``cpu_percent``'s previous reading per thread,
  so the sampler thread's first host reading was 0.0, and with the start reading's 0.0 two of three
  readings were zeros.

The latencies below are recorded ones (ms per iteration): the history's rounds, and rounds in the
slow state from the A/A gates under load.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from finished import confirm, judge_history

from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.judge import INCONCLUSIVE, REGRESSION, SCHEDULER_SLICE_MS, SHORT_ROUND_SD
from pytest_aaco.history.store import Baseline, run_record
from pytest_aaco.measure.results import BenchmarkResult, RoundResult
from pytest_aaco.options import GateSettings
from pytest_aaco.samplers.system import SystemSampler
from pytest_aaco.verdict.metrics import other_processes_cores
from pytest_aaco.verdict.stats import fastest_rounds
from tests.test_output import explained

FP = Fingerprint({"model_sha256": "bb" * 32, "provider": "CPUExecutionProvider", "cpu_model": "Xeon",
                  "cpu_cores": 2, "gpu_name": None})
LEVEL = 0.05  # the level LOND gives a single gated item at FDR 0.05
#: the 1-run history, recorded on a quieter machine: round log-means -5.022, -5.085, -5.100
HISTORY = [[0.0065, 0.0069, 0.0065, 0.0064, 0.0066], [0.0061, 0.0062, 0.0061, 0.0064, 0.0061],
           [0.0062, 0.006, 0.0061, 0.006, 0.0061]]
#: rounds in the slow state, recorded under two busy processes (log-means -4.78 .. -4.815)
FIRST_LOOK = [[0.008496, 0.008393, 0.008345, 0.008358, 0.008402], [0.008259, 0.008469, 0.008259, 0.008335, 0.00829],
              [0.008204, 0.008004, 0.008733, 0.008198, 0.008239]]
SECOND_LOOK = [[0.008226, 0.008188, 0.008371, 0.008289, 0.008217], [0.008208, 0.008325, 0.008264, 0.008402, 0.008308],
               [0.008048, 0.008137, 0.008131, 0.008117, 0.00812]]


def _result(rounds: list[list[float]], scale: float = 1.0) -> BenchmarkResult:
    built, clock = [], 1_000_000
    for i, lat in enumerate(rounds):
        ms = np.asarray(lat, dtype=float) * scale
        end = clock + int(ms.sum() * 1e6)
        built.append(RoundResult(i, ms, clock, end))
        clock = end + 1000
    return BenchmarkResult(model="tiny", provider="cpu", rounds=built, warmup_iterations=2,
                           warmup_latencies_ms=np.asarray(rounds[0][:2], dtype=float) * scale, session_create_ms=1.0,
                           first_run_ms=0.1, providers_used=["CPUExecutionProvider"], batch_size=1, telemetry={})


def _history(*runs: list[list[float]]) -> Baseline:
    records = [run_record(_result(r)) for r in runs]
    return Baseline(Path("/b/tiny.json"), "test_perf.py::test_latency[tiny-cpu]", FP.fields, FP.id, records,
                    [list(lat) for lat in runs[-1]])


def _gate(first: BenchmarkResult, second: BenchmarkResult, baseline: Baseline):
    """The gate's two looks, as gate._verdict runs them: the second only when the first flags."""
    settings = GateSettings()
    verdict = judge_history(first, baseline, FP, settings, LEVEL, "tiny[cpu]")
    if verdict.outcome == REGRESSION:
        verdict = confirm(verdict, judge_history(second, baseline, FP, settings, LEVEL, "tiny[cpu]"), settings)
    return verdict


def test_the_recorded_slow_state_is_not_a_confirmed_regression() -> None:
    """Before the fix: REGRESSION +31%, confirmed by the second look, so the unchanged item failed."""
    verdict = _gate(_result(FIRST_LOOK), _result(SECOND_LOOK), _history(HISTORY))
    assert verdict.ratio is not None and 1.25 < verdict.ratio < 1.4  # what the rounds say, in both looks
    assert verdict.outcome == INCONCLUSIVE and not verdict.fails, verdict.message
    assert "run-to-run term widened to 35%: its rounds last 0.0" in explained(verdict)
    assert f"inside one scheduler time slice ({SCHEDULER_SLICE_MS:g} ms)" in explained(verdict)
    assert "the history has 1 run" in explained(verdict) and "--aaco-iterations" in explained(verdict)


def test_with_two_runs_of_history_it_is_still_withheld() -> None:
    baseline = _history(HISTORY, [[x * 1.01 for x in r] for r in HISTORY])
    verdict = _gate(_result(FIRST_LOOK), _result(SECOND_LOOK), baseline)
    assert verdict.outcome == INCONCLUSIVE and "the history has 2 runs" in explained(verdict)


def test_short_rounds_widen_the_tests_run_term_as_scipy_computes_it() -> None:
    """The rule acts inside the test: Welch's standard error on the rounds with the run-to-run variance
    ``SHORT_ROUND_SD^2 x (1 + 1/runs)`` added, so the p-value, the interval and the MDE printed are the
    widened ones (before, the outcome was overridden after a test whose interval stayed narrow)."""
    first, baseline = _result(FIRST_LOOK), _history(HISTORY)
    verdict = judge_history(first, baseline, FP, GateSettings(), LEVEL, "tiny[cpu]")
    c = np.asarray(first.round_log_means)
    b = np.concatenate(baseline.run_round_log_means())
    vc, vb = c.var(ddof=1) / c.size, b.var(ddof=1) / b.size
    df = (vc + vb) ** 2 / (vc**2 / (c.size - 1) + vb**2 / (b.size - 1))
    se = math.sqrt(vc + vb + SHORT_ROUND_SD**2 * (1 + 1 / 1))
    # the estimate is the run levels' difference: each run's fastest quarter of rounds (stats.fastest_rounds)
    estimate = fastest_rounds(c).mean() - np.mean([fastest_rounds(r).mean() for r in baseline.run_round_log_means()])
    assert SHORT_ROUND_SD == pytest.approx(math.log(2) / (scipy.stats.norm.ppf(0.95) * math.sqrt(2)))
    assert verdict.p_value == pytest.approx(scipy.stats.t.sf(estimate / se, df), rel=1e-9)
    half = scipy.stats.t.ppf(0.975, df) * se
    assert verdict.ci_low == pytest.approx(math.exp(estimate - half), rel=1e-9)
    assert verdict.ci_high == pytest.approx(math.exp(estimate + half), rel=1e-9)
    mde = math.expm1((scipy.stats.t.ppf(1 - LEVEL, df) + scipy.stats.t.ppf(0.8, df)) * se)
    assert verdict.mde == pytest.approx(mde, rel=1e-9)
    assert verdict.ci_high > 2.0 and verdict.mde > 1.0  # the interval printed covers a doubling: not narrow


def test_a_tripling_of_the_short_round_item_still_fails() -> None:
    """A change well beyond the doubling the widened term is calibrated on still fails. With 3 rounds a side
    the test's t has about 4 degrees of freedom, so the edge lies near 2.5x, not at a hard 2x cut-off as when
    the rule overrode the outcome (2.2x is now inconclusive, p=0.068 at level 0.05)."""
    verdict = _gate(_result(HISTORY, 3.0), _result(HISTORY, 3.1), _history(HISTORY))
    assert verdict.outcome == REGRESSION and verdict.fails and verdict.confirmed, verdict.message


def _long_rounds(centre_ms: float, seed: int, rounds: int = 10) -> list[list[float]]:
    """Rounds of 20 iterations of about *centre_ms* (each round 20 x centre, far beyond a time slice)."""
    rng = np.random.default_rng(seed)
    return [list(centre_ms * np.exp(0.01 * rng.standard_normal(20) + 0.005 * rng.standard_normal()))
            for _ in range(rounds)]


@pytest.mark.parametrize("runs", [1, 2, 5])
def test_a_normal_item_is_gated_as_before(runs: int) -> None:
    """Rounds of 200 ms: the rule does not apply, a 2x slowdown fails, a 30% one too (short history included)."""
    baseline = _history(*[_long_rounds(10.0 * (1 + 0.01 * i), seed=i) for i in range(runs)])
    for factor in (2.0, 1.3):
        verdict = _gate(_result(_long_rounds(10.0 * factor, seed=50)), _result(_long_rounds(10.0 * factor, seed=51)),
                        baseline)
        assert verdict.outcome == REGRESSION and verdict.fails, (runs, factor, verdict.message)
        assert "withheld" not in verdict.message


def test_a_long_history_gates_short_rounds_as_before() -> None:
    baseline = _history(*[[[x * (1 + 0.003 * i) for x in r] for r in HISTORY] for i in range(5)])
    verdict = judge_history(_result(FIRST_LOOK), baseline, FP, GateSettings(), LEVEL, "tiny[cpu]")
    assert "scheduler time slice" not in verdict.message


# ---------------------------------------------------------------- the contention guard's figure


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a second core for the busy process")
def test_a_short_phase_under_a_busy_process_shows_its_core() -> None:
    """A phase of 0.15 s, three readings, as the tiny item's: before the fix the mean of the host's
    readings held two zeros and the figure came out 0.0 to 0.09 cores with a busy process running."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        sampler = SystemSampler(interval_s=0.1)
        sampler.start()
        end = time.perf_counter() + 0.15
        while time.perf_counter() < end:  # this process works too, as a benchmark does
            pass
        sampler.stop()
    finally:
        busy.kill()
        busy.wait()
    readings = sampler.samples()
    others = other_processes_cores({"summary": sampler.summary()}, os.cpu_count() or 1)
    assert others is not None and others > 0.5, (others, readings)
    assert readings[0]["system_cpu_percent"] is None and readings[0]["process_cpu_percent"] is None


def test_the_figure_comes_from_the_counters_of_the_first_and_last_reading() -> None:
    summary = {"system_busy_cpu_s": {"first": 100.0, "last": 100.5, "n": 3},
               "process_cpu_s": {"first": 10.0, "last": 10.2, "n": 3},
               "monotonic_s": {"first": 5.0, "last": 5.25, "n": 3},
               "system_cpu_percent": {"mean": 0.0}, "process_cpu_percent": {"mean": 0.0}}
    assert other_processes_cores({"summary": summary}, 2) == pytest.approx((0.5 - 0.2) / 0.25)
    old = {"system_cpu_percent": {"mean": 80.0}, "process_cpu_percent": {"mean": 100.0}}  # older telemetry
    assert other_processes_cores({"summary": old}, 2) == pytest.approx(0.6)
