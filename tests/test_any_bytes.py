"""Text from the file system and git can be any bytes the OS allows (issue 39, item 5): a file name, a
node id, a registry key, a branch name arrive in Python as ``os.fsdecode(raw)``, lone surrogates
(``\\udcff``) standing for the bytes that are not UTF-8. Each writer takes such a name, in its content and
in the path it writes to, writes, reads back what it wrote, and never raises: the session bundle, the
baseline store, JUnit XML, the HTML report, the job summary, the terminal table and the ``aaco`` command.

tests/test_sinks.py checks that each sink escapes hostile *text*; this file checks the bytes the OS hands
over, through the writers to disk and back.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_aaco.cli import main as aaco
from pytest_aaco.history.fingerprint import build_fingerprint
from pytest_aaco.history.store import baseline_path, load_baseline, save_run
from pytest_aaco.records import ItemRecord, SessionSummary
from pytest_aaco.reports import ReportContext, github, junit, terminal
from pytest_aaco.reports import html as html_report
from pytest_aaco.reports.bundle import SessionBundle, load_session, records_of
from tests.conftest import make_result
from tests.test_sinks import _record

#: a file-name component as the OS allows it (any byte but NUL and "/"), as Python receives it
OS_NAME = st.binary(min_size=1, max_size=24).filter(
    lambda raw: b"\x00" not in raw and b"/" not in raw and raw not in (b".", b"..")).map(os.fsdecode)


def _strict_utf8() -> io.TextIOWrapper:
    """A stream that, like a UTF-8 terminal's ``sys.stdout`` outside UTF-8 mode, refuses lone surrogates."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)


def _item(name: str) -> ItemRecord:
    record = _record(name).to_dict()
    record["nodeid"] = f"tests/{name}/test_{name}.py::test_latency[{name}-cpu]"
    return ItemRecord.from_dict(record)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=OS_NAME, branch=OS_NAME)
def test_a_name_of_any_os_bytes_goes_through_every_writer_and_back(name: str, branch: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / name  # the project folder itself has the name
        folder.mkdir()
        record = _item(name)
        nodeid = record.nodeid
        summary = SessionSummary.from_dict({"verdicts": {"regression": 1}})
        said: list[str] = []
        commit = {"sha": "0" * 40, "branch": branch, "dirty": False}

        # the session bundle: written, listed, read back by `aaco report`
        bundle = SessionBundle(folder / "sessions")
        bundle.write_meta({"argv": [name, f"--aaco-junit={name}.xml"], "commit_info": commit})
        bundle.write_item(nodeid, record.to_dict())
        bundle.finish({"verdicts": {"regression": 1}})
        [back] = records_of(load_session(bundle.path))
        assert back.nodeid == nodeid and back.model == name

        # the baseline store: the history file is named after the node id
        fp = build_fingerprint(model_sha256="ab" * 32, input_shapes={"x": [1]}, input_dtypes={"x": "float32"},
                               provider="cpu", ep_name="CPUExecutionProvider", provider_options={},
                               iobinding="none", intra_op_threads=0, extra={"registry_key": name})
        path = baseline_path(folder / "baselines", fp.machine_key, nodeid)
        save_run(path, nodeid, fp, make_result([1.0, 1.1, 1.0], model=name), extra={"commit_info": commit})
        stored = load_baseline(path)
        assert stored is not None and stored.item == nodeid and stored.runs == 1

        # JUnit XML and the HTML report, each to a file of the name
        context = ReportContext(summary, junit_path=folder / f"{name}.xml", html_path=folder / f"{name}.html",
                                say=lambda line, **_: said.append(line), commit_info=commit,
                                bundle_path=bundle.path)
        junit.write([record], context)
        cases = list(ET.parse(folder / f"{name}.xml").getroot().iter("testcase"))
        assert len(cases) == 1
        with mock.patch.object(html_report, "_matplotlib_available", lambda: False):
            html_report.write([record], context)
        assert "<html" in (folder / f"{name}.html").read_text(encoding="utf-8").lower()

        # the job summary, appended to the file GitHub names
        step_summary = folder / f"{name}.md"
        with mock.patch.dict(os.environ, {"GITHUB_STEP_SUMMARY": str(step_summary)}):
            github.write([record], context)
        assert "|" in step_summary.read_text(encoding="utf-8")
        assert not [line for line in said if "cannot" in line], said  # nothing reported as unwritable

        # the terminal table, through a stream that refuses what a UTF-8 terminal refuses
        out = _strict_utf8()
        for line in terminal.format_table([record]):
            out.write(line + "\n")

        # the aaco command: report (reads the bundle), baseline show (reads the store), as on a terminal
        for argv in (["report", str(bundle.path)],
                     ["baseline", "show", "--baseline-dir", str(folder / "baselines")]):
            stdout, stderr = _strict_utf8(), _strict_utf8()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                status = aaco(argv)
            stdout.seek(0)
            stderr.seek(0)
            text = stdout.read() + stderr.read()
            assert status in (0, 1), (argv, status, text)
            assert "Traceback" not in text, text
        assert json.loads((bundle.path / "session_meta.json").read_text(encoding="utf-8"))["commit_info"] == \
            json.loads(json.dumps(commit))
