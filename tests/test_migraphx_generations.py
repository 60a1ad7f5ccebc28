"""The plugin against the MIGraphX EP generations of tests/migraphx_generations.py (issue 40)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import onnxruntime as ort
import pytest

from pytest_aaco.measure import inference
from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.redact import fingerprint_options
from tests.migraphx_generations import EP, GENERATIONS, OLD_NAMES, SETTINGS, GenerationSession, applied_unreported

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


# --- the conformance harness: the plugin's probe, plan and session build against each generation ---------------


@pytest.fixture
def emulate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """``emulate(name)``: from then on ``onnxruntime.InferenceSession`` is generation *name*'s EP over the real CPU
    session (:class:`tests.migraphx_generations.GenerationSession`), MIGraphX is listed as available, the probe's
    answers are forgotten, and no ``ORT_MIGRAPHX_*`` variable is set. Returns the session class."""
    from pytest_aaco.measure import compile_cache, migraphx_probe

    real_available = ort.get_available_providers
    monkeypatch.setattr(ort, "get_available_providers", lambda: [EP, *real_available()])
    for name in list(os.environ):
        if name.startswith("ORT_MIGRAPHX_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(GenerationSession, "compiles", [])
    old = compile_cache.set_compile_cache("off")

    def use(name: str) -> type[GenerationSession]:
        migraphx_probe.reset()
        monkeypatch.setattr(GenerationSession, "generation", name)
        monkeypatch.setattr(ort, "InferenceSession", GenerationSession)
        return GenerationSession

    yield use
    compile_cache.set_compile_cache(old)
    migraphx_probe.reset()


def _build(model: Path, options: dict[str, str]) -> inference.SessionHandle:
    return inference.build_session(model, parse_provider("migraphx").with_options(options))


def _reported_as(name: str, key: str) -> str | None:
    reported = GENERATIONS[name]["reported"]
    old = {v: k for k, v in OLD_NAMES.items()}
    for candidate in (key, old.get(key, "")):
        if candidate in reported:  # type: ignore[operator]
            return candidate
    return None


#: the option sets of the issue: (options, --aaco-compile-cache, the setting whose application is tabled)
OPTION_SETS: dict[str, tuple[dict[str, str], str, str]] = {
    "compile cache auto": ({}, "auto", ""),
    "compile cache off": ({}, "off", ""),
    "compile cache folder": ({}, "folder", ""),
    "fp16": ({"migraphx_fp16_enable": "1"}, "off", "fp16"),
    "bf16": ({"migraphx_bf16_enable": "1"}, "off", "bf16"),
    "int8, no table": ({"migraphx_int8_enable": "1"}, "off", "int8"),
    "int8 + table": ({"migraphx_int8_enable": "1", "migraphx_int8_calibration_table_name": "calib.json"}, "auto",
                     "table"),
    "exhaustive tune": ({"migraphx_exhaustive_tune": "1"}, "off", "exhaustive tune"),
    "user keys (migraphx_mem_limit)": ({"migraphx_mem_limit": "4294967296"}, "off", ""),
}


def outcome(name: str, option_set: str, tmp_path: Path) -> str:
    """One cell of the generation table: the plugin's build of the probe model on generation *name* with
    *option_set* (the harness's :func:`emulate` in place), in words."""
    from pytest_aaco.measure import compile_cache
    from pytest_aaco.measure.migraphx_probe import tiny_model

    options, cache, setting = OPTION_SETS[option_set]
    work = tmp_path / f"{name}-{len(option_set)}-{abs(hash(option_set))}"
    work.mkdir()
    (work / "calib.json").write_text("{}", encoding="utf-8")
    model = tiny_model(work / "m.onnx")
    setting_value = {"auto": "auto", "off": "off", "folder": str(work / "cache")}[cache]
    compile_cache.set_compile_cache(setting_value, user_cache=lambda: work / "user-cache")
    cwd = os.getcwd()
    os.chdir(work)  # the calibration table's relative name is read from the working folder
    try:
        handles = [_build(model, options) for _ in range(2 if cache != "off" else 1)]
    except inference.SessionError as exc:
        refused = [k for k in options if k in str(exc)]
        return f"refused ({', '.join(refused)})" if refused else f"fails: {str(exc)[-80:]}"
    finally:
        os.chdir(cwd)
    last = handles[-1]
    if not setting:
        if cache == "off":
            told = "reported" if all(_reported_as(name, k) for k in options) else "not reported"
            return f"accepted; {told}" if options else "off: no folder, no variable set"
        status = " then ".join(str(h.compile_cache) for h in handles)
        return f"{status} ({CACHE_WORDS[GENERATIONS[name]['cache']]})"  # type: ignore[index]
    key = next(k for k in options if k in SETTINGS[setting])
    applied_as = last.session.applied.get(setting, ("", "not applied"))[1]
    reported = _reported_as(name, key)
    told = (f"reported as `{reported}`" if reported and reported != key else "reported" if reported
            else "unverified" if key in last.unverified else "not reported")
    return f"applied by {applied_as}; {told}"


@pytest.mark.parametrize("name", list(GENERATIONS))
def test_a_second_session_hits_the_compile_cache_where_the_build_has_one(name: str, emulate: Any,
                                                                         tmp_path: Path) -> None:
    from pytest_aaco.measure import compile_cache
    from pytest_aaco.measure.migraphx_probe import tiny_model

    session = emulate(name)
    model = tiny_model(tmp_path / "m.onnx")
    compile_cache.set_compile_cache(str(tmp_path / "cc"))
    first, second = _build(model, {}), _build(model, {})
    assert "ORT_MIGRAPHX_CACHE_PATH" not in {**first.options, **os.environ}
    if GENERATIONS[name]["cache"] is None:  # fork 6.1: nothing to cache in; the build time is the compile time
        assert (first.compile_cache, second.compile_cache) == ("none", "none")
        assert session.compiles[-2:] == ["compiled", "compiled"]
        assert first.create_ms > 0
        return
    assert (first.compile_cache, second.compile_cache) == ("miss", "hit")
    assert session.compiles[-2:] == ["compiled", "loaded"]
    assert first.cache.folder is not None and first.cache.folder.is_relative_to(tmp_path / "cc")


@pytest.mark.parametrize("name", ["upstream-1.22", "fork-6.2", "fork-6.3"])
def test_the_program_file_goes_through_the_save_and_load_variables(name: str, emulate: Any, tmp_path: Path) -> None:
    from pytest_aaco.measure import compile_cache, migraphx_probe

    emulate(name)
    folder = tmp_path / "keyed"
    found = migraphx_probe.plan({"device_id": "0", "migraphx_model_cache_dir": str(folder)}, ort,
                                plugin_cache=str(folder), environ={})
    assert found.cache == "program file" and found.options == {"device_id": "0"}
    program = str(folder / migraphx_probe.PROGRAM_FILE)
    assert found.env == {"ORT_MIGRAPHX_SAVE_COMPILED_MODEL": "1", "ORT_MIGRAPHX_LOAD_COMPILED_MODEL": "1",
                         "ORT_MIGRAPHX_SAVE_COMPILE_PATH": program, "ORT_MIGRAPHX_LOAD_COMPILE_PATH": program,
                         "ORT_MIGRAPHX_SAVE_COMPILED_PATH": program, "ORT_MIGRAPHX_LOAD_COMPILED_PATH": program}
    assert compile_cache.MIGRAPHX_CACHE_ENV not in found.env


def test_fork_63_int8_with_a_relative_table_and_the_default_cache_builds(emulate: Any, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40 finding 2: ORT_MIGRAPHX_CACHE_PATH moved the table to the cache folder ("ENV Failed to read
    calibration table")."""
    from pytest_aaco.measure import compile_cache
    from pytest_aaco.measure.migraphx_probe import tiny_model

    emulate("fork-6.3")
    (tmp_path / "calib.json").write_text("{}", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    compile_cache.set_compile_cache("auto", user_cache=lambda: tmp_path / "user")
    handle = _build(tiny_model(tmp_path / "m.onnx"),
                    {"migraphx_int8_enable": "1", "migraphx_int8_calibration_table_name": "calib.json"})
    assert handle.session.applied["table"] == ("calib.json", "option+env")
    assert handle.compile_cache == "miss"


@pytest.mark.parametrize("name", ["upstream-1.22", "fork-6.1", "fork-6.2"])
def test_fp16_reaches_an_env_only_ep_and_the_fingerprint_says_how(name: str, emulate: Any, tmp_path: Path) -> None:
    """Issue 40 finding 3: upstream 1.20-1.22 reads fp16 only from ORT_MIGRAPHX_FP16_ENABLE; it reported it taken."""
    from pytest_aaco.measure.migraphx_probe import tiny_model

    emulate(name)
    handle = _build(tiny_model(tmp_path / "m.onnx"), {"migraphx_fp16_enable": "1", "migraphx_int8_enable": "1"})
    assert handle.session.applied["fp16"] == ("1", "env")
    assert handle.session.applied["int8"] == ("1", "env")
    recorded = fingerprint_options(handle.recorded_options)
    assert recorded["migraphx_fp16_enable"] == "True"
    assert recorded["env:ORT_MIGRAPHX_FP16_ENABLE"] == "1" and recorded["env:ORT_MIGRAPHX_INT8_ENABLE"] == "1"
    assert not any("CACHE" in k or "COMPILE" in k for k in recorded)  # runner-specific paths stay out


def test_the_users_own_precision_variable_wins(emulate: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_aaco.measure.migraphx_probe import tiny_model

    emulate("upstream-1.22")
    monkeypatch.setenv("ORT_MIGRAPHX_FP16_ENABLE", "0")
    with pytest.warns(Warning, match="ORT_MIGRAPHX_FP16_ENABLE set"):
        handle = _build(tiny_model(tmp_path / "m.onnx"), {"migraphx_fp16_enable": "1"})
    assert handle.session.applied["fp16"] == ("0", "env")
    assert "env:ORT_MIGRAPHX_FP16_ENABLE" not in handle.recorded_options


def generation_options_table(tmp_path: Path) -> str:
    """The generation x option-set table, each cell what the harness found (:func:`outcome`)."""
    lines = ["| option set | " + " | ".join(GENERATIONS) + " |", "|---" * (len(GENERATIONS) + 1) + "|"]
    for option_set in OPTION_SETS:
        cells = []
        for name in GENERATIONS:
            GenerationSession.generation = name
            from pytest_aaco.measure import migraphx_probe

            migraphx_probe.reset()
            cells.append(outcome(name, option_set, tmp_path))
        lines.append(f"| {option_set} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


DOCS = Path(__file__).resolve().parent.parent / "docs" / "amd.md"
BEGIN = "<!-- begin: MIGraphX generations (written by tests/test_migraphx_generations.py) -->"
END = "<!-- end: MIGraphX generations -->"
BEGIN_SETS = "<!-- begin: MIGraphX option sets (written by tests/test_migraphx_generations.py) -->"
END_SETS = "<!-- end: MIGraphX option sets -->"
CACHE_WORDS = {None: "none", "program file": "one program file (`ORT_MIGRAPHX_{SAVE,LOAD}_COMPILED_MODEL`)",
               "folder": "`migraphx_model_cache_dir` / `MODEL_CACHE_PATH`"}


def generation_table() -> str:
    """The Markdown table of tests/migraphx_generations.py, as docs/amd.md shows it."""
    lines = ["| Generation | EP applies | Compile cache | Taken by the binding, not reported under that name"
             " | Reported by `get_provider_options()` | `ORT_MIGRAPHX_*` read | Source read |",
             "|---|---|---|---|---|---|---|"]
    for name, row in GENERATIONS.items():
        repo, branch, commit = row["source"]  # type: ignore[misc]
        unreported = ", ".join(f"`{k}`" for k in applied_unreported(name))
        reported = ", ".join(f"`{k}`" for k in row["reported"])  # type: ignore[attr-defined]
        env = ", ".join(f"`{k.removeprefix('ORT_MIGRAPHX_')}`" for k in row["env"])  # type: ignore[attr-defined]
        applies = "options, then `ORT_MIGRAPHX_*` over them" if row["applies"] == "options" else \
            "`device_id` from options; the rest only from `ORT_MIGRAPHX_*`"
        lines.append(f"| {name} | {applies} | {CACHE_WORDS[row['cache']]} | {unreported} | {reported} | {env}"  # type: ignore[index]
                     f" | {repo} {branch} `{commit[:12]}` |")
    return "\n".join(lines)


def _between(text: str, begin: str, end: str, body: str) -> str:
    assert begin in text and end in text, f"{DOCS}: the markers {begin!r} / {end!r} are missing"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def test_docs_generation_tables_are_the_ones_the_harness_found(emulate: Any, tmp_path: Path) -> None:
    """docs/amd.md's two tables between their markers are regenerated from the harness (the source table, and what
    the plugin's build did on each generation x option set); set AACO_WRITE_DOCS=1 to rewrite them."""
    emulate("fork-6.4")
    text = DOCS.read_text(encoding="utf-8")
    wanted = _between(text, BEGIN, END, generation_table())
    wanted = _between(wanted, BEGIN_SETS, END_SETS, generation_options_table(tmp_path))
    if os.environ.get("AACO_WRITE_DOCS") == "1":
        DOCS.write_text(wanted, encoding="utf-8")
    assert text == wanted, "docs/amd.md's MIGraphX generation tables differ: run this test with AACO_WRITE_DOCS=1"


@pytest.mark.parametrize(("name", "given", "hint"), [
    ("upstream-1.22", "migraphx_int8_use_native_calibration_table", "migraphx_use_native_calibration_table"),
    ("fork-6.1", "migraphx_int8_use_native_calibration_table", "migraphx_use_native_calibration_table"),
    ("fork-6.3", "migraphx_int8_use_native_calibration_table", "migraphx_use_native_calibration_table"),
    ("fork-6.4", "migraphx_use_native_calibration_table", "migraphx_int8_use_native_calibration_table"),
    ("pypi-1.23+", "migraphx_use_native_calibration_table", "migraphx_int8_use_native_calibration_table"),
])
def test_the_native_calibration_table_hint_names_the_key_this_generation_takes(
        name: str, given: str, hint: str, emulate: Any, tmp_path: Path) -> None:
    """Issue 40 finding 5: forks <= 6.3 (and upstream <= 1.22) accept only the legacy name."""
    from pytest_aaco.measure.migraphx_probe import tiny_model

    emulate(name)
    assert hint in GENERATIONS[name]["accepted"] and given not in GENERATIONS[name]["accepted"]  # type: ignore[operator]
    with pytest.raises(inference.SessionError) as refused:
        _build(tiny_model(tmp_path / "m.onnx"), {"migraphx_int8_enable": "1", given: "0"})
    assert f"for {given} use {hint};" in str(refused.value)
