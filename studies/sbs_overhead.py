"""``--aaco-compare-python`` A/A on a model of a few us and one of a few ms: is the comparison biased?

    python studies/sbs_overhead.py [--runs 10] [--python PATH] [--slow] [--layout mixed:1,workers:3]
    python studies/sbs_overhead.py --smoke      # CI: 2 runs of the us model, the mechanism only

Both sides run the *same* model file through the gate's factories and
:func:`pytest_aaco.sidebyside.cycles.compare_sides` (5% threshold, spinning off, one intra-op thread).
``--layout`` (several are taken in turn in every run): ``workers:N`` (the gate's with ``--aaco-compare-python``:
both sides in fresh workers, the baseline in ``--python``'s, N pairs at the first look, default
``--aaco-compare-processes``'), ``mixed:1`` (the gate's before 2026-11-29: the baseline in one worker, the
candidate here), ``in-process`` (``--aaco-compare``). Models: ``us`` one 8x8 Gemm + Relu at batch 1 (about
5 us); ``ms`` four 512x512 Gemm + Relu at batch 64 (about 1 ms); ``--slow`` adds ``us-slow`` (one more layer)
and ``ms-slow`` (a 512x128 MatMul side branch, scaled by 1e-30 into the output: about +10%), which must read
``regression``. Prints per model and layout the outcome words (A/A target: >= 9 of 10 ``no regression``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

MODELS = {"us": ((1, 8, 1), "same"), "ms": ((4, 512, 64), "same"), "us-slow": ((1, 8, 1), "layer"),
          "ms-slow": ((4, 512, 64), "branch")}


def with_branch(model: Any, width: int, columns: int) -> Any:
    """*model* plus ``y += 1e-30 * mean(x @ W[width, columns])``: more compute, the same outputs."""
    from onnx import helper as h, numpy_helper as nh  # noqa: I001

    w = (np.random.default_rng(3).standard_normal((width, columns)) / np.sqrt(width)).astype(np.float32)
    model.graph.initializer.extend([nh.from_array(w, "sw"), nh.from_array(np.array(1e-30, np.float32), "se")])
    model.graph.node[-1].output[0] = "y0"  # the Identity that wrote y
    model.graph.node.extend([h.make_node("MatMul", ["x", "sw"], ["sm"]),
                             h.make_node("ReduceMean", ["sm"], ["sr"], keepdims=0),
                             h.make_node("Mul", ["sr", "se"], ["ss"]), h.make_node("Add", ["y0", "ss"], ["y"])])
    return model


def child(baseline: str, candidate: str, python: str, seed: int, layout: str, processes: int) -> None:
    from pytest_aaco.measure.providers import parse_provider
    from pytest_aaco.measure.registry import ModelSpec
    from pytest_aaco.sidebyside.cycles import compare_sides
    from pytest_aaco.sidebyside.sides import CompareSettings, LocalFactory
    from pytest_aaco.sidebyside.workers import WorkerFactory

    cpu, settings = parse_provider("cpu"), CompareSettings(seed=seed, processes=processes)
    entries = settings.session_config()
    local: Any = LocalFactory(Path(candidate), ModelSpec("m", f"path:{candidate}", Path(candidate)), cpu, 10,
                              "none", 0, 1, entries)
    base: Any = WorkerFactory(python, Path(baseline), cpu, local.shared_feeds, 10, "none", 0, 1, entries)
    cand = local if layout != "workers" else WorkerFactory(sys.executable, Path(candidate), cpu, local.shared_feeds,
                                                          10, "none", 0, 1, entries)
    if layout == "in-process":
        base = LocalFactory(Path(baseline), local.spec, cpu, 10, "none", 0, 1, entries)
    start = time.monotonic()
    result = compare_sides(base, cand, settings, alpha=0.05, baseline_label=python)
    seconds = time.monotonic() - start
    m = result.measurement
    per_iter = {s: float(np.exp(np.mean([c.block(s).log_mean for c in sum(m.cycles_by_pair, [])])))
                for s in ("baseline", "candidate")}
    print(json.dumps({"outcome": str(result.outcome), "ratio": float(result.comparison.ratio), "cycles": m.cycles,
                      "pairs": len(m.cycles_by_pair), "seconds": seconds, "upper": float(result.ci()[1]),
                      "per_iteration_ms": per_iter}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, default_value in (("--runs", "10"), ("--python", sys.executable), ("--models", "us,ms"),
                                ("--layout", "workers"), ("--child", None)):
        parser.add_argument(flag, default=default_value, nargs=6 if flag == "--child" else None)
    for flag in ("--slow", "--smoke"):
        parser.add_argument(flag, action="store_true")
    args = parser.parse_args()
    if args.child:
        return child(*args.child[:3], int(args.child[3]), args.child[4], int(args.child[5])) or 0
    import onnx
    from bisect_demo import mlp

    from pytest_aaco.options import default

    layouts = [(f"{spec}:{default('compare-processes')}".split(":")[0], int(f"{spec}:{default('compare-processes')}"
                .split(":")[1])) for spec in args.layout.split(",")]
    names, runs = (["us"], 2) if args.smoke else (args.models.split(",") + ["us-slow", "ms-slow"] * args.slow,
                                                  int(args.runs))
    print(f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            (layers, width, batch), kind = MODELS[name]
            base, cand = Path(tmp, f"{name}-a.onnx"), Path(tmp, f"{name}-b.onnx")
            onnx.save(mlp(layers, width, batch, seed=7), base)
            onnx.save(mlp(layers + (kind == "layer"), width, batch, 7) if kind != "branch" else
                      with_branch(mlp(layers, width, batch, 7), width, 128), cand)
            rows: dict[tuple[str, int], list[dict[str, Any]]] = {layout: [] for layout in layouts}
            for run, (layout, processes) in itertools.product(range(runs), layouts):
                out = subprocess.run([sys.executable, __file__, "--child", str(base), str(cand), args.python, str(run),
                                      layout, str(processes)], capture_output=True, text=True, check=False)
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                if out.returncode or not lines:
                    print(f"  {name} {layout}:{processes} run {run}: failed: {out.stderr[-800:]}", flush=True)
                    continue
                rows[layout, processes].append(row := json.loads(lines[-1]))
                print(f"  {name} {layout}:{processes} run {run}: {row['outcome']:<14} candidate/baseline"
                      f" {100 * (row['ratio'] - 1):+.1f}% (upper bound {100 * (row['upper'] - 1):+.1f}%),"
                      f" {row['cycles']} cycles on {row['pairs']} pair(s), {row['seconds']:.1f} s; ms per iteration"
                      f" {row['per_iteration_ms']['baseline']:.4f} / {row['per_iteration_ms']['candidate']:.4f}"
                      f" (load {os.getloadavg()[0]:.1f})", flush=True)
            for (layout, processes), got in rows.items():
                median = 100 * (float(np.median([r["ratio"] for r in got])) - 1) if got else float("nan")
                secs = float(np.median([r["seconds"] for r in got])) if got else float("nan")
                print(f"{name} {layout}:{processes}: {dict(Counter(r['outcome'] for r in got))} of {len(got)} runs;"
                      f" median candidate/baseline {median:+.1f}%; median {secs:.1f} s per run", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
