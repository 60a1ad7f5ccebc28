"""Reports of a pytest-aaco session: terminal summary, session bundle, JUnit, GitHub job summary, HTML.

Writers take the item records (:class:`~pytest_aaco.records.item.ItemRecord`) and a
:class:`ReportContext`; none of them knows the session object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.records.device import BaselineRecord
from pytest_aaco.records.item import SessionSummary
from pytest_aaco.warnings import terminal_line


def _print(text: str, **markup: bool) -> None:
    print(text if markup.get("workflow_command") else terminal_line(text), flush=True)


@dataclass(frozen=True)
class ReportContext:
    """What the report writers need besides the records.

    *summary*: counts and the LOND state; *started_at*: ISO time (UTC) the session started;
    *fdr*: ``--aaco-fdr``; *bundle_path*: the session bundle folder, or None; *junit_path* /
    *html_path*: ``--aaco-junit`` / ``--aaco-html`` (None: not asked for); *say*: writes one line on
    pytest's terminal (markup keywords such as ``yellow=True``), never raising; *commit_info*: the
    project's git commit (:func:`pytest_aaco.measure.commit.commit_info`), or None; *baselines*: what
    the HTML report shows of each item's baseline file, by node id (the caller reads the files,
    :func:`pytest_aaco.history.store.report_baselines`; writers never open one); *environment*: the
    session's environment record (:func:`pytest_aaco.measure.environment.collect_environment`), or None.
    """

    summary: SessionSummary
    started_at: str | None = None
    fdr: float | None = None
    bundle_path: Path | None = None
    junit_path: Path | None = None
    html_path: Path | None = None
    say: Callable[..., None] = _print
    commit_info: JSONDict | None = None
    baselines: Mapping[str, BaselineRecord] | None = None
    environment: JSONDict | None = None
