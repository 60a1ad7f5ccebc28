"""The plugin against the MIGraphX EP generations of tests/migraphx_generations.py (issue 40)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import onnxruntime as ort
import pytest

from pytest_aaco.measure import inference
from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.redact import fingerprint_options
from tests.migraphx_generations import GENERATIONS, applied_unreported

FORKS_64_ON = ("fork-6.4", "fork-6.5", "fork-7.0")


def _fork_report(options: dict[str, str], name: str = "fork-6.4") -> dict[str, dict[str, str]]:
    """What generation *name*'s EP reports for *options*: its full list, the requested values filled in."""
    reported = {k: "0" for k in GENERATIONS[name]["reported"]}  # type: ignore[attr-defined]
    reported.update({k: v for k, v in options.items() if k in reported})
    return {"MIGraphXExecutionProvider": reported}


INT8_TABLE = {"device_id": "0", "migraphx_int8_enable": "True",
              "migraphx_int8_calibration_table_name": "calib.flatbuffers",
              "migraphx_int8_use_native_calibration_table": "False"}


@pytest.mark.parametrize("name", FORKS_64_ON)
def test_fork_int8_with_a_calibration_table_is_not_refused(name: str) -> None:
    assert set(INT8_TABLE) <= set(GENERATIONS[name]["accepted"])  # type: ignore[arg-type]
    assert applied_unreported(name) == ("migraphx_int8_calibration_table_name",
                                        "migraphx_int8_use_native_calibration_table")
    provider = parse_provider("migraphx")
    report = _fork_report(INT8_TABLE, name)
    problem = inference.creation_problem(Path("m.onnx"), provider, INT8_TABLE, "",
                                         ["MIGraphXExecutionProvider", "CPUExecutionProvider"], report, "1.22.1")
    assert problem is None
    assert inference.unverified_options(provider, INT8_TABLE, report) == [
        "migraphx_int8_calibration_table_name", "migraphx_int8_use_native_calibration_table"]


def test_a_key_the_fork_neither_applies_nor_reports_is_still_refused() -> None:
    options = {**INT8_TABLE, "migraphx_made_up": "1"}
    problem = inference.creation_problem(Path("m.onnx"), parse_provider("migraphx"), options, "",
                                         ["MIGraphXExecutionProvider"], _fork_report(options), "1.22.1")
    assert problem is not None and "migraphx_made_up" in problem
    assert "calibration" not in problem


@pytest.mark.parametrize("name", ("fork-6.1", "fork-6.2", "fork-6.3"))
def test_old_fork_reports_under_other_names_and_fp16_int8_are_not_refused(name: str) -> None:
    """On 6.1-6.3 the EP lists ``trt_fp16_enable`` / ``migx_int8_enable`` for the binding's
    ``migraphx_fp16_enable`` / ``migraphx_int8_enable``; the table keys stay unverified."""
    options = {"device_id": "0", "migraphx_fp16_enable": "True", "migraphx_int8_enable": "True",
               "migraphx_int8_calibration_table_name": "calib.flatbuffers",
               "migraphx_use_native_calibration_table": "False"}
    assert set(options) <= set(GENERATIONS[name]["accepted"])  # type: ignore[arg-type]
    report = {"MIGraphXExecutionProvider": {k: "1" for k in GENERATIONS[name]["reported"]}}  # type: ignore[attr-defined]
    provider = parse_provider("migraphx")
    assert inference.creation_problem(Path("m.onnx"), provider, options, "", ["MIGraphXExecutionProvider"],
                                      report, "1.19.0") is None
    assert inference.unverified_options(provider, options, report) == [
        "migraphx_int8_calibration_table_name", "migraphx_use_native_calibration_table"]


class _ForkSession:
    """The real CPU InferenceSession, answering ``get_providers`` / ``get_provider_options`` as the fork's
    6.4/6.5/7.0 MIGraphX EP does (tests/migraphx_generations.py)."""

    generation = "fork-6.4"

    def __init__(self, path: str, sess_options: object = None, providers: object = None) -> None:
        self._session = ort.InferenceSession(path, sess_options=sess_options, providers=["CPUExecutionProvider"])
        (_, self._options), = [p for p in providers if isinstance(p, tuple)]  # type: ignore[union-attr]

    def get_providers(self) -> list[str]:
        return ["MIGraphXExecutionProvider", "CPUExecutionProvider"]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return _fork_report({k: str(v) for k, v in self._options.items()}, self.generation)

    def __getattr__(self, name: str) -> object:
        return getattr(self._session, name)


@pytest.mark.parametrize("name", FORKS_64_ON)
def test_fork_int8_session_builds_and_records_the_table_keys_as_unverified(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_aaco.measure.migraphx_probe import tiny_model

    model = tiny_model(tmp_path / "m.onnx")
    monkeypatch.setattr(_ForkSession, "generation", name)
    monkeypatch.setattr(inference, "SESSION_FACTORY", _ForkSession)
    provider = replace(parse_provider("migraphx"), options=dict(INT8_TABLE))
    handle = inference.build_session(Path(model), provider, cache_folder=None)
    assert handle.unverified == ("migraphx_int8_calibration_table_name", "migraphx_int8_use_native_calibration_table")
    recorded = fingerprint_options(handle.recorded_options)  # what the fingerprint's provider_options hold
    assert recorded["migraphx_int8_enable"] == "True"
    assert recorded["migraphx_int8_calibration_table_name"] == "calib.flatbuffers"


DOCS = Path(__file__).resolve().parent.parent / "docs" / "amd.md"
BEGIN = "<!-- begin: MIGraphX generations (written by tests/test_migraphx_generations.py) -->"
END = "<!-- end: MIGraphX generations -->"


def generation_table() -> str:
    """The Markdown table of tests/migraphx_generations.py, as docs/amd.md shows it."""
    lines = ["| Generation | Taken by the binding, not reported under that name"
             " | Reported by `get_provider_options()` | `ORT_MIGRAPHX_*` read | Source read |", "|---|---|---|---|---|"]
    for name, row in GENERATIONS.items():
        repo, branch, commit = row["source"]  # type: ignore[misc]
        unreported = ", ".join(f"`{k}`" for k in applied_unreported(name))
        reported = ", ".join(f"`{k}`" for k in row["reported"])  # type: ignore[attr-defined]
        env = ", ".join(f"`{k.removeprefix('ORT_MIGRAPHX_')}`" for k in row["env"])  # type: ignore[attr-defined]
        lines.append(f"| {name} | {unreported} | {reported} | {env} | {repo} {branch} `{commit[:12]}` |")
    return "\n".join(lines)


def test_docs_generation_table_is_the_one_the_harness_uses(request: pytest.FixtureRequest) -> None:
    """docs/amd.md's table between the markers is regenerated from the harness's data; set
    AACO_WRITE_DOCS=1 to rewrite it."""
    import os

    text = DOCS.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"{DOCS}: the generation-table markers are missing"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    wanted = f"{head}{BEGIN}\n{generation_table()}\n{END}{tail}"
    if os.environ.get("AACO_WRITE_DOCS") == "1":
        DOCS.write_text(wanted, encoding="utf-8")
    assert text == wanted, "docs/amd.md's MIGraphX generation table differs: run this test with AACO_WRITE_DOCS=1"
