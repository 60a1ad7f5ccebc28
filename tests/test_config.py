"""Options: each parser of pytest_aaco.config, the frozen AacoConfig, ini twins, --help, lazy imports."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_aaco import config as cfg
from pytest_aaco import options as opts
from pytest_aaco.config import (
    AacoConfig,
    parse_choice,
    parse_fraction,
    parse_iterations,
    parse_megabytes,
    parse_milliseconds,
    parse_on_off,
    parse_option_value,
    parse_positive_int,
    parse_provider_options,
    parse_providers,
)
from pytest_aaco.options import OPTIONS


@contextlib.contextmanager
def usage_error(option: str, *fragments: str) -> Iterator[pytest.ExceptionInfo[pytest.UsageError]]:
    """Expect pytest.UsageError whose message starts with ``<option>:`` and contains *fragments*."""
    with pytest.raises(pytest.UsageError) as info:
        yield info
    message = str(info.value)
    assert message.startswith(f"{option}:"), message
    for fragment in fragments:
        assert fragment in message, message


# ---------------------------------------------------------------- the parsers, one by one


@pytest.mark.parametrize(("value", "minimum", "expected"), [("3", 1, 3), (" 7 ", 1, 7), (0, 0, 0), ("12", 2, 12)])
def test_parse_positive_int(value, minimum, expected):
    assert parse_positive_int("--aaco-rounds", value, minimum) == expected


@pytest.mark.parametrize(("value", "expected"), [("auto", None), (" AUTO ", None), ("10", 10), (2, 2)])
def test_parse_iterations(value, expected):
    assert parse_iterations("--aaco-iterations", value) == expected


@pytest.mark.parametrize(("value", "upper", "expected"), [
    ("0.05", 1.0, 0.05), ("5%", 1.0, 0.05), (" 2.5% ", 1.0, 0.025), (0.3, 1.0, 0.3), ("150%", 10.0, 1.5),
])
def test_parse_fraction(value, upper, expected):
    assert parse_fraction("--aaco-threshold", value, upper) == pytest.approx(expected)


@pytest.mark.parametrize(("value", "seconds"), [("100", 0.1), ("250ms", 0.25), (" 5MS ", 0.005), (20, 0.02)])
def test_parse_milliseconds(value, seconds):
    assert parse_milliseconds("--aaco-sample-interval", value) == pytest.approx(seconds)


@pytest.mark.parametrize(("value", "expected"), [("50", 50.0), ("50MB", 50.0), ("1.5mb", 1.5), ("0", 0.0)])
def test_parse_megabytes(value, expected):
    assert parse_megabytes("--aaco-memory-slack", value) == expected


@pytest.mark.parametrize("value", ["on", "ON", "true", "yes", "1", True])
def test_parse_on_off_true(value):
    assert parse_on_off("--aaco-confirm", value) is True


@pytest.mark.parametrize("value", ["off", "False", "no", "0", False])
def test_parse_on_off_false(value):
    assert parse_on_off("--aaco-confirm", value) is False


#: (parser, option, the arguments after the option, a fragment of the UsageError) per bad value
REJECTED = [
    (parse_positive_int, "--aaco-rounds", ("three", 1), "expected an integer, got 'three'"),
    (parse_positive_int, "--aaco-rounds", ("2.5", 1), "expected an integer"),
    (parse_positive_int, "--aaco-rounds", ("0", 1), "must be at least 1, got 0"),
    (parse_positive_int, "--aaco-rounds", ("-3", 0), "must be at least 0, got -3"),
    (parse_iterations, "--aaco-iterations", ("1",), "at least 2"),
    (parse_iterations, "--aaco-iterations", ("many",), "expected an integer"),
    (parse_fraction, "--aaco-threshold", ("five", 1.0), "expected a fraction like 0.05 or 5%, got 'five'"),
    (parse_fraction, "--aaco-threshold", ("0", 1.0), "between 0 and 1"),
    (parse_fraction, "--aaco-threshold", ("100%", 1.0), "between 0 and 1"),
    (parse_fraction, "--aaco-threshold", ("-5%", 1.0), "between 0 and 1"),
    (parse_fraction, "--aaco-threshold", ("0.6", 0.5), "between 0 and 0.5"),
    (parse_milliseconds, "--aaco-sample-interval", ("0",), "must be positive"),
    (parse_milliseconds, "--aaco-sample-interval", ("-5",), "must be positive"),
    (parse_milliseconds, "--aaco-sample-interval", ("fast",), "expected milliseconds"),
    (parse_megabytes, "--aaco-memory-slack", ("-1",), "must not be negative"),
    (parse_megabytes, "--aaco-memory-slack", ("lots",), "expected megabytes"),
    (parse_on_off, "--aaco-confirm", ("maybe",), "expected on or off, got 'maybe'"),
]


@pytest.mark.parametrize(("parse", "option", "args", "fragment"), REJECTED,
                         ids=[f"{parse.__name__}-{'-'.join(map(str, args))}" for parse, _, args, _ in REJECTED])
def test_parser_rejects(parse, option, args, fragment):
    with usage_error(option, fragment):
        parse(option, *args)


def test_shared_number_parsers_raise_value_error_without_an_option_name():
    """The aaco command and the model registry reuse them, each adding its own context and error type."""
    assert opts.int_at_least(" 7 ", 1) == 7 and opts.fraction_below("5%") == pytest.approx(0.05)
    with pytest.raises(ValueError, match=r"^must be at least 2, got 1$"):
        opts.int_at_least("1", 2)
    with pytest.raises(ValueError, match=r"^expected a fraction like 0\.05 or 5%, got 'x'$"):
        opts.fraction_below("x")


def test_parse_choice():
    assert parse_choice("--aaco-iobinding", " ALL ", opts.IOBINDING_MODES) == "all"
    with usage_error("--aaco-iobinding", "expected one of auto, none, inputs, all", "'device'"):
        parse_choice("--aaco-iobinding", "device", opts.IOBINDING_MODES)


def test_parse_providers_comma_separated_and_repeated():
    specs = parse_providers("--aaco-provider", ["migraphx,cpu", "CUDAExecutionProvider", "cpu", " trt "])
    assert [s.short for s in specs] == ["migraphx", "cpu", "cuda", "tensorrt"]
    assert specs[0].ep_name == "MIGraphXExecutionProvider"


@pytest.mark.parametrize(("values", "fragment"), [
    (["bogus"], "unknown execution provider 'bogus'"),
    (["cpu,bogus"], "unknown execution provider 'bogus'"),
    ([" , "], "no execution provider given"),
])
def test_parse_providers_rejects_and_lists_valid_names(values, fragment):
    with usage_error("--aaco-provider", fragment, "valid: cpu, cuda, migraphx, rocm, tensorrt, openvino, dml"):
        parse_providers("--aaco-provider", values)


@pytest.mark.parametrize(("text", "value"), [("1", 1), ("-2", -2), ("EXHAUSTIVE", "EXHAUSTIVE"), ("1.5", "1.5"),
                                             ("", "")])
def test_parse_option_value(text, value):
    assert parse_option_value(text) == value
    assert type(parse_option_value(text)) is type(value)


def test_parse_provider_options():
    got = parse_provider_options("--aaco-provider-option",
                                 ["device_id=1,cudnn_conv_algo_search=EXHAUSTIVE", " trt_fp16_enable = 1 "])
    assert got == {"device_id": 1, "cudnn_conv_algo_search": "EXHAUSTIVE", "trt_fp16_enable": 1}
    assert parse_provider_options("--aaco-provider-option", []) == {}


@pytest.mark.parametrize("bad", ["fp16", "=1", "a=1,oops"])
def test_parse_provider_options_rejects(bad):
    with usage_error("--aaco-provider-option", "expected KEY=VALUE"):
        parse_provider_options("--aaco-provider-option", [bad])


def test_every_option_has_metavar_or_is_a_flag_and_an_ini_twin():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names))
    for opt in OPTIONS:
        assert opt.flag == f"--aaco-{opt.name}"
        assert opt.dest == "aaco_" + opt.name.replace("-", "_")
        assert (opt.metavar is None) == (opt.default is False), opt.name


def test_profile_cold_start_and_kernel_options_parse():
    from pytest_aaco.config import parse_option
    from pytest_aaco.options import default, option

    assert default("profile") == "off" and default("cold-start") is None  # auto
    assert default("cold-start-threshold") == pytest.approx(0.20)
    assert default("cupti") is False and default("rocprof") is None
    assert parse_option(option("profile"), "FAILING") == "failing"
    assert parse_option(option("cold-start"), "0") == 0
    assert parse_option(option("cold-start"), " Auto ") is None
    assert parse_option(option("cold-start-threshold"), "50%") == pytest.approx(0.5)
    assert parse_option(option("rocprof"), "on") == "rocprofv3"
    assert parse_option(option("rocprof"), "/opt/rocm/bin/rocprofv3") == "/opt/rocm/bin/rocprofv3"
    assert parse_option(option("rocprof"), "off") is None
    with usage_error("--aaco-cold-start-threshold", "must be between 0 and 10"):
        parse_option(option("cold-start-threshold"), "0")


def test_rounds_option_parses_auto_and_counts():
    from pytest_aaco.config import parse_option
    from pytest_aaco.options import default, option

    assert default("rounds") is None  # auto: per EP, item_settings
    assert parse_option(option("rounds"), " AUTO ") is None
    assert parse_option(option("rounds"), "30") == 30
    with usage_error("--aaco-rounds", "must be at least 2, got 1 (or auto)"):
        parse_option(option("rounds"), "1")
    with usage_error("--aaco-rounds", "expected an integer, got 'many' (or auto)"):
        parse_option(option("rounds"), "many")


def test_ort_log_level_option_parses_names_into_ort_severities():
    from pytest_aaco.config import parse_option
    from pytest_aaco.options import default, option

    assert default("ort-log-level") == 3 == AacoConfig().ort_log_level  # error
    names = ("verbose", "INFO", " warning ", "error", "fatal")
    assert [parse_option(option("ort-log-level"), name) for name in names] == [0, 1, 2, 3, 4]
    assert option("ort-log-level").metavar == "LEVEL"
    with usage_error("--aaco-ort-log-level", "expected one of verbose, info, warning, error, fatal, got 'loud'"):
        parse_option(option("ort-log-level"), "loud")


def test_plugin_sessions_log_at_the_chosen_level_and_error_by_default(tiny_model_path, capfd):
    from pytest_aaco.measure.inference import build_session, ort_log_level, set_ort_log_level
    from pytest_aaco.measure.providers import parse_provider

    assert ort_log_level() == 3
    build_session(tiny_model_path, parse_provider("cpu"))
    assert "onnxruntime" not in capfd.readouterr().err  # error level: ORT prints nothing for a good model
    old = set_ort_log_level(0)
    try:
        handle = build_session(tiny_model_path, parse_provider("cpu"))
        assert "onnxruntime" in capfd.readouterr().err  # verbose: ORT's own lines come through
        assert handle.session is not None
    finally:
        set_ort_log_level(old)
        build_session(tiny_model_path, parse_provider("cpu"))  # puts ORT's default logger back at error
        capfd.readouterr()
    assert ort_log_level() == 3


def test_cold_start_auto_is_on_side_by_side_only():
    assert AacoConfig().cold_start == 0  # stored baselines: off
    assert AacoConfig(compare_ref="origin/main").cold_start == 5
    assert AacoConfig(compare_python="/old/bin/python").cold_start == 5
    assert AacoConfig(compare_ref="origin/main", cold_start_sessions=0).cold_start == 0
    assert AacoConfig(cold_start_sessions=3).cold_start == 3


def test_config_is_frozen():
    config = AacoConfig()
    with pytest.raises(AttributeError):
        config.threshold = 0.5  # type: ignore[misc]


# ---------------------------------------------------------------- through pytest, as users run it

SHOW_CONFIG = """
import json

def test_show(aaco_config, pytestconfig):
    c = aaco_config
    data = {"threshold": c.threshold, "rounds": c.rounds, "iterations": c.iterations,
            "providers": [p.short for p in c.providers], "confirm": c.confirm, "save": c.save_baseline,
            "models": str(c.models_path), "baseline_dir": str(c.baseline_dir),
            "provider_options": c.provider_options, "sample_interval_s": c.sample_interval_s,
            "ort_log_level": c.ort_log_level, "device_threshold": c.device_threshold,
            "require_baseline": c.require_baseline, "baseline_runner": c.baseline_runner}
    (pytestconfig.rootpath / "config.json").write_text(json.dumps(data))
"""


def shown(pytester: pytest.Pytester, *args: str) -> dict:
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)
    return json.loads((pytester.path / "config.json").read_text())


def test_defaults_through_pytest(pytester):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    data = shown(pytester)
    assert data["threshold"] == 0.05 and data["rounds"] is None and data["iterations"] is None  # rounds: auto
    assert data["providers"] == ["cpu"] and data["confirm"] is True and data["save"] is False
    assert data["models"] == "None"
    assert data["baseline_dir"] == str(pytester.path / "baselines")


def test_device_threshold_parses_from_the_command_line_and_its_ini_twin(pytester):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    assert shown(pytester)["device_threshold"] == pytest.approx(0.01)
    assert shown(pytester, "--aaco-device-threshold=2.5%")["device_threshold"] == pytest.approx(0.025)
    pytester.makeini("[pytest]\naaco_device_threshold = 0.02\n")
    assert shown(pytester)["device_threshold"] == pytest.approx(0.02)


def test_require_baseline_parses_from_the_command_line_and_its_ini_twin(pytester):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    assert shown(pytester)["require_baseline"] is False
    assert shown(pytester, "--aaco-require-baseline")["require_baseline"] is True
    pytester.makeini("[pytest]\naaco_require_baseline = true\n")
    assert shown(pytester)["require_baseline"] is True


def test_baseline_runner_parses_from_the_command_line_and_its_ini_twin(pytester):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    (pytester.path / "baselines" / "runner-a").mkdir(parents=True)
    (pytester.path / "baselines" / "runner-a" / "x.json").write_text("{}")
    assert shown(pytester)["baseline_runner"] is None
    assert shown(pytester, "--aaco-baseline-runner=runner-a")["baseline_runner"] == "runner-a"
    pytester.makeini("[pytest]\naaco_baseline_runner = runner-a\n")
    assert shown(pytester)["baseline_runner"] == "runner-a"
    # a runner that does not exist: a usage error naming the option and the runners that do
    result = pytester.runpytest("-p", "no:cacheprovider", "--aaco-baseline-runner=runner-z")
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    result.stderr.fnmatch_lines(["*--aaco-baseline-runner=runner-z: no such runner under *baselines*"
                                 " (the runners with baselines there: runner-a)*"])


def test_runner_key_refuses_paths():
    from pytest_aaco.options import runner_key

    assert runner_key("") is None and runner_key("  ") is None
    assert runner_key(" intel-4c-1a2b3c4d ") == "intel-4c-1a2b3c4d"
    for bad in ("../other", "a/b", "a\\b", ".", ".."):
        with pytest.raises(ValueError, match="expected a runner key"):
            runner_key(bad)


def test_bogus_provider_is_a_usage_error_listing_valid_names(pytester):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    result = pytester.runpytest("--aaco-provider=bogus")
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    result.stderr.fnmatch_lines([
        "ERROR: --aaco-provider: unknown execution provider 'bogus'; valid: cpu, cuda, migraphx, rocm, tensorrt,"
        " openvino, dml*",
    ])


@pytest.mark.parametrize(("option", "fragment"), [
    ("--aaco-threshold=lots", "--aaco-threshold: expected a fraction*"),
    ("--aaco-rounds=1", "--aaco-rounds: must be at least 2, got 1 (or auto)"),
    ("--aaco-confirm=perhaps", "--aaco-confirm: expected on or off*"),
    ("--aaco-provider-option=fp16", "--aaco-provider-option: expected KEY=VALUE*"),
    ("--aaco-history=0", "--aaco-history: must be at least 1, got 0"),
    ("--aaco-min-history=2", "--aaco-min-history: must be at least 3, got 2"),
    ("--aaco-fdr=0.7", "--aaco-fdr: must be between 0 and 0.5*"),
    ("--aaco-intra-op-threads=-1", "--aaco-intra-op-threads: must be at least 0, got -1"),
    ("--aaco-run-noise=lots", "--aaco-run-noise: expected a fraction*"),
    ("--aaco-device-threshold=lots", "--aaco-device-threshold: expected a fraction*"),
    ("--aaco-placement=strict", "--aaco-placement: expected one of check, warn, off*"),
    ("--aaco-max-contention=much", "--aaco-max-contention: expected a number of cores*"),
    ("--aaco-profile=sometimes", "--aaco-profile: expected one of off, on, failing*"),
    ("--aaco-cold-start=-1", "--aaco-cold-start: must be at least 0, got -1 (or auto)"),
    ("--aaco-cold-start-threshold=2x", "--aaco-cold-start-threshold: expected a fraction*"),
    ("--aaco-cupti=maybe", "--aaco-cupti: expected on or off*"),
    ("--aaco-compare-budget=0", "--aaco-compare-budget: must be positive*"),
    ("--aaco-compare-budget=soon", "--aaco-compare-budget: expected a number of seconds*"),
    ("--aaco-compare-processes=0", "--aaco-compare-processes: must be at least 1, got 0"),
    ("--aaco-compare-processes=many", "--aaco-compare-processes: expected an integer*"),
    ("--aaco-compare-python=/no/such/python", "--aaco-compare-python: no such file /no/such/python*"),
    ("--aaco-compare=--force", "--aaco-compare: expected a git revision*"),
    ("--aaco-ort-log-level=loud", "--aaco-ort-log-level: expected one of verbose, info, warning, error, fatal*"),
    ("--aaco-reference=alexnet", "--aaco-reference: expected one of mix, mix-small, squeezenet, inception_v1,*none*"),
])
def test_bad_values_are_usage_errors(pytester, option, fragment):
    result = pytester.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {fragment}"])


# ---------------------------------------------------------------- empty paths (issue 22)

#: every option naming a path; an empty value there is an unset CI variable, never "the current folder"
PATH_OPTIONS = [opt for opt in OPTIONS if opt.path is not None]


def test_path_options_are_the_ones_that_name_paths():
    assert [opt.name for opt in PATH_OPTIONS] == [
        "models", "baseline-dir", "rocprof", "session-dir", "junit", "html", "compare-python", "compile-cache"]


@pytest.mark.parametrize("blank", ["", "  ", "\t"], ids=["empty", "spaces", "tab"])
@pytest.mark.parametrize("opt", PATH_OPTIONS, ids=lambda opt: opt.name)
def test_empty_path_option_is_a_usage_error(pytester, opt, blank):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    result = pytester.runpytest("-p", "no:cacheprovider", f"{opt.flag}={blank}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    result.stderr.fnmatch_lines([f"ERROR: {opt.flag}: empty value; give {opt.path}, or leave the option out *"])
    assert "Traceback" not in result.stderr.str()
    assert not (pytester.path / "config.json").exists()


@pytest.mark.parametrize("how", ["ini", "override"])
@pytest.mark.parametrize("opt", PATH_OPTIONS, ids=lambda opt: opt.name)
def test_empty_path_ini_twin_is_a_usage_error(pytester, opt, how):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    if how == "ini":
        pytester.makeini(f"[pytest]\n{opt.dest} =\n")
        result = pytester.runpytest("-p", "no:cacheprovider")
    else:
        result = pytester.runpytest("-p", "no:cacheprovider", "-o", f"{opt.dest}= ")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: {opt.dest} (ini twin of {opt.flag}): empty value; give {opt.path}, or remove the ini line *"])


def test_empty_baseline_dir_names_the_default_and_saves_nothing(pytester):
    """The fault of issue 22: ``--aaco-baseline-dir "$UNSET" --aaco-save-baseline`` saved into the project root."""
    pytester.makepyfile(test_show=SHOW_CONFIG)
    result = pytester.runpytest("-p", "no:cacheprovider", "--aaco-baseline-dir=", "--aaco-save-baseline")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: --aaco-baseline-dir: empty value; give a folder such as baselines,"
        " or leave the option out for the default baselines"])
    assert sorted(p.name for p in pytester.path.iterdir()) == ["test_show.py"]


def test_empty_models_names_the_shipped_registry(pytester):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    result = pytester.runpytest("-p", "no:cacheprovider", "-o", "aaco_models=")
    result.stderr.fnmatch_lines(["ERROR: aaco_models (ini twin of --aaco-models): empty value; give the path of a"
                                 " model registry YAML such as models.yaml, or remove the ini line for the registry"
                                 " shipped with pytest-aaco"])


def test_unset_path_ini_twins_keep_the_defaults(pytester):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    pytester.makeini("[pytest]\naaco_threshold = 3%\n")
    data = shown(pytester)
    assert data["models"] == "None" and data["baseline_dir"] == str(pytester.path / "baselines")


@given(st.text(alphabet=" \t\n\r\f\v\u00a0\u2003\u3000", max_size=12))
def test_path_text_rejects_every_blank(blank):
    with pytest.raises(ValueError, match="^empty value; give a folder such as baselines$"):
        opts.path_text(blank, "a folder such as baselines")


@given(st.text(min_size=1).filter(lambda text: text.strip() != ""))
def test_path_text_keeps_every_other_value_stripped(text):
    assert opts.path_text(text, "a folder") == text.strip()


def test_providers_comma_separated_and_repeated_make_one_item_each(aaco_project):
    result = aaco_project.run("--collect-only", "-q", "--aaco-provider=cpu,migraphx", "--aaco-provider=cuda",
                              "--aaco-provider=CPUExecutionProvider")
    assert result.ret == 0
    lines = [line for line in result.outlines if "::" in line]
    assert lines == [
        "test_perf.py::test_latency[tiny-cpu]",
        "test_perf.py::test_latency[tiny-migraphx]",
        "test_perf.py::test_latency[tiny-cuda]",
    ]


def test_ini_twins_are_read(pytester):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    pytester.makeini("""
        [pytest]
        aaco_threshold = 3%
        aaco_rounds = 4
        aaco_iterations = 20
        aaco_confirm = off
        aaco_save_baseline = true
        aaco_sample_interval = 50ms
        aaco_provider =
            migraphx
            cpu
        aaco_provider_option =
            device_id=1
        aaco_ort_log_level = warning
    """)
    data = shown(pytester)
    assert data["ort_log_level"] == 2
    assert data["threshold"] == pytest.approx(0.03)
    assert data["rounds"] == 4 and data["iterations"] == 20
    assert data["confirm"] is False and data["save"] is True
    assert data["providers"] == ["migraphx", "cpu"]
    assert data["provider_options"] == {"device_id": 1}
    assert data["sample_interval_s"] == pytest.approx(0.05)


def test_command_line_wins_over_ini(pytester):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    pytester.makeini("""
        [pytest]
        aaco_threshold = 3%
        aaco_rounds = 4
        aaco_provider = migraphx
    """)
    data = shown(pytester, "--aaco-threshold=0.07", "--aaco-provider=cpu")
    assert data["threshold"] == pytest.approx(0.07)
    assert data["providers"] == ["cpu"]
    assert data["rounds"] == 4  # not given on the command line: the ini value stays


def test_bad_ini_value_is_a_usage_error(pytester):
    pytester.makepyfile(test_show=SHOW_CONFIG)
    pytester.makeini("""
        [pytest]
        aaco_threshold = 300%
    """)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --aaco-threshold: must be between 0 and 1*"])


def test_ini_paths_resolve_against_the_rootdir(pytester, monkeypatch):
    """Run from a subfolder: paths in the ini file still mean rootdir/..., command-line paths mean cwd/...."""
    pytester.makepyfile(test_show=SHOW_CONFIG)
    pytester.makeini("""
        [pytest]
        aaco_models = registry/models.yaml
        aaco_baseline_dir = perf-baselines
    """)
    sub = pytester.mkdir("sub")
    monkeypatch.chdir(sub)
    data = shown(pytester, str(pytester.path))
    assert data["models"] == str(pytester.path / "registry" / "models.yaml")
    assert data["baseline_dir"] == str(pytester.path / "perf-baselines")
    data = shown(pytester, str(pytester.path), "--aaco-models=mine.yaml", "--aaco-baseline-dir=b")
    assert data["models"] == str(sub / "mine.yaml")
    assert data["baseline_dir"] == str(sub / "b")


def test_help_shows_the_everyday_options_with_defaults(pytester):
    result = pytester.runpytest("--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "pytest-aaco (every option: pytest-aaco.readthedocs.io/en/latest/options/):",
        "*--aaco-provider=EP*",
        "*(default: cpu)",
        "*--aaco-save-baseline*",
        "*--aaco-threshold=FRACTION",
        "*(default: 5%)",
    ])
    for opt in OPTIONS:  # one or two lines each at 80 columns (the details are in the options reference)
        assert len(f"{opt.help} (default: {opts.default_text(opt)})") <= 112, opt.flag
    text = result.stdout.str()
    options_part = text.split("[pytest] ini-options")[0]
    for opt in OPTIONS:  # the everyday ones are shown; every ini twin is listed
        listed = re.search(rf"^  {re.escape(opt.flag)}\b", options_part, flags=re.M) is not None
        assert listed == (opt.name in opts.HELP_SHOWN), opt.flag
        assert f"  {opt.dest} ({opt.ini_type}):" in text, opt.dest
    result.stdout.fnmatch_lines(["*aaco_threshold (string):"])


def test_a_hidden_option_still_works(pytester):
    """An option --help leaves out (the options reference lists it) is parsed like any other."""
    assert "memory-threshold" not in opts.HELP_SHOWN
    pytester.makepyfile(test_show=SHOW_CONFIG.replace("c.threshold,", "c.memory_threshold,"))
    assert shown(pytester, "--aaco-memory-threshold=20%")["threshold"] == 0.2


def test_every_option_is_in_one_help_group():
    grouped = [name for _, _, members in opts.HELP_GROUPS for name in members]
    assert sorted(grouped) == sorted(opt.name for opt in OPTIONS)
    assert len(grouped) == len(set(grouped))


def test_help_groups_come_in_order_and_ini_twins_are_one_line(pytester):
    result = pytester.runpytest("--help")
    lines = result.stdout.lines
    titles = [next(line for line in lines if line.startswith("pytest-aaco (every option: "))]
    titles += [f"{title}:" for _, title, members in opts.HELP_GROUPS[1:] if set(members) & set(opts.HELP_SHOWN)]
    starts = [lines.index(t) for t in titles]
    assert starts == sorted(starts), titles  # everyday first, then measuring, reports, side by side, GPUs
    shown_groups = [g for g in opts.HELP_GROUPS if set(g[2]) & set(opts.HELP_SHOWN)]
    for (_, _, members), start, end in zip(shown_groups, starts, [*starts[1:], len(lines)], strict=True):
        section = "\n".join(lines[start:end])
        for name in set(members) & set(opts.HELP_SHOWN):
            assert f"--aaco-{name}" in section, name
    for opt in OPTIONS:  # the ini twin is one line: it names its option where that fits, and never repeats the help
        [twin] = [i for i, line in enumerate(lines) if line.startswith(f"  {opt.dest} (")]
        entry = [lines[twin]] + list(itertools.takewhile(lambda line: line.startswith(" " * 4), lines[twin + 1:]))
        assert entry == [f"  {opt.dest} ({opt.ini_type}):" + (f"{'':{22 - len(opt.dest + opt.ini_type) - 4}}"
                                                              f"ini twin of {opt.flag}" if opts.ini_help(opt) else "")]
    text = result.stdout.str()
    assert "docs/" not in text.split("[pytest] ini-options")[0].split(titles[0])[1]  # no page a pip install lacks


# ---------------------------------------------------------------- heavy imports stay lazy

HEAVY = ("onnxruntime", "scipy")
#: every library the plugin imports only where it is used
HEAVY_LIBRARIES = (*HEAVY, "onnx", "matplotlib", "pynvml", "amdsmi", "cupti")


def test_importing_the_plugin_does_not_import_onnxruntime_or_scipy():
    code = ("import pytest_aaco.plugin, sys; "
            "assert 'onnxruntime' not in sys.modules and 'scipy' not in sys.modules, "
            "sorted(m for m in sys.modules if m.split('.')[0] in ('onnxruntime', 'scipy'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


REPORT_HEAVY = """
import json, sys
from pathlib import Path

def pytest_unconfigure(config):
    heavy = {"onnxruntime", "onnx", "scipy", "numpy", "yaml", "matplotlib"}
    loaded = sorted({m.split(".")[0] for m in sys.modules} & heavy)
    package = sorted(m for m in sys.modules if m.startswith("pytest_aaco."))
    Path(__file__).with_name("heavy.json").write_text(json.dumps(loaded + package))
"""
#: all a run that never uses the plugin loads of it: the entry point, the option table, the hook specifications
PLUGIN_AT_LOAD = ["pytest_aaco.eps", "pytest_aaco.hookspecs", "pytest_aaco.jsonio", "pytest_aaco.options",
                  "pytest_aaco.plugin"]


@pytest.mark.parametrize("args", [(), ("--help",)], ids=["plain-run", "help"])
def test_unrelated_run_does_not_import_heavy_modules(pytester, args):
    pytester.makeconftest(REPORT_HEAVY)
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess(*args, timeout=60)
    assert result.ret == 0
    if not args:
        result.assert_outcomes(passed=1)
    # neither numpy, PyYAML, onnx, matplotlib nor the rest of the package (the session object and all below it)
    assert json.loads(Path(pytester.path, "heavy.json").read_text()) == PLUGIN_AT_LOAD


def test_source_keeps_heavy_imports_out_of_module_level():
    """No module of the package (all are on the import path of ``pytest_aaco.plugin``) imports a
    heavy library at top level."""
    package = Path(cfg.__file__).parent
    for path in sorted(package.rglob("*.py")):
        top = [line for line in path.read_text().splitlines() if line.startswith(("import ", "from "))]
        for line in top:
            assert not any(h in line.split() or f"{h}." in line for h in HEAVY_LIBRARIES), f"{path.name}: {line}"


def test_usage_error_helper_catches_a_wrong_option_name():
    """The helper used above must fail when the message names another option."""
    with pytest.raises(AssertionError):
        with usage_error("--aaco-rounds"):
            parse_positive_int("--aaco-warmup", "x")



def test_max_contention_parser():
    from pytest_aaco.config import parse_cores

    assert parse_cores("--aaco-max-contention", "off") is None
    assert parse_cores("--aaco-max-contention", "0.25") == 0.25
    with pytest.raises(pytest.UsageError, match="--aaco-max-contention"):
        parse_cores("--aaco-max-contention", "-1")
    with pytest.raises(pytest.UsageError, match="--aaco-max-contention"):
        parse_cores("--aaco-max-contention", "lots")


def test_run_noise_parser_accepts_zero_and_fractions():
    from pytest_aaco.config import parse_fraction_or_zero

    assert parse_fraction_or_zero("--aaco-run-noise", "0") == 0.0
    assert parse_fraction_or_zero("--aaco-run-noise", "2%") == pytest.approx(0.02)
    with pytest.raises(pytest.UsageError, match="--aaco-run-noise"):
        parse_fraction_or_zero("--aaco-run-noise", "60%", upper=0.5)


def test_placement_mode_parser():
    from pytest_aaco.config import parse_choice
    from pytest_aaco.options import PLACEMENT_MODES

    parsed = [parse_choice("--aaco-placement", m.upper(), PLACEMENT_MODES) for m in PLACEMENT_MODES]
    assert parsed == list(PLACEMENT_MODES)
    with pytest.raises(pytest.UsageError, match="--aaco-placement: expected one of check, warn, off"):
        parse_choice("--aaco-placement", "strict", PLACEMENT_MODES)


def test_compare_options_parse_and_have_ini_twins(pytester):
    from pytest_aaco import options as opts
    from pytest_aaco.config import parse_option

    assert opts.default("compare") is None and opts.default("compare-python") is None
    assert opts.default("compare-budget") == 60.0
    assert parse_option(opts.option("compare"), " origin/main ") == "origin/main"
    assert parse_option(opts.option("compare-budget"), "45s") == 45.0
    assert opts.default("compare-processes") == 3 and parse_option(opts.option("compare-processes"), " 5 ") == 5
    for name, metavar in (("compare", "REF"), ("compare-python", "PATH"), ("compare-budget", "S"),
                          ("compare-processes", "N")):
        assert opts.option(name).metavar == metavar
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--aaco-compare=REF*", "*--aaco-compare-python=PATH*",
                                 "*aaco_compare_budget (string):*"])  # --aaco-compare-budget: the options reference
    pytester.makeini("""
        [pytest]
        aaco_compare_budget = 30
    """)
    pytester.makepyfile(test_show=SHOW_CONFIG.replace("c.threshold,", "c.compare_budget_s,"))
    assert shown(pytester)["threshold"] == 30.0
    pytester.makeini("""
        [pytest]
        aaco_compare_processes = 4
    """)
    pytester.makepyfile(test_show=SHOW_CONFIG.replace("c.threshold,", "c.compare_processes,"))
    assert shown(pytester)["threshold"] == 4
    assert shown(pytester, "--aaco-compare-processes=2")["threshold"] == 2  # the command line over the ini


def test_rounds_auto_is_10_on_the_cpu_and_30_on_device_eps():
    from pytest_aaco.benchmark import AacoMarker, item_settings
    from pytest_aaco.measure.providers import parse_provider
    from pytest_aaco.measure.registry import ModelSpec

    model = ModelSpec("m", "zoo:squeezenet", Path("models.yaml"))
    rounds = {short: item_settings(AacoConfig(), model, parse_provider(short), AacoMarker())[0].rounds
              for short in ("cpu", "cuda", "migraphx")}
    assert rounds == {"cpu": 10, "cuda": 30, "migraphx": 30}
    assert item_settings(AacoConfig(rounds=7), model, parse_provider("cuda"), AacoMarker())[0].rounds == 7
    assert item_settings(AacoConfig(), model, parse_provider("cuda"), AacoMarker(rounds=4))[0].rounds == 4
