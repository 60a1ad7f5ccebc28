"""pytest-aaco under ``filterwarnings = error`` (issue 39): one run per warning class
(tests/w_error_scenarios.py makes each cause), and a deprecation from a dependency inside a report writer
(matplotlib at its floor with a current pyparsing) ends nothing.

What each class does under ``-W error``, asserted below: never an INTERNALERROR or a traceback, the
results table still printed; a configure-time problem that stops the run (two ONNX Runtime builds) is a
one-line usage error, exit 4; a session-hook one (a bundle or report that cannot be written) is said on
the terminal and the run passes; an item-time one fails that item only, as pytest does for any test's
warning, naming the cause; a fallback chain resolving to a later EP is no warning at all."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.w_error_scenarios import SCENARIOS, Scenario, run_scenario


@dataclass(frozen=True)
class Expected:
    """*ret*: pytest's exit code; *summary*: pytest's counts line; *said*: the line naming the cause."""

    ret: int
    summary: str
    said: str


EXPECTED = {
    # the user's own chain: recorded in the results section, not warned (tests/test_eps.py has the bundle and table)
    "AacoProviderWarning": Expected(0, "3 passed", "provider chain vitisai|dml|cpu: runs on CPUExecutionProvider"),
    # each item's own baseline is moved aside and saved again; the warning then fails that item
    "AacoBaselineWarning": Expected(1, "2 failed, 1 passed", "AacoBaselineWarning: unreadable baseline"),
    # checked once, before the first measurement: that item errors, the bundle is written for the others
    "AacoClockWarning": Expected(1, "2 passed, 1 error", "AacoClockWarning: CPU frequency governor is 'powersave'"),
    # said once, for the first item on the EP; the later ones are judged on raw figures
    "AacoReferenceWarning": Expected(1, "2 passed, 1 error",
                                     "AacoReferenceWarning: reference workload mix not used on CPUExecutionProvider"),
    # each item measured without the lock warns: each fails, naming the lock file
    "AacoLockWarning": Expected(1, "2 failed, 1 passed", "could not take the device lock"),
    # a session hook's warning: said on the terminal, nothing fails
    "AacoReportWarning": Expected(0, "3 passed", "AacoReportWarning: session bundle"),
    # said once, at the first model the cache is asked for; the later items use the temporary folder
    "AacoCacheWarning": Expected(1, "2 passed, 1 error", "AacoCacheWarning: the model cache folder"),
    "AacoDeviceTimeWarning": Expected(1, "1 failed, 3 passed",
                                      "AacoDeviceTimeWarning: tiny[migraphx]: device time could not be measured"),
    "AacoFlavorWarning": Expected(4, "", "ERROR: pytest-aaco: 2 ONNX Runtime builds are installed over each other"),
}


def test_every_warning_class_has_a_scenario() -> None:
    import pytest_aaco.warnings as aaco_warnings

    classes = {name for name, value in vars(aaco_warnings).items()
               if isinstance(value, type) and issubclass(value, aaco_warnings.AacoWarning)} - {"AacoWarning"}
    assert {s.warning for s in SCENARIOS} == classes == set(EXPECTED)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.warning for s in SCENARIOS])
def test_each_warning_class_under_filterwarnings_error(scenario: Scenario, tmp_path: Path,
                                                       tiny_model_path: Path) -> None:
    expected = EXPECTED[scenario.warning]
    out = run_scenario(scenario, tmp_path, tiny_model_path)
    assert (out.ret, out.summary) == (expected.ret, expected.summary), out.text
    assert not out.internal_error and not out.traceback, out.text
    assert expected.said in " ".join(out.text.split()), out.text
    assert "re-run with --full-trace" not in out.text, out.text  # a warning made an error is no crash to report
    if scenario.warning in ("AacoReferenceWarning", "AacoLockWarning", "AacoCacheWarning"):  # raised in its work
        assert f"-W default::pytest_aaco.warnings.{scenario.warning} keeps it a warning" in out.text, out.text
    project = tmp_path / "project"
    if expected.ret == pytest.ExitCode.USAGE_ERROR:  # one line on stderr, nothing ran
        lines = [line for line in out.text.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(expected.said), out.text
        return
    assert out.results_table, out.text
    if scenario.warning == "AacoProviderWarning":
        assert scenario.warning not in out.text
    if scenario.warning == "AacoBaselineWarning":  # nothing lost: the damaged files kept, new baselines saved
        assert len(list((project / "baselines").rglob("*.corrupt-*.json"))) == 2
        saved = [p for p in (project / "baselines").rglob("*.json") if ".corrupt-" not in p.name]
        assert len(saved) == 2 and all(json.loads(p.read_text())["history"] for p in saved)
    if scenario.warning == "AacoClockWarning":  # the warning ended the first item, not the session's bundle
        [items] = (project / ".aaco" / "sessions").glob("*/items")
        assert [p.name.split(".")[1] for p in items.iterdir()] == ["py__test_latency_again_tiny-cpu"]


@pytest.mark.slow
def test_a_dependency_deprecation_in_the_html_writer_does_not_end_the_run(aaco_project) -> None:
    """The floor case: importing matplotlib 3.7.0 with a current pyparsing warns DeprecationWarning; here
    the HTML writer is wrapped to issue one, as that import does, before writing."""
    aaco_project.pytester.makeconftest(textwrap.dedent("""
        import warnings

        import pytest_aaco.reports.html as html

        _write = html.write

        def write(records, context):
            # as pyparsing 3.1 warns when matplotlib 3.7.0 imports it
            warnings.warn(DeprecationWarning("'oneOf' deprecated - use 'one_of'"))
            return _write(records, context)

        html.write = write
    """))
    result = aaco_project.run_subprocess("-W", "error", "--aaco-html=report.html", timeout=180)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, text
    assert "AacoReportWarning" not in text and "INTERNALERROR" not in text
    assert "pytest-aaco results" in text
    assert (aaco_project.pytester.path / "report.html").stat().st_size > 0
