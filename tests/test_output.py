"""What a person reads first (issue 21): labelled per cents, failures that name what failed,
result tables that tell two tests on one model apart, pytest's own layout when output is piped
into a CI log, and the quiet modes. The plugin runs through ``pytester`` with its output captured
(not a tty), as in CI."""

from __future__ import annotations

import re

import pytest
from verdicts import verdict

from pytest_aaco.records.base import Outcome, QuantileComparison
from pytest_aaco.records.item import ItemRecord
from pytest_aaco.records.verdict import SideBySideSummary, Verdict
from pytest_aaco.reports import terminal
from pytest_aaco.reports.wording import (
    change_text,
    headline,
    junit_names,
    measured_summary,
    row_names,
    verdict_cell,
)

TWO_TESTS = """
def test_latency(benchmark_model):
    benchmark_model()

def test_other(benchmark_model):
    benchmark_model()
"""

#: the tiny model plus 8 extra [128x128] MatMul+Tanh steps (about 100x slower)
SLOW_REGISTRY = """
models:
  tiny:
    path: tiny.onnx
    extra_work: {matmuls: 8, size: 128}
"""

PIN_MODEL_HASH = """
def pytest_aaco_fingerprint(config, item, fields):
    fields["model_sha256"] = "pinned-for-the-output-tests"
"""


def _half_unit(printed: str) -> float:
    """Half a unit in the last place of a printed number (``0.84`` -> 0.005, ``2.041`` -> 0.0005)."""
    mantissa = printed.lower().split("e")[0]
    exponent = int(printed.lower().split("e")[1]) if "e" in printed.lower() else 0
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 0.5 * 10.0 ** (exponent - decimals)


def explained(verdict) -> str:
    """A verdict's one-line message and the notes the report prints beside it
    (:attr:`pytest_aaco.records.verdict.Verdict.report_notes`): what a person reads of it."""
    return "; ".join([verdict.message, *verdict.report_notes])


def agrees(pct: str, current: str, baseline: str) -> bool:
    """Whether the printed per cent *pct* is the ratio of the printed means *current* / *baseline*, to
    the precision all three are printed with."""
    c, b, p = float(current), float(baseline), float(pct.rstrip("%"))
    uc, ub, up = _half_unit(current), _half_unit(baseline), _half_unit(pct.rstrip("%"))
    low, high = (c - uc) / (b + ub), (c + uc) / max(b - ub, 1e-12)
    return low - up / 100 - 1e-9 <= 1 + p / 100 <= high + up / 100 + 1e-9


def _verdict(**fields) -> Verdict:
    base = {"outcome": Outcome.REGRESSION, "label": "mlp[cpu]", "threshold": 0.05, "ratio": 1.211, "ci_low": 1.1,
            "ci_high": 1.3, "p_value": 1e-4, "level": 0.05, "fails": True, "series": "adjusted", "raw_ratio": 0.771}
    if isinstance(fields.get("side_by_side"), dict):  # the typed summary, from the keys a bundle holds
        fields["side_by_side"] = SideBySideSummary.from_dict(fields["side_by_side"])
    if isinstance(fields.get("p99"), dict):
        fields["p99"] = QuantileComparison(**{"q": 99.0, "ratio": 1.0, "ci_low": 1.0, "ci_high": 1.0, "p_slower": 0.5,
                                         "n_boot": 1000, "regression": False, **fields["p99"]})
    return verdict(**{**base, **fields})


def _record(verdict: Verdict | None, nodeid: str = "tests/perf/test_models.py::test_latency[mlp-cpu]",
            **fields) -> ItemRecord:
    return ItemRecord(nodeid, "mlp", "cpu", "mlp[cpu]", verdict=verdict,
                      outcome=Outcome.FAILED if verdict is not None and verdict.fails else Outcome.PASSED, **fields)


# ---------------------------------------------------------------- 1. every per cent says what it is


def test_the_tested_change_is_labelled_with_the_raw_one_beside_it():
    v = _verdict()
    assert change_text(v) == "+21.1% adjusted [+10.0, +30.0]; raw -22.9%"
    assert change_text(_verdict(series="raw", raw_ratio=1.211)) == "+21.1% raw [+10.0, +30.0]"
    paired = _verdict(series=None, side_by_side={"ref": "origin/main"})
    assert change_text(paired, ci=False) == "+21.1% paired"
    # the headline is the tested quantity, labelled, with the raw figure next to it
    assert headline(_record(v)) == "REGRESSION mlp[cpu]: latency +21.1% (adjusted; raw -22.9%) vs baseline"


def test_the_table_shows_the_measurement_the_change_was_computed_on():
    """A confirmed regression's change comes from the confirmation look: the table shows its mean."""
    result = {"summary": {"mean_ms": 2.36, "p50_ms": 2.3, "p99_ms": 3.0, "throughput": 420.0},
              "confirmation": {"summary": {"mean_ms": 2.20, "p50_ms": 2.1, "p99_ms": 2.9, "throughput": 450.0}}}
    record = _record(_verdict(confirmed=True, series="raw", raw_ratio=1.211), result=result)
    assert measured_summary(record).of("mean_ms") == 2.20
    lines = terminal.format_table([record])
    assert " 2.20 " in lines[2] and "2.36" not in lines[2]
    assert "+21.1% raw [+10.0, +30.0]" in lines[2] and "regression (confirmed)" in lines[2]
    assert "confirmation measurement" in (terminal.confirmed_line([record]) or "")
    unconfirmed = _record(_verdict(confirmed=False, outcome=Outcome.INCONCLUSIVE, fails=False), result=result)
    assert measured_summary(unconfirmed).of("mean_ms") == 2.36  # the first look's figures, as its verdict's


@pytest.mark.slow
def test_the_verdict_message_names_its_series_and_whose_means_it_shows(aaco_project):
    pytester = aaco_project.pytester
    pytester.makeconftest(PIN_MODEL_HASH)
    assert aaco_project.run("--aaco-save-baseline", "--aaco-reference=none").ret == 0
    aaco_project.registry(SLOW_REGISTRY)
    result = aaco_project.run("--aaco-reference=none")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    # before: "REGRESSION tiny[cpu]: mean 0.84 ms vs baseline 0.02 ms (+3561.2%, 95% CI ...)", its mean the
    # confirmation's while the table showed the first look's
    message = re.search(r"REGRESSION tiny\[cpu\]: latency (\+[\d.]+)% raw, fastest quarter of rounds"
                        r" \(lower bound [^)]*\);"
                        r" geometric mean of the fastest quarter ([\d.e+-]+) ms vs ([\d.e+-]+) ms; mean ([\d.]+) ms"
                        r" \(the confirmation measurement's\) vs ([\d.]+) ms"
                        r" \(([+-][\d.]+)%\) over 1 baseline run;", text)
    assert message, text
    # each per cent is the ratio of the means printed beside it, to the printed precision
    pct, geo_now, geo_then, now, then, mean_pct = message.groups()
    assert agrees(pct, geo_now, geo_then) and agrees(mean_pct, now, then), message.group(0)
    message = re.search(r"; mean ([\d.]+) ms \(the confirmation", text)
    row = re.search(r"^tiny +cpu +([\d.]+) .*\+[\d.]+% raw \[", text, re.M)
    assert row and row.group(1) == message.group(1), text


# ---------------------------------------------------------------- 2. the failure names what failed


def test_a_cold_start_failure_is_named_first_though_latency_was_inconclusive():
    """Side by side on an H100: first run 247 vs 143 ms failed the item, the latency was inconclusive.
    Before, pytest's summary said ``Failed: inconclusive resnet50[cuda]: +5.9% ...``."""
    v = _verdict(outcome=Outcome.INCONCLUSIVE, fails=False, ratio=1.059, series=None,
                 side_by_side={"ref": "origin/main", "outcome": "inconclusive"},
                 message="inconclusive mlp[cpu]: latency +5.9% paired vs origin/main")
    cold = {"verdict": {"outcome": "regression", "fails": True, "method": "side-by-side", "ref": "origin/main",
                        "message": "COLD START REGRESSION mlp[cpu] (first run): first run 247.0 ms vs 143.0 ms",
                        "metrics": {"first_run_ms": {"outcome": "regression", "ratio": 1.727},
                                    "session_create_ms": {"outcome": "no-regression", "ratio": 1.01}}}}
    record = _record(v, cold_start=cold)
    record.outcome = Outcome.FAILED
    assert record.failed_metrics == ["cold start"]
    assert headline(record) == "REGRESSION mlp[cpu]: cold start first run +73% (paired) vs origin/main"
    assert verdict_cell(record) == "regression (cold start)"


@pytest.mark.parametrize(("fields", "expected", "cell"), [
    ({"memory": ["RSS growth 120 MB vs baseline 75 MB (+45 MB, limit +10% and +50 MB)"], "outcome":
      Outcome.NO_REGRESSION, "ratio": 1.01, "series": "raw"},
     "REGRESSION mlp[cpu]: memory: RSS growth 120 MB vs baseline 75 MB", "regression (memory)"),
    ({"p99": {"ratio": 1.4, "regression": True}, "outcome": Outcome.NO_REGRESSION, "series": "raw"},
     "REGRESSION mlp[cpu]: p99 +40.0% vs the latest baseline run", "no-regression (p99)"),
    ({"side_by_side": {"ref": "main", "outcome": "no-regression", "device_time": {"outcome": "regression",
                                                                                 "ratio": 1.064}}},
     "REGRESSION mlp[cpu]: device time +6.4% (paired) vs main", "regression (device time)"),
    ({"outcome": Outcome.INCONCLUSIVE, "series": "raw"},
     "INCONCLUSIVE mlp[cpu]: latency +21.1% (raw) vs baseline (fails with --aaco-strict-inconclusive)",
     "inconclusive (latency)"),
])
def test_each_failing_metric_heads_the_failure(fields, expected, cell):
    record = _record(_verdict(**fields))
    assert headline(record).startswith(expected), headline(record)
    assert len(headline(record)) <= 160
    assert verdict_cell(record) == cell


# ---------------------------------------------------------------- 7 and 8. names


def test_junit_names_are_pytests():
    assert junit_names("tests/perf/test_models.py::test_latency[mlp-cpu]") == ("tests.perf.test_models",
                                                                               "test_latency[mlp-cpu]")
    assert junit_names("t/test_a.py::TestX::test_y[a::b]") == ("t.test_a.TestX", "test_y[a::b]")


@pytest.mark.slow
def test_two_tests_on_one_model_are_told_apart_in_the_table(aaco_project):
    aaco_project.tests(TWO_TESTS)
    result = aaco_project.run()
    result.assert_outcomes(passed=2)
    # before: two identical "tiny  cpu" rows
    result.stdout.re_match_lines([r"^tiny test_latency +cpu +[\d.]+ ", r"^tiny test_other +cpu +[\d.]+ "])
    assert row_names([_record(None), _record(None, nodeid="b.py::test_x[mlp-cpu]")]) == [
        "mlp test_latency", "mlp test_x"]
    assert row_names([_record(None)]) == ["mlp"]


# ---------------------------------------------------------------- 9. piped output keeps pytest's layout


def test_piped_output_keeps_one_path_and_one_dots_line(aaco_project):
    aaco_project.tests(TWO_TESTS)
    result = aaco_project.run()  # pytester captures the output: not a tty, as in a CI log
    result.assert_outcomes(passed=2)
    lines = result.outlines
    assert sum(line.startswith("test_perf.py") for line in lines) == 1, lines
    assert any(re.match(r"^test_perf\.py \.\. +\[100%\]$", line) for line in lines), lines
    assert not any(line.strip() in (".", "F") for line in lines), lines


def test_verbose_lines_fit_80_columns(aaco_project, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "80")
    aaco_project.tests(TWO_TESTS)
    result = aaco_project.run("-v")
    result.assert_outcomes(passed=2)
    items = [line for line in result.outlines if line.startswith("test_perf.py::")]
    assert len(items) == 2, result.outlines
    for line in items:  # the status fits, and pytest's outcome and progress stay on the item's line
        assert len(line) <= 80 and re.search(r" PASSED +\[ *\d+%\]$", line), line
    assert "aaco" in items[0]


# ---------------------------------------------------------------- 10. quiet modes and the short summary


def _one_failing(aaco_project):
    pytester = aaco_project.pytester
    pytester.makeconftest(PIN_MODEL_HASH)
    aaco_project.tests(TWO_TESTS)
    assert aaco_project.run("--aaco-save-baseline", "--aaco-reference=none", "-k", "test_latency").ret == 0
    aaco_project.registry(SLOW_REGISTRY)


def test_qq_prints_only_the_failing_items_with_the_per_cent_first(aaco_project):
    _one_failing(aaco_project)
    result = aaco_project.run("--aaco-reference=none", "-qq")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # -qq prints no outcome counts to parse
    text = result.stdout.str()
    section = text[text.index("pytest-aaco results"):text.index("short test summary")]
    body = [line for line in section.splitlines()[1:] if line.strip() and not line.startswith("=")]
    assert len(body) == 1 and re.match(r"^  test_perf\.py::test_latency\[tiny-cpu\]: REGRESSION tiny\[cpu\]: latency"
                                       r" \+[\d.]+% \[[^\]]*\] \(raw\) vs baseline$", body[0]), section
    assert "model" not in section and "likely cause" not in section and "no-baseline" not in section
    # pytest's short summary: the outcome, the item, the metric, then its per cent
    result.stdout.re_match_lines([r"^FAILED test_perf\.py::test_latency\[tiny-cpu\] - Failed: REGRESSION tiny"])


def test_q_shortens_the_section(aaco_project):
    _one_failing(aaco_project)
    result = aaco_project.run("--aaco-reference=none", "-q")
    result.assert_outcomes(failed=1, passed=1)
    text = result.stdout.str()
    section = text[text.index("pytest-aaco results"):text.index("short test summary")]
    assert "change vs baseline" in section and "    likely cause" not in section
    assert "false-alarm control" not in section
    assert re.search(r"^  REGRESSION tiny\[cpu\]: latency \+[\d.]+% \[[^\]]*\] \(raw\) vs baseline$", section,
                     re.M), section


def test_qq_with_nothing_failing_prints_no_section(aaco_project):
    result = aaco_project.run("-qq")
    assert result.ret == pytest.ExitCode.OK
    assert "pytest-aaco results" not in result.stdout.str()
