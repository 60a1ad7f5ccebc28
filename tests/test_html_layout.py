"""The HTML report as a person sees it (issue 21): failing items first, both sides' figures and
distributions in ``--aaco-compare`` mode, readable axis labels, a telemetry plot that its first
sample does not flatten; and, rendered in a real headless Chromium at 1400 and 400 px wide, no
page that scrolls sideways, a verdict column in view and plots that stack on a narrow screen.

The browser is Debian's ``chromium`` driven by Playwright from PyPI (``executable_path``: no
browser download). ``.ci/run`` installs the Debian package when it can; where no Chromium can be
had, the browser tests skip and say why.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_aaco.records.device import BaselineRecord
from pytest_aaco.records.item import ItemRecord, SessionSummary
from pytest_aaco.reports import html as html_report

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
needs_matplotlib = pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="the plots need matplotlib")


def _chromium() -> str | None:
    """The Chromium executable: ``AACO_CHROMIUM``, else Debian's ``chromium`` on the PATH."""
    given = os.environ.get("AACO_CHROMIUM")
    if given:
        return given
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _round(n: int, mean: float, rng: np.random.Generator) -> list[float]:
    return list(np.round(mean * np.exp(0.03 * rng.standard_normal(n)), 6))


def _result(mean: float, rounds: int, seed: int, telemetry: dict | None = None) -> dict:
    rng = np.random.default_rng(seed)
    lat = [_round(40, mean, rng) for _ in range(rounds)]
    flat = [x for r in lat for x in r]
    return {"summary": {"mean_ms": float(np.mean(flat)), "p50_ms": float(np.median(flat)),
                        "p99_ms": float(np.percentile(flat, 99)), "throughput": 1000 / float(np.mean(flat)),
                        "rounds": rounds, "measure_iterations": len(flat)},
            "rounds": [{"n": len(r), "mean_ms": float(np.mean(r)), "log_mean": float(np.mean(np.log(r)))} for r in lat],
            "latencies_ms": lat, "warmup_latencies_ms": [mean * 3, mean * 1.5], "telemetry": telemetry or {}}


def _telemetry(start_ns: int, seconds: int = 6) -> dict:
    # psutil's first process_cpu_percent covers the time before the phase: 5515.8% on 2 cores
    samples = [{"t_ns": start_ns + i * 500_000_000, "process_cpu_percent": 5515.8 if i == 0 else 95.0 + i % 3,
                "rss_mb": 120.0 + i * 0.01} for i in range(seconds * 2)]
    return {"start_ns": start_ns, "samplers": {"system": {"samples": samples}},
            "summary": {"rss_mb": {"mean": 120.0, "max": 120.1}}}


def page_records() -> tuple[list[ItemRecord], dict]:
    """Three items in run order: one that passed, one that failed side by side (both sides'
    blocks recorded) and one gated on a history of 6 runs; and that item's baseline file."""
    start = 10_000_000_000
    passed = {
        "nodeid": "tests/perf/test_models.py::test_latency[a-very-long-model-name-for-a-narrow-screen-cpu]",
        "model": "a-very-long-model-name-for-a-narrow-screen", "provider": "cpu",
        "label": "a-very-long-model-name-for-a-narrow-screen[cpu]", "result": _result(2.0, 5, 1),
        "verdict": {"outcome": "no-regression", "label": "x", "threshold": 0.05, "ratio": 1.01, "ci_low": 0.98,
                    "ci_high": 1.03, "p_value": 0.3, "series": "raw", "raw_ratio": 1.01,
                    "baseline_path": "/nowhere/b.json", "message": "no regression"},
        "outcome": "passed"}
    blocks = [[start + i * 400_000_000, start + i * 400_000_000 + 150_000_000] for i in range(12)]
    windows = {"baseline": blocks[0::2], "candidate": blocks[1::2]}
    base_side = _result(5.0, 6, 2)
    failed = {
        "nodeid": "tests/perf/test_models.py::test_latency[resnet50-cpu]", "model": "resnet50", "provider": "cpu",
        "label": "resnet50[cpu]", "result": _result(6.0, 6, 3, _telemetry(start)),
        "verdict": {"outcome": "regression", "label": "resnet50[cpu]", "threshold": 0.05, "ratio": 1.2,
                    "ci_low": 1.15, "ci_high": 1.25, "p_value": 1e-5, "fails": True, "method": "side-by-side",
                    "current_mean_ms": 6.0, "baseline_mean_ms": 5.0,
                    "message": "REGRESSION resnet50[cpu]: latency +20.0% paired vs origin/main",
                    "side_by_side": {"ref": "origin/main", "cycles": 6, "outcome": "regression",
                                     "ratios": [[1.2, 1.19, 1.21, 1.2, 1.22, 1.18]],
                                     "baseline_side": {"summary": base_side["summary"],
                                                       "rounds": base_side["rounds"],
                                                       "latencies_ms": base_side["latencies_ms"],
                                                       "windows": windows}}},
        "outcome": "failed"}
    history = [{"timestamp": f"2026-11-{20 + i:02d}T0{i}:1{i}:00+00:00", "summary": {"mean_ms": 3.0},
                "rounds": _result(3.0 * (1 + 0.01 * i), 4, 10 + i)["rounds"]} for i in range(6)]
    gated = {
        "nodeid": "tests/perf/test_models.py::test_latency[mlp-cpu]", "model": "mlp", "provider": "cpu",
        "label": "mlp[cpu]", "result": _result(30.0, 5, 4),  # a slow run: a log axis over 3 to 30 ms
        "verdict": {"outcome": "inconclusive", "label": "mlp[cpu]", "threshold": 0.05, "ratio": 1.116,
                    "ci_low": 0.9, "ci_high": 1.4, "p_value": 0.2, "series": "adjusted", "raw_ratio": 1.3,
                    "baseline_runs": 6, "baseline_path": "/b/mlp.json", "message": "inconclusive mlp[cpu]"},
        "outcome": "passed"}
    records = [ItemRecord.from_dict(r) for r in (passed, failed, gated)]
    baseline = {"history": history, "latest_latencies_ms": _result(3.0, 2, 9)["latencies_ms"]}
    return records, {gated["nodeid"]: BaselineRecord.from_dict(baseline)}


@pytest.fixture(scope="module")
def page() -> str:
    records, baselines = page_records()
    return html_report.render_html(records, SessionSummary.of(records), None, baselines=baselines)


# ---------------------------------------------------------------- the page's content


def test_failing_items_come_first(page: str):
    sections = re.findall(r'<section class="item" id="item-([^"]+)"', page)
    assert sections[0].endswith("resnet50-cpu") and sections[1].endswith("mlp-cpu")  # failed, then inconclusive
    overview = page[page.index('<table class="overview">'):]
    assert overview.index("resnet50[cpu]") < overview.index("mlp[cpu]") < overview.index("a-very-long")


def test_compare_mode_shows_the_baseline_side(page: str):
    section = page[re.search(r'<section class="item" id="item-[^"]*resnet50-cpu"', page).start():]
    section = section[:section.index("</section>")]
    figures = section[section.index("<h3>Figures</h3>"):section.index("<h3>Verdict</h3>")]
    assert "baseline side (origin/main)" in figures and "vs baseline side" in figures
    mean_row = re.search(r"<th>mean</th><td[^>]*>([^<]+)</td><td[^>]*>([^<]+)</td>", figures)
    assert mean_row and mean_row.group(2).strip() != "-", figures  # before: the baseline column was all "-"
    assert "baseline runs" not in section  # before: "baseline runs 0" beside a baseline mean
    if HAVE_MATPLOTLIB:
        assert "baseline side (origin/main) (n=240)" in section  # the histogram has both sides
        assert section.count("this side") >= 3


def test_every_change_in_the_page_is_labelled(page: str):
    assert "+11.6% adjusted [-10.0, +40.0]; raw +30.0%" in page
    assert "+20.0% paired [+15.0, +25.0]" in page
    assert "change (adjusted)" in page and "change (raw)" in page
    assert "change (vs latest run)" in page or "change (vs baseline side)" in page
    assert "change (ratio - 1)" not in page


@needs_matplotlib
def test_axis_labels_are_plain_and_runs_are_told_apart(page: str):
    assert "10^" not in page and "\\times" not in page and "×10" not in page  # no 6×10^0 labels
    for label in ("#1 11-20 00:10", "#6 11-25 05:15"):  # before: every run was "11-2x"
        assert label in page


@needs_matplotlib
def test_the_first_telemetry_sample_does_not_flatten_the_plot(page: str):
    assert "process_cpu_percent (first sample 5516 not shown)" in page


# ---------------------------------------------------------------- the page in a real browser


LAYOUT_JS = """() => {
  const vw = window.innerWidth;
  const head = [...document.querySelectorAll('table.overview th')].find(th => th.textContent === 'verdict');
  const hr = head.getBoundingClientRect();
  const plots = [...document.querySelector('section.item .plots.latency').querySelectorAll(':scope > .plot')]
    .map(p => p.getBoundingClientRect()).map(r => ({left: r.left, top: r.top, width: r.width}));
  return {vw, pageWidth: document.documentElement.scrollWidth, verdictLeft: hr.left, verdictRight: hr.right,
          plots};
}"""


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium here: install Debian's chromium package (apt-get install chromium), as .ci/run does")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="Playwright is in the dev extra: pip install -e .[dev]")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


def _layout(browser, path: Path, width: int, shot: Path | None = None) -> dict:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(path.as_uri())
    found = page.evaluate(LAYOUT_JS)
    if shot is not None:
        page.screenshot(path=str(shot), full_page=False)
    page.close()
    return found


@needs_matplotlib
@pytest.mark.parametrize("width", [1400, 400])
def test_the_page_fits_the_screen(browser, page: str, tmp_path: Path, width: int):
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    found = _layout(browser, path, width, Path(os.environ["AACO_SCREENSHOTS"]) / f"report-{width}.png"
                    if os.environ.get("AACO_SCREENSHOTS") else None)
    assert found["pageWidth"] <= found["vw"], found  # the page never scrolls sideways; tables scroll in their box
    assert 0 <= found["verdictLeft"] and found["verdictRight"] <= found["vw"], found  # the verdict column is in view
    plots = found["plots"]
    assert len(plots) == 4
    if width == 400:  # stacked, each as wide as the section, not thumbnails side by side
        assert len({round(p["left"]) for p in plots}) == 1, plots
        assert all(b["top"] > a["top"] for a, b in zip(plots, plots[1:], strict=False)), plots
        assert all(p["width"] > 0.8 * (found["vw"] - 60) for p in plots), plots
    else:  # side by side
        assert plots[0]["top"] == plots[1]["top"] and plots[1]["left"] > plots[0]["left"], plots
