"""``aaco report BUNDLE [BUNDLE ...]``: one table, HTML page, job summary and exit status for several jobs.

Recorded bundles (tests/data/fleet/README.md says how each was made: two real CPU jobs and one GPU
job recorded by editing a real CPU bundle), and bundles pytest writes here for three shards.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from pytest_aaco.reports import merge

FLEET = Path(__file__).parent / "data" / "fleet"
CPU_A, CPU_B, GPU = (next((FLEET / job).iterdir()) for job in ("cpu-a", "cpu-b", "gpu-h100"))
GPU_KEY = "intel-r-xeon-r-platinum-8480-nvidia-h100-80gb-hbm3-16c-"


def aaco(pytester: pytest.Pytester, *args: str, timeout: float | None = None) -> pytest.RunResult:
    """The ``aaco`` command in a subprocess, as a CI step runs it."""
    return pytester.run(sys.executable, "-c", "from pytest_aaco.cli import main; raise SystemExit(main())", *args,
                        timeout=timeout)


def test_three_bundles_give_one_table_html_summary_and_exit_status(pytester):
    summary = pytester.path / "summary.md"
    summary.write_text("earlier step\n")
    result = aaco(pytester, "report", str(CPU_A), str(CPU_B), str(GPU), "--html", "fleet.html",
                  "--github-summary", str(summary))
    text = result.stdout.str()
    assert result.ret == 1, text  # cpu-b holds a regression
    result.stdout.fnmatch_lines([
        "3 session bundles, 6 item(s) on 3 runner(s):",
        f"{CPU_A.name}: runner amd-epyc-2c-* #1, 2 item(s), *LOND at FDR 0.05 over its 2 items",
        f"{CPU_B.name}: runner amd-epyc-2c-* #2, 2 item(s),*",
        "  where the time went: 14.2 s wall; collection 0.0 s, setup 0.7 s (checks at REF 0.2 s), call 13.4 s,*",
        "    items: 1 measured (13.7 s), 1 unchanged (0.4 s)",
        f"{GPU.name}: runner {GPU_KEY}*, 2 item(s),*",
        "runner*gpu*model*provider*mean ms*verdict",
    ])
    rows = [line for line in text.splitlines() if re.match(r"(amd-epyc|intel)", line)]
    assert len(rows) == 6, text
    assert sum("NVIDIA H100 80GB HBM3" in r and " cuda " in r for r in rows) == 2
    assert sum(r.startswith("amd-epyc-2c-") and "#1" in r and "inconclusive" in r for r in rows) == 2
    assert any("#2" in r and "squeezenet" in r and r.rstrip().endswith("unchanged") for r in rows)
    assert any("#2" in r and "tiny" in r and "regression (confirmed)" in r for r in rows)
    page = (pytester.path / "fleet.html").read_text()
    assert "<h2>Runners</h2>" in page and page.count('<section class="item"') == 6
    assert "tiny[cuda] @ intel-r-xeon" in page and "NVIDIA H100 80GB HBM3" in page
    markdown = summary.read_text()
    assert markdown.startswith("earlier step\n## pytest-aaco (3 jobs): 4 inconclusive, 1 regression, 1 unchanged")
    assert "### Failed (1)" in markdown and "### Runners" in markdown
    assert markdown.count("| squeezenet\\[") + markdown.count("| tiny\\[") == 6


def test_without_the_regression_the_exit_status_is_zero(pytester):
    result = aaco(pytester, "report", str(CPU_A), str(GPU))
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["2 session bundles, 4 item(s) on 2 runner(s):"])
    assert " #1" not in result.stdout.str()  # two runners: no item is duplicated on one runner


def test_a_folder_that_is_no_bundle_is_a_usage_error(pytester):
    result = aaco(pytester, "report", str(CPU_A), str(pytester.path))
    assert result.ret == 2
    result.stderr.fnmatch_lines(["aaco: error: *not a session bundle*"])


def test_runner_of_a_skipped_item_comes_from_the_environment():
    bundle = merge.load_bundle(GPU)
    measured = merge.runner_of(bundle.records[0], bundle.environment)
    assert measured[0].startswith(GPU_KEY) and measured[1] == "NVIDIA H100 80GB HBM3"
    cpu_b = merge.load_bundle(CPU_B)
    skipped = next(r for r in cpu_b.records if r.result is None)  # unchanged: no fingerprint
    assert skipped.fingerprint is None
    measured_b = next(r for r in cpu_b.records if r.result is not None)
    # the same key as the measured item's fingerprint gives (the baselines' folder name)
    assert merge.runner_of(skipped, cpu_b.environment) == merge.runner_of(measured_b, cpu_b.environment)


SHARD_REGISTRY = "models:\n" + "".join(f"  m{i}:\n    path: tiny.onnx\n" for i in range(6))


@pytest.mark.slow
def test_three_shards_merge_into_the_whole_suite(aaco_project):
    pytester = aaco_project.pytester
    aaco_project.registry(SHARD_REGISTRY)
    args = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    bundles = []
    for k in (1, 2, 3):
        folder = pytester.path / f"shard{k}"
        result = pytester.runpytest_subprocess(*args, f"--aaco-shard={k}/3", f"--aaco-session-dir={folder}",
                                               "--aaco-save-baseline")
        assert result.ret == 0, result.stdout.str()
        (bundle,) = folder.iterdir()
        bundles.append(bundle)
        assert json.loads((bundle / "session_meta.json").read_text())["cost"]["shard"] == f"{k}/3"
    result = aaco(pytester, "report", *map(str, bundles))
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["3 session bundles, 6 item(s) on 1 runner(s):"])
    rows = [line for line in result.stdout.str().splitlines() if re.match(r"\S+-\d+c-[0-9a-f]{8}\s", line)]
    assert sorted(r.split()[2] for r in rows) == [f"m{i}" for i in range(6)]  # each item once, no '#'
    shutil.rmtree(pytester.path / "baselines", ignore_errors=True)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX special files")
def test_a_summary_fifo_without_a_reader_is_refused_at_once(pytester):
    """``--github-summary`` goes through the same writer as the session's job summary (jsonio.append_text):
    a FIFO nobody reads used to block ``aaco report`` for ever."""
    fifo = pytester.path / "summary.pipe"
    os.mkfifo(fifo)
    # a blocked open would hang to the timeout (an error); the refusal's words say the open did not wait
    result = aaco(pytester, "report", str(CPU_A), "--github-summary", str(fifo), timeout=120)
    assert "--github-summary" in result.stderr.str() + result.stdout.str()
    assert "FIFO that no process is reading" in result.stderr.str() + result.stdout.str()
    assert result.ret not in (0, 1), result.stdout.str()


def test_the_runners_block_escapes_control_characters(pytester):
    """The merged page's runner lines come from bundle files; they are escaped by markup.e like every
    other file-derived text (before: html.escape, which kept a raw ESC from session_meta.json)."""
    copy = pytester.path / "jobs" / CPU_A.name
    shutil.copytree(CPU_A, copy)
    meta = json.loads((copy / "session_meta.json").read_text())
    meta["started_at"] = "2026-11-27 \x1b[31m<b>"
    (copy / "session_meta.json").write_text(json.dumps(meta))
    result = aaco(pytester, "report", str(copy), str(CPU_B), "--html", "fleet.html")
    page = (pytester.path / "fleet.html").read_text()
    assert "<h2>Runners</h2>" in page, result.stdout.str()
    assert "\x1b" not in page and "\\x1b[31m&lt;b&gt;" in page
