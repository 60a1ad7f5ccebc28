"""The session bundle: layout, atomic writes as items finish, reading bundles back."""

from __future__ import annotations

import json
import os
import re

import pytest

from pytest_aaco import jsonio
from pytest_aaco.jsonio import AacoFileError
from pytest_aaco.reports import bundle as bundle_mod
from pytest_aaco.reports.bundle import SessionBundle, list_sessions, load_session, safe_file_stem

NODE = "tests/perf/test_models.py::test_latency[resnet50-cpu]"


def test_folder_name_and_files(tmp_path):
    bundle = SessionBundle(tmp_path / "sessions", session_id="0123abcd")
    assert bundle.path.parent == tmp_path / "sessions"
    assert re.fullmatch(r"\d{8}-\d{6}_0123abcd", bundle.path.name)
    assert (bundle.path / "items").is_dir()
    bundle.write_meta({"started_at": "2025-01-01T00:00:00+00:00", "argv": ["-q"]})
    bundle.write_environment({"python": {"version": "3.11.7"}, "nan": float("nan")})
    meta = json.loads((bundle.path / "session_meta.json").read_text())
    assert meta == {
        "schema_version": 1,
        "session_id": "0123abcd",
        "bundle_started_at": meta["bundle_started_at"],
        "started_at": "2025-01-01T00:00:00+00:00",
        "argv": ["-q"],
    }
    assert json.loads((bundle.path / "environment.json").read_text()) == {"python": {"version": "3.11.7"}, "nan": None}


def test_random_session_ids_and_bad_ids(tmp_path):
    a, b = SessionBundle(tmp_path), SessionBundle(tmp_path)
    assert a.session_id != b.session_id and re.fullmatch(r"[0-9a-f]{8}", a.session_id)
    with pytest.raises(ValueError, match="8 lower-case hex digits"):
        SessionBundle(tmp_path, session_id="../../etc")


def test_write_item_is_immediate_and_atomic(tmp_path, monkeypatch):
    bundle = SessionBundle(tmp_path)
    written = []
    real = bundle_mod.atomic_write_json

    def spy(path, data):
        written.append(path)
        return real(path, data)

    monkeypatch.setattr(bundle_mod, "atomic_write_json", spy)
    path = bundle.write_item(NODE, {"summary": {"mean_ms": 41.2}, "verdict": {"outcome": "regression"}})
    assert written == [path]  # every write goes through jsonio.atomic_write_json
    assert path.parent == bundle.path / "items" and path.suffix == ".json"
    assert json.loads(path.read_text()) == {
        "nodeid": NODE,
        "summary": {"mean_ms": 41.2},
        "verdict": {"outcome": "regression"},
    }
    assert [p.name for p in (bundle.path / "items").iterdir()] == [path.name]  # no temporary files left
    again = bundle.write_item(NODE, {"summary": {"mean_ms": 40.0}})
    assert again == path and json.loads(path.read_text())["summary"]["mean_ms"] == 40.0


def test_a_crash_keeps_finished_items(tmp_path, monkeypatch):
    bundle = SessionBundle(tmp_path)
    bundle.write_meta({})
    bundle.write_item("t.py::a", {"n": 1})

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        bundle.write_item("t.py::b", {"n": 2})
    monkeypatch.undo()
    loaded = load_session(bundle.path)
    assert loaded["items"] == {"t.py::a": {"nodeid": "t.py::a", "n": 1}}
    assert loaded["errors"] == {}
    assert not [p for p in (bundle.path / "items").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "nodeid",
    [NODE, "a/b::c", "a_b::c", "tests/x.py::test[C:\\path with spaces]", "t::" + "x" * 500, "::", "ünïcödé::tëst[α]"],
)
def test_safe_file_stem(nodeid):
    stem = safe_file_stem(nodeid)
    assert re.fullmatch(r"[A-Za-z0-9._-]+", stem)
    assert len(stem) <= bundle_mod.MAX_STEM + 9
    assert not stem.startswith(".")


def test_safe_file_stems_do_not_collide():
    ids = ["a/b::c", "a_b::c", "a:b::c", "t::" + "x" * 500 + "1", "t::" + "x" * 500 + "2"]
    assert len({safe_file_stem(i) for i in ids}) == len(ids)
    assert safe_file_stem(NODE).startswith("tests_perf_test_models.py__test_latency_resnet50-cpu")


def test_finish_rewrites_meta_with_end_and_summary(tmp_path):
    bundle = SessionBundle(tmp_path, session_id="deadbeef")
    bundle.write_meta({"started_at": "x", "providers": ["cpu"]})
    bundle.write_item("t::a", {})
    bundle.finish({"items": 1, "verdicts": {"no_regression": 1}})
    meta = jsonio.read_json(bundle.path / "session_meta.json")
    assert meta["providers"] == ["cpu"] and meta["session_id"] == "deadbeef"
    assert meta["summary"] == {"items": 1, "verdicts": {"no_regression": 1}}
    assert meta["items_written"] == 1 and meta["duration_s"] >= 0 and meta["bundle_finished_at"]


def test_finish_accepts_a_whole_meta_dict(tmp_path):
    bundle = SessionBundle(tmp_path)
    bundle.write_meta({"started_at": "x"})
    bundle.finish({"started_at": "x", "finished_at": "y", "summary": {"items": 0}})
    meta = jsonio.read_json(bundle.path / "session_meta.json")
    assert meta["summary"] == {"items": 0} and meta["finished_at"] == "y"


def test_list_sessions_newest_first(tmp_path):
    root = tmp_path / "sessions"
    names = ["20240101-000000_aaaaaaaa", "20250301-120000_bbbbbbbb", "20250101-000000_cccccccc"]
    for name in names:
        (root / name / "items").mkdir(parents=True)
        jsonio.atomic_write_json(root / name / "session_meta.json", {"session_id": name[-8:]})
    (root / "not-a-session").mkdir()
    (root / "20250101-000000_zzzz").mkdir()
    (root / "20990101-000000_dddddddd").write_text("a file, not a folder")
    assert [p.name for p in list_sessions(root)] == [names[1], names[2], names[0]]
    assert list_sessions(tmp_path / "missing") == []


def test_load_session_round_trip_and_errors(tmp_path):
    bundle = SessionBundle(tmp_path)
    bundle.write_meta({"started_at": "x"})
    bundle.write_environment({"cpu": {"model": "EPYC"}})
    bundle.write_item(NODE, {"summary": {"mean_ms": 41.2}})
    bundle.write_item("t.py::b", {"summary": {"mean_ms": 1.0}})
    (bundle.path / "items" / "broken.json").write_text("{not json")
    (bundle.path / "items" / ".x.json.123.tmp").write_text("half")
    bundle.finish({"items": 2})
    loaded = load_session(bundle.path)
    assert loaded["path"] == str(bundle.path)
    assert loaded["meta"]["summary"] == {"items": 2}
    assert loaded["environment"] == {"cpu": {"model": "EPYC"}}
    assert set(loaded["items"]) == {NODE, "t.py::b"}
    assert loaded["items"][NODE]["summary"]["mean_ms"] == 41.2
    assert list(loaded["errors"]) == ["broken.json"] and "not valid JSON" in loaded["errors"]["broken.json"]
    assert list_sessions(tmp_path) == [bundle.path]


def test_load_session_without_meta_raises(tmp_path):
    with pytest.raises(AacoFileError, match="session_meta.json: file not found"):
        load_session(tmp_path)
