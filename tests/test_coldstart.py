"""Cold start: measuring fresh sessions, and its verdict on deterministic samples and on real ORT."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from pytest_aaco.measure.modelgen import add_folding_work, save_model_atomic
from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.measure.results import FreshSample
from pytest_aaco.passes.coldstart import (
    COLD_SESSIONS,
    ColdStart,
    LocalSessions,
    cold_start_verdict,
    compare_cold_start,
    measure_cold_start,
    measure_side_by_side,
    side_by_side_verdict,
)

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
    assert verdict.judgements["session_create_ms"].outcome == "regression"
    assert verdict.judgements["first_run_ms"].outcome == "no-regression"
    assert verdict.message.startswith("COLD START REGRESSION m[cpu] (session creation): session creation 194.0 ms vs"
                                      " 97.6 ms (+99%")
    assert "fastest of 5 fresh sessions vs 3 earlier run(s), threshold 20%, level 0.005 per figure" in verdict.message


def test_a_regression_under_cpu_contention_is_withheld():
    busy = cold(200, 20)
    busy.others_cores = 0.8
    verdict = cold_start_verdict(busy, history(), "m[cpu]", max_contention=0.1)
    assert verdict.outcome == "inconclusive" and not verdict.fails
    assert "not failed: other processes kept 0.80 cores busy" in verdict.message
    # no figure of a withheld verdict reads "regression" (the HTML's cold-start table shows them)
    written = verdict.to_dict()["metrics"]
    assert written and all(f["outcome"] != "regression" for f in written.values())
    assert all(j.outcome != "regression" for j in verdict.judgements.values())
    assert verdict.metrics["session_create_ms"]["withheld"] == "CPU contention"
    busy.others_cores = 0.05
    assert cold_start_verdict(busy, history(), "m[cpu]", max_contention=0.1).fails


def test_others_cores_from_cpu_readings():
    from pytest_aaco.passes.coldstart import others_cores

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
    assert verdict.judgements["session_create_ms"].p_slower == pytest.approx(scipy.stats.t.sf(t, 7), rel=1e-9)


def test_one_earlier_run_is_judged_with_the_prior_alone():
    one = cold_start_verdict(cold(200, 20), history(1), "m")
    assert one.outcome == "regression" and one.baseline_runs == 1
    noisy_prior = cold_start_verdict(cold(200, 20), history(1), "m", run_noise=0.4)
    assert noisy_prior.outcome == "inconclusive"  # a 40% run-to-run prior cannot call 2x at p <= 0.005


def test_a_noisy_history_widens_the_interval():
    quiet = [cold(100 * f, 20) for f in (1.0, 1.01, 0.99, 1.0, 1.02, 0.98)]
    noisy = [cold(100 * f, 20) for f in (1.0, 1.6, 0.8, 1.3, 0.9, 1.5)]
    p_quiet = cold_start_verdict(cold(140, 20), quiet, "m").judgements["session_create_ms"].p_slower
    p_noisy = cold_start_verdict(cold(140, 20), noisy, "m").judgements["session_create_ms"].p_slower
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
    assert verdict.judgements["session_create_ms"].ratio > 3


def test_default_session_count():
    assert COLD_SESSIONS == 5


# ------------------------------------------------------------------ side by side (--aaco-compare)


def pair(base_create, cand_create, base_first=(20.0,) * 5, cand_first=(20.0,) * 5) -> tuple[ColdStart, ColdStart]:
    return ColdStart(list(base_create), list(base_first)), ColdStart(list(cand_create), list(cand_first))


def test_side_by_side_p_value_is_the_paired_t_test_on_log_ratios():
    base, cand = pair([100, 104, 98, 101, 99], [150, 160, 149, 158, 151])
    verdict = side_by_side_verdict(base, cand, "m[cpu]", "origin/main")
    expected = scipy.stats.ttest_rel(np.log(cand.session_create_ms), np.log(base.session_create_ms),
                                     alternative="greater").pvalue
    judged = verdict.judgements["session_create_ms"]
    assert judged.p_slower == pytest.approx(expected, rel=1e-9) and judged.series == "paired"
    assert judged.lower_bound is not None and judged.lower_bound > 1  # the bound the message prints
    assert judged.ratio == pytest.approx(math.exp(np.mean(np.log(cand.session_create_ms)
                                                              - np.log(base.session_create_ms))))
    assert verdict.outcome == "regression" and verdict.fails and verdict.method == "side-by-side"
    # before: "session creation 149.0 ms vs 98.0 ms at origin/main (+53%": the fastest sessions (+52%)
    # beside the paired ratio; now each per cent sits beside the means it is the ratio of
    assert verdict.message.startswith("COLD START REGRESSION m[cpu] (session creation): session creation geometric"
                                      " mean 153.5 ms vs 100.4 ms at origin/main (+53%, lower bound +")
    assert "; fastest 149 ms vs 98 ms (+52%)" in verdict.message
    assert ("each side's geometric mean and fastest of 5 alternating fresh sessions shown, ratio paired by cycle,"
            " threshold 20%, level 0.005 per figure") in verdict.message
    data = verdict.to_dict()
    assert data["ref"] == "origin/main" and data["cycles"] == 5 and data["method"] == "side-by-side"


def test_side_by_side_unchanged_pair_is_no_regression():
    base, cand = pair([100, 104, 98, 101, 99], [101, 103, 99, 100, 100])
    verdict = side_by_side_verdict(base, cand, "m[cpu]", "HEAD~1")
    assert verdict.outcome == "no-regression" and not verdict.fails


def test_side_by_side_needs_the_fastest_sessions_to_differ_by_the_threshold_too():
    # the paired ratios say +27% (p < 0.001), but the fastest candidate session is only 15% slower
    base, cand = pair([100, 200, 200, 200, 200], [115, 260, 260, 262, 258])
    verdict = side_by_side_verdict(base, cand, "m[cpu]", "HEAD~1")
    judged = verdict.judgements["session_create_ms"]
    assert judged.p_slower is not None and judged.p_slower < 0.001 and judged.ratio > 1.2
    assert judged.outcome == "inconclusive" and judged.reason == "the fastest sessions differ by only +15%"
    assert verdict.outcome == "inconclusive" and not verdict.fails
    assert "the fastest sessions differ by only +15%" in verdict.message
    assert side_by_side_verdict(base, cand, "m[cpu]", "HEAD~1", threshold=0.1).fails


def test_side_by_side_guards_slack_contention_and_unpaired_samples():
    base, cand = pair([1.0, 1.1, 0.9, 1.0, 1.0], [3.0, 3.2, 2.9, 3.1, 3.0])  # 3x, but +2 ms
    assert side_by_side_verdict(base, cand, "m", "r").outcome == "no-regression"
    base, cand = pair([100, 104, 98, 101, 99], [200, 208, 196, 202, 198])
    cand.others_cores = 0.9
    # paired: both sides ran alternately under the same load, so contention withholds nothing
    busy = side_by_side_verdict(base, cand, "m", "r")
    assert busy.outcome == "regression" and busy.fails and "CPU contention" not in busy.message
    unpaired = side_by_side_verdict(ColdStart([100.0] * 4, [20.0] * 4), cand, "m", "r")
    assert unpaired.outcome == "inconclusive" and "not paired by cycle" in unpaired.message


class ScriptedSide:
    """A side whose fresh sessions take the scripted (create ms, first run ms), in order."""

    def __init__(self, samples):
        self.samples = list(samples)
        self.calls = 0

    def fresh(self) -> FreshSample:
        self.calls += 1
        return FreshSample(*self.samples.pop(0))


def test_a_side_by_side_regression_is_confirmed_on_fresh_cycles():
    base = ScriptedSide([(100.0 + i % 3, 20.0) for i in range(10)])
    slow = ScriptedSide([(200.0 + i % 3, 20.0) for i in range(10)])
    found = compare_cold_start(base, slow, "m[cpu]", "HEAD~1", cycles=5, discard=0)
    assert base.calls == slow.calls == 10
    assert found.verdict.fails and found.verdict.confirmed is True and found.first is not None
    record = found.record()
    assert record["verdict"]["confirmed"] is True and record["first_look"]["outcome"] == "regression"
    assert record["baseline_side"]["min_session_create_ms"] == 100.0 and record["min_session_create_ms"] == 200.0

    base = ScriptedSide([(100.0 + i % 3, 20.0) for i in range(10)])
    once = ScriptedSide([(200.0 + i % 3, 20.0) for i in range(5)] + [(100.0 + i % 2, 20.0) for i in range(5)])
    found = compare_cold_start(base, once, "m[cpu]", "HEAD~1", cycles=5, discard=0)
    assert found.verdict.outcome == "inconclusive" and not found.verdict.fails and found.verdict.confirmed is False
    assert found.verdict.message.startswith("cold start inconclusive m[cpu]: a first look was a regression")

    base = ScriptedSide([(500.0, 20.0)] + [(100.0 + i % 3, 20.0) for i in range(5)])  # a slow first session
    slow = ScriptedSide([(200.0 + i % 3, 20.0) for i in range(6)])
    found = compare_cold_start(base, slow, "m", "r", cycles=5, confirm=False)
    assert base.calls == 6  # one discarded session per side, and no second look without confirm
    assert found.verdict.fails and found.baseline.session_create_ms == [100.0, 101.0, 102.0, 100.0, 101.0]


def test_real_side_by_side_catches_constant_folding_and_passes_an_unchanged_pair(tiny_model_path, tmp_path):
    import onnx

    heavy = save_model_atomic(add_folding_work(onnx.load(str(tiny_model_path)), 12, 512), tmp_path / "fold.onnx")
    feeds = {"x": np.ones((1, 64), np.float32)}
    cpu = parse_provider("cpu")
    light = LocalSessions(tiny_model_path, cpu, feeds)
    base, cand = measure_side_by_side(light, LocalSessions(heavy, cpu, feeds), cycles=8)
    assert len(base.session_create_ms) == len(cand.session_create_ms) == 8
    verdict = side_by_side_verdict(base, cand, "tiny[cpu]", "HEAD~1")
    assert verdict.outcome == "regression", verdict.message
    assert verdict.judgements["session_create_ms"].ratio > 3
    same = compare_cold_start(light, LocalSessions(tiny_model_path, cpu, None), "tiny[cpu]", "HEAD~1", cycles=5)
    assert not same.verdict.fails, same.verdict.message


def test_local_sessions_make_inputs_from_the_spec_when_none_are_given(tiny_model_path):
    from pytest_aaco.measure.registry import ModelSpec

    spec = ModelSpec("tiny", f"path:{tiny_model_path}", tiny_model_path)
    side = LocalSessions(tiny_model_path, parse_provider("cpu"), None, spec)
    sample = side.fresh()
    assert sample.create_ms > 0 and sample.first_run_ms > 0
    assert side.feeds is not None and side.feeds["x"].shape == (1, 64)


# ------------------------------------------------------------------ ORT's split of session creation

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("name", "load_ms", "init_ms"), [
    ("ort_profile_creation_cpu.json", 1.120, 30.741),  # onnxruntime 1.32, CPU EP, squeezenet, this machine
    ("ort_profile_cuda.json", 0.208, 2.063),  # recorded on an H100 (CUDA EP): no other creation events either
])
def test_creation_phases_from_recorded_profiles(name, load_ms, init_ms):
    from pytest_aaco.measure.ortprofile import read_events
    from pytest_aaco.passes.coldstart import creation_phases

    phases = creation_phases(read_events(DATA / name))
    assert phases == {"load_ms": pytest.approx(load_ms), "init_ms": pytest.approx(init_ms)}


def test_creation_phases_of_a_model_from_bytes_and_of_a_profile_without_them():
    from pytest_aaco.passes.coldstart import creation_phases

    events = [{"cat": "Session", "name": "model_loading_array", "dur": 500},
              {"cat": "Session", "name": "session_initialization", "dur": 2500},
              {"cat": "Node", "name": "session_initialization", "dur": 9999}]
    assert creation_phases(events) == {"load_ms": 0.5, "init_ms": 2.5}
    assert creation_phases([]) == {"load_ms": None, "init_ms": None}


def test_fresh_sessions_record_the_split_of_their_creation(tiny_model_path):
    side = LocalSessions(tiny_model_path, parse_provider("cpu"), {"x": np.ones((1, 64), np.float32)})
    cold = measure_side_by_side(side, side, cycles=2)[1]
    assert len(cold.load_ms) == len(cold.init_ms) == 2
    for create, load, init in zip(cold.session_create_ms, cold.load_ms, cold.init_ms, strict=True):
        assert 0 < load and 0 < init and load + init <= create * 1.05  # both happen inside the timed creation
    again = ColdStart.from_dict(cold.to_dict())
    assert again.init_ms == pytest.approx(cold.init_ms, abs=1e-3)
    assert cold.phase_s is not None and cold.phase_s * 1000 >= sum(cold.session_create_ms)  # the phase's wall time
    assert again.phase_s == pytest.approx(cold.phase_s, abs=1e-3)
    old = {k: v for k, v in cold.to_dict().items() if k not in ("load_ms", "init_ms")}
    assert ColdStart.from_dict(old).init_ms == []  # records written before the split still load


def test_a_session_creation_regression_names_the_phase_that_grew():
    base = ColdStart([100.0, 102, 99, 101, 100], [20.0] * 5, load_ms=[5.0] * 5, init_ms=[80.0, 82, 79, 81, 80])
    cand = ColdStart([200.0, 204, 198, 202, 200], [20.0] * 5, load_ms=[5.0] * 5, init_ms=[180.0, 182, 179, 181, 180])
    verdict = side_by_side_verdict(base, cand, "m[cpu]", "HEAD~1")
    assert verdict.fails
    assert ("session creation split by ORT's profiler: model load 5.0 ms vs 5.0 ms, session initialization"
            " 179.0 ms vs 79.0 ms") in verdict.message
    assert verdict.metrics["session_create_ms"]["phases"]["init_ms"] == {"current_ms": 179.0, "baseline_ms": 79.0}
    stored = cold_start_verdict(cand, [base, base], "m[cpu]")
    assert stored.metrics["session_create_ms"]["phases"]["init_ms"]["baseline_ms"] == 79.0
    unchanged = side_by_side_verdict(base, base, "m[cpu]", "HEAD~1")
    assert "split by ORT's profiler" not in unchanged.message  # only a regression spells it out


def reused(create_base, create_cand, first=20.0):
    """(baseline, candidate) samples as the side-by-side measurement's fresh sessions left them."""
    return ([FreshSample(c, first) for c in create_base], [FreshSample(c, first) for c in create_cand])


def test_the_side_by_side_sessions_are_the_first_cycles_and_only_the_missing_ones_are_built():
    base = ScriptedSide([(100.0 + i % 3, 20.0) for i in range(10)])
    cand = ScriptedSide([(100.0 + i % 2, 20.0) for i in range(10)])
    fill_b = ScriptedSide([(101.0, 21.0)])
    fill_c = ScriptedSide([(100.0, 21.0)])
    took = reused((100.5, 99.5, 102.0, 101.5), (101.0, 100.0, 100.5, 102.5))
    found = compare_cold_start(base, cand, "m[cpu]", "HEAD~1", cycles=5, reused=took, fill=(fill_b, fill_c))
    assert fill_b.calls == fill_c.calls == 1 and base.calls == cand.calls == 0  # was 6 + 6 (1 discard + 5)
    assert found.baseline.session_create_ms == [100.5, 99.5, 102.0, 101.5, 101.0]
    assert found.candidate.session_create_ms == [101.0, 100.0, 100.5, 102.5, 100.0]
    assert found.candidate.first_run_ms == [20.0] * 4 + [21.0]
    assert not found.verdict.fails and found.verdict.cycles == 5
    assert "fastest of 5 alternating fresh sessions (4 from the side-by-side measurement) shown" in \
        found.verdict.message
    record = found.record()
    assert record["reused_sessions"] == 4 and record["baseline_side"]["reused_sessions"] == 4
    assert "load_ms" not in record  # the side-by-side sessions carry no ORT-profiler split

    enough = reused([100.0 + i % 3 for i in range(6)], [100.0 + i % 2 for i in range(6)])
    found = compare_cold_start(base, cand, "m", "r", cycles=5, reused=enough, fill=(fill_b, fill_c))
    assert fill_b.calls == 1 and base.calls == 0  # nothing more built
    assert found.candidate.session_create_ms == [100.0, 101.0, 100.0, 101.0, 100.0]
    assert found.candidate.reused_sessions == 5


def test_a_regression_in_the_reused_sessions_is_caught_and_confirmed_on_fresh_cycles():
    base = ScriptedSide([(100.0 + i % 3, 20.0) for i in range(5)])
    slow = ScriptedSide([(200.0 + i % 3, 20.0) for i in range(5)])
    fill_b, fill_c = ScriptedSide([(101.0, 20.0)]), ScriptedSide([(203.0, 20.0)])
    took = reused((100.0, 102.0, 101.0, 100.0), (201.0, 200.0, 202.0, 199.0))
    found = compare_cold_start(base, slow, "m[cpu]", "HEAD~1", cycles=5, discard=0, reused=took, fill=(fill_b, fill_c))
    assert found.verdict.fails and found.verdict.confirmed is True and found.first is not None
    assert "(4 from the side-by-side measurement)" in found.first.message
    assert fill_b.calls == fill_c.calls == 1 and base.calls == slow.calls == 5  # the confirmation: N fresh each
    assert found.candidate.reused_sessions == 0 and "reused_sessions" not in found.record()

    unchanged = ScriptedSide([(100.0 + i % 3, 20.0) for i in range(5)])
    took = reused((100.0, 102.0, 101.0, 100.0), (101.0, 100.0, 100.0, 102.0))
    found = compare_cold_start(unchanged, unchanged, "m", "r", cycles=5, reused=took,
                               fill=(ScriptedSide([(101.0, 20.0)]), ScriptedSide([(100.0, 20.0)])))
    assert found.verdict.outcome != "regression" and found.first is None and unchanged.calls == 0


def test_reused_sessions_round_trip_and_old_records_load_unchanged():
    data = ColdStart([100.0, 101.0], [20.0, 21.0], reused_sessions=2).to_dict()
    assert data["reused_sessions"] == 2 and ColdStart.from_dict(data).reused_sessions == 2
    old = cold(100, 20).to_dict()
    assert "reused_sessions" not in old and ColdStart.from_dict(old).reused_sessions == 0
    assert ColdStart.from_dict(old).to_dict() == old
    assert ColdStart.from_dict({**old, "reused_sessions": "many"}).reused_sessions == 0
