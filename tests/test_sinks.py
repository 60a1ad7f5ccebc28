"""Text from a user file or the environment never reaches a sink unescaped: the terminal (no ESC, no
line break inside a line, no GitHub Actions workflow command), workflow commands, JUnit XML (it
parses), HTML (it parses, no tag from user text), the Markdown job summary (the table keeps its
columns). One escape function per sink lives in :mod:`pytest_aaco.reports.markup`.

The workflow-command rules are the runner's own: ``::`` after leading white space
(``actions/runner`` ``src/Runner.Common/ActionCommand.cs`` ``TryParseV2``), ``##[`` anywhere in a
line (``TryParse``, the older form ``ActionCommandManager.TryProcessCommand`` still tries).
"""

from __future__ import annotations

import html.parser
import re
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_aaco.records import ItemRecord, SessionSummary
from pytest_aaco.reports import github, junit, markup, terminal
from pytest_aaco.reports import html as html_report


def runner_would_execute(line: str) -> bool:
    """True when the GitHub Actions runner would parse *line* as a workflow command (either form)."""
    return line.lstrip().startswith("::") or "##[" in line


#: characters that make trouble in some sink: controls, XML-forbidden, separators, markup
NASTY = st.sampled_from(["\n", "\r", "\x1b", "\x00", "\x07", "\x7f", "\x85", "\u2028", "\u202e", "\ufffe", "\ud800",
                         "::", "##[", "%", ",", ":", "|", "`", "<", ">", "&", '"', "'", "*", "_", "[", "]", "\t",
                         "<script>", "::error::x", "::add-mask::y", " "])
TEXT = st.lists(st.one_of(NASTY, st.text(max_size=4)), max_size=12).map("".join)


def _record(label: str, outcome: str = "regression") -> ItemRecord:
    return ItemRecord.from_dict({
        "nodeid": f"tests/test_x.py::test_a[{label}]", "model": label, "provider": "cpu", "label": label,
        "result": {"summary": {"mean_ms": 2.0, "p50_ms": 1.9, "p99_ms": 3.0, "throughput": 500.0},
                   "rounds": [{"n": 3, "mean_ms": 2.0, "log_mean": 0.69}] * 2,
                   "latencies_ms": [[2.0, 2.1, 1.9], [2.0, 2.2, 1.8]], "warmup_latencies_ms": [3.0, 2.5]},
        "verdict": {"outcome": outcome, "message": f"{outcome.upper()} {label}: 50% slower",
                    "ratio": 1.5, "ci_low": 1.4, "ci_high": 1.6, "p_value": 1e-4, "threshold": 0.05,
                    "fails": outcome == "regression", "unstable": [], "memory": [], "notes": [label]},
        "fingerprint": {"cpu_model": label, "model_sha256": "x"},
        "diagnosis": {"category": label, "score": 0.5, "evidence": [label], "recommendation": label},
        "outcome": "failed" if outcome == "regression" else "passed", "error": None, "warnings": [label],
    })


class _StrictHTML(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


# ---------------------------------------------------------------- every sink, random text


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_terminal_sink(text: str) -> None:
    line = markup.terminal_line(text)
    assert line.isprintable() and "\x1b" not in line and not runner_would_execute(line)
    for block_line in markup.terminal_block(text).split("\n"):
        assert block_line.isprintable() and not runner_would_execute(block_line)


@settings(max_examples=150, deadline=None)
@given(TEXT, TEXT, TEXT)
def test_workflow_command_sink(message: str, file: str, title: str) -> None:
    line = github.command("error", message, file=file or None, title=title or None)
    assert line.isprintable() and "\n" not in line and "\r" not in line
    head, _, data = line[2:].partition("::")  # the runner splits at the first "::" after the command
    assert head.split(" ", 1)[0] == "error"
    props = head.split(" ", 1)[1] if " " in head else ""
    parsed = dict(p.split("=", 1) for p in props.split(",") if p)  # runner: split at ",", then at "="
    assert set(parsed) <= {"file", "title"}
    unescape = {"%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ",", "%25": "%"}
    if file and file.isprintable():
        assert re.sub("%(0D|0A|3A|2C|25)", lambda m: unescape[m.group()], parsed["file"]) == file
    if message.replace("\r", "").replace("\n", "").isprintable():
        assert re.sub("%(0D|0A|25)", lambda m: unescape[m.group()], data) == message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT, TEXT)
def test_xml_html_markdown_sinks(label: str, other: str) -> None:
    records = [_record(label), _record(other, "no-regression")]
    summary = SessionSummary.from_dict({"verdicts": {"regression": 1, "no-regression": 1}})
    # JUnit: parses as XML, and every property value is there, escaped at most
    root = ET.fromstring(junit.render_junit(records, summary))
    assert len(list(root.iter("testcase"))) == 2
    # HTML: no raw control character, no tag from user text
    with mock.patch.object(html_report, "_matplotlib_available", lambda: False):
        page = html_report.render_html(records, summary, {"env": {"ORT_X": label}}, baselines={})
    assert "\x1b" not in page and "\x00" not in page
    parser = _StrictHTML()
    parser.feed(page)
    parser.close()
    assert "script" not in parser.tags
    # Markdown: the table keeps its columns, no raw control character, no raw tag
    text = github.job_summary(records, summary)
    assert "\x1b" not in text and "<script" not in text
    width = None
    for line in text.splitlines():
        if not line.startswith("|"):
            width = None  # the next table starts
        elif width is None:
            width = line.count(" | ")  # its header (plugin text, no escaped pipes)
        elif not line.startswith("|-"):
            assert len(re.findall(r"(?<!\\) \| ", line)) == width, line
    # terminal table: every line printable, none a workflow command
    for line in terminal.format_table(records):
        assert line.isprintable() and not runner_would_execute(line)


@pytest.mark.parametrize(("sink", "text", "expected"), [
    (markup.terminal_line, "a\nb", "a\\nb"),
    (markup.terminal_line, "::error::x", "\\x3a:error::x"),
    (markup.terminal_line, "  ::add-mask::x", "  \\x3a:add-mask::x"),
    (markup.terminal_line, "ok ##[error]x", "ok #\\x23[error]x"),
    (markup.terminal_line, "\x1b[31mred", "\\x1b[31mred"),
    (markup.terminal_line, "rtl\u202eevil", "rtl\\u202eevil"),
    (markup.workflow_data, "50%\r\n\x1b", "50%25%0D%0A\\x1b"),
    (markup.workflow_property, "a: b, c", "a%3A b%2C c"),
    (markup.xml_text, "a\x00\x1b\ufffe\ud800b\tc", "a\\x00\\x1b\\ufffe\\ud800b\tc"),
    (markup.e, "<b>\x1b", "&lt;b&gt;\\x1b"),
    (markup.md_text, "a|b\nc`\x1b", "a\\|b<br>c\\`\\x1b"),
    (markup.md_code, "a|b\n", "<code>a&#124;b\\n</code>"),
])
def test_each_sink_escapes_its_specials(sink, text: str, expected: str) -> None:
    assert sink(text) == expected


def test_warning_messages_are_one_terminal_line() -> None:
    from pytest_aaco.warnings import AacoProviderWarning

    assert str(AacoProviderWarning("m\n::error::x\x1b[0m")) == "m\\n::error::x\\x1b[0m"


# ---------------------------------------------------------------- the whole flow through pytest

HOSTILE_REGISTRY = """
models:
  "tiny\\n::error file=x::pwned\\n  ::add-mask::hidden\\x1b[31m ##[warning]legacy":
    path: tiny.onnx
"""


def test_registry_key_never_reaches_the_ci_host(aaco_project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A newline in a registry key used to put a ``::error`` line on stdout (GitHub Actions runs it), raw
    ESC reached the terminal and ``--aaco-junit`` wrote XML that did not parse."""
    pytester = aaco_project.pytester
    aaco_project.registry(HOSTILE_REGISTRY)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = aaco_project.run_subprocess("-rA", "--aaco-junit=out.xml", "--aaco-html=out.html")
    assert result.ret == 0, result.stdout.str()
    stdout = "\n".join(result.outlines + result.errlines)
    assert "\x1b" not in stdout
    commands = [line for line in result.outlines if runner_would_execute(line)]
    # the one workflow command is the plugin's own: the item passed unjudged (no baseline, issue 43); the key's
    # line breaks and colons are escaped in its title, so the hostile text is data, never a command of its own
    assert len(commands) == 1 and commands[0].isprintable(), commands
    assert commands[0].startswith("::warning file=test_perf.py,line=1,title=not judged%3A tiny%0A%3A%3Aerror"
                                  " file=x%3A%3Apwned%0A  %3A%3Aadd-mask%3A%3Ahidden\\x1b[31m ##[warning]legacy[cpu]"
                                  "::not judged: no baseline for this runner."), commands
    assert "tiny\\n\\x3a:error file=x::pwned" in stdout or "tiny\\n::error file=x::pwned" in stdout
    root = ET.parse(pytester.path / "out.xml").getroot()  # parses
    assert any("pwned" in (p.get("value") or "") for p in root.iter("property"))
    page = (pytester.path / "out.html").read_text(encoding="utf-8")
    assert "\x1b" not in page
    text = summary.read_text(encoding="utf-8")
    assert "\x1b" not in text and "pwned" in text


def test_cli_output_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_aaco import cli

    cli._out("::error::x\n##[error]y\x1b")
    cli._err("::warning::z")
    out, err = capsys.readouterr()
    assert not any(runner_would_execute(line) for line in (out + err).splitlines())
    assert "\x1b" not in out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, *textwrap.dedent("-x -q").split()]))


# ---------------------------------------------------------------- credentials inside recorded variables

#: credentials inside the value of a timing-relevant variable whose name looks harmless
EMBEDDED_SECRETS = {
    "ORT_DB_URL": "postgres://aaco:s3cr3t-userinfo@db.example.com/perf",
    "ORT_MODEL_SOURCE": "https://models.example.com/m.onnx?token=tok-embedded-4242",
    "OMP_EXTRA": "granularity=fine,password=pw-embedded-7777",
    "ORT_HEADERS": "Authorization: Bearer bearer-embedded-0000abcd",
    "OMP_MIRROR": "mirror:hunter2-noscheme@cache.example.com",
    "ORT_AWS": "region=us-east-1 AKIAIOSFODNN7EXAMPLE",
}
#: the parts that must never appear in an artifact
EMBEDDED_PARTS = ("s3cr3t-userinfo", "tok-embedded-4242", "pw-embedded-7777", "bearer-embedded-0000abcd",
                  "hunter2-noscheme", "AKIAIOSFODNN7EXAMPLE")


def _all_text(root: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*") if p.is_file())


def test_credentials_inside_variables_reach_no_artifact(aaco_project, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """A password inside an ``ORT_*``/``OMP_*`` value (``password=``, ``?token=``, URL userinfo, a Bearer
    header, an AWS key id) used to be copied into the baselines, the bundle, the HTML, JUnit and the job
    summary; now the variable is dropped and only its name is listed as redacted."""
    for name, value in EMBEDDED_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # a harmless variable is kept
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    project = aaco_project
    args = [a for a in project.args() if a != "--aaco-no-bundle"]
    reports = ("--aaco-junit=perf.xml", "--junitxml=pytest.xml", "--aaco-html=report.html")
    result = project.pytester.runpytest_subprocess(*args, "--aaco-save-baseline", *reports, timeout=120)
    assert result.ret == 0, result.stdout.str()
    root = project.pytester.path
    bundle = _all_text(root / ".aaco")
    assert '"OMP_NUM_THREADS": "2"' in bundle
    assert "ORT_DB_URL" in bundle, "the bundle names the redacted variable"
    text = "\n".join([bundle, _all_text(root / "baselines"), (root / "perf.xml").read_text(),
                      (root / "pytest.xml").read_text(), (root / "report.html").read_text(),
                      summary.read_text(), result.stdout.str(), result.stderr.str()])
    for part in EMBEDDED_PARTS:
        assert part not in text, f"{part} leaked into an artifact"
