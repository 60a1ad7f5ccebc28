"""``--aaco-compare-python`` A/A on a model of a few us and one of a few ms: is the worker side biased?

    python studies/sbs_overhead.py [--runs 10] [--python PATH] [--slow] [--layout mixed:1,workers:3]
    python studies/sbs_overhead.py --smoke           # CI: 2 runs of the us model, the mechanism only

Both sides run the *same* model file, built by the factories the plugin's side-by-side gate builds
and compared with :func:`pytest_aaco.sidebyside.cycles.compare_sides` at the default threshold (5%)
with the gate's session configuration (intra-op spinning off, one intra-op thread). ``--layout``
(several, comma-separated, are taken in turn in every run, so the load hits them alike):

* ``workers`` (the gate's with ``--aaco-compare-python``): the baseline in fresh worker processes of
  ``--python`` (default this interpreter), the candidate in fresh workers of this interpreter
  (:class:`pytest_aaco.sidebyside.cycles.WorkerFactory` both), ``workers:N``: N pairs at the first look
  (default: ``--aaco-compare-processes``' default), the process pair as the test's session level;
* ``mixed`` (the gate's before 2026-11-29 as ``mixed:1``): the baseline in a worker, the candidate in this
  process (:class:`~pytest_aaco.sidebyside.sides.LocalFactory`);
* ``in-process`` (``--aaco-compare`` without ``-python``): both sides in this process, fresh sessions.

Every run is a fresh child process. Models (seeded weights): ``us``: one 8x8 Gemm + Relu at batch 1
(a few us per run); ``ms``: four 512x512 Gemm + Relu at batch 64 (about 1 ms). ``--slow`` adds
``us-slow`` (the candidate has one more Gemm + Relu layer) and ``ms-slow`` (the candidate adds a
side branch of one 512x205 MatMul whose result, scaled by 1e-30, is added to the output: about +10%
of the compute, outputs unchanged); both must read ``regression``.

Prints, per model: the outcome words of the runs (target: ``no regression`` in >= 9 of 10 for the A/A),
the median over runs of the paired ratio candidate / baseline (per cent; 0 = no bias), and the median
seconds per run (opening the sides, the cycles and a confirmation). Exit status 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: name -> (layers, width, batch) of the baseline's model, and the candidate: "same", "layer" (one
#: more layer) or "branch" (a side branch of about +10% compute)
MODELS = {"us": ((1, 8, 1), "same"), "ms": ((4, 512, 64), "same"), "us-slow": ((1, 8, 1), "layer"),
          "ms-slow": ((4, 512, 64), "branch")}
LAYOUTS = ("workers", "mixed", "in-process")


def with_branch(model: Any, width: int, columns: int) -> Any:
    """*model* (``x -> ... -> y``) plus ``y += 1e-30 * mean(x @ W[width, columns])``: more compute, the
    same outputs (the side-branch trick of ../shared/tools/slow_model.py, for a 2-D input)."""
    from onnx import helper, numpy_helper

    g = model.graph
    w = np.random.default_rng(3).standard_normal((width, columns)).astype(np.float32) / np.sqrt(width)
    g.initializer.extend([numpy_helper.from_array(w, "side_w"), numpy_helper.from_array(np.array(1e-30, np.float32),
                                                                                          "side_eps")])
    g.node[-1].output[0] = "y_pre"  # the Identity that wrote y
    g.node.extend([helper.make_node("MatMul", ["x", "side_w"], ["side_m"]),
                   helper.make_node("ReduceMean", ["side_m"], ["side_r"], keepdims=0),
                   helper.make_node("Mul", ["side_r", "side_eps"], ["side_s"]),
                   helper.make_node("Add", ["y_pre", "side_s"], ["y"])])
    return model


def child(baseline: str, candidate: str, python: str, seed: int, layout: str, processes: int) -> None:
    import time

    from pytest_aaco.measure.providers import parse_provider
    from pytest_aaco.measure.registry import ModelSpec
    from pytest_aaco.sidebyside.cycles import WorkerFactory, compare_sides
    from pytest_aaco.sidebyside.sides import CompareSettings, LocalFactory

    cpu = parse_provider("cpu")
    settings = CompareSettings(seed=seed, processes=processes)
    entries = settings.session_config()
    spec = ModelSpec("m", f"path:{candidate}", Path(candidate))
    local = LocalFactory(Path(candidate), spec, cpu, 10, "none", 0, 1, entries)
    base: Any = WorkerFactory(python, Path(baseline), cpu, local.shared_feeds, 10, "none", 0, 1, entries)
    cand: Any = local
    if layout == "workers":
        cand = WorkerFactory(sys.executable, Path(candidate), cpu, local.shared_feeds, 10, "none", 0, 1, entries)
    elif layout == "in-process":
        base = LocalFactory(Path(baseline), ModelSpec("m", f"path:{baseline}", Path(baseline)), cpu, 10, "none", 0,
                            1, entries)
    start = time.monotonic()
    result = compare_sides(base, cand, settings, alpha=0.05, baseline_label=python)
    seconds = time.monotonic() - start
    per_iter = {s: float(np.exp(np.mean([c.block(s).log_mean for cs in result.measurement.cycles_by_pair
                                         for c in cs]))) for s in ("baseline", "candidate")}
    print(json.dumps({"outcome": str(result.outcome), "ratio": float(result.comparison.ratio),
                      "cycles": int(sum(len(cs) for cs in result.measurement.cycles_by_pair)),
                      "pairs": len(result.measurement.cycles_by_pair), "seconds": seconds,
                      "upper": float(result.ci()[1]), "per_iteration_ms": per_iter}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--python", default=sys.executable, help="the worker's interpreter (default: this one)")
    parser.add_argument("--models", default="us,ms")
    parser.add_argument("--slow", action="store_true", help="also us-slow and ms-slow")
    parser.add_argument("--smoke", action="store_true", help="2 runs of the us model")
    parser.add_argument("--layout", default="workers", help="LAYOUT[:PROCESSES],...: taken in turn in every run")
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child[:3], int(args.child[3]), args.child[4], int(args.child[5]))
        return 0
    import onnx
    from bisect_demo import mlp

    from pytest_aaco.options import default

    layouts = [(spec.split(":")[0], int(spec.split(":")[1]) if ":" in spec else int(default("compare-processes")))
               for spec in args.layout.split(",")]
    if any(name not in LAYOUTS for name, _ in layouts):
        parser.error(f"--layout: one of {', '.join(LAYOUTS)}, each with an optional :PROCESSES")
    names = ["us"] if args.smoke else args.models.split(",") + (["us-slow", "ms-slow"] if args.slow else [])
    runs = 2 if args.smoke else args.runs
    print(f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            (layers, width, batch), kind = MODELS[name]
            base, cand = Path(tmp, f"{name}-a.onnx"), Path(tmp, f"{name}-b.onnx")
            onnx.save(mlp(layers, width, batch, seed=7), base)
            onnx.save(mlp(layers + 1, width, batch, seed=7) if kind == "layer" else
                      with_branch(mlp(layers, width, batch, 7), width, 205) if kind == "branch" else
                      mlp(layers, width, batch, 7), cand)
            rows: dict[tuple[str, int], list[dict[str, Any]]] = {layout: [] for layout in layouts}
            for run, (layout, processes) in itertools.product(range(runs), layouts):
                out = subprocess.run([sys.executable, __file__, "--child", str(base), str(cand), args.python, str(run),
                                      layout, str(processes)], capture_output=True, text=True, check=False)
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                if out.returncode or not lines:
                    print(f"  {name} {layout}:{processes} run {run}: failed: {out.stderr[-800:]}", flush=True)
                    continue
                row = json.loads(lines[-1])
                rows[layout, processes].append(row)
                print(f"  {name} {layout}:{processes} run {run}: {row['outcome']:<14} candidate/baseline"
                      f" {100 * (row['ratio'] - 1):+.1f}% (upper bound {100 * (row['upper'] - 1):+.1f}%) over"
                      f" {row['cycles']} cycles on {row['pairs']} pair(s), {row['seconds']:.1f} s; per iteration ms"
                      f" {row['per_iteration_ms']['baseline']:.4f} / {row['per_iteration_ms']['candidate']:.4f}"
                      f" (load {os.getloadavg()[0]:.1f})", flush=True)
            for (layout, processes), got in rows.items():
                median = 100 * (float(np.median([r["ratio"] for r in got])) - 1) if got else float("nan")
                secs = float(np.median([r["seconds"] for r in got])) if got else float("nan")
                print(f"{name} {layout}:{processes}: {dict(Counter(r['outcome'] for r in got))} of {len(got)} runs;"
                      f" median candidate/baseline {median:+.1f}%; median {secs:.1f} s per run", flush=True)
    print(f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
