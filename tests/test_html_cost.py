"""The HTML report stays cheap per item: 300 items used to take 418 s of CPU (about 1.4 s each) with no
word on the terminal. The html_report_cost.py study (in git history at commit 7ecd489; its figure is in
studies/RESULTS.md) measured it; these tests pin the causes found with cProfile: one SVG element per
iteration, one ECDF step per iteration, a second layout draw."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from pytest_aaco.records.device import BaselineRecord
from pytest_aaco.records.item import ItemRecord, SessionSummary
from pytest_aaco.reports import ReportContext, html_plots
from pytest_aaco.reports import html as html_report

pytestmark = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="plots need matplotlib")


def record(index: int, rng: np.random.Generator, rounds: int = 10,
           iterations: int = 1000) -> tuple[ItemRecord, str, dict]:
    """An item record shaped as a real session writes it (10 rounds of 1000 measured iterations, warmup
    latencies, a verdict against a 20-run history, CPU telemetry samples), its nodeid and its baseline."""
    mean = 1.0 + index % 7
    lat = [list(mean * np.exp(0.03 * rng.standard_normal(iterations))) for _ in range(rounds)]
    round_rows = [{"index": i, "n": iterations, "mean_ms": float(np.mean(x)), "log_mean": float(np.mean(np.log(x))),
                   "start_ns": i * 10**9, "end_ns": i * 10**9 + 5 * 10**8} for i, x in enumerate(lat)]
    samples = [{"t_ns": t * 10**8, "cpu_percent": 50 + 10 * np.sin(t), "rss_mb": 300 + t * 0.01} for t in range(200)]
    history = [{"run_mean_ms": mean * (1 + 0.01 * rng.standard_normal()),
                "rounds": [{"mean_ms": m, "log_mean": float(np.log(m)), "n": 1000}
                           for m in mean * (1 + 0.02 * rng.standard_normal(10))],
                "recorded_at": f"2025-01-{1 + k % 28:02d}T00:00:00+00:00"} for k in range(20)]
    nodeid = f"tests/perf/test_models.py::test_latency[model{index}-cpu]"
    return ItemRecord.from_dict({
        "nodeid": nodeid, "model": f"model{index}", "provider": "cpu", "label": f"model{index}[cpu]",
        "result": {"summary": {"mean_ms": mean, "p50_ms": mean, "p99_ms": mean * 1.2, "throughput": 1000 / mean},
                   "rounds": round_rows, "latencies_ms": lat,
                   "warmup_latencies_ms": list(mean * 2 * np.ones(10)),
                   "telemetry": {"start_ns": 0, "samplers": {"process": {"samples": samples}}, "summary": {}}},
        "verdict": {"outcome": "no-regression", "message": f"model{index}[cpu]: +0.3%", "ratio": 1.003,
                    "ci_low": 0.99, "ci_high": 1.01, "p_value": 0.4, "threshold": 0.05, "fails": False,
                    "unstable": [], "memory": [], "baseline_runs": 20},
        "fingerprint": {"cpu_model": "X"}, "outcome": "passed", "error": None,
    }), nodeid, {"history": history, "latest_latencies_ms": lat[:3]}


def test_ecdf_points_keep_the_curve() -> None:
    values = np.random.default_rng(0).standard_normal(10_000)
    xs, ys = html_plots.ecdf_points(values)
    assert len(xs) <= html_plots.ECDF_POINTS and xs[0] == values.min() and xs[-1] == values.max() and ys[-1] == 1
    exact = np.searchsorted(np.sort(values), xs, side="right") / values.size
    assert np.allclose(ys, exact)
    small = np.array([3.0, 1.0, 2.0])
    assert list(html_plots.ecdf_points(small)[0]) == [1.0, 2.0, 3.0]


def test_an_item_of_10000_iterations_is_small_and_quick() -> None:
    rng = np.random.default_rng(0)
    built = [record(i, rng) for i in range(3)]
    records = [r for r, _, _ in built]
    page = html_report.render_html(records, SessionSummary.of(records), None,
                                   baselines={nodeid: BaselineRecord.from_dict(base) for _, nodeid, base in built})
    assert "could not be drawn" not in page and page.count("<svg") >= 3 * 6
    # the CPU figure (0.4 s an item on a loaded 2-core machine) is a lab note: studies/RESULTS.md
    assert len(page) / 3 < 400_000, "an item's page grew past 400 kB: one SVG element per iteration again?"


def test_many_items_say_that_the_report_is_being_drawn(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    records = [record(i, rng)[0] for i in range(html_report.PROGRESS_ITEMS)]
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
