"""``aaco trends``: the history page from real baseline files and session bundles.

Baseline files are written by the real writer (:func:`pytest_aaco.history.store.save_run`) from
seeded results; the change-point test is checked against ``scipy.stats.ttest_ind``; the page is
rendered in a real headless Chromium (Debian's, through Playwright) at desktop and phone widths.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.store import baseline_path, save_run
from pytest_aaco.reports import trends
from tests.test_html_layout import _chromium

NODE = "tests/perf/test_models.py::test_latency[resnet50-cpu]"
FIELDS = {"model_sha256": "aa" * 32, "provider": "CPUExecutionProvider", "ort_version": "1.31.1",
          "cpu_model": "AMD EPYC", "cpu_cores": 2, "gpu_name": None, "intra_op_threads": 0,
          "input_shapes": {"x": [1, 64]}, "env": {}}
AACO = [sys.executable, "-c", "import sys; from pytest_aaco.cli import main; sys.exit(main())"]


def aaco(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AACO, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def save_history(folder: Path, result_factory, means: list[float], cores: int = 2, node: str = NODE) -> Path:
    """One saved run per entry of *means* (ms; 5 rounds of 20 iterations, 1% noise, seeded)."""
    fp = Fingerprint({**FIELDS, "cpu_cores": cores})
    path = baseline_path(folder, fp.machine_key, node)
    for i, mean in enumerate(means):
        extra = {"commit_info": {"id": f"{i + 1:02d}" + "c" * 38, "branch": "main", "dirty": False}}
        save_run(path, node, fp, result_factory([mean] * 5, noise=0.01, seed=i), extra=extra)
    return path


STEP = [10.0, 10.1, 9.9, 10.05, 9.95, 11.5, 11.6, 11.45, 11.55, 11.5]  # +15% from run 6 on


def test_a_step_is_one_change_point_tested_as_scipy_tests_it():
    rng = np.random.default_rng(0)
    logs = list(np.log(STEP) + 0.005 * rng.standard_normal(10))
    found = trends.change_points(logs, threshold=0.05)
    assert [c.index for c in found] == [5]
    candidates = len(range(2, 10 - 2 + 1))  # splits leaving at least 2 runs on each side
    expected = scipy.stats.ttest_ind(logs[5:], logs[:5], equal_var=False).pvalue * candidates
    assert found[0].p == pytest.approx(expected)
    assert found[0].ratio == pytest.approx(math.exp(np.mean(logs[5:]) - np.mean(logs[:5])))


def test_a_point_is_the_runs_level_as_the_gate_compares_runs():
    """A run of 8 rounds at 10 ms, 3 of them in a slow phase (13 ms): its point is the geometric mean of its
    fastest quarter of rounds (2), with the t-interval over those two, not the mean of all 8."""
    logs = [math.log(v) for v in (10.0, 10.1, 13.0, 10.2, 13.0, 9.9, 13.0, 10.05)]
    point = trends.run_point([{"log_mean": v} for v in logs], "2026-11-29T00:00:00Z", None, None, "b.json")
    assert point is not None
    kept = sorted(logs)[:2]
    assert point.mean_ms == pytest.approx(math.exp(np.mean(kept)))
    half = scipy.stats.t.ppf(0.975, 1) * np.std(kept, ddof=1) / math.sqrt(2)
    assert point.low_ms == pytest.approx(math.exp(np.mean(kept) - half))
    assert point.mean_ms < 10.0 < math.exp(np.mean(logs))


def test_noise_and_small_steps_are_not_change_points():
    rng = np.random.default_rng(1)
    assert trends.change_points(list(0.02 * rng.standard_normal(12)), threshold=0.05) == []
    small = list(np.log([10.0] * 5 + [10.2] * 5) + 0.001 * rng.standard_normal(10))  # +2%: significant, too small
    assert trends.change_points(small, threshold=0.05) == []
    assert [c.index for c in trends.change_points(small, threshold=0.01)] == [5]


def test_the_page_shows_the_series_and_marks_the_change(tmp_path, result_factory):
    save_history(tmp_path / "baselines", result_factory, STEP)
    done = aaco("trends", "--baseline-dir", "baselines", "--out", "site", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 series, 1 change point(s)" in done.stdout
    assert f"{NODE} [" in done.stdout and "]: latency +15." in done.stdout
    assert "at run 6 (commit 06cccccccc)" in done.stdout
    page = (tmp_path / "site" / "index.html").read_text()
    assert page.count('class="point"') == 10 and page.count('class="change-line"') == 1
    assert "run 6: latency +15." in page and "06cccccccc" in page
    assert "http://" not in page and "https://" not in page and "<script src" not in page  # offline


def test_no_history_says_so_and_where_it_looked(tmp_path):
    (tmp_path / "empty").mkdir()
    done = aaco("trends", "--baseline-dir", "empty", "--out", "site", cwd=tmp_path)
    assert done.returncode == 0 and "no history: no saved run or session bundle in empty" in done.stdout
    page = (tmp_path / "site" / "index.html").read_text()
    assert 'id="no-history"' in page and "No history yet." in page and "--aaco-save-baseline" in page


def test_a_damaged_baseline_is_named_and_the_rest_is_drawn(tmp_path, result_factory):
    good = save_history(tmp_path / "baselines", result_factory, STEP[:4])
    (good.parent / "broken-0123456789.json").write_text("{not json")
    done = aaco("trends", "--baseline-dir", "baselines", "--out", "site", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "skipped: " in done.stdout and "broken-0123456789.json" in done.stdout and "Traceback" not in done.stderr
    assert "1 series" in done.stdout
    done = aaco("trends", "--baseline-dir", "nowhere", cwd=tmp_path)
    assert done.returncode == 2 and "nowhere" in done.stderr and "no such folder" in done.stderr


@pytest.mark.slow
def test_session_bundles_add_their_gated_runs(aaco_project):
    """A real plugin run: two saves and one gate; the trends page from the baseline folder and the
    session folder has the three runs, the saved ones once."""
    args = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    for extra in (["--aaco-save-baseline"], ["--aaco-save-baseline"], []):
        aaco_project.pytester.runpytest(*args, *extra).assert_outcomes(passed=1)
    root = aaco_project.pytester.path
    done = aaco("trends", "--baseline-dir", "baselines", "--session-dir", ".aaco/sessions", "--out", "site", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "1 series" in done.stdout, done.stdout
    assert (root / "site" / "index.html").read_text().count('class="point"') == 3


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium here: install Debian's chromium package (apt-get install chromium), as .ci/run does")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is in the test extra")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


LAYOUT = """() => ({vw: window.innerWidth, pageWidth: document.documentElement.scrollWidth,
  charts: [...document.querySelectorAll('section.series:not([hidden]) svg')].map(s => s.getBoundingClientRect().width),
  changes: document.querySelectorAll('section.series:not([hidden]) .change-line').length,
  shown: document.querySelectorAll('section.series:not([hidden])').length})"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_page_in_a_browser_fits_and_filters(browser, tmp_path, result_factory, width):
    save_history(tmp_path / "baselines", result_factory, STEP)
    save_history(tmp_path / "baselines", result_factory, [10.0] * 6, cores=8)  # another runner, flat
    assert aaco("trends", "--baseline-dir", "baselines", "--out", "site", cwd=tmp_path).returncode == 0
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto((tmp_path / "site" / "index.html").as_uri())
    found = page.evaluate(LAYOUT)
    assert found["pageWidth"] <= found["vw"], found  # never scrolls sideways
    assert found["shown"] == 2 and found["changes"] == 1
    assert all(w > 0.8 * (min(width, 1200) - 60) for w in found["charts"]), found
    runner = Fingerprint({**FIELDS, "cpu_cores": 8}).machine_key
    page.select_option("#runner", runner)
    found = page.evaluate(LAYOUT)
    assert found["shown"] == 1 and found["changes"] == 0, found
    assert page.inner_text("#shown") == "1"
    page.close()
