"""Issue 22, fault 1: every number of a baseline file is checked when it is read, and never written
as NaN, an infinity or null; a bad one is an error naming the file and its JSON path."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.store import load_baseline, save_run
from pytest_aaco.jsonio import AacoFileError, dumps

NODE = "tests/perf/test_models.py::test_latency[resnet50-cpu]"
FP = Fingerprint({"model_sha256": "aa" * 32, "provider": "CPUExecutionProvider", "ort_version": "1.31.1",
                  "cpu_model": "AMD EPYC", "cpu_cores": 2, "gpu_name": None, "intra_op_threads": 0,
                  "input_shapes": {"x": [1, 64]}, "env": {}})
#: what replaces one number: not finite, negative, huge, or not a number at all
BAD = [math.nan, math.inf, -math.inf, -1.5, -1, 1e300, "1.0", True, False, None]


def _real_file(folder: Path, result_factory) -> tuple[Path, dict[str, Any]]:
    """A baseline written by the store itself: two runs, then a reset, so it has an archive too."""
    path = folder / "b.json"
    telemetry = {"summary": {"rss_mb": {"max": 120.0, "mean": 110.0}}}
    save_run(path, NODE, FP, result_factory([10.0, 10.2, 9.9], iterations=4, telemetry=telemetry))
    save_run(path, NODE, FP, result_factory([10.1, 10.0, 9.8], iterations=4, seed=1, telemetry=telemetry))
    save_run(path, NODE, FP, result_factory([10.1, 10.0, 9.8], iterations=4, seed=2, telemetry=telemetry), reset=True)
    return path, json.loads(path.read_text())


def _leaves(data: Any, keys: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    """(key path, JSON path) of every number in the measured parts (history, archive histories, latencies)."""
    found = []
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in items:
        here = keys + (key,)
        if isinstance(value, (dict, list)):
            if key != "fingerprint":
                found.extend(_leaves(value, here))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and key != "schema_version":
            found.append((here, "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in here).lstrip(".")))
    return found


def _set(data: Any, keys: tuple[Any, ...], value: Any) -> None:
    for key in keys[:-1]:
        data = data[key]
    data[keys[-1]] = value


def test_the_issue_reproduction_is_an_error_naming_file_and_path(tmp_path, result_factory):
    path, data = _real_file(tmp_path, result_factory)
    data["history"][0]["rounds"][1]["log_mean"] = float("nan")
    path.write_text(json.dumps(data))  # json writes NaN
    with pytest.raises(AacoFileError, match=r"history\[0\]\.rounds\[1\]\.log_mean is nan, expected a finite"):
        load_baseline(path)
    before = path.read_bytes()
    outcome = save_run(path, NODE, FP, result_factory([10.0, 10.0, 10.0], iterations=4))
    copies = list(tmp_path.glob("b.corrupt-*.json"))
    assert len(copies) == 1 and copies[0].read_bytes() == before  # moved aside byte for byte, said so
    assert any("history[0].rounds[1].log_mean" in w for w in outcome.warnings)
    assert "null" not in path.read_text().replace('"gpu_name": null', "")
    assert load_baseline(path).runs == 1


def test_the_writer_never_writes_nan_or_null_for_a_number(tmp_path, result_factory):
    with pytest.raises(ValueError):
        dumps({"x": math.nan}, strict=True)
    assert dumps({"x": math.nan}) == '{\n  "x": null\n}\n'  # other artifacts keep their null
    path, _ = _real_file(tmp_path, result_factory)
    before = path.read_bytes()
    bad = result_factory([10.0, 10.0, 10.0], iterations=4)
    bad.rounds[1].latencies_ms[0] = math.nan
    with pytest.raises(AacoFileError, match=r"b\.json"):
        save_run(path, NODE, FP, bad)
    assert path.read_bytes() == before  # the history is untouched


def test_valid_files_round_trip_byte_for_byte(tmp_path, result_factory):
    path, data = _real_file(tmp_path, result_factory)
    assert dumps(data, strict=True) == path.read_text() == dumps(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pick=st.integers(0, 10_000), bad=st.sampled_from(BAD))
def test_any_bad_number_is_an_error_naming_its_json_path(pick, bad, result_factory):
    with tempfile.TemporaryDirectory() as folder:
        path, data = _real_file(Path(folder), result_factory)
        leaves = _leaves(data)
        assert any(where == "history[0].rounds[1].log_mean" for _, where in leaves)
        assert any(where.startswith("archive[0].history[1].") for _, where in leaves)
        keys, where = leaves[pick % len(leaves)]
        free_form = ".telemetry." in f".{where}"
        if (isinstance(bad, (int, float)) and not isinstance(bad, bool) and bad < 0
                and (where.endswith("log_mean") or "log_means" in where or "normalized" in where)):
            return  # a log of a sub-millisecond latency is negative
        if free_form and (bad is None or isinstance(bad, (str, bool))):
            return  # free-form telemetry may hold strings, flags and nulls; its numbers are still checked
        _set(data, keys, bad)
        path.write_text(json.dumps(data))
        with pytest.raises(AacoFileError) as info:
            load_baseline(path)
        assert str(info.value).startswith(f"{path}: "), info.value
        assert where in str(info.value), (where, str(info.value))
