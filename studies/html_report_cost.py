"""CPU time of the HTML report (``--aaco-html`` / ``aaco report --html``) per item.

Builds N synthetic item records shaped as a real session writes them (10 rounds of 1000 measured
iterations, warmup latencies, a verdict against a baseline with a 20-run history, CPU telemetry
samples) and renders the page with :func:`pytest_aaco.reports.html.render_html`, timing it with
``time.process_time``. ``--profile`` prints the 25 most expensive functions (cProfile, cumulative).

Run: ``python studies/html_report_cost.py --items 30 [--profile]`` (``AACO_SOURCE=<checkout>`` measures
another checkout of pytest-aaco, e.g. the code before a change)
Prints: ``items=30 cpu_s=... per_item_s=... bytes=...``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.environ.get("AACO_SOURCE") or str(Path(__file__).resolve().parent.parent))

from pytest_aaco.records.device import BaselineRecord
from pytest_aaco.records.item import ItemRecord, SessionSummary  # noqa: E402
from pytest_aaco.reports.html import render_html  # noqa: E402


def record(index: int, rng: np.random.Generator, rounds: int = 10, iterations: int = 1000) -> ItemRecord:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.items = 2
    rng = np.random.default_rng(0)
    built = [record(i, rng) for i in range(args.items)]
    records = [r for r, _, _ in built]
    baselines = {nodeid: BaselineRecord.from_dict(base) for _, nodeid, base in built}
    summary = SessionSummary.of(records)
    profiler = cProfile.Profile() if args.profile else None
    start = time.process_time()
    if profiler:
        profiler.enable()
    page = render_html(records, summary, None, baselines=baselines)
    if profiler:
        profiler.disable()
    cpu = time.process_time() - start
    print(f"items={args.items} cpu_s={cpu:.2f} per_item_s={cpu / args.items:.3f} bytes={len(page)}")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
