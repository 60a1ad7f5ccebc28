"""An ``--aaco-*`` option value written as the next argument must not choose pytest's rootdir.

pytest chooses its rootdir and ini file on a first parse of the command line, before it loads the
plugins installed by entry points (``_pytest/config/__init__.py``, ``Config.parse``: ``determine_setup``
runs before ``load_setuptools_entrypoints``). Until then ``--aaco-junit /reports/perf.xml`` is an unknown
option followed by a test path, so an existing ``/reports/perf.xml`` moved the rootdir to ``/reports``:
the project's ``pytest.ini`` was skipped, the built-in registry measured, every item ``no-baseline``,
rc 0. Now the run stops with a line naming the option and the ``--opt=value`` form.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_aaco.options import OPTIONS

INI = "[pytest]\naaco_models = models.yaml\n"

#: every option whose value is a path, and one more whose value can happen to be a folder's name
PATH_FLAGS = sorted([opt.flag for opt in OPTIONS if opt.path is not None] + ["--aaco-ep-library", "--aaco-compare"])


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder beside the project, holding an existing file (a report from an earlier run)."""
    folder = tmp_path_factory.mktemp("reports")
    (folder / "old.xml").write_text("<testsuites/>", encoding="utf-8")
    return folder


def _value(flag: str, outside: Path) -> str:
    if flag == "--aaco-compare-python":
        return sys.executable
    if flag in ("--aaco-baseline-dir", "--aaco-session-dir", "--aaco-compile-cache"):
        return str(outside)
    return str(outside / "old.xml")


@pytest.mark.parametrize("flag", PATH_FLAGS)
def test_a_value_after_a_space_that_would_move_the_rootdir_is_refused(aaco_project, outside, flag):
    aaco_project.pytester.makeini(INI)
    value = _value(flag, outside)
    result = aaco_project.pytester.runpytest_subprocess(flag, value, "--co", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    err = result.stderr.str()
    assert f"{flag} {value}: pytest read {value} as a test path when it chose its rootdir" in err, err
    assert f"write the value with '=': {flag}={value}" in err
    assert "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--aaco-junit", "--aaco-html", "--aaco-models"])
def test_the_equals_form_and_a_harmless_value_keep_the_projects_rootdir(aaco_project, outside, flag):
    aaco_project.pytester.makeini(INI)
    root = aaco_project.pytester.path
    value = str(outside / "old.xml") if flag != "--aaco-models" else str(root / "models.yaml")
    result = aaco_project.pytester.runpytest_subprocess(f"{flag}={value}", "--co", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"rootdir: {root}", "configfile: tox.ini", "*test_latency[[]tiny-cpu[]]*"])
    # a value after a space that leaves the rootdir where it is (a file inside the project) is accepted
    (root / "out").mkdir()
    (root / "out" / "old.xml").write_text("<testsuites/>")
    inside = str(root / "out" / "old.xml") if flag != "--aaco-models" else "models.yaml"
    result = aaco_project.pytester.runpytest_subprocess(flag, inside, "--co", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"rootdir: {root}", "*test_latency[[]tiny-cpu[]]*"])


def test_the_reproduction_in_a_fresh_process(aaco_project, outside):
    """As a user runs it: the project's ini would be skipped and the built-in registry measured."""
    aaco_project.pytester.makeini(INI)
    result = aaco_project.pytester.runpytest_subprocess("--aaco-junit", str(outside / "old.xml"), "--co",
                                                        "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert f"--aaco-junit={outside / 'old.xml'}" in result.stderr.str()
