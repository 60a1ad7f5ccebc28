"""``--aaco-baseline-runner=KEY``: another runner's history, used on purpose (issue 43, pytest_aaco/history/across.py).

"Another runner" is made as the other-runners line's test makes it (tests/test_baseline.py): the history
recorded here is moved into a folder named for runner A, and its stored fingerprint is given another CPU
model, so that nothing but the option can gate against it. The slowdown is made as the end-to-end test makes it
(tests/test_e2e_gate.py: extra MatMul work, here three times as much) and the threshold as wide (90%),
so neither outcome can flip on a loaded machine.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from pytest_aaco.history.across import ACROSS_RUNNER_SD, across_comparison, across_fingerprint
from pytest_aaco.history.store import baseline_path
from pytest_aaco.verdict import run_stats, stats
from pytest_aaco.verdict.comparable import Fingerprint

#: items within 3x of the reference workload's duration (the mix: about 8 ms here; 4 such MatMuls took 1.8 ms)
#: the normalized series judges across runners only where the two slow down alike (history/across.py)
REGISTRY = """
models:
  steady:
    path: tiny.onnx
    extra_work: {matmuls: 12, size: 256}
  changing:
    path: tiny.onnx
    extra_work: {matmuls: %d, size: 256}
"""
SLOWER = REGISTRY % 36  # three times the work
REGISTRY = REGISTRY % 12
GATE = ("--aaco-threshold=90%", "--aaco-intra-op-threads=1", "--aaco-memory-slack=100000", "-v")
#: every verdict record to records.jsonl (the plugin's hook), so that each item's message can be read
RECORDING_CONFTEST = """
import json


def pytest_aaco_verdict(config, item, record):
    with open("records.jsonl", "a") as out:
        out.write(json.dumps(record) + "\\n")
"""
NODES = ("test_perf.py::test_latency[steady-cpu]", "test_perf.py::test_latency[changing-cpu]")


def as_runner_a(project) -> tuple[str, list]:
    """Move this runner's history into ``baselines/runner-a`` with another CPU model in its fingerprint;
    returns this runner's key and runner A's files."""
    root = project.pytester.path / "baselines"
    (mine,) = [p for p in root.iterdir() if p.is_dir()]
    moved = []
    for nodeid in NODES:
        data = json.loads(baseline_path(root, mine.name, nodeid).read_text())
        data["fingerprint"]["cpu_model"] = "Another CPU model 9000"
        other = baseline_path(root, "runner-a", nodeid)
        other.parent.mkdir(exist_ok=True)
        other.write_text(json.dumps(data))
        moved.append(other)
    shutil.rmtree(mine)
    return mine.name, moved


#: the machine's load left the reference workload unusable, or its speed changed between the history and now
#: (a verdict withheld as "not judged: the machine ran N% slower than in the history ..."): by design
UNSTABLE = ("the reference's block-to-block spread", "the reference drifted", "not judged:")


def gate_steady_reference(project, *args: str):
    """The gate run across runners, again (at most 3 runs) while the machine's load left the reference workload
    unusable (its spread or drift, or a machine speed change that withholds a verdict: then nothing can be
    compared across runners, by design); skips when it stayed so, since the behaviour under test needs a usable
    reference."""
    for _ in range(3):
        (project.pytester.path / "records.jsonl").unlink(missing_ok=True)  # the last run's records only
        done = project.run_subprocess(*args)
        if not any(word in done.stdout.str() for word in UNSTABLE):
            return done
    pytest.skip("the reference workload was unstable in 3 runs (a loaded machine): nothing to compare across runners")


def test_another_runners_history_gates_on_purpose_and_catches_a_slowdown(aaco_project):
    project = aaco_project
    project.registry(REGISTRY)
    for _ in range(2):
        assert project.run_subprocess("--aaco-save-baseline", *GATE).ret == 0
    mine, moved = as_runner_a(project)
    before = [p.read_bytes() for p in moved]

    # without the option: no baseline for this runner, and runner A is named
    plain = project.run_subprocess(*GATE)
    assert plain.ret == 0
    assert "other runners' histories: steady[cpu] (runner-a)" in plain.stdout.str()

    # with it: judged against runner A's history (not no-baseline), and the verdict says whose it is
    project.pytester.makeconftest(RECORDING_CONFTEST)
    same = gate_steady_reference(project, "--aaco-baseline-runner=runner-a", *GATE)
    text = same.stdout.str()
    assert same.ret == 0, text
    same.assert_outcomes(passed=2)
    assert "no-baseline" not in text and "no baseline for this runner" not in text
    records = [json.loads(line) for line in (project.pytester.path / "records.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for record in records:
        verdict = record["verdict"]
        assert verdict["baseline_runner"] == "runner-a" and verdict["series"] == "normalized", verdict
        assert "against runner runner-a's history (another runner's)" in verdict["message"]
        notes = " ".join(verdict["notes"])
        assert re.search(r"between-runner term of 5% sd in its test: minimum detectable effect [\d.]+%, against"
                         r" [\d.]+% without that term", notes), notes

    # a slowed model is caught through the normalized series; the unchanged one is not failed
    project.registry(SLOWER)
    slow = gate_steady_reference(project, "--aaco-baseline-runner=runner-a", *GATE)
    text = slow.stdout.str()
    assert slow.ret == pytest.ExitCode.TESTS_FAILED, text
    slow.assert_outcomes(passed=1, failed=1)
    slow.stdout.re_match_lines([r"^REGRESSION changing\[cpu\]: .*normalized.*against runner runner-a's history"
                                r" \(another runner's\)"])
    assert "REGRESSION steady" not in text

    # saving never writes into runner A's folder: it goes to this runner's own
    project.registry(REGISTRY)
    saved = project.run_subprocess("--aaco-baseline-runner=runner-a", "--aaco-save-baseline", *GATE)
    assert saved.ret == 0, saved.stdout.str()
    assert [p.read_bytes() for p in moved] == before
    root = project.pytester.path / "baselines"
    assert all(baseline_path(root, mine, nodeid).is_file() for nodeid in NODES)


def test_an_unknown_runner_is_a_usage_error_listing_the_runners(aaco_project):
    project = aaco_project
    assert project.run("--aaco-save-baseline", "--aaco-reference=none").ret == 0
    root = project.pytester.path / "baselines"
    (mine,) = [p.name for p in root.iterdir() if p.is_dir()]
    result = project.run("--aaco-baseline-runner=runner-z")
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    result.stderr.fnmatch_lines([f"*--aaco-baseline-runner=runner-z: no such runner under *baselines*"
                                 f" (the runners with baselines there: {mine})*"])


def test_the_fingerprint_is_compared_without_the_machine():
    here = Fingerprint({"cpu_model": "A", "cpu_cores": 4, "gpu_name": None, "provider": "cpu", "ort_version": "1"})
    there = {"cpu_model": "B", "cpu_cores": 64, "gpu_name": None, "provider": "cpu", "ort_version": "1"}
    assert not here.matches(there) and across_fingerprint(here, there).matches(there)
    cuda = {**there, "provider": "cuda"}  # what is not the machine still has to match
    assert across_fingerprint(here, cuda).diff(cuda) == ["provider"]


def test_the_between_runner_term_widens_the_test_by_its_variance():
    """The estimate and df are Welch's with the run term (scipy-checked in tests/test_stats.py); the standard
    error adds ACROSS_RUNNER_SD in quadrature, and p and the MDE follow from Student's t (scipy.stats.t)."""
    from scipy.stats import t as student_t

    rng = np.random.default_rng(3)
    current = np.log(10.0) + 0.02 * rng.standard_normal(8)
    history = [list(np.log(10.0) + 0.02 * rng.standard_normal(8)) for _ in range(2)]
    base = stats.welch_rounds(current, np.concatenate(history), run_sd=max(np.log1p(0.01),
                              run_stats.run_offset_sd(history)), baseline_runs=2)
    comp = across_comparison(current, history, 0.01)
    assert comp.estimate == pytest.approx(base.estimate) and comp.df == pytest.approx(base.df)
    assert comp.se == pytest.approx(np.hypot(base.se, ACROSS_RUNNER_SD))
    assert comp.p_slower == pytest.approx(student_t.sf(comp.estimate / comp.se, comp.df))
    assert comp.mde(0.05) > base.mde(0.05) + 0.05  # the wider MDE the verdict states


def _across(result_factory, tmp_path, device_ms: float, gpu_here: str = "NVIDIA H200"):
    """A 5-run history of runner B (another CPU, an H200) with device time and the reference, and this run on
    another CPU 30% slower in wall time, its kernel time *device_ms* (0.818 in the history), judged finished."""
    from test_device_time_stored import LEVELS, _baseline, _reference, _series

    from pytest_aaco.history.across import judge_across
    from pytest_aaco.options import GateSettings
    from pytest_aaco.verdict.finish import settle

    fields = {"provider": "cuda", "cpu_model": "B", "cpu_cores": 64, "gpu_name": "NVIDIA H200"}
    baseline = _baseline(tmp_path, result_factory, LEVELS, with_reference=True)
    baseline.fingerprint = fields
    current = result_factory([2.6] * 10, seed=9)  # a slower CPU: launches take longer
    current.device = _series(device_ms, seed=9)
    current.reference = _reference(current, 0.5, 9)
    here = Fingerprint({**fields, "cpu_model": "A", "cpu_cores": 8, "gpu_name": gpu_here})
    settings = GateSettings()
    return settle(judge_across(current, baseline, here, settings, 0.05, "m[cuda]", "runner-b"), settings)


def test_device_time_gives_the_word_across_runners_on_one_gpu_model(tmp_path, result_factory):
    from pytest_aaco.records.base import Outcome

    same = _across(result_factory, tmp_path, 0.818)
    assert same.outcome == Outcome.NO_REGRESSION and not same.fails, same.message
    assert same.baseline_runner == "runner-b" and same.to_dict()["baseline_runner"] == "runner-b"
    assert "against runner runner-b's history (another runner's)" in same.message
    # the untested raw change compares levels, as the stored gate does: each run's fastest quarter of rounds
    assert "raw wall time +30.0%, fastest quarter of rounds (the machines' difference included; not tested)" in (
        same.notes)
    slow = _across(result_factory, tmp_path, 0.818 * 1.064)
    assert slow.outcome == Outcome.REGRESSION and slow.fails
    assert slow.message.startswith("REGRESSION m[cuda]: device time +6."), slow.message
    # another GPU model: device time is not compared, and says so
    other = _across(result_factory, tmp_path, 0.818 * 1.064, gpu_here="NVIDIA A100")
    assert other.device_time is None
    assert any("device time not compared: the GPUs differ (NVIDIA H200 there, NVIDIA A100 here)" in n
               for n in other.notes)


def test_an_item_far_shorter_than_the_reference_is_not_judged_across_runners(tmp_path, result_factory):
    """Under load an unchanged 10 us item normalized by the mix reference (8 ms) read +133%, confirmed: the two do
    not slow down alike, so across runners such an item is not judged, and the verdict says why."""
    from test_device_time_stored import _reference

    from pytest_aaco.history.across import judge_across
    from pytest_aaco.history.store import Baseline, run_record
    from pytest_aaco.options import GateSettings
    from pytest_aaco.records.base import Outcome

    fields = {"provider": "cpu", "cpu_model": "B", "cpu_cores": 64, "gpu_name": None}
    history = []
    for seed in range(2):
        run = result_factory([0.01] * 10, seed=seed)
        run.reference = _reference(run, 0.5, seed)  # its blocks; its mean_ms (1.8 ms) is 180 times the item's
        history.append(run_record(run))
    baseline = Baseline(tmp_path / "b.json", "t::x", fields, "fp", history)
    current = result_factory([0.01] * 10, seed=9)
    current.reference = _reference(current, 0.5, 9)
    here = Fingerprint({**fields, "cpu_model": "A"})
    v = judge_across(current, baseline, here, GateSettings(), 0.05, "m[cpu]", "runner-b")
    assert v.outcome == Outcome.INCONCLUSIVE and v.wall is None and v.baseline_runner == "runner-b"
    assert "the item's iteration (0.01 ms in the history) and the reference's (1.8 ms) differ more than 3x" in (
        v.reason or ""), v.reason


def test_an_item_not_comparable_across_runners_is_named_not_judged():
    """An item with no series comparable with the other runner's history is inconclusive with a reason and no
    ratio: the summary's first line names it, and --aaco-fail-blind fails it, as for the other not-judged items."""
    from pytest_aaco.options import GateSettings
    from pytest_aaco.records.base import Outcome
    from pytest_aaco.records.verdict import Verdict
    from pytest_aaco.verdict.blind import not_judged_line
    from pytest_aaco.verdict.outcome import fails

    v = Verdict(Outcome.INCONCLUSIVE, "m[cpu]", 0.05, baseline_runner="runner-a",
                reason="inconclusive for m[cpu]: not judged against runner runner-a's history: ...")
    line = not_judged_line([("m[cpu]", v)])
    assert line is not None and "m[cpu] (no series comparable with runner runner-a's history)" in line, line
    assert not fails(v, GateSettings()) and fails(v, GateSettings(fail_blind=True))
