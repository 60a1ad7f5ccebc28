"""``--aaco-compare-python`` A/A on a model of a few us and one of a few ms: is the worker side biased?

    python studies/sbs_overhead.py [--runs 10] [--python PATH] [--slow]
    python studies/sbs_overhead.py --smoke           # CI: 2 runs of the us model, the mechanism only

Both sides run the *same* model file: the baseline in a side worker (``--python``, default this
interpreter) and the candidate in this process, built by the factories the plugin's side-by-side gate
builds (:class:`pytest_aaco.sidebyside.cycles.WorkerFactory`, :class:`~pytest_aaco.sidebyside.sides.LocalFactory`,
the gate's session configuration: intra-op spinning off, one intra-op thread) and compared with
:func:`pytest_aaco.sidebyside.cycles.compare_sides` at the default threshold (5%). Every run is a fresh
child process. Models (seeded weights): ``us``: one 8x8 Gemm + Relu at batch 1 (a few us per run);
``ms``: four 512x512 Gemm + Relu at batch 64 (a few ms). ``--slow`` adds ``us-slow``: the candidate is
the us model with one more Gemm + Relu layer (a real slowdown that must read ``regression``).

Prints, per model: the outcome words of the runs (target: ``no regression`` in >= 9 of 10 for the A/A),
and the median over runs of the paired ratio candidate / baseline (per cent; 0 = no bias).
Exit status 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: name -> (layers, width, batch) of the baseline's model, and the candidate's layers
MODELS = {"us": ((1, 8, 1), 1), "ms": ((4, 512, 64), 4), "us-slow": ((1, 8, 1), 2)}


def child(baseline: str, candidate: str, python: str, seed: int) -> None:
    from pytest_aaco.measure.providers import parse_provider
    from pytest_aaco.measure.registry import ModelSpec
    from pytest_aaco.sidebyside.cycles import WorkerFactory, compare_sides
    from pytest_aaco.sidebyside.sides import CompareSettings, LocalFactory

    cpu = parse_provider("cpu")
    settings = CompareSettings(seed=seed)
    entries = settings.session_config()
    spec = ModelSpec("m", f"path:{candidate}", Path(candidate))
    local = LocalFactory(Path(candidate), spec, cpu, 10, "none", 0, 1, entries)
    worker = WorkerFactory(python, Path(baseline), cpu, local.shared_feeds, 10, "none", 0, 1, entries)
    result = compare_sides(worker, local, settings, alpha=0.05, baseline_label=python)
    per_iter = {s: float(np.exp(np.mean([c.block(s).log_mean for cs in result.measurement.cycles_by_pair
                                         for c in cs]))) for s in ("baseline", "candidate")}
    print(json.dumps({"outcome": str(result.outcome), "ratio": float(result.comparison.ratio),
                      "cycles": int(sum(len(cs) for cs in result.measurement.cycles_by_pair)),
                      "per_iteration_ms": per_iter}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--python", default=sys.executable, help="the worker's interpreter (default: this one)")
    parser.add_argument("--models", default="us,ms")
    parser.add_argument("--slow", action="store_true", help="also the us model against one layer more")
    parser.add_argument("--smoke", action="store_true", help="2 runs of the us model")
    parser.add_argument("--child", nargs=4, metavar=("BASELINE", "CANDIDATE", "PYTHON", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.child[2], int(args.child[3]))
        return 0
    import onnx
    from bisect_demo import mlp

    names = ["us"] if args.smoke else args.models.split(",") + (["us-slow"] if args.slow else [])
    runs = 2 if args.smoke else args.runs
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            (layers, width, batch), cand_layers = MODELS[name]
            base, cand = Path(tmp, f"{name}-a.onnx"), Path(tmp, f"{name}-b.onnx")
            onnx.save(mlp(layers, width, batch, seed=7), base)
            onnx.save(mlp(cand_layers, width, batch, seed=7) if cand_layers != layers else mlp(layers, width, batch, 7),
                      cand)
            rows = []
            for run in range(runs):
                out = subprocess.run([sys.executable, __file__, "--child", str(base), str(cand), args.python, str(run)],
                                     capture_output=True, text=True, check=False)
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                if out.returncode or not lines:
                    print(f"  {name} run {run}: failed: {out.stderr[-800:]}", flush=True)
                    continue
                row = json.loads(lines[-1])
                rows.append(row)
                print(f"  {name} run {run}: {row['outcome']:<14} candidate/baseline {100 * (row['ratio'] - 1):+.1f}%"
                      f" over {row['cycles']} cycles; per iteration baseline {row['per_iteration_ms']['baseline']:.4f}"
                      f" ms, candidate {row['per_iteration_ms']['candidate']:.4f} ms", flush=True)
            words = Counter(r["outcome"] for r in rows)
            median = 100 * (float(np.median([r["ratio"] for r in rows])) - 1) if rows else float("nan")
            print(f"{name}: {dict(words)} of {len(rows)} runs; median candidate/baseline {median:+.1f}%", flush=True)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
