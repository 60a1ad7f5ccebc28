"""Model cache integrity (issue 39): each generated model's SHA-256 is recorded when generated and checked
when used; a planted or damaged cache file is generated again, said once, and never measured as the model
it is named after."""

from __future__ import annotations

import hashlib
import shutil
import warnings
from pathlib import Path

import pytest

from pytest_aaco.measure import modelgen
from pytest_aaco.measure.reference_workload import reference_path
from pytest_aaco.measure.registry import zoo_model_path
from pytest_aaco.warnings import AacoCacheWarning


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("AACO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(modelgen, "_VERIFIED", set())
    return tmp_path / "cache"


def test_a_valid_model_planted_under_a_zoo_name_is_generated_again(fresh_cache: Path, tiny_model_path: Path) -> None:
    path = zoo_model_path("squeezenet")
    real = sha(path)
    assert (path.parent / (path.name + modelgen.DIGEST_SUFFIX)).read_text().strip() == real
    shutil.copyfile(tiny_model_path, path)  # a valid ONNX model, another one
    modelgen._VERIFIED.clear()  # a new process
    with pytest.warns(AacoCacheWarning, match=r"model cache file .* \(the generated zoo: squeezenet\) does not match"
                                              r" the SHA-256 recorded when it was generated"):
        again = zoo_model_path("squeezenet")
    assert again == path and sha(path) == real  # the item measures the real squeezenet
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zoo_model_path("squeezenet")  # said once: the file is right now


def test_a_garbage_cache_file_is_named_as_a_cache_file_and_regenerated(fresh_cache: Path) -> None:
    path = reference_path("mix")
    real = sha(path)
    path.write_bytes(b"\x00garbage, not a model")
    modelgen._VERIFIED.clear()
    with pytest.warns(AacoCacheWarning) as caught:
        reference_path("mix")
    [message] = [str(w.message) for w in caught]
    assert message.startswith(f"model cache file {path} (the generated reference workload mix)")
    assert "generated again" in message
    assert sha(path) == real


def test_a_cache_file_from_before_digests_is_kept_quietly_when_right(fresh_cache: Path) -> None:
    path = zoo_model_path("squeezenet")
    (path.parent / (path.name + modelgen.DIGEST_SUFFIX)).unlink()
    modelgen._VERIFIED.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert zoo_model_path("squeezenet") == path
    assert (path.parent / (path.name + modelgen.DIGEST_SUFFIX)).exists()


TWO_ITEMS = """
def test_one(benchmark_model):
    assert benchmark_model().measure_iterations > 0


def test_two(benchmark_model):
    assert benchmark_model().measure_iterations > 0
"""


def test_a_pytest_run_regenerates_a_planted_zoo_model_says_so_once_and_measures_the_real_one(
        aaco_project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """End to end (issue 39, item 6): a valid but different ONNX model under squeezenet's cache name. The
    run regenerates the file, says so once for its two items, and both measure the real squeezenet: the
    fingerprint's model digest is the generated model's, and so is the file afterwards."""
    import json

    cache = tmp_path / "cache"
    monkeypatch.setenv("AACO_CACHE_DIR", str(cache))
    monkeypatch.setattr(modelgen, "_VERIFIED", set())
    path = zoo_model_path("squeezenet")  # generated, its digest recorded
    real = sha(path)
    shutil.copyfile(aaco_project.model, path)  # planted: the tiny model, valid ONNX
    assert sha(path) != real
    aaco_project.registry("models:\n  sq:\n    zoo: squeezenet\n")
    aaco_project.tests(TWO_ITEMS)
    args = [a for a in aaco_project.args("--aaco-provider=cpu", "--aaco-save-baseline", "--aaco-baseline-dir=bl")
            if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(*args, timeout=300)
    out = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=2)
    flat = " ".join(out.split())
    assert flat.count("does not match the SHA-256 recorded when it was generated") == 1, out
    assert "(the generated zoo: squeezenet)" in flat and "generated again" in flat, out
    assert sha(path) == real  # the real model is back in the cache
    items = [json.loads(p.read_text()) for p in (aaco_project.pytester.path / ".aaco").rglob("items/*.json")]
    assert len(items) == 2
    assert {item["fingerprint"]["model_sha256"] for item in items} == {real}, [i["fingerprint"] for i in items]
