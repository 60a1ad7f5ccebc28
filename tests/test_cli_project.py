"""``aaco`` run from anywhere in a project (issue 21, point 19): the project root is found as pytest finds
its rootdir, so ``aaco baseline show`` and ``aaco report`` work from a subfolder; and the ``.aaco``
folder the plugin creates is ignored by git (point 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_aaco import cli
from pytest_aaco.session_parts import GITIGNORE_TEXT
from tests.test_cli import NODE_A, item_record, write_baseline, write_bundle

#: layouts: file -> text, relative to the top; the test runs from ``top/a/b``
LAYOUTS = {
    "pyproject-ini-options": {"pyproject.toml": "[tool.pytest.ini_options]\naddopts = ''\n"},
    "pyproject-without-pytest": {"pyproject.toml": "[project]\nname = 'x'\n"},
    "pytest.ini": {"pytest.ini": "[pytest]\n", "a/pyproject.toml": "[project]\nname = 'inner'\n"},
    "empty pytest.ini wins": {"pytest.ini": "", "a/tox.ini": "[tox]\n"},
    "tox.ini": {"tox.ini": "[pytest]\naddopts = -q\n", "a/setup.cfg": "[metadata]\nname = x\n"},
    "setup.cfg": {"setup.cfg": "[tool:pytest]\naddopts = -q\n"},
    "inner pyproject with pytest": {"pyproject.toml": "[tool.pytest.ini_options]\n",
                                    "a/pyproject.toml": "[tool.pytest.ini_options]\n"},
    "setup.py": {"setup.py": "", "a/pyproject.toml": "[project]\nname = 'x'\n"},
    "nothing": {},
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_project_root_is_the_rootdir_pytest_finds(pytester, monkeypatch, layout):
    top = pytester.path / "top"
    sub = top / "a" / "b"
    sub.mkdir(parents=True)
    for name, text in LAYOUTS[layout].items():
        (top / name).write_text(text)
    monkeypatch.chdir(sub)
    config = pytester.parseconfig()
    project = cli.find_project(Path.cwd())
    assert project.rootdir == Path(config.rootpath)
    assert project.inifile == (Path(config.inipath) if config.inipath else None)


def test_a_configuration_file_that_cannot_be_parsed_is_named(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["baseline", "show"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"aaco: error: {tmp_path / 'pyproject.toml'}: cannot read it as pytest does")


def _project(root: Path, ini: str = "") -> Path:
    (root / "pyproject.toml").write_text(f"[tool.pytest.ini_options]\n{ini}")
    sub = root / "tests" / "perf"
    sub.mkdir(parents=True)
    return sub


def test_baseline_show_and_report_work_from_a_subfolder(tmp_path, monkeypatch, capsys):
    sub = _project(tmp_path)
    write_baseline(tmp_path / "baselines" / "runner" / "a.json", NODE_A, [10.0, 10.2])
    write_bundle(tmp_path / ".aaco" / "sessions", "20250101-000000_aaaaaaaa", [item_record(NODE_A, 9.0)])
    newest = write_bundle(tmp_path / ".aaco" / "sessions", "20250102-000000_bbbbbbbb", [item_record(NODE_A, 11.0)],
                          started="2025-01-02T00:00:00+00:00")
    monkeypatch.chdir(sub)
    assert cli.main(["baseline", "show"]) == 0
    out = capsys.readouterr().out
    assert NODE_A in out and f"history of {tmp_path / 'baselines' / 'runner' / 'a.json'}" in out
    assert cli.main(["report"]) == 0  # the latest bundle
    out = capsys.readouterr().out
    assert out.startswith(f"latest session bundle: {newest}\n") and "11.00" in out
    assert cli.main(["ls"]) == 0
    assert str(newest) in capsys.readouterr().out
    # an explicit folder is relative to where aaco runs, as on pytest's command line
    assert cli.main(["baseline", "show", "--baseline-dir", "baselines"]) == 2
    err = capsys.readouterr().err
    assert "--baseline-dir: baselines (relative to the current folder" in err and "no such folder" in err


def test_the_ini_settings_of_the_folders_are_used(tmp_path, monkeypatch, capsys):
    sub = _project(tmp_path, 'aaco_baseline_dir = "perf/base"\naaco_session_dir = "perf/sessions"\n')
    write_baseline(tmp_path / "perf" / "base" / "runner" / "a.json", NODE_A, [10.0])
    monkeypatch.chdir(sub)
    assert cli.main(["baseline", "show"]) == 0
    assert NODE_A in capsys.readouterr().out
    assert cli.main(["report"]) == 2
    err = capsys.readouterr().err
    assert f"no session bundles under {tmp_path / 'perf' / 'sessions'}" in err
    assert f"project root {tmp_path}, from pyproject.toml" in err


# ---------------------------------------------------------------- .aaco is ignored by git


def test_the_aaco_folder_it_creates_is_ignored_by_git(aaco_project, git):
    project = aaco_project.pytester.path
    git(project, "init", "-q")
    args = [a for a in aaco_project.args("--aaco-reference=none") if a != "--aaco-no-bundle"]
    aaco_project.pytester.runpytest(*args).assert_outcomes(passed=1)
    assert (project / ".aaco" / ".gitignore").read_text() == GITIGNORE_TEXT
    assert list((project / ".aaco" / "sessions").iterdir())  # a bundle was written
    status = git(project, "status", "--porcelain", "--untracked-files=all")
    assert ".aaco" not in status and "test_perf.py" in status


def test_an_existing_aaco_folder_or_another_session_dir_is_left_alone(aaco_project):
    project = aaco_project.pytester.path
    (project / ".aaco").mkdir()
    args = [a for a in aaco_project.args("--aaco-reference=none") if a != "--aaco-no-bundle"]
    aaco_project.pytester.runpytest(*args).assert_outcomes(passed=1)
    assert not (project / ".aaco" / ".gitignore").exists()
    aaco_project.pytester.runpytest(*args, "--aaco-session-dir=out/sessions").assert_outcomes(passed=1)
    assert list((project / "out" / "sessions").iterdir())
    assert not list(project.rglob(".gitignore"))
