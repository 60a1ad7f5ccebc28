"""pytest-aaco under ``-W error`` (issue 39): each warning the plugin issues from a session hook is said
on the terminal rather than ending the run in an INTERNALERROR or a traceback, and a deprecation from a
dependency inside a report writer (matplotlib at its floor with a current pyparsing) ends nothing.

Warnings issued inside an item (provider, baseline, clock, reference) fail that item under ``-W error``,
as pytest does for any test; a configure-time one that stops the run is a one-line usage error
(tests/test_flavors.py); a fallback chain is no warning at all (tests/test_eps.py)."""

from __future__ import annotations

import textwrap

import pytest


def test_a_bundle_that_cannot_be_written_under_w_error_is_said_not_raised(aaco_project, tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = [a for a in aaco_project.args("-W", "error", f"--aaco-session-dir={blocker / 'sessions'}")
            if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(*args, timeout=180)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, text
    assert "INTERNALERROR" not in text and "Traceback" not in text, text
    assert "AacoReportWarning: session bundle" in text, text
    assert "pytest-aaco results" in text


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
