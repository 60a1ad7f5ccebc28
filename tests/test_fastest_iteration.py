"""The stored gate's witness under CPU contention: the run's fastest iteration (history/judge.fastest_iteration).

Waiting for a CPU lengthens the iterations a wait interrupts; the fastest iteration of a run of short
iterations ran uninterrupted, at the speed the item's own work sets. A regression that contention or a
machine speed change would withhold stands when the fastest iteration moved beyond the threshold, beyond
what the reference workload's own fastest iteration moved, and beyond what fewer cores explain.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from finished import judge_history
from scipy import stats as scipy_stats

from pytest_aaco.history import judge as judge_module
from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.store import Baseline, run_record
from pytest_aaco.measure.results import BenchmarkResult, ReferenceSeries, RoundResult
from pytest_aaco.options import GateSettings
from pytest_aaco.records.base import FastestIteration
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.verdict.finish import finish, under_contention
from pytest_aaco.verdict.outcome import Outcome

FIELDS = {"model_sha256": "bb" * 32, "provider": "CPUExecutionProvider", "ort_version": "1.31.1",
          "inputs": "x:float32[32,384]", "intra_op_threads": 1}
FP = Fingerprint(dict(FIELDS))
REF_ID = "mix:0123456789ab"


def _telemetry(cores: float) -> dict:
    """A sampler summary in which the process used *cores* cores over 2 s."""
    return {"summary": {"process_cpu_s": {"first": 0.0, "last": 2.0 * cores, "n": 5},
                        "monotonic_s": {"first": 0.0, "last": 2.0, "n": 5}}}


def _run(fast_ms: float, stalled_ms: float, stalled_share: float, ref_ms: float, ref_min_ms: float, cores: float,
         seed: int, rounds: int = 6, iterations: int = 40) -> BenchmarkResult:
    """One run: per round, *iterations* latencies near *fast_ms*, a share *stalled_share* of them waiting
    for a CPU (*stalled_ms*); a reference block of 3 iterations at *ref_ms*, its fastest *ref_min_ms*."""
    rng = np.random.default_rng(seed)
    out, refs, clock = [], [], 1_000_000
    for index in range(rounds):
        lat = fast_ms * np.exp(0.01 * np.abs(rng.standard_normal(iterations)))
        stalled = rng.random(iterations) < stalled_share
        lat[stalled] += stalled_ms
        lat[0] = fast_ms  # the round's fastest iteration, exactly
        end = clock + int(lat.sum() * 1e6)
        out.append(RoundResult(index, lat, clock, end))
        clock = end + 1000
        refs.append(math.log(ref_ms))
    ref_logs = np.array(refs)
    reference = ReferenceSeries("mix", REF_ID, ref_logs, np.array([r.log_mean for r in out]) - ref_logs,
                                ref_ms, 3, 0.17, min_ms=ref_min_ms)
    return BenchmarkResult(model="mlp", provider="cpu", rounds=out, warmup_iterations=3,
                           warmup_latencies_ms=np.full(3, fast_ms), session_create_ms=5.0, first_run_ms=1.0,
                           providers_used=["CPUExecutionProvider"], telemetry=_telemetry(cores),
                           reference=reference)


def _baseline(cores: float = 1.0, fast=(0.160, 0.162)) -> Baseline:
    """2 quiet saved runs: fastest iterations *fast* (ms), the reference at 2.6 ms."""
    records = [run_record(_run(f, 0.0, 0.0, 2.6, 2.55 + 0.02 * i, cores, seed=i)) for i, f in enumerate(fast)]
    return Baseline(Path("/b/mlp.json"), "t.py::test_latency[mlp-cpu]", FP.fields, FP.id, records, [])


def _busy(fast_ms: float, cores: float = 0.3, seed: int = 7) -> BenchmarkResult:
    """A run on a busy machine: a third of the iterations wait 5 ms for a CPU, the reference runs 3.5x
    slower on average but its fastest iteration only 4% slower."""
    return _run(fast_ms, 5.0, 0.33, 9.0, 2.65, cores, seed)


def test_a_saved_round_keeps_its_fastest_iteration():
    result = _run(0.2, 0.0, 0.0, 2.6, 2.5, 1.0, seed=0)
    record = run_record(result)
    assert [r["min_ms"] for r in record["rounds"]] == pytest.approx([0.2] * 6)
    assert record["reference"]["min_ms"] == 2.5


def test_the_lower_bound_is_a_prediction_bound_for_one_new_run():
    """ratio over the slowest history minimum, divided by exp(z s sqrt(1 + 1/n)) with z the normal quantile
    at the item's level and s the sd of the history's ln minima (scipy.stats)."""
    baseline = _baseline(fast=(0.150, 0.160))
    result = _busy(0.240)
    level = 0.05
    f = judge_module.fastest_iteration(result, baseline, level, run_noise=0.01)
    assert f is not None
    s = scipy_stats.tstd(np.log([0.150, 0.160]))
    z = scipy_stats.norm.ppf(1 - level)
    assert f.baseline_ms == pytest.approx(0.160)
    assert f.ratio == pytest.approx(0.240 / 0.160)
    assert f.lower_bound == pytest.approx(f.ratio / math.exp(z * s * math.sqrt(1.5)))
    assert f.reference_ratio == pytest.approx(2.65 / 2.55)
    assert f.parallel_bound == pytest.approx(1.0)
    # the run-noise floor applies when the history's minima agree more closely than it
    tight = judge_module.fastest_iteration(result, _baseline(fast=(0.160, 0.160)), level, run_noise=0.01)
    assert tight is not None
    assert tight.lower_bound == pytest.approx(tight.ratio / math.exp(z * 0.01 * math.sqrt(1.5)))


def test_no_witness_without_two_saved_minima(result_factory):
    """Baselines saved before the fastest iteration was stored have none: nothing to stand on."""
    old = [run_record(result_factory([0.2] * 6)) for _ in range(2)]
    for record in old:
        for r in record["rounds"]:
            del r["min_ms"]
    baseline = Baseline(Path("/b/m.json"), "t", FP.fields, FP.id, old, [])
    assert judge_module.fastest_iteration(_busy(0.3), baseline, 0.05, 0.01) is None


def test_a_gpu_session_has_no_fastest_iteration_witness():
    result = _busy(0.240)
    result.providers_used = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert judge_module.fastest_iteration(result, _baseline(), 0.05, 0.01) is None


@pytest.mark.parametrize("fast_ms, stands", [(0.240, True), (0.165, False), (0.166, False)])
def test_a_machine_speed_change_withholds_only_what_the_fastest_iteration_does_not_show(fast_ms, stands):
    """The reference ran 3.5x slower: raw figures would be withheld. A +50% change of the item's work moves
    its fastest iteration +50%: the regression stands, and the message leads with that figure. An
    unchanged item (fastest iteration +2%) stays not judged."""
    settings = GateSettings(threshold=0.05)
    v = judge_history(_busy(fast_ms), _baseline(), FP, settings, 0.05, "mlp[cpu]")
    assert v.fastest_iteration is not None
    if stands:
        assert v.outcome is Outcome.REGRESSION and v.fails
        assert v.fastest_iteration.stood
        assert v.message.startswith("REGRESSION mlp[cpu]: latency fastest iteration +48.1% (lower bound")
        assert v.withheld is None
        assert any("the regression stands" in n for n in v.notes)
    else:
        assert v.outcome is Outcome.INCONCLUSIVE and not v.fails
        assert v.withheld and "machine ran" in v.withheld
        assert not v.fastest_iteration.stood


def test_fewer_cores_for_a_multi_threaded_session_explain_its_fastest_iteration():
    """A 2-thread session that used 2 cores in its history and got 0.8 now runs even its uninterrupted
    iterations on fewer threads: a +50% fastest iteration is within the 2x that explains."""
    settings = GateSettings(threshold=0.05)
    v = judge_history(_busy(0.240, cores=0.8), _baseline(cores=2.0), FP, settings, 0.05, "mlp[cpu]")
    assert v.fastest_iteration is not None
    assert v.fastest_iteration.parallel_bound == pytest.approx(2.0)
    assert v.outcome is Outcome.INCONCLUSIVE and not v.fails
    assert "one intra-op thread (--aaco-intra-op-threads=1) is judged on its fastest iteration" in v.message


def _contended(fastest: FastestIteration | None) -> Verdict:
    from pytest_aaco.records.base import LATENCY, Judgement

    wall = Judgement(LATENCY, Outcome.REGRESSION, ratio=2.3, ci_low=2.0, ci_high=2.6, p_slower=1e-4, p_faster=1.0,
                     level=0.05, mde=0.1, series="raw", lower_bound=2.0, upper_bound=2.6, threshold=0.05)
    return Verdict.judged(wall, "mlp[cpu]", fastest_iteration=fastest)


@pytest.mark.parametrize("fastest, stands", [
    (FastestIteration(0.24, 0.16, 1.5, 1.45, 1.05, 2, 1.0), True),
    (FastestIteration(0.24, 0.16, 1.5, 1.45, 1.60, 2, 1.0), False),  # the reference's fastest moved more
    (FastestIteration(0.24, 0.16, 1.5, 1.45, 1.05, 2, 2.0), False),  # fewer cores explain it
    (FastestIteration(0.24, 0.16, 1.5, 1.45, None, 2, 1.0), False),  # no reference: nothing bounds it
    (FastestIteration(0.24, 0.16, 1.5, 1.45, 1.05, 2, None), False),  # the CPU share was not sampled
    (FastestIteration(0.17, 0.16, 1.06, 1.04, 1.00, 2, 1.0), False),  # the lower bound is below the threshold
    (FastestIteration(0.24, 0.16, 1.5, 1.30, 1.25, 2, 1.0), False),  # a slower clock: the threshold beyond it
    (FastestIteration(0.24, 0.16, 1.5, 1.32, 1.25, 2, 1.0), True),  # 1.32 >= 1.05 x 1.25
    (None, False),
])
def test_contention_withholds_unless_the_fastest_iteration_stands(fastest, stands):
    v = under_contention(_contended(fastest), others_cores=1.9, limit=0.1, explained=2.7)
    finish(v, GateSettings(threshold=0.05))
    assert (v.outcome is Outcome.REGRESSION) is stands
    assert v.fails is stands
    assert (v.contention is None) is stands
    if stands and fastest.lower_bound == 1.45:
        assert v.message.startswith("REGRESSION mlp[cpu]: latency fastest iteration +50.0% (lower bound +45.0% >= 5%"
                                    " beyond the +5.0% the machine explains: the reference workload's fastest"
                                    " iteration); 0.24 ms vs at most 0.16 ms")
    elif stands:
        assert v.message.startswith("REGRESSION mlp[cpu]: latency fastest iteration +50.0% (lower bound +32.0% >= 5%"
                                    " beyond the +25.0% the machine explains"), v.message
    else:
        assert "not judged: CPU contention" in v.message


def test_the_figure_round_trips_and_old_verdicts_stay_byte_identical():
    v = _contended(FastestIteration(0.24, 0.16, 1.5, 1.45, 1.05, 2, 1.0, stood=True))
    data = v.to_dict()
    assert data["fastest_iteration"]["stood"] is True
    assert Verdict.from_dict(data).fastest_iteration == v.fastest_iteration
    assert "fastest_iteration" not in _contended(None).to_dict()


def test_aaco_diff_keeps_a_rounds_fastest_iteration_without_its_latencies():
    """A baseline run has round summaries only: the stand-in latencies keep both the log-mean and the
    fastest iteration exact."""
    from pytest_aaco.cli.diff import _rounds_of
    from pytest_aaco.records.device import RoundFigures

    figures = RoundFigures(n=20, mean_ms=0.5, log_mean=math.log(0.4), min_ms=0.2)
    (rebuilt,) = _rounds_of([figures], [])
    assert rebuilt.latencies_ms.size == 20
    assert rebuilt.log_mean == pytest.approx(math.log(0.4))
    assert rebuilt.latencies_ms.min() == pytest.approx(0.2)
    (plain,) = _rounds_of([RoundFigures(n=20, mean_ms=0.5, log_mean=math.log(0.4))], [])
    assert plain.latencies_ms == pytest.approx(np.full(20, 0.4))


def test_a_first_look_that_stood_on_it_but_was_not_confirmed_does_not_say_it_stood():
    from finished import confirm

    from pytest_aaco.records.base import LATENCY, Judgement

    first = _contended(FastestIteration(0.24, 0.16, 1.5, 1.45, 1.05, 2, 1.0, stood=True))
    wall = Judgement(LATENCY, Outcome.NO_REGRESSION, ratio=1.01, ci_low=0.98, ci_high=1.04, p_slower=0.3,
                     p_faster=0.7, level=0.05, mde=0.03, series="raw", lower_bound=0.99, upper_bound=1.03,
                     threshold=0.05)
    v = confirm(first, Verdict.judged(wall, "mlp[cpu]"))
    assert v.confirmed is False and v.outcome is Outcome.INCONCLUSIVE
    assert v.fastest_iteration is not None and not v.fastest_iteration.stood
    assert not v.message.startswith("REGRESSION")
