"""The nightly workflow (.github/workflows/perf-nightly.yml) run night by night in a temporary git
repository: its own step scripts, read from the workflow file, with real ONNX Runtime.

Night 1 has no accepted commit: it records only, and being green it sets the tag. Night 2 (a
cosmetic change: same compute, other bytes) is gated side by side against the tag, passes, is
stored, and moves the tag. Night 3 (a model slowed by extra MatMul work many times the tiny
model's cost) fails side by side; its run is still stored for trends, and the tag stays on night
2's commit. A wide threshold keeps the outcomes from flipping on a loaded machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import yaml

from pytest_aaco.measure.modelgen import add_extra_work

WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "perf-nightly.yml"
GATE_STEP = "Gate side by side against the last accepted commit"
ACCEPT_STEP = "Accept this commit"
REGISTRY = """models:
  steady:
    path: steady.onnx
  changing:
    path: changing.onnx
"""
#: fast rounds and a wide threshold: robust on a loaded two-core machine
INI = ("[pytest]\naaco_models = models.yaml\naddopts = --aaco-warmup=2 --aaco-rounds=3 --aaco-iterations=5"
       " --aaco-threshold=50%% --aaco-compare-budget=20 --aaco-max-contention=off\n")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def steps() -> tuple[dict[str, str], dict[str, dict[str, object]]]:
    flow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    job = flow["jobs"]["nightly"]
    return {k: str(v) for k, v in flow["env"].items()}, {s["name"]: s for s in job["steps"] if "name" in s}


def night(repo: Path) -> tuple[int, str]:
    """One night: the gate step's script, then the accept step's if the gate was green (its
    ``if: success()``), as GitHub's bash runs them (``bash -e -o pipefail``)."""
    env_vars, by_name = steps()
    env = {**os.environ, **env_vars, "PERF_TESTS": "test_perf.py", "GITHUB_SHA": git(repo, "rev-parse", "HEAD"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}  # this checkout's pytest_aaco
    gate = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", str(by_name[GATE_STEP]["run"])], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600)
    out = gate.stdout + gate.stderr
    assert by_name[ACCEPT_STEP]["if"] == "success()"
    if gate.returncode == 0:
        accept = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", str(by_name[ACCEPT_STEP]["run"])], cwd=repo,
                                env=env, capture_output=True, text=True, timeout=60)
        assert accept.returncode == 0, accept.stdout + accept.stderr
    return gate.returncode, out


def stored_runs(repo: Path) -> dict[str, int]:
    """Runs stored per item, the live history and the archived ones (a model change starts a new
    history and archives the old: the trend keeps both)."""
    found = {}
    for path in (repo / "baselines-nightly").glob("*/*.json"):
        data = json.loads(path.read_text())
        runs = len(data["history"]) + sum(len(a["history"]) for a in data.get("archive") or [])
        found[path.name.split("--test_latency-")[1].split("-")[0]] = runs
    return found


@pytest.fixture
def repo(tmp_path: Path, tiny_model_path: Path, isolated_cache: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    remote, root = tmp_path / "remote.git", tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    for name in ("steady", "changing"):
        shutil.copy(tiny_model_path, root / f"{name}.onnx")
    (root / "models.yaml").write_text(REGISTRY)
    (root / "pytest.ini").write_text(INI.replace("%%", "%"))
    (root / "test_perf.py").write_text("def test_latency(benchmark_model):\n    benchmark_model()\n")
    (root / ".gitignore").write_text("baselines-nightly/\nreports/\n")
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "remote", "add", "origin", str(remote))
    git(root, "add", ".")
    git(root, "commit", "-qm", "night 1")
    return root


def test_the_workflow_compares_side_by_side_with_the_accepted_commit() -> None:
    env_vars, by_name = steps()
    assert env_vars["ACCEPTED_TAG"] == "aaco-accepted"
    script = str(by_name[GATE_STEP]["run"])
    assert '--aaco-compare="$ACCEPTED_TAG"' in script and "--aaco-save-baseline" in script
    checkout = next(s for s in yaml.safe_load(WORKFLOW.read_text())["jobs"]["nightly"]["steps"]
                    if str(s.get("uses", "")).startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0  # the tag and its commit are fetched


@pytest.mark.slow
def test_three_nights_record_accept_and_catch(repo: Path) -> None:
    # night 1: no accepted commit yet, so it records only, and being green sets the tag
    rc, out = night(repo)
    assert rc == 0, out
    assert "no aaco-accepted tag yet" in out
    first = git(repo, "rev-parse", "HEAD")
    assert git(repo, "ls-remote", "--tags", "origin", "aaco-accepted").split()[0] == first
    assert stored_runs(repo) == {"steady": 1, "changing": 1}

    # night 2: a cosmetic change (same compute, other bytes): gated side by side, passes, stored, accepted
    model = onnx.load(str(repo / "changing.onnx"))
    model.doc_string = "same compute, other bytes"
    onnx.save(model, str(repo / "changing.onnx"))
    git(repo, "commit", "-qam", "night 2")
    rc, out = night(repo)
    assert rc == 0, out
    assert f"comparing with aaco-accepted ({first[:7]}" in out
    assert "REGRESSION" not in out
    second = git(repo, "rev-parse", "HEAD")
    assert git(repo, "ls-remote", "--tags", "origin", "aaco-accepted").split()[0] == second
    assert stored_runs(repo) == {"steady": 2, "changing": 2}

    # night 3: a real slowdown fails side by side; the run is still stored, the tag stays on night 2
    onnx.save(add_extra_work(onnx.load(str(repo / "changing.onnx")), matmuls=40, size=256),
              str(repo / "changing.onnx"))
    git(repo, "commit", "-qam", "night 3")
    rc, out = night(repo)
    assert rc == 1, out
    assert "REGRESSION changing[cpu]" in out and "paired vs aaco-accepted" in out
    assert git(repo, "ls-remote", "--tags", "origin", "aaco-accepted").split()[0] == second
    assert stored_runs(repo) == {"steady": 3, "changing": 3}
