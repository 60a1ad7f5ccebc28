"""False-alarm rate, power and minimum detectable effect of the pooled stored-baseline test
(:func:`pytest_aaco.api.pooled_test`) by simulation; no GPU needed, a few seconds per row.

Each trial is one baseline folder of ``--items`` items. An item's run means (ln device time per run)
are ``μ_item + γ_gpu + ε``, ``ε ~ N(0, σ_item²)``, ``σ_item`` log-uniform in 0.02-0.1% (kernel time
between processes on one H200, main 1641227) or, in the ``busy`` rows, 2-20% (wall time on a busy
2-core runner); ``gpus=2`` puts each run on one of two GPUs 1% apart. Histories of 2, 3, 5 and 10
runs, then one gate, unchanged or +2% / +6%. Per row: the false-alarm rate at levels 0.05 and 0.025
(the gate's first LOND level), power at level 0.01, the median and p90 MDE (power 0.8, level 0.01),
the share left to the unpooled test, and the MDE of the test before pooling (Welch with a 2% prior
below 5 runs, the prediction interval from 5).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from pytest_aaco.api import fit_pool, pooled_test, prediction_interval_test, run_offset_sd, welch_rounds


def simulate(runs: int, trials: int, items: int, sd_range: tuple[float, float], gpus: int, effect: float,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """p-values (slower) and MDEs (level 0.01) of item 0's gate in *trials* folders."""
    pvals, mdes, fallback = [], [], []
    gpu_names = [f"GPU-{k}" for k in range(gpus)]
    gpu_offset = {g: 0.01 * k for k, g in enumerate(gpu_names)} if gpus > 1 else {}
    for _ in range(trials):
        sds = np.exp(rng.uniform(math.log(sd_range[0]), math.log(sd_range[1]), size=items))
        folder = []
        for s in sds:
            hist = []
            for _ in range(runs):
                g = gpu_names[rng.integers(gpus)] if gpus > 1 else None
                hist.append((g, gpu_offset.get(g or "", 0.0) + float(rng.normal(0, s))))
            folder.append(hist)
        pool = fit_pool(folder)
        g_now = gpu_names[rng.integers(gpus)] if gpus > 1 else None
        current = [math.log1p(effect) + gpu_offset.get(g_now or "", 0.0) + float(rng.normal(0, sds[0]))]
        comp = pooled_test(current, folder[0], g_now, pool)
        if comp is None:  # no prior, or a GPU of unknown offset: the test before pooling, with its 2% prior
            rounds = 20
            cur = rng.normal(current[0], sds[0] * math.sqrt(rounds), rounds)
            base = np.concatenate([rng.normal(y, sds[0] * math.sqrt(rounds), rounds) for _, y in folder[0]])
            comp = welch_rounds(cur, base, run_sd=max(math.log1p(0.02), run_offset_sd(
                [base[k * rounds:(k + 1) * rounds] for k in range(runs)])), baseline_runs=runs)
            fallback.append(1)
        else:
            fallback.append(0)
        pvals.append(comp.p_slower)
        mdes.append(comp.mde(0.01))
    simulate.fallback = float(np.mean(fallback))  # type: ignore[attr-defined]
    return np.array(pvals), np.array(mdes)


def old_mde(runs: int, sd: float) -> float:
    """MDE (level 0.01, power 0.8) of the test before pooling: on a history shorter than 5 runs
    (``--aaco-min-history``) Welch on 20 rounds per run with the 2% run-to-run prior
    (``series.comparison``); from 5 runs the prediction interval on the run means (median of 200
    histories)."""
    rng = np.random.default_rng(0)
    if runs >= 5:
        return float(np.median([prediction_interval_test([rng.normal(0, sd)], rng.normal(0, sd, runs)).mde(0.01)
                                for _ in range(200)]))
    rounds = 20
    cur = rng.normal(0, sd * math.sqrt(rounds), rounds)
    base = rng.normal(0, sd * math.sqrt(rounds), rounds * runs)
    return welch_rounds(cur, base, run_sd=max(math.log1p(0.02), sd), baseline_runs=runs).mde(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--items", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.trials = 20
    rng = np.random.default_rng(args.seed)
    print(f"{args.trials} folders of {args.items} items per row; FAR at levels 0.05 / 0.025 (one-sided),"
          " power and MDE at level 0.01")
    print(f"{'noise':>7} {'gpus':>4} {'runs':>4} | {'FAR@.05':>7} {'FAR@.025':>8} | {'+2%':>6} {'+6%':>6} |"
          f" {'MDE med':>8} {'MDE p90':>8} | {'unpooled':>8} | {'MDE before':>10}")
    for label, sd_range, gpus_list in (("device", (0.0002, 0.001), (1, 2)), ("busy", (0.02, 0.2), (1,))):
        for gpus in gpus_list:
            for runs in (2, 3, 5, 10):
                p0, mde = simulate(runs, args.trials, args.items, sd_range, gpus, 0.0, rng)
                unpooled = simulate.fallback  # type: ignore[attr-defined]
                p2, _ = simulate(runs, args.trials, args.items, sd_range, gpus, 0.02, rng)
                p6, _ = simulate(runs, args.trials, args.items, sd_range, gpus, 0.06, rng)
                before = old_mde(runs, math.sqrt(sd_range[0] * sd_range[1]))
                print(f"{label:>7} {gpus:>4} {runs:>4} | {np.mean(p0 <= 0.05):7.3f} {np.mean(p0 <= 0.025):8.3f} |"
                      f" {np.mean(p2 <= 0.01):6.2f} {np.mean(p6 <= 0.01):6.2f} |"
                      f" {np.nanmedian(mde):8.2%} {np.nanpercentile(mde, 90):8.2%} | {unpooled:8.1%} | {before:10.2%}")


if __name__ == "__main__":
    main()
