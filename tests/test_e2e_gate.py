"""End to end with real ONNX Runtime, as a user runs it: record baselines, pass, then catch a real slowdown.

Each pytest run is a fresh process (``runpytest_subprocess``): timings, ORT thread pools and process
memory must not leak from one run into the next, as they would not in CI. The slowdown is made
large (extra MatMul work, hundreds of times slower than the tiny model) and the threshold wide
(90%: a tiny model on a loaded two-core machine was measured 37% off between runs, and a busy
hyperthread sibling can cost more), so neither outcome can flip.
"""

from __future__ import annotations

import json
import re

import pytest

REGISTRY = """
models:
  steady:
    path: tiny.onnx
    iterations: 200
  changing:
    path: tiny.onnx
"""
SLOWER = REGISTRY + "    extra_work: {matmuls: 40, size: 256}\n"

#: wide threshold and one intra-op thread: robust on a loaded machine; memory is judged in its own test
GATE = ("--aaco-threshold=90%", "--aaco-intra-op-threads=1", "--aaco-memory-slack=100000", "-v")


def baseline_files(project) -> dict[str, dict]:
    """Baseline files by name, the ``-<hash>`` suffix that keeps names unique left out."""
    return {re.sub(r"-[0-9a-f]{10}\.json$", ".json", p.name): json.loads(p.read_text())
            for p in project.pytester.path.glob("baselines/*/*.json")}


@pytest.mark.slow
def test_record_pass_then_catch_a_regression(aaco_project):
    project = aaco_project
    project.registry(REGISTRY)

    # 1. record two runs of history
    for _ in range(2):
        result = project.run_subprocess("--aaco-save-baseline", *GATE)
        assert result.ret == 0, result.stdout.str()
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines(["steady*cpu*saved*", "changing*cpu*saved*"])
    files = baseline_files(project)
    assert sorted(files) == ["test_perf.py--test_latency-changing-cpu.json",
                             "test_perf.py--test_latency-steady-cpu.json"]
    for data in files.values():
        assert data["schema_version"] == 3 and len(data["history"]) == 2  # runs with reference series
        assert data["fingerprint"]["provider"] == "CPUExecutionProvider"
        assert data["fingerprint"]["intra_op_threads"] == 1
        assert data["fingerprint"]["reference"].startswith("mix:")  # the default reference workload
        for run in data["history"]:  # raw rounds, and the reference's own and the normalized series
            assert len(run["reference"]["log_means"]) == len(run["reference"]["normalized"]) == len(run["rounds"])
    steady = files["test_perf.py--test_latency-steady-cpu.json"]
    assert [r["n"] for r in steady["history"][-1]["rounds"]] == [200, 200, 200]

    # 2. nothing changed: both items pass, and the table shows them
    result = project.run_subprocess(*GATE)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*= pytest-aaco results =*",
        "model*provider*mean ms*p50 ms*p99 ms*throughput/s*change vs baseline*machine*verdict*",
        "steady*cpu*%*",
        "changing*cpu*%*",
        "false-alarm control: LOND at FDR 0.05 over 2 benchmark items; 2 gated, 0 regression(s)",
    ])
    assert "REGRESSION" not in result.stdout.str()

    # 3. the 'changing' model now does much more work: exactly that item fails, with an actionable message
    project.registry(SLOWER)
    result = project.run_subprocess(*GATE)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "test_perf.py::test_latency[[]steady-cpu[]] *PASSED*",
        "test_perf.py::test_latency[[]changing-cpu[]] *FAILED*",
    ])
    # the short summary (cut at the terminal's width) starts with the outcome and the item; the failure's
    # first line is the whole headline: the metric, its per cent, the bound compared, the series, vs what
    result.stdout.re_match_lines([r"FAILED test_perf.py::test_latency\[changing-cpu\] - Failed: REGRESSION chang"])
    result.stdout.re_match_lines([r"^REGRESSION changing\[cpu\]: latency \+[\d.]+% \[lower bound [^\]]+\]"
                                  r" \((raw|normalized|adjusted)[^)]*\) vs baseline$"])
    text = result.stdout.str()
    match = re.search(r"REGRESSION changing\[cpu\]: latency \+[\d.]+% (raw|normalized|adjusted)"
                      r"(?:, fastest quarter of rounds)? \(lower bound \+[^;]*;"
                      r"(?: [^;]*geometric mean [^;]*;)?"
                      r" mean ([\d.]+) ms \(the confirmation measurement's\) vs ([\d.]+) ms \([+-][\d.]+%\) over 2"
                      r" baseline runs", text)
    assert match, text
    current, baseline = float(match.group(2)), float(match.group(3))
    assert current >= 3 * baseline, (current, baseline)  # the injected slowdown is large, never noise
    assert ">= 90%)" in text and "confirmed by a second measurement with a fresh session" in text
    if ", fastest quarter of rounds" in match.group(0):  # the table says what its change is over
        assert "change vs baseline: stored wall time compares each run's fastest quarter of rounds" in text
    # normalized by the reference, or raw saying why (its iteration is much longer than the item's, or a
    # machine loaded enough to upset it, or the history shows the other series less steady)
    assert re.search(r"normalized by the reference workload mix \(raw \+"
                     r"|raw figures: the (reference|item|normalized series|adjusted series)", text), text
    assert "REGRESSION steady" not in text

    # the failed run did not touch the recorded history
    assert all(len(d["history"]) == 2 for d in baseline_files(project).values())


def test_unchanged_items_do_not_trip_the_memory_gate(aaco_project):
    project = aaco_project
    project.registry(REGISTRY)
    # a 20 MB slack: nothing in an unchanged tiny model grows by that much (the artifact is ~55 MB)
    args = ("--aaco-threshold=90%", "--aaco-intra-op-threads=1", "--aaco-memory-slack=20")
    assert project.run_subprocess("--aaco-save-baseline", *args).ret == 0
    result = project.run_subprocess(*args)
    assert "MEMORY REGRESSION" not in result.stdout.str()
    assert result.ret == 0


@pytest.mark.slow
def test_reference_can_be_chosen_or_turned_off(aaco_project):
    """``--aaco-reference`` picks the reference workload (a zoo model here) or turns it off; a history
    recorded with another reference, or none, is still gated, on raw figures."""
    project = aaco_project
    project.registry(REGISTRY)
    assert project.run_subprocess("--aaco-save-baseline", "--aaco-reference=none", *GATE).ret == 0
    assert project.run_subprocess("--aaco-save-baseline", "--aaco-reference=squeezenet", *GATE).ret == 0
    for data in baseline_files(project).values():
        first, second = data["history"]
        assert "reference" not in first and second["reference"]["id"].startswith("squeezenet:")
        assert second["reference"]["name"] == "squeezenet"
    result = project.run_subprocess(*GATE)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2)
