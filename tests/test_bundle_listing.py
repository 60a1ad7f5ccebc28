"""Which bundle ``aaco report`` takes as the latest, and what ``aaco ls`` lists, when the session folder
holds damaged or odd bundles: an empty ``session_meta.json`` (a full disk), a bundle without one, a
FIFO in place of a file, a bundle dated ahead of the clock (clock skew)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from pytest_aaco import cli
from pytest_aaco.reports.bundle import latest_session, list_sessions
from tests.test_cli import item_record, run, write_bundle

NOW = dt.datetime.now(dt.timezone.utc)


def _name(when: dt.datetime, suffix: str) -> str:
    return f"{when:%Y%m%d-%H%M%S}_{suffix}"


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    write_bundle(root, _name(NOW - dt.timedelta(hours=2), "0000000a"),
                 [item_record("t.py::test_a[good-cpu]", 1.0)])
    return root


def _damage(root: Path, kind: str) -> Path:
    folder = root / _name(NOW - dt.timedelta(minutes=5), "0000000b")
    (folder / "items").mkdir(parents=True)
    meta = folder / "session_meta.json"
    if kind == "empty meta":
        meta.write_bytes(b"")
    elif kind == "truncated meta":
        meta.write_text('{"schema_version": 1, "sess', encoding="utf-8")
    elif kind == "FIFO meta":
        os.mkfifo(meta)
    elif kind == "folder meta":
        meta.mkdir()
    elif kind == "list meta":
        meta.write_text("[]", encoding="utf-8")
    # "no meta": nothing written
    return folder


DAMAGE = ["empty meta", "truncated meta", "no meta", "list meta",
          *(["FIFO meta"] if hasattr(os, "mkfifo") else []), "folder meta"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_report_skips_an_incomplete_latest_bundle(sessions: Path, capsys, kind: str) -> None:
    """An empty bundle (disk full) used to fail ``aaco report`` as the latest."""
    damaged = _damage(sessions, kind)
    code, out, err = run(capsys, "report", "--session-dir", str(sessions))
    assert code == 0, err
    assert "\ngood " in out and str(damaged) in err and "incomplete bundle" in err
    code, out, err = run(capsys, "ls", "--session-dir", str(sessions))  # ls still lists both, never blocks
    assert code == 0 and str(damaged) in out


def test_future_dated_bundle_does_not_stay_the_newest(sessions: Path, capsys) -> None:
    """A bundle dated a year ahead (clock skew) used to stay ``aaco ls``'s newest for good."""
    future = write_bundle(sessions, _name(NOW + dt.timedelta(days=365), "0000000f"),
                          [item_record("t.py::test_a[future-cpu]", 1.0)])
    newer = write_bundle(sessions, _name(NOW - dt.timedelta(minutes=1), "0000000c"),
                         [item_record("t.py::test_a[newer-cpu]", 1.0)])
    assert list_sessions(sessions)[0] == newer and list_sessions(sessions)[-1] == future
    code, out, err = run(capsys, "report", "--session-dir", str(sessions))
    assert code == 0 and "\nnewer " in out and str(future) in err and "clock" in err
    code, out, _ = run(capsys, "ls", "--session-dir", str(sessions))
    assert "dated ahead of this clock" in out
    # once the clock has passed its date, it takes its place again
    later = NOW + dt.timedelta(days=366)
    assert list_sessions(sessions, now=later)[0] == future
    assert latest_session(sessions, now=later)[0] == future


def test_only_incomplete_bundles_is_a_clear_error(tmp_path: Path, capsys) -> None:
    root = tmp_path / "sessions"
    _damage(root, "empty meta")
    code, out, err = run(capsys, "report", "--session-dir", str(root))
    assert code == cli.USAGE_ERROR and "no complete session bundles" in err and "empty" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_fifo_inside_a_bundle_does_not_block_the_report(sessions: Path, capsys) -> None:
    """A FIFO in a bundle used to block ``aaco report`` for good."""
    folder = list_sessions(sessions)[0]
    os.mkfifo(folder / "items" / "stuck.json")
    os.mkfifo(folder / "environment.json.fifo")
    (folder / "environment.json").unlink()
    os.mkfifo(folder / "environment.json")
    code, out, err = run(capsys, "report", "--session-dir", str(sessions), "--html", str(sessions / "r.html"))
    assert "\ngood " in out and (sessions / "r.html").is_file()  # what can be read is reported
    assert "stuck.json skipped" in err and "FIFO" in err
    # an item file that cannot be read: the report lacks data, so it does not pass (issue 43)
    assert code == cli.USAGE_ERROR and f"incomplete bundle: {folder / 'items' / 'stuck.json'}" in err
