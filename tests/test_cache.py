"""The model cache folder (issue 22): an unwritable one falls back to a temporary folder, with one warning.

Tests run as root, where a read-only mode does not stop writes, so the folder is made unwritable by
putting it under a regular file (``NotADirectoryError``), as a read-only HOME would refuse it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from pytest_aaco.measure import modelgen
from pytest_aaco.warnings import AacoCacheWarning


@pytest.fixture
def unwritable(tmp_path: Path) -> Path:
    (tmp_path / "file.txt").write_text("not a folder", encoding="utf-8")
    return tmp_path / "file.txt" / "cache"


def test_unwritable_cache_falls_back_once(monkeypatch, unwritable):
    monkeypatch.setenv("AACO_CACHE_DIR", str(unwritable))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = modelgen.cache_dir(), modelgen.cache_dir()
    try:
        assert first == second and first.is_dir() and first.name.startswith("aaco-cache-")
        cache_warnings = [w for w in caught if issubclass(w.category, AacoCacheWarning)]
        assert len(cache_warnings) == 1
        text = str(cache_warnings[0].message)
        assert str(unwritable) in text and "AACO_CACHE_DIR" in text and str(first) in text
    finally:
        modelgen.drop_fallback_caches()
    assert not first.exists()


def test_writable_cache_is_used_as_is(monkeypatch, tmp_path):
    monkeypatch.setenv("AACO_CACHE_DIR", str(tmp_path / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert modelgen.cache_dir() == tmp_path / "cache"


@pytest.mark.parametrize("setting", ["AACO_CACHE_DIR", "XDG_CACHE_HOME"])
def test_run_passes_with_an_unwritable_cache(aaco_project, monkeypatch, unwritable, setting):
    monkeypatch.delenv("AACO_CACHE_DIR", raising=False)
    monkeypatch.setenv(setting, str(unwritable))
    folder = unwritable if setting == "AACO_CACHE_DIR" else unwritable / "pytest-aaco"
    aaco_project.registry()
    aaco_project.tests()
    result = aaco_project.run("--aaco-reference=mix", "-W", "always::pytest_aaco.warnings.AacoWarning")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "InferenceSession" not in out
    assert out.count("AacoCacheWarning") == 1
    result.stdout.fnmatch_lines([f"*model cache folder {folder} cannot be written*{setting}*"])
    assert not modelgen._FALLBACKS  # removed at the session's end


def test_a_cache_that_cannot_be_written_at_all_is_not_blamed_on_the_session(aaco_project, monkeypatch, unwritable):
    # even the temporary folder fails: the error names the cache, not the InferenceSession
    monkeypatch.setenv("AACO_CACHE_DIR", str(unwritable))
    monkeypatch.setattr(modelgen, "cache_dir", lambda: unwritable)
    monkeypatch.setattr("pytest_aaco.measure.reference_workload.cache_dir", lambda: unwritable)
    aaco_project.registry()
    aaco_project.tests()
    result = aaco_project.run("--aaco-reference=mix")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "InferenceSession" not in out
    result.stdout.fnmatch_lines(["*could not write a generated model to the model cache*AACO_CACHE_DIR*"])
