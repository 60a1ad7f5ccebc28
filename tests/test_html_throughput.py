"""The HTML's side-by-side statistics table gives each side's throughput at that side's own batch size
(issue 43: an unchanged model read 392.5/s on the baseline side against 8221.6/s on this side,
``+1994.7%``, because the baseline side's batch size was taken as 1).

End to end: a git project whose model has a batch of 8, changed only cosmetically, gated with
``--aaco-compare=HEAD~1``; real ONNX Runtime on both sides. No timing is asserted: each side's
throughput must be ``8 * 1000 / mean ms`` of the figures the same table prints, so the two sides'
throughputs stand in the inverse ratio of their means whatever the machine's load.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import onnx
import pytest

from tests.conftest import make_tiny_model

BATCH = 8


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _row(page: str, name: str) -> tuple[float, float]:
    """This side's and the baseline side's figures in the statistics table's row *name*."""
    found = re.search(rf"<tr><th>{name}</th><td class=\"num\">([\d.]+) [^<]*</td><td class=\"num\">([\d.]+) ", page)
    assert found, page[:2000]
    return float(found.group(1)), float(found.group(2))


@pytest.mark.slow
def test_an_unchanged_batched_model_shows_both_sides_throughput_at_their_batch_size(aaco_project):
    root = aaco_project.pytester.path
    # about 0.5 ms a run: the table prints the mean with 3 decimals
    make_tiny_model(root / "batched.onnx", layers=4, width=512, batch=BATCH)
    aaco_project.registry("models:\n  batched:\n    path: batched.onnx\n")
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    model = onnx.load(str(root / "batched.onnx"))
    model.doc_string = "same compute, different bytes"
    onnx.save(model, str(root / "batched.onnx"))
    git(root, "commit", "-qam", "cosmetic")

    result = aaco_project.run_subprocess("--aaco-compare=HEAD~1", "--aaco-compare-unchanged=measure",
                                         "--aaco-html=perf.html", "--aaco-threshold=50%", "--aaco-intra-op-threads=1",
                                         "--aaco-compare-budget=20", timeout=300)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    page = (root / "perf.html").read_text(encoding="utf-8")
    assert "baseline side (" in page  # measured side by side: the table compares the two sides
    this_mean, base_mean = _row(page, "mean")
    this_tp, base_tp = _row(page, "throughput")
    # each side: samples per s = batch * 1000 / its mean (ms), to the table's rounding
    assert this_tp == pytest.approx(BATCH * 1000 / this_mean, rel=0.01)
    assert base_tp == pytest.approx(BATCH * 1000 / base_mean, rel=0.01)
    # so the throughput change is the inverse of the latency change, never the batch size's factor
    assert this_tp / base_tp == pytest.approx(base_mean / this_mean, rel=0.02)
