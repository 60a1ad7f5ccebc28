"""The HTML report stays cheap per item: 300 items used to take 418 s of CPU (about 1.4 s each) with no
word on the terminal. studies/html_report_cost.py measures it; these tests pin the causes found with
cProfile: one SVG element per iteration, one ECDF step per iteration, a second layout draw."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_aaco.records.device import BaselineRecord
from pytest_aaco.records.item import SessionSummary
from pytest_aaco.reports import ReportContext, html_plots
from pytest_aaco.reports import html as html_report

pytestmark = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="plots need matplotlib")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "studies"))


def test_ecdf_points_keep_the_curve() -> None:
    values = np.random.default_rng(0).standard_normal(10_000)
    xs, ys = html_plots.ecdf_points(values)
    assert len(xs) <= html_plots.ECDF_POINTS and xs[0] == values.min() and xs[-1] == values.max() and ys[-1] == 1
    exact = np.searchsorted(np.sort(values), xs, side="right") / values.size
    assert np.allclose(ys, exact)
    small = np.array([3.0, 1.0, 2.0])
    assert list(html_plots.ecdf_points(small)[0]) == [1.0, 2.0, 3.0]


def test_an_item_of_10000_iterations_is_small_and_quick() -> None:
    import html_report_cost as study

    rng = np.random.default_rng(0)
    built = [study.record(i, rng) for i in range(3)]
    records = [r for r, _, _ in built]
    page = html_report.render_html(records, SessionSummary.of(records), None,
                                   baselines={nodeid: BaselineRecord.from_dict(base) for _, nodeid, base in built})
    assert "could not be drawn" not in page and page.count("<svg") >= 3 * 6
    # the CPU figure is printed by studies/html_report_cost.py (0.4 s an item on a loaded 2-core machine)
    assert len(page) / 3 < 400_000, "an item's page grew past 400 kB: one SVG element per iteration again?"


def test_many_items_say_that_the_report_is_being_drawn(tmp_path: Path) -> None:
    import html_report_cost as study

    rng = np.random.default_rng(0)
    records = [study.record(i, rng)[0] for i in range(html_report.PROGRESS_ITEMS)]
    said: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(html_report, "render_html", lambda *a, **k: "<html></html>")
        html_report.write(records, ReportContext(SessionSummary.of(records), html_path=tmp_path / "r.html",
                                                 say=lambda text, **_: said.append(text)))
    assert said[0].startswith(f"pytest-aaco: drawing the HTML report of {len(records)} items")


def test_aaco_report_says_that_the_report_is_being_drawn(tmp_path: Path, capsys, monkeypatch) -> None:
    from pytest_aaco import cli
    from tests.test_cli import item_record, run, write_bundle

    records = [item_record(f"t.py::test_a[m{i}-cpu]", 1.0) for i in range(html_report.PROGRESS_ITEMS)]
    write_bundle(tmp_path / "sessions", "20250101-000000_0000000a", records)
    monkeypatch.setattr(cli.bundles, "render_html", lambda *a, **k: "<html></html>")
    code, out, err = run(capsys, "report", "--session-dir", str(tmp_path / "sessions"), "--html",
                         str(tmp_path / "r.html"))
    assert code == 0 and f"drawing the HTML report of {len(records)} items" in err
