"""What ``--aaco-profile`` costs on CPU: extra seconds per item, and whether it moves the measured p50.

Per zoo model whose p50 is at most ``--max-p50-ms`` on this machine:

1. **time**: the profile pass as the plugin runs it (:func:`pytest_aaco.passes.opprofile.profile_model`
   with :func:`~pytest_aaco.passes.opprofile.profile_runs` runs: a new profiling InferenceSession, one dropped
   run, the profiled runs, parsing), timed end to end ``--passes`` times; the median is the extra
   time per item.
2. **p50, side by side**: one InferenceSession is the item's. ``--pairs`` pairs of blocks run in
   random order (AB or BA): block A measures a round of ``--iterations`` iterations; block B first
   runs a profile pass (its own session), then measures the same round on the item's session, as
   the next item would after an item with ``--aaco-profile``. The figure is the median over pairs
   of ln(p50 B / p50 A) with a 95% bootstrap CI over pairs (Efron & Tibshirani 1993, ch. 13); the
   target is within ±1%. Pairs share the machine's state, so drift and neighbours cancel
   (Bulej et al., ICPE 2020).

Run under the measurement lock:

    flock /work/coord/measure.lock python studies/profile_overhead.py
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time

import numpy as np

MODELS = ("squeezenet", "shufflenet", "inception_v1", "resnet50", "densenet121", "inception_v2")


def round_p50(run, iterations: int) -> float:
    lat = []
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        run()
        lat.append(time.perf_counter_ns() - t0)
    return float(np.median(lat)) / 1e6


def study(name: str, args: argparse.Namespace, rng: random.Random) -> dict | None:
    import onnxruntime as ort

    from pytest_aaco.measure.inputs import make_inputs
    from pytest_aaco.measure.providers import parse_provider
    from pytest_aaco.measure.registry import zoo_model_path
    from pytest_aaco.passes.opprofile import profile_model, profile_runs

    path = zoo_model_path(name)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    session = ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])
    feeds = make_inputs(name, session.get_inputs(), {}, {})

    def run() -> None:
        session.run(None, feeds)

    for _ in range(10):
        run()
    p50 = round_p50(run, 20)
    if p50 > args.max_p50_ms:
        return {"model": name, "p50_ms": round(p50, 3), "skipped": f"p50 above {args.max_p50_ms} ms"}
    cpu = parse_provider("cpu")
    runs = profile_runs(p50)
    costs = []
    for _ in range(args.passes):
        t0 = time.perf_counter()
        profile = profile_model(path, cpu, feeds=feeds, runs=runs)
        costs.append(time.perf_counter() - t0)
    ratios = []
    for _ in range(args.pairs):
        order = rng.choice(("AB", "BA"))
        got = {}
        for arm in order:
            if arm == "B":
                profile_model(path, cpu, feeds=feeds, runs=runs)
            got[arm] = round_p50(run, args.iterations)
        ratios.append(math.log(got["B"] / got["A"]))
    boot = np.random.default_rng(0)
    arr = np.array(ratios)
    meds = np.median(arr[boot.integers(0, arr.size, (2000, arr.size))], axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return {"model": name, "p50_ms": round(p50, 3), "profile_runs": runs,
            "profile_pass_s_median": round(statistics.median(costs), 3), "profile_pass_s_max": round(max(costs), 3),
            "top_ops": [(o.op, round(o.share, 3)) for o in profile.top_ops(3)],
            "pairs": args.pairs, "p50_change_median": round(math.expm1(float(np.median(arr))), 4),
            "p50_change_ci95": [round(math.expm1(lo), 4), round(math.expm1(hi), 4)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--max-p50-ms", type=float, default=40.0)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.models, args.passes, args.pairs, args.iterations = ["squeezenet"], 1, 2, 2
    rng = random.Random(14)
    for name in args.models:
        print(json.dumps(study(name, args, rng)), flush=True)


if __name__ == "__main__":
    main()
