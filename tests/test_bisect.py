"""``aaco bisect GOOD BAD -- PYTEST ARGS`` end to end: a git repository of 8 commits, real ONNX Runtime.

Commit 3 changes an unrelated model (same compute, other bytes: measured side by side, no
regression) and commit 5 slows the other model by extra MatMul work many times the tiny model's
cost, with a wide threshold so the outcome cannot flip on a loaded machine. Each step is a pytest
process with ``--aaco-compare=GOOD`` in a temporary linked worktree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from pytest_aaco.cli.bisect import BAD, GOOD, SKIP, Bisection, ItemFinding, Step, classify
from pytest_aaco.measure.modelgen import add_extra_work

REGISTRY = """
models:
  steady:
    path: steady.onnx
  other:
    path: other.onnx
"""
STEP_ARGS = ("--aaco-models=models.yaml", "--aaco-threshold=50%", "--aaco-intra-op-threads=1",
             "--aaco-compare-budget=20", "--aaco-warmup=2", "--aaco-max-contention=off", "--aaco-cold-start=0",
             "--aaco-confirm=off", "-p", "no:cacheprovider")
AACO = [sys.executable, "-c", "import sys; from pytest_aaco.cli import main; sys.exit(main())"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


def note(repo: Path, text: str) -> None:
    (repo / "notes.txt").write_text(text)


def build_history(aaco_project, broken_at: int | None = None) -> tuple[Path, dict[int, str]]:
    """Commits 0..7 as the module docstring says; *broken_at*: that commit's registry cannot be parsed
    (the next commit mends it)."""
    root = aaco_project.pytester.path
    for name in ("steady", "other"):
        shutil.copy(aaco_project.model, root / f"{name}.onnx")
    aaco_project.registry(REGISTRY)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    shas = {0: commit(root, "base")}
    for n in range(1, 8):
        if n == 3:
            model = onnx.load(str(root / "other.onnx"))
            model.doc_string = "same compute, different bytes"
            onnx.save(model, str(root / "other.onnx"))
        elif n == 5:
            onnx.save(add_extra_work(onnx.load(str(root / "steady.onnx")), matmuls=40, size=256),
                      str(root / "steady.onnx"))
        note(root, f"commit {n}")
        if broken_at is not None and n == broken_at:
            (root / "models.yaml").write_text("models: [unclosed\n")
        elif broken_at is not None and n == broken_at + 1:
            aaco_project.registry(REGISTRY)
        shas[n] = commit(root, f"commit {n}")
    return root, shas


def bisect(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    # pytester points HOME at the repository: caches written under ~ (matplotlib's) must not land in it
    env = {**os.environ, "HOME": str(root.parent / "home")}
    return subprocess.run([*AACO, "bisect", "HEAD~7", "HEAD", *extra, "--", *STEP_ARGS], cwd=root,
                          capture_output=True, text=True, timeout=900, env=env)


@pytest.mark.slow
def test_bisect_names_the_commit_that_slowed_the_model(aaco_project, tmp_path, monkeypatch):
    root, shas = build_history(aaco_project)
    status = git(root, "status", "--porcelain")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    done = bisect(root, "--out", str(tmp_path / "result.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"first bad commit: {shas[5][:12]} commit 5" in done.stdout, done.stdout
    assert "test_latency[steady-cpu]: latency +" in done.stdout and "(lower bound +" in done.stdout, done.stdout
    assert re.search(r"steady-cpu\]: latency \+[\d.]+% paired \(lower bound \+", done.stdout), done.stdout
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["first_bad"]["commit"] == shas[5]
    assert result["measured_steps"] <= 4, result["steps"]
    assert [s["state"] for s in result["steps"] if s["commit"] == shas[7]] == [BAD]
    assert result["skipped"] == []
    item = result["first_bad"]["items"][0]
    assert item["nodeid"].endswith("test_latency[steady-cpu]") and item["ratio"] > 1.5 and item["bound"] > 1.0
    assert f"First bad commit: `{shas[5][:12]}`" in (tmp_path / "summary.md").read_text()
    # the user's work tree and HEAD are as they were, and no linked worktree is left behind
    assert git(root, "status", "--porcelain") == status
    assert git(root, "rev-parse", "HEAD").strip() == shas[7]
    assert len(git(root, "worktree", "list").splitlines()) == 1


@pytest.mark.slow
def test_a_commit_that_cannot_run_is_skipped_and_named_and_the_bisection_resumes(aaco_project, tmp_path):
    root, shas = build_history(aaco_project, broken_at=6)
    first = bisect(root, "--max-steps", "2", "--out", str(tmp_path / "first.json"))
    assert first.returncode == 1 and "stopped after 2 step(s) (--max-steps)" in first.stdout, first.stdout
    done = bisect(root, "--out", str(tmp_path / "result.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming: 2 step(s) done" in done.stdout
    assert f"skipped {shas[6][:12]} commit 6: pytest exit" in done.stdout, done.stdout
    assert "models.yaml: invalid YAML" in done.stdout, done.stdout
    assert f"first bad commit: {shas[5][:12]} commit 5" in done.stdout, done.stdout
    result = json.loads((tmp_path / "result.json").read_text())
    assert [s["commit"] for s in result["skipped"]] == [shas[6]]
    assert result["measured_steps"] == 4  # commits 7, 4, 6 (skipped), 5: the resumed call measured 2


def test_a_bad_that_does_not_regress_names_nothing(aaco_project, tmp_path):
    root, _ = build_history(aaco_project)
    done = subprocess.run([*AACO, "bisect", "HEAD~7", "HEAD~4", "--", *STEP_ARGS], cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "does not regress against GOOD" in done.stdout


def test_usage_errors_name_the_argument(aaco_project):
    root, _ = build_history(aaco_project)
    done = subprocess.run([*AACO, "bisect", "HEAD~7", "no-such-ref"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 2 and "BAD 'no-such-ref' is not a commit" in done.stderr
    done = subprocess.run([*AACO, "bisect", "HEAD", "HEAD~7"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 2 and "GOOD must be older than BAD" in done.stderr
    done = subprocess.run([*AACO, "bisect", "HEAD~7", "HEAD", "--", "--aaco-compare=HEAD~1"], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "--aaco-compare is set by aaco bisect" in done.stderr


def _search(states: dict[int, str], n: int = 7) -> Bisection:
    commits = [[f"{i:040x}", f"c{i}"] for i in range(1, n + 1)]
    steps = {commits[i][0]: Step(commits[i][0], commits[i][1], s, "") for i, s in states.items()}
    return Bisection("0" * 40, commits[-1][0], commits, [], "", steps=steps)


def test_the_search_measures_bad_first_then_halves_and_steps_around_skips():
    assert _search({}).next_index() == 6
    assert _search({6: GOOD}).next_index() is None  # nothing to bisect
    assert _search({6: BAD}).next_index() == 3  # the middle of -1..6, the later on a tie
    assert _search({6: BAD, 3: SKIP}).next_index() == 2  # the untested commit nearest the middle
    search = _search({6: BAD, 3: GOOD, 5: BAD, 4: SKIP})
    assert search.next_index() is None and search.culprits() == [4, 5]  # a skip leaves two candidates
    search = _search({6: BAD, 3: GOOD, 5: BAD, 4: GOOD})
    assert search.next_index() is None and search.culprits() == [5]


def test_a_step_is_good_only_when_every_tracked_item_was_judged():
    regressed = ItemFinding("t[a]", "regression", "latency", 1.3, 1.2, "lower bound")
    fine = ItemFinding("t[a]", "no-regression", "latency", 1.0, 1.04, "upper bound")
    unsure = ItemFinding("t[a]", "inconclusive", "latency", 1.1, 1.6, "upper bound", "upper bound +60% >= 50%")
    assert classify([regressed], ["t[a]"], 1)[0] == BAD
    assert classify([fine], ["t[a]"], 0) == (GOOD, "no regression in t[a]")
    assert classify([unsure], ["t[a]"], 0)[0] == SKIP
    assert classify([], ["t[a]"], 5)[1].startswith("pytest exit 5 (no tests collected)")
    assert classify([fine], ["t[a]", "t[b]"], 0) == (SKIP, "t[b] did not run at this commit")


@pytest.mark.parametrize("text", ["{", "[]", '{"version": 1}'])
def test_a_damaged_state_file_is_a_usage_error_naming_it(aaco_project, text):
    root, _ = build_history(aaco_project)
    state = root / "state"
    state.mkdir()
    (state / "state.json").write_text(text)
    done = subprocess.run([*AACO, "bisect", "HEAD~7", "HEAD", "--state", str(state), "--", *STEP_ARGS], cwd=root,
                          capture_output=True, text=True)
    assert done.returncode == 2 and str(state / "state.json") in done.stderr and "--reset" in done.stderr, done.stderr
