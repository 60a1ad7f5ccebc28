"""Hypothesis fuzzing (issue 12): any input to the baseline loader, the registry loader and the option
parsers gives a result or a clear error naming the input, never a traceback from deep inside."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_aaco import config as cfg
from pytest_aaco import options as opts
from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.store import load_baseline, save_run
from pytest_aaco.jsonio import AacoFileError
from pytest_aaco.measure.registry import RegistryError, load_registry

#: AACO_FUZZ_EXAMPLES=1500 for a longer search (1500 per test found nothing on 2026-11-23)
FUZZ = settings(max_examples=int(os.environ.get("AACO_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

#: JSON-like values, nested a few levels, with the keys a baseline file uses among random ones
KEYS = st.sampled_from(["schema_version", "history", "fingerprint", "fingerprint_id", "item", "rounds", "summary",
                        "log_mean", "mean_ms", "latest_latencies_ms", "archive", "telemetry", "x"])
SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=5)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS | st.text(max_size=3),
                                                                                           inner, max_size=5),
                    max_leaves=25)


def _baseline_shaped(data: dict) -> dict:
    """Bias half the examples towards files that almost parse: a version, a history of runs."""
    return {"schema_version": 1, "fingerprint": {}, **data}


@FUZZ
@given(content=st.binary(max_size=300) | JSON.map(lambda d: json.dumps(d).encode())
       | st.dictionaries(KEYS, JSON, max_size=6).map(_baseline_shaped).map(lambda d: json.dumps(d).encode()))
def test_baseline_loader_never_raises_anything_but_a_file_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "b.json"
        path.write_bytes(content)
        try:
            loaded = load_baseline(path)
        except AacoFileError as exc:
            assert str(path) in str(exc)
            return
        assert loaded is not None
        loaded.run_round_log_means()  # what the verdict reads must be there
        [float(run["summary"]["mean_ms"]) for run in loaded.history]


@FUZZ
@given(content=st.binary(max_size=200) | JSON.map(lambda d: json.dumps(d).encode()))
def test_saving_over_any_file_keeps_its_bytes(content: bytes, result_factory) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runner" / "b.json"
        path.parent.mkdir()
        path.write_bytes(content)
        fp = Fingerprint({"cpu_model": "x", "cpu_cores": 2, "gpu_name": None})
        try:
            outcome = save_run(path, "item", fp, result_factory([10.0] * 3))
        except AacoFileError as exc:  # only a newer schema version is refused, and then nothing changes
            assert "newer than this pytest-aaco" in str(exc) and path.read_bytes() == content
            return
        assert outcome.baseline.history[-1]["summary"]["mean_ms"] > 0
        kept = [p.read_bytes() for p in path.parent.glob("*.corrupt-*.json")]
        if kept:
            assert kept == [content]
        else:  # a readable file: its runs are still there (live or archived)
            old = json.loads(content)
            saved = json.loads(path.read_text())
            runs = len(saved["history"]) + sum(len(a["history"]) for a in saved.get("archive", []))
            assert runs == len(old["history"]) + 1


MODEL_KEYS = st.sampled_from(["path", "zoo", "generator", "dims", "inputs", "providers", "warmup", "iterations",
                              "rounds", "threshold", "tags", "extra_work", "params", "kind", "cpu", "cuda"])
YAML_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(MODEL_KEYS | st.text(max_size=3), inner, max_size=4), max_leaves=20)


@FUZZ
@given(text=st.text(max_size=200)
       | st.dictionaries(st.sampled_from(["models", "defaults", "x"]),
                         st.dictionaries(st.text(min_size=1, max_size=4), YAML_VALUES, max_size=3), max_size=3)
       .map(lambda d: yaml.safe_dump(d)))
def test_registry_loader_never_raises_anything_but_a_registry_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "models.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            models = load_registry(path)
        except RegistryError as exc:
            assert str(path.resolve()) in str(exc)
            return
        assert models


ANY_VALUE = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
PARSERS = [
    lambda v: cfg.parse_positive_int("--aaco-rounds", v, minimum=2),
    lambda v: cfg.parse_iterations("--aaco-iterations", v),
    lambda v: cfg.parse_fraction("--aaco-threshold", v),
    lambda v: cfg.parse_fraction_or_zero("--aaco-run-noise", v, upper=0.5),
    lambda v: cfg.parse_cores("--aaco-max-contention", v),
    lambda v: cfg.parse_milliseconds("--aaco-sample-interval", v),
    lambda v: cfg.parse_megabytes("--aaco-memory-slack", v),
    lambda v: cfg.parse_on_off("--aaco-confirm", v),
    lambda v: cfg.parse_choice("--aaco-iobinding", v, opts.IOBINDING_MODES),
    lambda v: cfg.parse_providers("--aaco-provider", [v] if isinstance(v, str) else []),
    lambda v: cfg.parse_provider_options("--aaco-provider-option", [v] if isinstance(v, str) else []),
]


@FUZZ
@given(value=ANY_VALUE | st.text(alphabet="0123456789.,%=-+eE abcms", max_size=10),
       parser=st.integers(0, len(PARSERS) - 1))
def test_option_parsers_give_a_value_or_a_usage_error_naming_the_option(value, parser: int) -> None:
    try:
        PARSERS[parser](value)
    except pytest.UsageError as exc:
        assert str(exc).startswith("--aaco-"), exc


@FUZZ
@given(options=st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=4),
       providers=st.lists(st.sampled_from(["cpu", "cuda", "migraphx", "openvino"]), min_size=1, max_size=3))
def test_provider_option_checks_name_keys_never_values(options: dict, providers: list) -> None:
    specs = cfg.parse_providers("--aaco-provider", providers)
    try:
        cfg.check_provider_options("--aaco-provider-option", specs, {k: f"VALUE<{v}>" for k, v in options.items()})
    except pytest.UsageError as exc:
        assert "VALUE<" not in str(exc)
