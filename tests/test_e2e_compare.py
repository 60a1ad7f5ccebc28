"""``--aaco-compare=REF`` end to end, as a pull-request job runs it: a git repository, real ONNX Runtime.

The project is a git repository holding the registry and the model files. Each pytest run is a
fresh process. Four items: one untouched (``unchanged at REF``, not measured again), one new,
one cosmetically changed (same compute, other bytes: measured side by side, must pass) and one
slowed by extra MatMul work many times the tiny model's cost (must fail), with a wide threshold
so neither outcome can flip on a loaded machine.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import onnx
import pytest

from pytest_aaco.measure.modelgen import add_extra_work, add_folding_work, save_model_atomic

REGISTRY = """
models:
  steady:
    path: steady.onnx
  cosmetic:
    path: cosmetic.onnx
  slowed:
    path: slowed.onnx
"""
NEW_ENTRY = """  fresh:
    path: steady.onnx
"""
ARGS = ("--aaco-threshold=50%", "--aaco-intra-op-threads=1", "--aaco-compare-budget=20", "-v")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(aaco_project) -> object:
    root = aaco_project.pytester.path
    for name in ("steady", "cosmetic", "slowed"):
        shutil.copy(aaco_project.model, root / f"{name}.onnx")
    aaco_project.registry(REGISTRY)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    return aaco_project


@pytest.mark.slow
def test_a_pull_request_job_gates_only_what_changed(repo, monkeypatch):
    root = repo.pytester.path
    model = onnx.load(str(root / "cosmetic.onnx"))
    model.doc_string = "same compute, different bytes"
    onnx.save(model, str(root / "cosmetic.onnx"))
    onnx.save(add_extra_work(onnx.load(str(root / "slowed.onnx")), matmuls=40, size=256), str(root / "slowed.onnx"))
    repo.registry(REGISTRY + NEW_ENTRY)
    git(root, "commit", "-qam", "the pull request")

    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(root / "summary.md"))
    result = repo.run_subprocess("--aaco-compare=HEAD~1", "--aaco-compare-unchanged=measure", "--aaco-junit=perf.xml",
                                 "--aaco-html=perf.html", *ARGS,
                                 timeout=300)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*test_latency[[]slowed-cpu[]] *FAILED*"])
    assert re.search(r"REGRESSION slowed\[cpu\]: latency \+\d+\.\d% paired vs HEAD~1 \(lower bound \+[\d.]+% > 0,"
                     r" \+[\d.]+% >= 50%\); geometric mean [\d.]+ ms vs [\d.]+ ms \(\+[\d.]+%\); measured side by"
                     r" side over \d+ cycles, p=\S+ at level \S+", text), text
    assert "REGRESSION cosmetic" not in text
    result.stdout.fnmatch_lines(["steady*cpu*-*unchanged", "cosmetic*cpu*no-regression", "slowed*cpu*regression*",
                                 "fresh*cpu*-*new"])
    assert "false-alarm control: LOND at FDR 0.05 over 4 benchmark items; 2 gated, 1 regression(s)" in text
    junit = (root / "perf.xml").read_text()
    assert "unchanged at HEAD~1" in junit and "measured side by side" in junit
    summary = (root / "summary.md").read_text()
    assert r"Compared side by side with HEAD\~1: 2 measured, 1 unchanged, 1 new." in summary  # Markdown-escaped
    page = (root / "perf.html").read_text()
    assert "Side by side: per-cycle ratios" in page
    assert "<svg" in page.split("Side by side: per-cycle ratios", 1)[1][:400]
    # both sides' figures and distributions (issue 21): the baseline column, histogram and telemetry of both
    slowed = page[page.index('<section class="item" id="item-test_perf-py-test_latency-slowed-cpu"'):]
    slowed = slowed[:slowed.index("</section>")]
    mean_row = re.search(r"<th>mean</th><td[^>]*>([^<]+)</td><td[^>]*>([^<]+)</td>", slowed)
    assert mean_row and mean_row.group(2).endswith(" ms"), slowed[:3000]
    assert "baseline side (HEAD~1) (n=" in slowed and "baseline runs" not in slowed
    assert "no data for the telemetry plot" not in slowed and "baseline side (HEAD~1)</text>" in slowed


def test_a_bad_revision_is_a_usage_error(repo):
    result = repo.run_subprocess("--aaco-compare=no-such-branch", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--aaco-compare=no-such-branch: no such commit*fetch*"])


COLD_REGISTRY = """
models:
  cosmetic:
    path: cosmetic.onnx
  folded:
    path: folded.onnx
"""


@pytest.mark.slow
def test_cold_start_is_compared_side_by_side(aaco_project):
    """``--aaco-compare=REF --aaco-cold-start=5``: fresh sessions of both sides alternate. The
    candidate whose session creation folds about 3 GFLOP of constant MatMuls (the runs are the
    same) fails on its cold start alone; the cosmetically changed model passes."""
    root = aaco_project.pytester.path
    for name in ("cosmetic", "folded"):
        shutil.copy(aaco_project.model, root / f"{name}.onnx")
    aaco_project.registry(COLD_REGISTRY)
    for args in (("init", "-q"), ("config", "user.email", "t@example.com"), ("config", "user.name", "t"),
                 ("add", "."), ("commit", "-qm", "base")):
        git(root, *args)
    model = onnx.load(str(root / "cosmetic.onnx"))
    model.doc_string = "same compute, different bytes"
    onnx.save(model, str(root / "cosmetic.onnx"))
    save_model_atomic(add_folding_work(onnx.load(str(root / "folded.onnx")), 12, 512), root / "folded.onnx")
    git(root, "commit", "-qam", "the pull request")

    fast = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(
        *fast, "--aaco-compare=HEAD~1", "--aaco-compare-unchanged=measure", "--aaco-cold-start=5",
        "--aaco-max-contention=off", "--aaco-junit=perf.xml",
        "--aaco-html=perf.html", *ARGS, timeout=300)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_latency[[]folded-cpu[]] *FAILED*",
                                 "*COLD START REGRESSION folded[[]cpu[]] (session creation): session creation * ms vs"
                                 " * ms at HEAD~1 (+*fastest of 5 alternating fresh sessions shown*"])
    assert "COLD START REGRESSION cosmetic" not in text and "REGRESSION folded[cpu]: latency" not in text  # alike
    # the failure's first line (pytest's short summary) names what failed and its per cent; so does the table
    result.stdout.fnmatch_lines(["REGRESSION folded[[]cpu[]]: cold start session creation +*% (paired) vs HEAD~1",
                                 "FAILED test_perf.py::test_latency[[]folded-cpu[]] - Failed: REGRESSION fold*"])
    result.stdout.fnmatch_lines(["folded*cpu*regression (cold start*"])
    assert "Failed: inconclusive" not in text and "Failed: no regression" not in text
    records = {r["model"]: r for r in (json.loads(p.read_text()) for p in root.glob(".aaco/sessions/*/items/*.json"))}
    folded, cosmetic = records["folded"]["cold_start"], records["cosmetic"]["cold_start"]
    assert folded["verdict"]["method"] == "side-by-side" and folded["verdict"]["fails"]
    assert folded["verdict"]["confirmed"] is True and folded["first_look"]["outcome"] == "regression"
    assert folded["min_session_create_ms"] > 2 * folded["baseline_side"]["min_session_create_ms"]
    assert not cosmetic["verdict"]["fails"] and len(cosmetic["baseline_side"]["session_create_ms"]) == 5
    # issue 19: the side-by-side measurement's fresh sessions are the cold start's first cycles
    assert cosmetic["reused_sessions"] >= 1 and cosmetic["baseline_side"]["reused_sessions"] >= 1
    assert f"5 alternating fresh sessions ({cosmetic['reused_sessions']} from the side-by-side measurement)" in \
        cosmetic["verdict"]["message"]
    assert "reused_sessions" not in folded  # its confirmation built all 5 anew
    junit = (root / "perf.xml").read_text()
    assert 'name="aaco_cold_start_method" value="side-by-side"' in junit
    page = (root / "perf.html").read_text()
    assert "baseline side (fastest session)" in page and "from the side-by-side measurement" in page


SPY_CONFTEST = """
from pathlib import Path

from pytest_aaco.measure import reference_workload

_get = reference_workload.ReferenceCache.get


def _spy(self, *args, **kwargs):
    with open(Path(__file__).with_name("reference_built.txt"), "a") as f:
        f.write("built\\n")
    return _get(self, *args, **kwargs)


reference_workload.ReferenceCache.get = _spy
"""


@pytest.mark.slow
def test_side_by_side_builds_no_reference_workload(repo):
    """The reference workload only adjusts stored baselines; side by side it is never used, so it is
    never built (on an H100 the default mix cost an item about 1.1 s of setup). Without
    ``--aaco-compare`` the same items build it."""
    root = repo.pytester.path
    repo.pytester.makeconftest(SPY_CONFTEST)
    model = onnx.load(str(root / "cosmetic.onnx"))
    model.doc_string = "same compute, different bytes"
    onnx.save(model, str(root / "cosmetic.onnx"))
    git(root, "commit", "-qam", "the pull request")
    spy = root / "reference_built.txt"
    result = repo.run_subprocess("--aaco-compare=HEAD~1", "--aaco-compare-unchanged=measure", "-k", "cosmetic",
                                 *ARGS, timeout=300)
    result.stdout.fnmatch_lines(["cosmetic*cpu*no-regression"])
    assert not spy.exists(), spy.read_text()
    repo.run_subprocess("-k", "cosmetic", *ARGS, timeout=300)
    assert spy.exists()
