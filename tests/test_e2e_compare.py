"""``--aaco-compare=REF`` end to end, as a pull-request job runs it: a git repository, real ONNX Runtime.

The project is a git repository holding the registry and the model files. Each pytest run is a
fresh process. Four items: one untouched (``unchanged at REF``, not measured again), one new,
one cosmetically changed (same compute, other bytes: measured side by side, must pass) and one
slowed by extra MatMul work many times the tiny model's cost (must fail), with a wide threshold
so neither outcome can flip on a loaded machine.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import onnx
import pytest

from pytest_aaco.modelgen import add_extra_work

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


def test_a_pull_request_job_gates_only_what_changed(repo, monkeypatch):
    root = repo.pytester.path
    model = onnx.load(str(root / "cosmetic.onnx"))
    model.doc_string = "same compute, different bytes"
    onnx.save(model, str(root / "cosmetic.onnx"))
    onnx.save(add_extra_work(onnx.load(str(root / "slowed.onnx")), matmuls=40, size=256), str(root / "slowed.onnx"))
    repo.registry(REGISTRY + NEW_ENTRY)
    git(root, "commit", "-qam", "the pull request")

    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(root / "summary.md"))
    result = repo.run_subprocess("--aaco-compare=HEAD~1", "--aaco-junit=perf.xml", "--aaco-html=perf.html", *ARGS,
                                 timeout=300)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*test_latency[[]slowed-cpu[]] *FAILED*"])
    assert re.search(r"REGRESSION slowed\[cpu\]: \+\d+\.\d% vs HEAD~1 \(95% CI \+[\d.]+ \.\. \+[\d.]+%\), measured"
                     r" side by side over \d+ cycles, p=\S+ at level \S+, threshold 50%", text), text
    assert "REGRESSION cosmetic" not in text
    result.stdout.fnmatch_lines(["steady*cpu*-*unchanged", "cosmetic*cpu*no-regression", "slowed*cpu*regression",
                                 "fresh*cpu*-*new"])
    assert "false-alarm control: LOND at FDR 0.05 over 4 benchmark items; 2 gated, 1 regression(s)" in text
    junit = (root / "perf.xml").read_text()
    assert "unchanged at HEAD~1" in junit and "measured side by side" in junit
    summary = (root / "summary.md").read_text()
    assert r"Compared side by side with HEAD\~1: 2 measured, 1 unchanged, 1 new." in summary  # Markdown-escaped
    page = (root / "perf.html").read_text()
    assert "Side by side: per-cycle ratios" in page
    assert "<svg" in page.split("Side by side: per-cycle ratios", 1)[1][:400]


def test_a_bad_revision_is_a_usage_error(repo):
    result = repo.run_subprocess("--aaco-compare=no-such-branch", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--aaco-compare=no-such-branch: no such commit*fetch*"])
