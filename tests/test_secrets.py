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


#: credentials given as provider options (finding 1 of issue 12): names that look like secrets, values that do not
OPTION_SECRETS = {
    "api_key": "plain-api-key-value-1",
    "db_password": "hunter2-db-password",
    "auth_token": "opaque-auth-token-2",
    "x-api-key": "x-api-key-value-3",
}
REGISTRY_SECRET = "registry-held-credential-4"
ARGV_SECRET = "argv-held-credential-5"


@pytest.mark.slow
def test_provider_option_secrets_never_reach_an_artifact(aaco_project, monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials in --aaco-provider-option, in registry provider options and in argv are redacted in the
    baseline, the bundle (items and session_meta argv), both JUnit files, the HTML and the terminal."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    summary = aaco_project.pytester.path / "job-summary.md"  # the GitHub Actions job summary is an artifact too
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    project = aaco_project
    project.registry(f"""
        models:
          tiny:
            path: tiny.onnx
            providers:
              cpu: {{service_secret: {REGISTRY_SECRET}}}
    """)
    # the CPU EP takes no provider options (ORT ignores them); here it takes any, as an EP whose options
    # ORT lists would, so the values travel the whole way to the artifacts
    project.pytester.makeconftest("""
        import dataclasses
        from pytest_aaco import eps
        eps.BY_SHORT["cpu"] = dataclasses.replace(eps.BY_SHORT["cpu"], option_keys=None)

        def pytest_addoption(parser):
            parser.addoption("--db-password")
    """)
    options = [f"--aaco-provider-option={k}={v}" for k, v in OPTION_SECRETS.items()]
    args = [a for a in project.args() if a != "--aaco-no-bundle"] + ["--db-password", ARGV_SECRET]
    reports = ("--aaco-junit=perf.xml", "--junitxml=pytest.xml", "--aaco-html=report.html")
    saved = project.pytester.runpytest_subprocess(*args, *options, "--aaco-save-baseline", *reports, timeout=120)
    assert saved.ret == 0, saved.stdout.str()
    # the gating run changes every value: the fingerprint differs and the terminal says which field
    changed = [f"--aaco-provider-option={k}={v}-changed" for k, v in OPTION_SECRETS.items()]
    result = project.pytester.runpytest_subprocess(*args, *changed, *reports, timeout=120)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*not gated*provider_options*"])
    root = project.pytester.path
    baselines = _all_text(root / "baselines")
    assert "api_key" in baselines, "the fingerprint keeps the option's key"
    assert "--db-password" in _all_text(root / ".aaco"), "session_meta.json keeps the command line"
    assert summary.read_text(), "the run wrote no job summary"
    text = "\n".join([_all_text(root / ".aaco"), baselines, (root / "perf.xml").read_text(), summary.read_text(),
                      (root / "pytest.xml").read_text(), (root / "report.html").read_text(),
                      saved.stdout.str(), result.stdout.str(), result.stderr.str()])
    planted = {**OPTION_SECRETS, "registry": REGISTRY_SECRET, "argv": ARGV_SECRET, **SECRETS}
    for name, value in planted.items():
        assert value not in text, f"{name}'s value leaked into an artifact"
