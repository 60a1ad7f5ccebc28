"""The extra passes end to end, as users run them: the operator types that grew are named in the
regression message, cold start is gated on its own, and both reach the bundle and the HTML page.

Each pytest run is a fresh process. Effects are made far larger than the noise of a loaded
two-core machine: a Conv whose kernel grows from 3x3 to 9x9 (9x its FLOPs), and a session whose
creation folds a 12-step 512x512 MatMul chain (about 3 GFLOP) into a constant.
"""

from __future__ import annotations

import json
import shutil

import onnx
import pytest

from pytest_aaco.measure.modelgen import add_folding_work, save_model_atomic

GATE = ("--aaco-threshold=90%", "--aaco-intra-op-threads=1", "--aaco-memory-slack=100000", "-v")


def bundle_records(project) -> list[dict]:
    found = sorted(project.pytester.path.glob(".aaco/sessions/*/items/*.json"))
    return [json.loads(p.read_text()) for p in found]


@pytest.mark.slow
def test_a_regression_names_the_operator_types_that_grew(aaco_project, conv_models):
    project = aaco_project
    light, heavy = conv_models
    shutil.copy(light, project.pytester.path / "conv.onnx")
    project.registry("models:\n  conv:\n    path: conv.onnx\n")
    fast = [a for a in project.args() if a != "--aaco-no-bundle"]
    for _ in range(2):
        result = project.pytester.runpytest_subprocess(*fast, "--aaco-save-baseline", "--aaco-profile=on",
                                                       "--aaco-cold-start=0", *GATE, timeout=180)
        assert result.ret == 0, result.stdout.str()
    saved = json.loads(next(project.pytester.path.glob("baselines/*/*.json")).read_text())
    assert {o["op"] for o in saved["history"][-1]["profile"]["ops"]} >= {"Conv", "MatMul"}

    shutil.copy(heavy, project.pytester.path / "conv.onnx")
    html = project.pytester.path / "report.html"
    # "failing": only an item that fails gets the profile pass, after its verdict
    result = project.pytester.runpytest_subprocess(*fast, "--aaco-profile=failing", "--aaco-cold-start=0",
                                                   f"--aaco-html={html}", *GATE, timeout=180)
    assert result.ret == 1, result.stdout.str()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*REGRESSION conv[[]cpu[]]*", "*operators: Conv +*"])
    record = bundle_records(project)[-1]
    comparison = record["profile"]["comparison"]
    assert comparison["changes"][0]["op"] == "Conv" and comparison["changes"][0]["change"] > 2
    page = html.read_text(encoding="utf-8")
    assert "Where the time goes: operators" in page and "time by operator type" in page


@pytest.mark.slow
def test_cold_start_is_gated_on_its_own(aaco_project):
    project = aaco_project
    cold = ("--aaco-cold-start=3", *GATE)
    for _ in range(2):
        result = project.run_subprocess("--aaco-save-baseline", *cold)
        assert result.ret == 0, result.stdout.str()
    saved = json.loads(next(project.pytester.path.glob("baselines/*/*.json")).read_text())
    assert len(saved["history"][-1]["cold_start"]["session_create_ms"]) == 3

    result = project.run_subprocess(*cold)  # unchanged: passes
    assert result.ret == 0, result.stdout.str()

    folded = add_folding_work(onnx.load(str(project.model)), 12, 512)
    save_model_atomic(folded, project.model)  # same runs, slower session creation
    result = project.run_subprocess(*cold)
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*COLD START REGRESSION tiny[[]cpu[]] (session creation)*",
                                 "FAILED *::test_latency[[]tiny-cpu[]] - Failed: REGRESSION tiny[[]cpu[]]*"])
    assert "REGRESSION tiny[cpu]: latency" not in result.stdout.str()  # the runs themselves did not regress


@pytest.mark.slow
def test_extra_passes_are_skipped_when_off(aaco_project):
    fast = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(*fast, "--aaco-cold-start=0", "--aaco-profile=off", *GATE)
    assert result.ret == 0, result.stdout.str()
    record = bundle_records(aaco_project)[-1]
    assert "cold_start" not in record and "profile" not in record and "kernels" not in record


def test_judge_insight_returns_the_record_fields():
    from pytest_aaco.config import AacoConfig
    from pytest_aaco.extra_passes import Insight, JudgedInsight, judge_insight
    from pytest_aaco.passes.coldstart import ColdStart

    cold = ColdStart([100.0] * 4, [20.0] * 4)
    saved = judge_insight(Insight(cold_start=cold, notes=["--aaco-profile: no profile"]), None, "m[cpu]",
                          AacoConfig(), gated=False)
    assert saved == JudgedInsight(cold_start=cold.to_dict(), notes=["--aaco-profile: no profile"])
    gated = judge_insight(Insight(cold_start=cold), None, "m[cpu]", AacoConfig())
    assert gated.cold_start is not None and gated.cold_start["verdict"]["outcome"] == "no-baseline"
    assert gated.profile is None and gated.kernels is None and gated.notes == []
