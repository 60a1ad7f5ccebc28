"""Issue 22, "Settings", for the ``aaco`` command: an empty, blank or unreadable value of a path
argument is a usage error (exit 2) naming the argument; a relative path's error says what it was
resolved against. Hypothesis draws the blank values (spaces, tabs, newlines, Unicode spaces) and the
argument."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_aaco import cli

# ---------------------------------------------------------------- path arguments (issue 22, "Settings")

#: every path argument of the aaco command, as (argv with {} where the value goes, the name argparse gives it)
PATH_ARGUMENTS = [
    (["ls", "--session-dir", "{}"], "--session-dir"),
    (["report", "{}"], "BUNDLE"),
    (["report", "b", "--html", "{}"], "--html"),
    (["diff", "{}", "b"], "A"),
    (["diff", "a", "{}"], "B"),
    *[(["baseline", action, "--baseline-dir", "{}", *extra], "--baseline-dir")
      for action, extra in (("show", []), ("prune", ["--keep", "1"]), ("archived", []), ("restore", ["x", "1"]))],
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(PATH_ARGUMENTS), blank=st.text(alphabet=" \t\n\r\f\v\u00a0\u2003\u3000", max_size=6))
def test_an_empty_path_argument_is_a_usage_error_naming_it(capsys, case, blank):
    """``aaco baseline show --baseline-dir "$UNSET"`` listed the current folder, ``aaco ls --session-dir ""``
    the default one: an empty or blank path is refused, naming the argument."""
    argv, name = case
    code = cli.main([blank if a == "{}" else a for a in argv])
    _, err = capsys.readouterr()
    assert code == 2
    assert f"argument {name}: empty value; give " in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(("argv", "option"), [
    (["ls", "--session-dir", "{}"], "--session-dir"),
    (["baseline", "show", "--baseline-dir", "{}"], "--baseline-dir"),
    (["baseline", "prune", "--keep", "1", "--baseline-dir", "{}"], "--baseline-dir"),
])
@pytest.mark.parametrize("kind", ["missing", "file", "unreadable"])
def test_a_folder_argument_names_what_it_is_and_what_a_relative_one_was_resolved_against(
        tmp_path, capsys, monkeypatch, argv, option, kind):
    monkeypatch.chdir(tmp_path)
    if kind == "file":
        (tmp_path / "given").write_text("")
    elif kind == "unreadable":
        (tmp_path / "given").mkdir()
        monkeypatch.setattr(cli.os, "access", lambda path, mode: Path(path).name != "given")
    code = cli.main([("given" if a == "{}" else a) for a in argv])
    _, err = capsys.readouterr()
    says = {"missing": "no such folder", "file": "not a folder", "unreadable": "cannot be read (permission denied)"}
    assert code == 2
    assert err.strip() == f"aaco: error: {option}: given (relative to the current folder {tmp_path}): {says[kind]}"


def test_a_bundle_given_relatively_says_where_it_was_looked_for(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "nope"]) == 2
    assert capsys.readouterr().err.strip() == (f"aaco: error: nope (relative to the current folder {tmp_path}):"
                                               " no such file or folder")
