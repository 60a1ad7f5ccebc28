"""The pytest set-ups people run, each in a subprocess over the tiny project: the run passes, the
results table is printed (unless -qq), and one --aaco-save-baseline run adds exactly one run to the
history (a rerun or a second worker must not count twice).

The third-party plugins (pytest-randomly, -timeout, -rerunfailures, -cov: the ``setups`` extra) are never
installed into the environment that runs this suite: pytest-randomly would load itself into every pytester
run of every other test file. They live in a folder of their own, put on ``PYTHONPATH`` of these
subprocesses only: ``$AACO_SETUPS_PLUGINS``, else ``.setups-plugins`` in the checkout, made by
:data:`INSTALL` (as .ci/run does). Without it those set-ups skip saying so; with ``AACO_SETUPS_PLUGINS``
set (CI) a missing plugin fails."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALL = "pip install --no-deps --upgrade --target .setups-plugins $(python .ci/requirements.py extra setups)"

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


def plugins_folder() -> tuple[Path | None, bool]:
    """The folder holding the set-ups' third-party plugins (None: there is none) and whether it was
    asked for (``AACO_SETUPS_PLUGINS`` set: a plugin missing from it is a failure, not a skip)."""
    asked = os.environ.get("AACO_SETUPS_PLUGINS")
    folder = Path(asked) if asked else ROOT / ".setups-plugins"
    return (folder if folder.is_dir() else None), bool(asked)


def use_plugin(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make *module* importable in this test's subprocesses only (their ``PYTHONPATH``), or skip/fail."""
    if importlib.util.find_spec(module) is not None:  # -n auto: xdist is in the test extra
        return
    folder, asked = plugins_folder()
    if folder is not None and importlib.machinery.PathFinder.find_spec(module, [str(folder)]) is not None:
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder),
                                                                      os.environ.get("PYTHONPATH")])))
        return
    where = folder or (os.environ.get("AACO_SETUPS_PLUGINS") or ROOT / ".setups-plugins")
    message = f"{module} is not in {where}: make it with `{INSTALL}` (never into this suite's environment)"
    if asked:
        pytest.fail(message)
    pytest.skip(message)


@pytest.mark.parametrize("name", list(SETUPS))
def test_a_setup_runs_and_saves_one_baseline_run(aaco_project, name, monkeypatch):
    args, module = SETUPS[name]
    if module is not None:
        use_plugin(module, monkeypatch)
        if module != "pytest_randomly":  # the folder puts every plugin of it in reach: one set-up at a time
            args = [*args, "-p", "no:randomly"]
    aaco_project.registry()
    aaco_project.tests()
    root = aaco_project.pytester.path
    result = aaco_project.run_subprocess(*args, "--aaco-save-baseline", "--aaco-baseline-dir=bl", timeout=300)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, out
    assert "INTERNALERROR" not in out and "Traceback" not in out, out
    assert _history_runs(root) == [1], (_history_runs(root), out)
    if module is not None:  # the plugin really ran: pytest's header lists it (pytest-randomly as randomly-X)
        plugin = {"xdist": "xdist"}.get(module, module.removeprefix("pytest_"))
        assert f" {plugin}-" in out.split("collect", 1)[0], out[:1500]


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


FLAKY = """
from pathlib import Path


def test_latency(benchmark_model):
    result = benchmark_model()
    assert result.measure_iterations > 0
    marker = Path("failed-once")
    if not marker.exists():  # fails after measuring, the first time only: pytest-rerunfailures runs it again
        marker.write_text("")
        raise AssertionError("flaky")
"""


def test_a_rerun_replaces_its_own_baseline_run_and_counts_once(aaco_project, monkeypatch):
    """pytest-rerunfailures reruns an item that failed after --aaco-save-baseline saved its run: the
    history holds one run of this session, not two, and the item is counted once."""
    use_plugin("pytest_rerunfailures", monkeypatch)
    aaco_project.registry()
    aaco_project.tests(FLAKY)
    root = aaco_project.pytester.path
    result = aaco_project.run_subprocess("--reruns=1", "-p", "no:randomly", "--aaco-save-baseline",
                                         "--aaco-baseline-dir=bl", timeout=300)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, out
    assert result.parseoutcomes().get("rerun") == 1 and result.parseoutcomes().get("passed") == 1, out
    assert _history_runs(root) == [1], (_history_runs(root), out)
    table = out[out.index("pytest-aaco results"):]
    assert len([line for line in table.splitlines() if line.startswith("tiny ")]) == 1, table  # counted once
