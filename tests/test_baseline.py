"""Baseline files: round trip, history, reset, fingerprint changes, atomic writes, bad files, stable text."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from pytest_aaco import jsonio
from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.store import (
    ARCHIVE_SCHEMA_VERSION,
    SCHEMA_VERSION,
    Baseline,
    baseline_path,
    item_slug,
    legacy_path,
    legacy_slug,
    load_baseline,
    other_runners,
    run_record,
    save_run,
)
from pytest_aaco.jsonio import AacoFileError, atomic_write_json, dumps, read_json

NODE = "tests/perf/test_models.py::test_latency[resnet50-cpu]"
FIELDS = {"model_sha256": "aa" * 32, "provider": "CPUExecutionProvider", "ort_version": "1.31.1",
          "cpu_model": "AMD EPYC", "cpu_cores": 2, "gpu_name": None, "intra_op_threads": 0,
          "input_shapes": {"x": [1, 64]}, "env": {}}
FP = Fingerprint(dict(FIELDS))


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return baseline_path(tmp_path / "baselines", FP.machine_key, NODE)


def test_paths_and_slugs(tmp_path):
    import hashlib

    digest = hashlib.sha256(f"amd-epyc-2c-1234\n{NODE}".encode()).hexdigest()[:10]
    assert item_slug(NODE, "amd-epyc-2c-1234") == f"tests-perf-test_models.py--test_latency-resnet50-cpu-{digest}"
    assert item_slug("::").startswith("item-")
    assert len(item_slug("x" * 500)) == 80 + 1 + 10
    assert item_slug("a+b") != item_slug("a-b") and legacy_slug("a+b") == legacy_slug("a-b")
    p = baseline_path(tmp_path, "amd-epyc-2c-1234", NODE)
    assert p == tmp_path / "amd-epyc-2c-1234" / f"tests-perf-test_models.py--test_latency-resnet50-cpu-{digest}.json"


def test_round_trip(path, result_factory):
    result = result_factory([10.0, 10.2, 9.9], iterations=4, telemetry={"summary": {"rss_mb": {"max": 120.0}}})
    outcome = save_run(path, NODE, FP, result)
    saved = outcome.baseline
    assert outcome.note == "baseline saved (1 run in history)" and outcome.warnings == []
    loaded = load_baseline(path)
    assert loaded is not None
    assert loaded.item == NODE and loaded.fingerprint == FIELDS and loaded.fingerprint_id == FP.id
    assert loaded.runs == 1
    run = loaded.latest()
    assert [r["n"] for r in run["rounds"]] == [4, 4, 4]
    assert loaded.run_round_log_means() == [pytest.approx(list(result.round_log_means))]
    assert run["summary"]["mean_ms"] == pytest.approx(result.mean_ms)
    assert run["telemetry"] == {"rss_mb": {"max": 120.0}}
    assert len(loaded.latest_latencies_ms) == 3 and len(loaded.latest_latencies_ms[0]) == 4
    assert loaded.latest_latencies_ms[0][0] == pytest.approx(result.rounds[0].latencies_ms[0], abs=1e-4)
    assert loaded.to_dict() == saved.to_dict()


def test_missing_file_is_none(tmp_path):
    assert load_baseline(tmp_path / "nope.json") is None


def test_history_appends_and_keeps_the_last_n(path, result_factory):
    means = []
    for i in range(5):
        result = result_factory([10.0 + i] * 3, seed=i)
        means.append(result.mean_ms)
        note = save_run(path, NODE, FP, result, keep=3).note
        assert note.endswith(f"baseline saved ({min(i + 1, 3)} run{'s' if i else ''} in history)")
    loaded = load_baseline(path)
    assert loaded.runs == 3
    assert [run["summary"]["mean_ms"] for run in loaded.history] == pytest.approx(means[-3:])  # oldest first
    # raw iterations are kept for the latest run only
    assert loaded.latest_latencies_ms[0][0] == pytest.approx(result.rounds[0].latencies_ms[0], abs=1e-4)


def test_reset_starts_again(path, result_factory):
    save_run(path, NODE, FP, result_factory([10.0] * 3))
    save_run(path, NODE, FP, result_factory([10.0] * 3, seed=1))
    outcome = save_run(path, NODE, FP, result_factory([12.0] * 3), reset=True)
    assert outcome.note.startswith(f"history reset: the 2 runs history is archived in {path.name} and a new")
    assert outcome.note.endswith("baseline saved (1 run in history)")
    assert outcome.warnings == []  # asked for: the report says so, no warning
    loaded = load_baseline(path)
    assert loaded.runs == 1 and [len(a["history"]) for a in loaded.archive] == [2]
    assert json.loads(path.read_text())["schema_version"] == ARCHIVE_SCHEMA_VERSION == 2


def test_fingerprint_change_starts_a_new_history_naming_the_field(path, result_factory):
    save_run(path, NODE, FP, result_factory([10.0] * 3))
    save_run(path, NODE, FP, result_factory([10.0] * 3, seed=1))
    upgraded = Fingerprint({**FIELDS, "ort_version": "1.32.0"})
    outcome = save_run(path, NODE, upgraded, result_factory([10.0] * 3, seed=2))
    assert outcome.note.startswith("fingerprint changed (ort_version: '1.31.1' -> '1.32.0'): the 2 runs history"
                                   f" is archived in {path.name} and a new history starts")
    assert outcome.warnings == [f"{NODE}: " + outcome.note.split(" (aaco baseline")[0]]
    loaded = load_baseline(path)
    assert loaded.runs == 1 and loaded.fingerprint["ort_version"] == "1.32.0"
    assert loaded.fingerprint_id == upgraded.id != FP.id
    [archived] = loaded.archive
    assert archived["fingerprint"]["ort_version"] == "1.31.1" and len(archived["history"]) == 2
    # back on the old fingerprint: its history resumes, the newer one is archived in turn
    outcome = save_run(path, NODE, FP, result_factory([10.0] * 3, seed=3))
    assert "resumed the 2 runs history archived" in outcome.note
    loaded = load_baseline(path)
    assert loaded.runs == 3 and [a["fingerprint"]["ort_version"] for a in loaded.archive] == ["1.32.0"]


def test_model_change_starts_a_new_history(path, result_factory):
    save_run(path, NODE, FP, result_factory([10.0] * 3))
    changed = Fingerprint({**FIELDS, "model_sha256": "bb" * 32})
    note = save_run(path, NODE, changed, result_factory([10.0] * 3)).note
    assert note.startswith("model changed since the history was recorded: the 1 run history is archived")
    assert load_baseline(path).runs == 1


def test_unreadable_file_is_moved_aside_with_a_warning(path, result_factory):
    path.parent.mkdir(parents=True)
    path.write_text("{ not json")
    outcome = save_run(path, NODE, FP, result_factory([10.0] * 3))
    [kept] = path.parent.glob("*.corrupt-*.json")
    assert kept.read_text() == "{ not json"
    assert outcome.note.startswith(f"unreadable baseline moved aside to {kept.name}")
    [warning] = outcome.warnings
    assert warning.startswith(f"unreadable baseline {path} moved aside to {kept} ({path}: not valid JSON")
    assert load_baseline(path).runs == 1


def test_a_file_in_place_of_the_folder_is_an_error_not_a_missing_baseline(tmp_path, result_factory):
    (tmp_path / "baselines").write_text("not a folder")
    path = baseline_path(tmp_path / "baselines", FP.machine_key, NODE)
    with pytest.raises(AacoFileError, match="is a file, but pytest-aaco keeps baselines in a folder there"):
        load_baseline(path)
    with pytest.raises(AacoFileError, match="is a file"):
        save_run(path, NODE, FP, result_factory([10.0] * 3))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX folder permissions: Windows has no read-only folder mode")
@pytest.mark.skipif(sys.platform != "win32" and os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_an_error_naming_the_fix(path, result_factory):
    save_run(path, NODE, FP, result_factory([10.0] * 3))
    path.parent.chmod(0o555)
    try:
        with pytest.raises(AacoFileError, match="cannot save the baseline.*make .* writable"):
            save_run(path, NODE, FP, result_factory([10.0] * 3))
    finally:
        path.parent.chmod(0o755)


def test_a_legacy_file_is_read_and_migrated(path, result_factory):
    """Files named by pytest-aaco 0.1 (slug, no hash) are found, and moved to the new name on the next save."""
    old = legacy_path(path, NODE)
    save_run(old, NODE, FP, result_factory([10.0] * 3))
    assert load_baseline(path, NODE).runs == 1
    assert load_baseline(path) is None  # without the item, the old name is not guessed
    outcome = save_run(path, NODE, FP, result_factory([10.0] * 3, seed=1))
    assert f"migrated from {old.name}" in outcome.note
    assert not old.exists() and load_baseline(path).runs == 2


def test_a_legacy_file_of_another_item_is_left_alone(path, result_factory):
    old = legacy_path(path, NODE)
    other = NODE.replace("-cpu]", "+cpu]")  # the same 0.1 name
    save_run(old, other, FP, result_factory([10.0] * 3))
    assert load_baseline(path, NODE) is None
    save_run(path, NODE, FP, result_factory([10.0] * 3))
    assert old.exists() and json.loads(old.read_text())["item"] == other


def test_newer_schema_is_not_overwritten(path, result_factory):
    """A file written by a newer pytest-aaco keeps its history: saving over it is an error, not a silent reset."""
    path.parent.mkdir(parents=True)
    text = json.dumps({"schema_version": SCHEMA_VERSION + 1, "history": [], "fingerprint": {}})
    path.write_text(text)
    with pytest.raises(AacoFileError, match="newer than this pytest-aaco understands"):
        save_run(path, NODE, FP, result_factory([10.0] * 3))
    assert path.read_text() == text


# ---------------------------------------------------------------- bad files


def test_malformed_json_names_the_file(path):
    path.parent.mkdir(parents=True)
    path.write_text('{"schema_version": 1,')
    with pytest.raises(AacoFileError) as info:
        load_baseline(path)
    assert str(info.value).startswith(f"{path}: not valid JSON")
    assert "restore it from git" in str(info.value)


def test_newer_schema_version_is_a_clear_error(path):
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema_version": 99, "history": [], "fingerprint": {}}))
    with pytest.raises(AacoFileError, match=rf"^{path}: schema_version 99 is newer than this pytest-aaco understands"
                                            rf" \({SCHEMA_VERSION}\); upgrade pytest-aaco"):
        load_baseline(path)


@pytest.mark.parametrize(("data", "fragment"), [
    ([], "'schema_version' missing"),
    ({"history": []}, "'schema_version' missing"),
    ({"schema_version": 1, "fingerprint": {}}, "'history' missing"),
    ({"schema_version": 1, "history": [], "fingerprint": "x"}, "'fingerprint' missing or not a dict"),
    ({"schema_version": 1, "history": [{"summary": {"mean_ms": 1}}], "fingerprint": {}}, "'rounds' missing"),
    ({"schema_version": 1, "history": [{"rounds": [], "summary": {"mean_ms": 1}}], "fingerprint": {}},
     "no round summaries with 'log_mean'"),
    ({"schema_version": 1, "history": [{"rounds": [{"n": 3}], "summary": {"mean_ms": 1}}], "fingerprint": {}},
     "no round summaries with 'log_mean'"),
    ({"schema_version": 1, "history": [{"rounds": [{"log_mean": 1.0}]}], "fingerprint": {}}, "'summary'"),
    ({"schema_version": 1, "history": [{"rounds": [{"log_mean": 1.0}], "summary": {}}], "fingerprint": {}},
     "'mean_ms'"),
])
def test_structurally_bad_files_name_the_file(path, data, fragment):
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    with pytest.raises(AacoFileError) as info:
        load_baseline(path)
    assert str(info.value).startswith(f"{path}: "), info.value
    assert fragment in str(info.value)


def test_read_json_missing_file(tmp_path):
    with pytest.raises(AacoFileError, match="file not found"):
        read_json(tmp_path / "absent.json")


# ---------------------------------------------------------------- atomic and stable writes


def test_atomic_write_keeps_the_old_file_when_replace_fails(path, result_factory, monkeypatch):
    save_run(path, NODE, FP, result_factory([10.0] * 3))
    before = path.read_text()

    def crash(src, dst):
        raise OSError("simulated crash during rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(AacoFileError, match="cannot save the baseline \\(simulated crash"):
        save_run(path, NODE, FP, result_factory([20.0] * 3, seed=4))
    assert path.read_text() == before
    # no temporary file left behind: the file, its lock and the .gitignore for lock files
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([".gitignore", f".{path.name}.lock", path.name])


def test_atomic_write_cleans_up_on_interrupt(tmp_path, monkeypatch):
    target = tmp_path / "deep" / "er" / "f.json"
    atomic_write_json(target, {"a": 1})

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(jsonio.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]


def test_stable_key_order_and_text(tmp_path):
    a = {"zeta": 1, "alpha": {"b": [1.5, 2], "a": None}, "mid": "x"}
    b = {"mid": "x", "alpha": {"a": None, "b": [1.5, 2]}, "zeta": 1}
    assert dumps(a) == dumps(b)
    assert dumps(a) == '{\n  "alpha": {\n    "a": null,\n    "b": [\n      1.5,\n      2\n    ]\n  },\n' \
                       '  "mid": "x",\n  "zeta": 1\n}\n'
    first, second = tmp_path / "1.json", tmp_path / "2.json"
    atomic_write_json(first, a)
    atomic_write_json(second, b)
    assert first.read_bytes() == second.read_bytes()


def test_identical_baselines_give_identical_files(tmp_path, result_factory):
    result = result_factory([10.0, 11.0, 10.5])
    record = run_record(result)
    files = []
    for name in ("a", "b"):
        baseline = Baseline(tmp_path / f"{name}.json", NODE, dict(reversed(list(FIELDS.items()))), FP.id,
                            [record], [r.latencies_ms.round(4).tolist() for r in result.rounds])
        files.append(atomic_write_json(baseline.path, baseline.to_dict()).read_text())
    assert files[0] == files[1]
    keys = list(json.loads(files[0]))
    assert keys == sorted(keys)


def test_numpy_values_and_nan_are_strict_json(tmp_path):
    import numpy as np

    text = dumps({"x": np.float32(1.5), "n": np.int64(3), "bad": float("nan"), "arr": np.arange(3)})
    assert json.loads(text) == {"x": 1.5, "n": 3, "bad": None, "arr": [0, 1, 2]}


def test_other_runners(tmp_path, result_factory):
    root = tmp_path / "baselines"
    save_run(baseline_path(root, "runner-a", NODE), NODE, FP, result_factory([10.0] * 3))
    save_run(baseline_path(root, "runner-b", NODE), NODE, FP, result_factory([10.0] * 3))
    assert other_runners(root, "runner-a", NODE) == ["runner-b"]
    assert other_runners(root, "runner-c", NODE) == ["runner-a", "runner-b"]
    assert other_runners(tmp_path / "none", "runner-a", NODE) == []


# ---------------------------------------------------------------- fingerprints


def test_fingerprint_survives_a_json_round_trip():
    from pytest_aaco.history.fingerprint import build_fingerprint

    fp = build_fingerprint(model_sha256="ab" * 32, input_shapes={"x": [1, 64]}, input_dtypes={"x": "float32"},
                           provider="cpu", ep_name="CPUExecutionProvider", provider_options={"a": "1"},
                           iobinding="none", intra_op_threads=1, extra={"image": "ci:42"})
    stored = json.loads(dumps(fp.fields))
    assert fp.matches(stored) and fp.diff(stored) == [] and Fingerprint(stored).id == fp.id
    assert fp.fields["image"] == "ci:42" and fp.fields["provider"] == "CPUExecutionProvider"


def test_fingerprint_id_and_diff():
    reordered = Fingerprint(dict(reversed(list(FIELDS.items()))))
    assert reordered.id == FP.id and len(FP.id) == 16
    other = {**FIELDS, "ort_version": "1.30.0", "cpu_cores": 4}
    assert FP.diff(other) == ["cpu_cores", "ort_version"]
    assert FP.describe_diff(other) == "cpu_cores: 4 -> 2; ort_version: '1.30.0' -> '1.31.1'"
    assert not FP.matches(other)
    # the model hash is recorded but is not part of the comparability key
    model_changed = {**FIELDS, "model_sha256": "cc" * 32}
    assert FP.matches(model_changed) and Fingerprint(model_changed).id == FP.id
    assert FP.subject_changes(model_changed) == ["model_sha256"]
    assert FP.machine_key.startswith("amd-epyc-2c-")


def test_timing_env_keeps_timing_variables_and_drops_secrets():
    from pytest_aaco.history.fingerprint import timing_env

    env = {"OMP_NUM_THREADS": "2", "ORT_MIGRAPHX_FP16_ENABLE": "1", "HIP_VISIBLE_DEVICES": "0", "HOME": "/root",
           "ORT_API_TOKEN": "s3cr3t-value", "MIGRAPHX_PASSWORD": "hunter2"}
    assert timing_env(env) == {"HIP_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "2", "ORT_MIGRAPHX_FP16_ENABLE": "1"}


def test_timing_env_keeps_device_selection_and_hsa_variables():
    from pytest_aaco.history.fingerprint import timing_env

    env = {"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "0",
           "GPU_DEVICE_ORDINAL": "0", "HSA_OVERRIDE_GFX_VERSION": "11.0.0", "HSA_ENABLE_SDMA": "0",
           "ROCR_OTHER": "x", "GPU_MAX_HW_QUEUES": "4", "HSA_AUTH_TOKEN": "s3cr3t-value-Zq8x"}
    assert timing_env(env) == {"CUDA_VISIBLE_DEVICES": "0", "GPU_DEVICE_ORDINAL": "0", "HIP_VISIBLE_DEVICES": "0",
                               "HSA_ENABLE_SDMA": "0", "HSA_OVERRIDE_GFX_VERSION": "11.0.0",
                               "ROCR_VISIBLE_DEVICES": "1"}


AMD_FIELDS = {**FIELDS, "provider": "MIGraphXExecutionProvider", "gpu_name": "AMD Instinct MI300X",
              "env": {"HIP_VISIBLE_DEVICES": "0"}}


def test_rocm_and_migraphx_versions_are_version_fields():
    old = {**AMD_FIELDS, "rocm_version": "6.4.1-120", "migraphx_version": "2.12.0", "env_scheme": 2}
    new = Fingerprint({**old, "rocm_version": "7.0.0-38", "migraphx_version": "2.13.0"})
    assert new.diff(old) == ["migraphx_version", "rocm_version"]
    assert new.version_only(old) == ["migraphx_version", "rocm_version"]
    assert "rocm_version: '6.4.1-120' -> '7.0.0-38'" in new.describe_diff(old)
    assert Fingerprint(old).version_only({**old, "rocm_version": "7.0.0", "cpu_cores": 64}) == []


def test_baselines_recorded_before_the_amd_fields_stay_comparable():
    """A stored fingerprint of an earlier pytest-aaco has no rocm_version, migraphx_version or env_scheme,
    and its env holds only the old families: the new run matches it exactly (no raw-only fallback)."""
    stored = dict(AMD_FIELDS)
    current = Fingerprint({**AMD_FIELDS, "rocm_version": "6.4.1-120", "migraphx_version": "2.12.0", "env_scheme": 2,
                           "env": {"HIP_VISIBLE_DEVICES": "0", "HSA_OVERRIDE_GFX_VERSION": "9.4.2",
                                   "ROCR_VISIBLE_DEVICES": "0", "GPU_DEVICE_ORDINAL": "0"}})
    assert current.matches(stored) and current.diff(stored) == []
    # an old-family variable that changed is still a difference; which GPU (HIP_VISIBLE_DEVICES) is not
    # (one history per GPU model, docs/gpu.md)
    changed = {**stored, "env": {"HIP_VISIBLE_DEVICES": "1", "MIGRAPHX_TRACE_COMPILE": "1"}}
    assert current.diff(changed) == ["env"]
    assert current.describe_diff(changed) == ("env: {'HIP_VISIBLE_DEVICES': '1', 'MIGRAPHX_TRACE_COMPILE': '1'}"
                                              " -> {'HIP_VISIBLE_DEVICES': '0'}")
    assert current.diff({**stored, "env": {"HIP_VISIBLE_DEVICES": "1"}}) == []
    # once recorded under the new scheme, the new families count
    recorded = {**current.fields, "env": {"HIP_VISIBLE_DEVICES": "0", "HSA_OVERRIDE_GFX_VERSION": "11.0.0"}}
    assert current.diff(recorded) == ["env"]
    # a version recorded then and gone now (ROCm uninstalled) is a difference, not a match
    assert Fingerprint(dict(AMD_FIELDS)).diff({**AMD_FIELDS, "rocm_version": "6.4.1"}) == ["rocm_version"]


def test_env_scheme_is_bookkeeping_not_identity():
    assert Fingerprint({**FIELDS, "env_scheme": 2}).id == FP.id


def test_amd_stack_fields(tmp_path, monkeypatch):
    from pytest_aaco.history import fingerprint as fp_mod

    version = tmp_path / "version"
    version.write_text("6.4.1-120\n")
    monkeypatch.setattr(fp_mod, "migraphx_version", lambda: "2.12.0")
    assert fp_mod.amd_stack_fields("migraphx", str(version)) == {"rocm_version": "6.4.1-120",
                                                                  "migraphx_version": "2.12.0"}
    assert fp_mod.amd_stack_fields("cpu", str(version)) == {} and fp_mod.amd_stack_fields("cuda", str(version)) == {}
    monkeypatch.setattr(fp_mod, "migraphx_version", lambda: None)
    assert fp_mod.amd_stack_fields("rocm", str(tmp_path / "missing")) == {}  # unknown: left out, id unchanged


# ---------------------------------------------------------------- result records


def test_result_figures():
    import numpy as np

    from pytest_aaco.measure.results import BenchmarkResult, RoundResult

    rounds = [RoundResult(0, np.array([1.0, 2.0, 3.0, 4.0]), 0, 10_000_000),
              RoundResult(1, np.array([5.0, 6.0, 7.0, 8.0]), 20_000_000, 2_020_000_000)]
    r = BenchmarkResult("m", "cpu", rounds, 3, np.array([9.0, 8.0, 7.0]), 12.0, 30.0, ["CPUExecutionProvider"],
                        batch_size=4)
    assert r.measure_iterations == 8 and r.latencies_ms.shape == (8,)
    assert r.mean_ms == 4.5 and r.p50_ms == 4.5 and r.std_ms == pytest.approx(np.std(np.arange(1, 9), ddof=1))
    assert r.p90_ms == pytest.approx(np.percentile(np.arange(1, 9), 90))
    assert r.throughput == pytest.approx(4 * 1000 / 4.5)
    assert r.round_log_means == pytest.approx([np.log([1, 2, 3, 4]).mean(), np.log([5, 6, 7, 8]).mean()])
    assert r.duration_s == pytest.approx(2.02)
    assert rounds[0].summary() == {"n": 4, "mean_ms": 2.5, "log_mean": pytest.approx(np.log([1, 2, 3, 4]).mean()),
                                   "p50_ms": 2.5, "p99_ms": pytest.approx(3.97), "min_ms": 1.0}
    data = r.to_dict()
    assert data["latencies_ms"] == [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]
    assert data["summary"]["warmup_iterations"] == 3 and data["summary"]["rounds"] == 2
    assert "latencies_ms" not in r.to_dict(raw=False)
    json.loads(dumps(data))  # strict JSON


def test_other_runners_baseline_is_named_in_the_terminal(aaco_project):
    # issue 22: "other runners have a baseline" was only in the session bundle
    aaco_project.registry()
    aaco_project.tests()
    assert aaco_project.run("--aaco-save-baseline", "--aaco-reference=none").ret == 0
    root = aaco_project.pytester.path / "baselines"
    (mine,) = [p for p in root.iterdir() if p.is_dir()]
    nodeid = "test_perf.py::test_latency[tiny-cpu]"
    other = baseline_path(root, "runner-b", nodeid)  # the file name hashes the runner key too
    other.parent.mkdir()
    baseline_path(root, mine.name, nodeid).rename(other)
    shutil.rmtree(mine)
    result = aaco_project.run("--aaco-reference=none")
    result.assert_outcomes(passed=1)
    # issue 43: the no-baseline line LEADS the results: the count, the folder searched, the other runners' histories
    out = result.stdout.lines
    first = out[out.index(next(x for x in out if "pytest-aaco results" in x)) + 1]
    assert first.startswith("no baseline for this runner: 1 of 1 item(s), searched in "), first
    assert str(root / mine.name) in first and "other runners' histories: tiny[cpu] (runner-b)" in first
    assert "--aaco-require-baseline fails them" in first
    result.stdout.fnmatch_lines(["tiny*cpu*no-baseline*"])
    # --aaco-require-baseline fails the item, and pytest exits 1
    required = aaco_project.run("--aaco-reference=none", "--aaco-require-baseline")
    required.assert_outcomes(failed=1)
    assert required.ret == 1
    assert "they failed (--aaco-require-baseline)" in required.stdout.str()
    shutil.rmtree(root / "runner-b")
    plain = aaco_project.run("--aaco-reference=none")
    assert "runner-b" not in plain.stdout.str() and "no other runner has one either" in plain.stdout.str()
