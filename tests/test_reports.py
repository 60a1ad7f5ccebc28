"""Session-end reports as users get them: --aaco-junit, GitHub job summary and annotations, --aaco-html,
and the progress line; plus the escaping rules and the writers' failure modes, tested directly."""

from __future__ import annotations

import html
import importlib.util
import re
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_aaco.records import ItemRecord, SessionSummary
from pytest_aaco.reports import github, junit
from pytest_aaco.reports import html as html_report

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

#: the registry after the change: the tiny model plus 8 extra [128x128] MatMul+Tanh steps (about 100x slower)
SLOW_REGISTRY = """
models:
  tiny:
    path: tiny.onnx
    extra_work: {matmuls: 8, size: 128}
"""

#: extra_work changes the model file, hence its hash; pin it so the slower variant is gated
#: against the tiny model's baseline (a project comparing model variants would do the same)
PIN_MODEL_HASH = """
def pytest_aaco_fingerprint(config, item, fields):
    fields["model_sha256"] = "pinned-for-the-report-tests"
"""


@pytest.fixture(autouse=True)
def _no_github_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our own CI runs on GitHub: inner runs must not write into its job summary or annotations."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _properties(testcase: ET.Element) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "") for p in testcase.iter("property")}


def _cases(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    return {case.get("name", ""): case for case in root.iter("testcase")}


# ---------------------------------------------------------------- the whole flow through pytest


def test_forced_regression_reaches_every_report(aaco_project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    pytester = aaco_project.pytester
    pytester.makeconftest(PIN_MODEL_HASH)
    out = tmp_path / "out"
    summary_file = tmp_path / "step_summary.md"
    summary_file.write_text("previous step\n", encoding="utf-8")

    # the reference workload stays out: this test is about the reports, and under CPU load the
    # regime rule may rightly withhold a raw regression of a 0.2 ms item (studies/RESULTS.md)
    saved = aaco_project.run("--aaco-save-baseline", "--aaco-provider=cpu,cuda", "--aaco-reference=none")
    saved.assert_outcomes(passed=1, skipped=1)

    aaco_project.registry(SLOW_REGISTRY)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    result = aaco_project.run("--aaco-provider=cpu,cuda", "--aaco-reference=none", f"--aaco-junit={out / 'aaco.xml'}",
                              f"--aaco-html={out / 'report.html'}", f"--junitxml={out / 'pytest.xml'}")
    result.assert_outcomes(failed=1, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED

    # both JUnit files: the regression is a failure carrying the message, the figures agree
    ours, theirs = _cases(out / "aaco.xml"), _cases(out / "pytest.xml")
    # pytest's own names and case time, so a CI dashboard matches the two files (issue 21)
    assert set(ours) == set(theirs) == {"test_latency[tiny-cpu]", "test_latency[tiny-cuda]"}
    case = ours["test_latency[tiny-cpu]"]
    assert case.get("classname") == theirs["test_latency[tiny-cpu]"].get("classname") == "test_perf"
    assert float(case.get("time")) == pytest.approx(float(theirs["test_latency[tiny-cpu]"].get("time")), abs=0.01)
    assert float(case.get("time")) > 0.1  # the whole item (two measurements), not the model's run time alone
    failure = case.find("failure")
    # the failure message is the headline: outcome, item, metric, per cent, the bound compared, series, vs what
    assert failure is not None
    assert re.match(r"REGRESSION tiny\[cpu\]: latency \+[\d.]+% \[lower bound [^\]]*\] \(raw\) vs baseline$",
                    failure.get("message", "")), failure.get("message")
    assert len(failure.get("message", "")) <= 160
    props = _properties(case)
    assert props["aaco_verdict"] == "regression"
    assert float(props["aaco_change_pct"]) > 100
    assert float(props["aaco_lower_bound"]) > 1 and float(props["aaco_p_value"]) < 0.05
    assert {"aaco_model", "aaco_provider", "aaco_mean_ms", "aaco_p50_ms", "aaco_p99_ms", "aaco_throughput",
            "aaco_upper_bound", "aaco_fingerprint"} <= set(props)
    # one interval: JUnit's bound is the one the headline printed (issue 43)
    assert f"[{props['aaco_bound_compared']}]" in failure.get("message", "")
    assert "aaco_ci_low" not in props
    skipped = ours["test_latency[tiny-cuda]"]
    assert skipped.find("skipped") is not None and skipped.get("classname") == "test_perf"

    pytest_case = theirs["test_latency[tiny-cpu]"]
    assert pytest_case.find("failure") is not None
    assert "REGRESSION tiny[cpu]: latency +" in (pytest_case.find("failure").get("message") or "")
    pytest_props = _properties(pytest_case)
    shared = set(pytest_props) & set(props)
    assert len(shared) >= 10
    assert {k: pytest_props[k] for k in shared} == {k: props[k] for k in shared}
    assert theirs["test_latency[tiny-cuda]"].find("skipped") is not None

    # GitHub: an ::error workflow command on stdout, escaped, and the regression first in the job summary
    errors = [line for line in result.outlines if line.startswith("::error ")]
    assert len(errors) == 1
    assert errors[0].startswith("::error file=test_perf.py,line=1,title=latency regression%3A tiny[cpu]::"
                                "REGRESSION tiny[cpu]: latency +")
    assert "\n" not in errors[0] and "%25" in errors[0]  # the '%' of the message is escaped
    text = summary_file.read_text(encoding="utf-8")
    assert text.startswith("previous step\n## pytest-aaco:")  # appended, never overwritten
    assert text.index("### Failed") < text.index("### Results") < text.index("Machine fingerprint")
    failed_block = text[text.index("### Failed"):text.index("### Results")]
    first_item = next(line for line in failed_block.splitlines() if line.startswith("- "))
    assert first_item.startswith("- **tiny\\[cpu\\]**") and "REGRESSION tiny\\[cpu\\]: latency +" in first_item
    # "**regression**", or "**regression (unstable)**" when the loaded test machine upset the rounds
    assert "| tiny\\[cuda\\] |" in text and "**regression" in text

    # HTML: one self-contained page with the verdict and inline SVG plots, nothing fetched
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert 'class="badge bad">regression<' in page
    if HAVE_MATPLOTLIB:
        assert page.count("<svg") >= 2
    else:
        assert "pip install pytest-aaco[plots]" in page
    assert not re.search(r"""<(script|link|img|iframe)\b|src=["']https?:|url\(https?:""", page)
    assert "Environment" in page and "pytest-aaco: HTML report:" in result.stdout.str()


def test_passing_run_without_github_env_writes_no_github_output(aaco_project, tmp_path: Path):
    result = aaco_project.run(f"--aaco-junit={tmp_path / 'a.xml'}", "-rA")
    result.assert_outcomes(passed=1)
    assert not any(line.startswith("::") for line in result.outlines)
    case = _cases(tmp_path / "a.xml")["test_latency[tiny-cpu]"]
    assert case.find("failure") is None and _properties(case)["aaco_verdict"] == "no-baseline"
    assert ET.parse(tmp_path / "a.xml").getroot().get("tests") == "1"


def test_unwritable_report_paths_are_reported_not_raised(aaco_project, tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = aaco_project.run(f"--aaco-junit={blocker / 'a.xml'}", f"--aaco-html={blocker / 'r.html'}")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*--aaco-junit: cannot write*", "*--aaco-html: cannot write*"])


# ---------------------------------------------------------------- progress line


PROGRESS_TEST = """
import types
from pytest_aaco.reports.progress import announce

def test_one(request):
    announce(request.config, "resnet50[cpu]", types.SimpleNamespace(warmup=10, rounds=4, iterations=None))
"""


def test_announce_names_the_item_with_v(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makepyfile(PROGRESS_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*::test_one aaco: measuring resnet50?cpu? (warmup 10, 4 rounds)... PASSED*"])


def test_announce_is_silent_with_q(pytester: pytest.Pytester):
    pytester.makepyfile(PROGRESS_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "-q")
    assert "aaco: measuring" not in result.stdout.str()


# ---------------------------------------------------------------- escaping and rendering, directly


def test_workflow_command_escaping_follows_the_toolkit():
    assert github.escape_data("50% slower\r\nnext") == "50%25 slower%0D%0Anext"
    assert github.escape_property("a: b, c%") == "a%3A b%2C c%25"
    line = github.command("error", "x%\ny", file="t.py", title="t: 1, 2", line=None)
    assert line == "::error file=t.py,title=t%3A 1%2C 2::x%25%0Ay"


def _record(label: str = "m[cpu]", outcome: str = "regression", **verdict) -> dict:
    return {
        "nodeid": f"tests/test_x.py::test_a[{label}]", "model": "m", "provider": "cpu", "label": label,
        "result": {"summary": {"mean_ms": 2.0, "p50_ms": 1.9, "p99_ms": 3.0, "throughput": 500.0},
                   "rounds": [{"n": 3, "mean_ms": 2.0, "log_mean": 0.69}] * 2,
                   "latencies_ms": [[2.0, 2.1, 1.9], [2.0, 2.2, 1.8]], "warmup_latencies_ms": [3.0, 2.5]},
        "verdict": {"outcome": outcome, "message": f"{outcome.upper()} {label}: 50% slower",
                    "ratio": 1.5, "ci_low": 1.4, "ci_high": 1.6, "p_value": 1e-4, "threshold": 0.05,
                    "fails": outcome == "regression", "unstable": [], "memory": [], **verdict},
        "fingerprint": {"cpu_model": "X", "model_sha256": label}, "diagnosis": None,
        "outcome": "failed" if outcome == "regression" else "passed", "error": None,
    }


def test_job_summary_orders_failures_first_and_escapes_markdown():
    records = [_record("ok|<b>[cpu]", "no-regression"), _record("flaky[cpu]", "inconclusive"), _record()]
    records = [ItemRecord.from_dict(r) for r in records]
    text = github.job_summary(records, SessionSummary.from_dict(
        {"verdicts": {"regression": 1, "no-regression": 1, "inconclusive": 1}}))
    assert text.index("### Failed (1)") < text.index("### Inconclusive or unstable (1)") < text.index("### Results")
    assert "ok\\|&lt;b&gt;\\[cpu\\]" in text and "<b>" not in text
    assert "| cpu\\_model | <code>X</code> |" in text and "model\\_sha256" not in text  # machine fields only
    commands = github.workflow_commands(records)
    assert [c.split(" ", 1)[0] for c in commands] == ["::warning", "::error"]


def test_render_html_escapes_every_text_field():
    evil = "<script>alert(1)</script>"
    record = _record(evil)
    record["diagnosis"] = {"category": evil, "score": 0.9, "evidence": [evil], "recommendation": evil}
    page = html_report.render_html([ItemRecord.from_dict(record)], SessionSummary.from_dict(
        {"verdicts": {"regression": 1}}), {"env": {"ORT_X": evil}}, baselines={})
    assert "<script" not in page
    assert page.count(html.escape(evil)) >= 5


def test_render_html_without_matplotlib_keeps_the_tables(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(html_report, "_matplotlib_available", lambda: False)
    page = html_report.render_html([ItemRecord.from_dict(_record())], SessionSummary.from_dict(
        {"verdicts": {"regression": 1}}), None, baselines={})
    assert "<svg" not in page and "pip install pytest-aaco[plots]" in page and "<table>" in page
    # where each plot would be, a note: the latency plots and the telemetry plot of the item
    assert "The latency plots (histogram, ECDF, rounds) would be here" in page
    assert "The telemetry plot would be here" in page


def test_junit_marks_errors_and_uses_pytests_names():
    records = [_record(), _record(), _record("b[cpu]", "error")]
    records[1]["nodeid"] = "tests/perf/test_x.py::TestA::test_b[m-cpu]"
    root = ET.fromstring(junit.render_junit([ItemRecord.from_dict(r) for r in records], SessionSummary()))
    names = [(c.get("classname"), c.get("name")) for c in root.iter("testcase")]
    assert names == [("tests.test_x", "test_a[m[cpu]]"), ("tests.perf.test_x.TestA", "test_b[m-cpu]"),
                     ("tests.test_x", "test_a[b[cpu]]")]
    assert root.find(".//testcase[@name='test_a[b[cpu]]']/error") is not None
    assert root.find("testsuite").get("failures") == "2"


def test_write_text_atomic_replaces_whole_files(tmp_path: Path):
    from pytest_aaco.jsonio import atomic_write_text

    target = tmp_path / "deep" / "r.html"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two" and [p.name for p in target.parent.iterdir()] == ["r.html"]
    assert target.stat().st_mode & 0o777 == 0o644  # shareable, not mkstemp's 0600


def test_progress_settings_text():
    from pytest_aaco.reports.progress import status_text

    settings = types.SimpleNamespace(warmup=5, rounds=10, iterations=50)
    expected = "aaco: measuring bert[migraphx] (warmup 5, 10 rounds x 50 iterations)..."
    assert status_text("bert[migraphx]", settings) == expected


def test_the_junit_file_reads_in_a_junit_reader_with_its_counts_results_and_properties(tmp_path: Path):
    """Written with ``xml.etree`` (junit-xml is gone, issue 41): a real JUnit reader (``junitparser``, as
    CI test reporters read the file) finds the suite's counts, each case's result with its message
    and the suite's properties; characters XML forbids in a node id do not break the file."""
    from junitparser import Error, Failure, JUnitXml, Skipped

    from pytest_aaco.records import Outcome
    from tests.test_output import _record, _verdict

    failed = _record(_verdict(), nodeid="tests/perf/test_models.py::test_latency[mlp-cpu]")
    passed = _record(_verdict(outcome=Outcome.NO_REGRESSION, fails=False, ratio=1.0, series="raw"),
                     nodeid="tests/perf/test_models.py::test_latency[a\x01b-cpu]")
    skipped = _record(None, nodeid="tests/perf/test_models.py::test_latency[mlp-cuda]", error="no CUDA")
    skipped.outcome = Outcome.SKIPPED
    broken = _record(None, nodeid="tests/perf/test_models.py::test_latency[bad-cpu]", error="cannot read x.json")
    broken.outcome = Outcome.ERROR
    path = tmp_path / "aaco.xml"
    summary = SessionSummary(items=4, verdicts={"regression": 1})
    path.write_text(junit.render_junit([failed, passed, skipped, broken], summary, "2026-11-28T23:00:00"),
                    encoding="utf-8")
    (suite,) = list(JUnitXml.fromfile(str(path)))
    assert (suite.name, suite.tests, suite.failures, suite.errors, suite.skipped) == ("pytest-aaco", 4, 1, 1, 1)
    assert suite.timestamp == "2026-11-28T23:00:00"
    assert {p.name: p.value for p in suite.properties()} == {"aaco_verdicts_regression": "1"}
    cases = {case.name: case for case in suite}
    assert len(cases) == 4 and "test_latency[mlp-cuda]" in cases and "test_latency[bad-cpu]" in cases
    (failure,) = cases["test_latency[mlp-cpu]"].result
    assert isinstance(failure, Failure) and failure.message.startswith("REGRESSION mlp[cpu]:")
    assert failure.type == "aaco-regression"
    assert cases["test_latency[mlp-cpu]"].classname == "tests.perf.test_models"
    (skip,) = cases["test_latency[mlp-cuda]"].result
    assert isinstance(skip, Skipped) and skip.message == "no CUDA"
    (error,) = cases["test_latency[bad-cpu]"].result
    assert isinstance(error, Error)
    assert sum(1 for case in suite if case.is_passed) == 1
    # each case's properties come first, as pytest's own --junitxml writes them
    first = ET.parse(path).getroot().find("testsuite/testcase")
    assert first is not None and first[0].tag == "properties"
    assert _properties(first)["aaco_verdict"] == "regression"


# ---------------------------------------------------------------- items not judged, in GitHub Actions (issue 43)


def _not_judged_records() -> list[ItemRecord]:
    withheld = _record("busy[cpu]", "inconclusive", contention={"cores": 3.9, "limit": 1.0, "explained": 1.2},
                       mde=0.1)
    blind = _record("blind[cpu]", "inconclusive", mde=0.64)
    missing = _record("new[cpu]", "no-baseline", ratio=None)
    missing["verdict"]["reason"] = missing["verdict"]["message"] = ("no baseline for new[cpu]; record one with"
                                                                    " --aaco-save-baseline")
    judged = _record("ok[cpu]", "no-regression")
    records = [ItemRecord.from_dict(r) for r in (withheld, blind, missing, judged)]
    records[0].extra["test_line"] = 12
    return records


def test_items_not_judged_get_a_warning_with_file_line_and_title():
    commands = github.workflow_commands(_not_judged_records())
    assert len(commands) == 3  # the judged item gets none
    assert commands[0].startswith("::warning file=tests/test_x.py,line=12,title=not judged%3A busy[cpu]::not judged:"
                                  " CPU contention (3.90 other cores busy, explaining a slowdown of up to +20.0%25)."
                                  " INCONCLUSIVE busy[cpu]: 50%25 slower%0A")
    assert commands[1].startswith("::warning file=tests/test_x.py,title=not judged%3A blind[cpu]::not judged:"
                                  " minimum detectable effect 64%25 > threshold 5%25.")
    assert commands[2].startswith("::warning file=tests/test_x.py,title=not judged%3A new[cpu]::not judged: no"
                                  " baseline for this runner. no baseline for new[cpu]")


def test_the_job_summary_leads_with_the_items_not_judged():
    records = _not_judged_records()
    text = github.job_summary(records, SessionSummary.from_dict({"verdicts": {"inconclusive": 2}}))
    lines = text.splitlines()
    assert lines[0].startswith("## pytest-aaco: ") and lines[1] == ""
    assert lines[2] == ("**Not judged: 3 of 4 items passed without a verdict (2 withheld or blind, 1 with no baseline"
                        " for this runner): busy\\[cpu\\] (CPU contention (3.90 other cores busy, explaining a slowdown"
                        " of up to +20.0%)); blind\\[cpu\\] (minimum detectable effect 64% &gt; threshold 5%);"
                        " new\\[cpu\\] (no baseline for this runner). --aaco-fail-blind and --aaco-require-baseline"
                        " fail them.**"), lines[2]
    judged = github.job_summary(records[3:], SessionSummary.from_dict({"verdicts": {"no-regression": 1}}))
    assert "Not judged" not in judged


@pytest.mark.parametrize("nodeid", [
    "tests/a:b,c%d.py::test_x[\udcff\x1b]", "t.py::test\r\n::warning::injected", "::", "", "x.py::t[%0A,:]"])
def test_annotations_survive_any_node_id(nodeid: str):
    records = _not_judged_records()
    for record in records:
        record.nodeid = nodeid
    records[1].extra["test_line"] = "12"  # a bundle edited by hand: not an int, left out
    records[2].extra["test_line"] = True
    for line in github.workflow_commands(records):
        line.encode("utf-8")  # printable to stdout: lone surrogates escaped
        head, _, message = line[2:].partition("::")
        assert "\n" not in line and "\r" not in line and line.startswith("::warning")
        assert "::" not in head  # the properties cannot end the command early
        props = head.split(" ", 1)[1].split(",") if " " in head else []
        assert all("=" in p and ":" not in p for p in props)
        assert ",line=" not in line or ",line=12," in line
    assert github.job_summary(records, SessionSummary.from_dict({})).startswith("## pytest-aaco")


def test_a_run_without_baselines_in_github_actions_is_annotated_and_leads_the_summary(
        aaco_project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    summary_file = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    result = aaco_project.run("--aaco-reference=none")
    result.assert_outcomes(passed=1)
    warnings = [line for line in result.outlines if line.startswith("::warning ")]
    assert warnings == [
        "::warning file=test_perf.py,line=1,title=not judged%3A tiny[cpu]::not judged: no baseline for this runner."
        " no baseline for tiny[cpu]; record one with --aaco-save-baseline"], result.outlines
    lines = summary_file.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("## pytest-aaco: 1 no-baseline")
    assert lines[2].startswith("**Not judged: 1 of 1 item passed without a verdict (0 withheld or blind, 1 with no"
                               " baseline for this runner): tiny\\[cpu\\] (no baseline for this runner).")
    # without GitHub Actions: no workflow commands
    monkeypatch.delenv("GITHUB_ACTIONS")
    assert not any(line.startswith("::") for line in aaco_project.run("--aaco-reference=none").outlines)
