"""The pytest set-ups people run, each in a subprocess over the tiny project: the run passes, the
results table is printed (unless -qq), and one --aaco-save-baseline run adds exactly one run to the
history (a rerun or a second worker must not count twice). A set-up whose third-party plugin is not
installed skips saying which (they are in the ``test`` extra)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SETUPS = {
    "-W error": (["-W", "error"], None),
    "pytest-randomly": (["-p", "randomly"], "pytest_randomly"),
    "pytest-timeout": (["--timeout=300"], "pytest_timeout"),
    "pytest-rerunfailures": (["--reruns=2"], "pytest_rerunfailures"),
    "pytest-cov": (["--cov=pytest_aaco", "--cov-report="], "pytest_cov"),
    "-x": (["-x"], None),
    "--strict-markers": (["--strict-markers"], None),
    "-n auto": (["-n", "auto"], "xdist"),
    "--import-mode=importlib": (["--import-mode=importlib"], None),
    "-q": (["-q"], None),
    "-qq": (["-qq"], None),
    "-v": (["-v"], None),
}


def _history_runs(root: Path) -> list[int]:
    """The number of runs in each baseline history under ``bl``."""
    from pytest_aaco.history.store import load_baseline

    counts = []
    for path in sorted(root.rglob("*.json")):
        if "corrupt" in path.name or ".aaco" in path.parts or "sessions" in str(path):
            continue
        try:
            baseline = load_baseline(path)
        except Exception:  # noqa: BLE001 - another JSON file (a bundle's item), not a baseline
            continue
        if baseline is not None:
            counts.append(len(baseline.history))
    return counts


@pytest.mark.parametrize("name", list(SETUPS))
def test_a_setup_runs_and_saves_one_baseline_run(aaco_project, name):
    args, module = SETUPS[name]
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' installs it)")
    aaco_project.registry()
    aaco_project.tests()
    root = aaco_project.pytester.path
    result = aaco_project.run_subprocess(*args, "--aaco-save-baseline", "--aaco-baseline-dir=bl", timeout=300)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, out
    assert "INTERNALERROR" not in out and "Traceback" not in out, out
    assert _history_runs(root) == [1], (_history_runs(root), out)


def test_last_failed_reruns_only_the_failed_item(aaco_project):
    """``--lf`` needs the cache provider, which the fixture's arguments turn off."""
    aaco_project.registry()
    aaco_project.tests()
    aaco_project.pytester.makepyfile(test_other="def test_fails():\n    assert False\n")
    args = [a for a in aaco_project.args() if a not in ("-p", "no:cacheprovider")]
    first = aaco_project.pytester.runpytest_subprocess(*args, timeout=300)
    first.assert_outcomes(passed=1, failed=1)
    second = aaco_project.pytester.runpytest_subprocess(*args, "--lf", timeout=300)
    second.assert_outcomes(failed=1)
    assert second.ret == 1, second.stdout.str()


def test_aaco_version_and_python_dash_m():
    import subprocess
    import sys

    import pytest_aaco

    for argv in ([sys.executable, "-m", "pytest_aaco", "--version"],):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
        assert proc.returncode == 0 and proc.stdout.strip() == f"aaco {pytest_aaco.__version__}", proc


def test_aaco_output_survives_a_closed_pipe():
    """``aaco info | head -1``: exit 0, no traceback (the reader closes the pipe at once)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "pytest_aaco", "info"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # as head does after its line
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(120) == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
