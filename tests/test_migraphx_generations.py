"""The plugin against the MIGraphX EP generations of tests/migraphx_generations.py (issue 40)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import onnxruntime as ort
import pytest

from pytest_aaco.measure import inference
from pytest_aaco.measure.providers import parse_provider
from tests.migraphx_generations import GENERATIONS

FORK = GENERATIONS["fork-6.4-7.0"]


def _fork_report(options: dict[str, str]) -> dict[str, dict[str, str]]:
    """What the fork 6.4/6.5/7.0 EP reports for *options*: its full list, the requested values filled in."""
    reported = {k: "0" for k in FORK["reported"]}  # type: ignore[union-attr]
    reported.update({k: v for k, v in options.items() if k in reported})
    return {"MIGraphXExecutionProvider": reported}


INT8_TABLE = {"device_id": "0", "migraphx_int8_enable": "True",
              "migraphx_int8_calibration_table_name": "calib.flatbuffers",
              "migraphx_int8_use_native_calibration_table": "False"}


def test_fork_int8_with_a_calibration_table_is_not_refused() -> None:
    provider = parse_provider("migraphx")
    problem = inference.creation_problem(Path("m.onnx"), provider, INT8_TABLE, "",
                                         ["MIGraphXExecutionProvider", "CPUExecutionProvider"],
                                         _fork_report(INT8_TABLE), "1.22.1")
    assert problem is None
    assert inference.unverified_options(provider, INT8_TABLE, _fork_report(INT8_TABLE)) == [
        "migraphx_int8_calibration_table_name", "migraphx_int8_use_native_calibration_table"]


def test_a_key_the_fork_neither_applies_nor_reports_is_still_refused() -> None:
    options = {**INT8_TABLE, "migraphx_made_up": "1"}
    problem = inference.creation_problem(Path("m.onnx"), parse_provider("migraphx"), options, "",
                                         ["MIGraphXExecutionProvider"], _fork_report(options), "1.22.1")
    assert problem is not None and "migraphx_made_up" in problem
    assert "calibration" not in problem


class _ForkSession:
    """The real CPU InferenceSession, answering ``get_providers`` / ``get_provider_options`` as the fork's
    6.4/6.5/7.0 MIGraphX EP does (tests/migraphx_generations.py)."""

    def __init__(self, path: str, sess_options: object = None, providers: object = None) -> None:
        self._session = ort.InferenceSession(path, sess_options=sess_options, providers=["CPUExecutionProvider"])
        (_, self._options), = [p for p in providers if isinstance(p, tuple)]  # type: ignore[union-attr]

    def get_providers(self) -> list[str]:
        return ["MIGraphXExecutionProvider", "CPUExecutionProvider"]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return _fork_report({k: str(v) for k, v in self._options.items()})

    def __getattr__(self, name: str) -> object:
        return getattr(self._session, name)


def test_fork_int8_session_builds_and_records_the_table_keys_as_unverified(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_aaco.measure.migraphx_probe import tiny_model

    model = tiny_model(tmp_path / "m.onnx")
    monkeypatch.setattr(inference, "SESSION_FACTORY", _ForkSession)
    provider = replace(parse_provider("migraphx"), options=dict(INT8_TABLE))
    handle = inference.build_session(Path(model), provider, cache_folder=None)
    assert handle.unverified == ("migraphx_int8_calibration_table_name", "migraphx_int8_use_native_calibration_table")
    assert handle.options["migraphx_int8_enable"] == "True"
