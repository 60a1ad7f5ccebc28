"""A planted secret never reaches any artifact pytest-aaco writes: bundle, baselines, JUnit."""

from __future__ import annotations

from pathlib import Path

import pytest

SECRETS = {
    "ORT_API_TOKEN": "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
    "HIP_PASSWORD": "hunter2-plaintext-password",
    "CUDA_SECRET_KEY": "AKIAIOSFODNN7EXAMPLE",
    "OMP_AUTH": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhYWNvIn0.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
}


def _all_text(root: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*") if p.is_file())


def test_planted_secret_never_reaches_an_artifact(aaco_project, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # a harmless performance variable is kept
    project = aaco_project
    args = [a for a in project.args() if a != "--aaco-no-bundle"]
    result = project.pytester.runpytest_subprocess(*args, "--aaco-save-baseline", "--aaco-junit=perf.xml",
                                                   "--junitxml=pytest.xml", timeout=120)
    result.assert_outcomes(passed=1)
    root = project.pytester.path
    bundle = root / ".aaco"
    assert list(bundle.rglob("environment.json")), "the run wrote no session bundle"
    assert list((root / "baselines").rglob("*.json")), "the run wrote no baseline"
    text = _all_text(bundle) + _all_text(root / "baselines") + (root / "perf.xml").read_text() \
        + (root / "pytest.xml").read_text()
    for name, value in SECRETS.items():
        assert value not in text, f"{name}'s value leaked into an artifact"
    assert '"OMP_NUM_THREADS": "2"' in _all_text(bundle)
