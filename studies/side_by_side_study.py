"""Side-by-side verdict quality (issue 10): A/A false alarms, detection of +5% / +10%, time per item.

Every trial is a **separate process** that compares a baseline model with a candidate exactly as
``--aaco-compare`` does (:func:`pytest_aaco.sidebyside.cycles.compare_sides`: fresh sessions, warmup, balanced
AB/BA cycles, looks with alpha spending, confirmation on fresh sessions, memory of each side):

* ``cosmetic``: the zoo model with a different ``doc_string``: same compute, different bytes (A/A);
* ``slow5`` / ``slow10``: the model plus a calibrated chain of MatMul+Tanh steps
  (:func:`pytest_aaco.measure.modelgen.add_extra_work`), deterministic once calibrated; the true slowdown
  of each variant is measured once more with many cycles and printed.

Commands (CPU, this machine; measure under the lock)::

    flock /work/coord/measure.lock python benchmarks/side_by_side_study.py cpu --out studies/sbs-cpu
    python benchmarks/side_by_side_study.py summarize studies/sbs-cpu

GPU (CUDA EP, cudnn_conv_algo_search EXHAUSTIVE and HEURISTIC, IO binding), one command::

    python benchmarks/side_by_side_study.py gpu --out $OUT/sbs-gpu

``spin`` measures the spin bleed: A/A cycles with ORT's intra-op spinning on (discarding 0 or 2
iterations per block) and with ``session.intra_op.allow_spinning=0``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve()
if str(HERE.parents[1]) not in sys.path:  # run from a checkout without installing: pytest_aaco is one level up
    sys.path.insert(0, str(HERE.parents[1]))
VARIANTS = ("cosmetic", "slow5", "slow10")
TARGETS = {"slow5": 0.05, "slow10": 0.10}


def _spec(model: str) -> Any:
    from pytest_aaco.measure.registry import load_registry

    return next(s for s in load_registry() if s.name == model)


def _provider(kind: str, algo: str | None) -> Any:
    from pytest_aaco.measure.providers import parse_provider

    provider = parse_provider(kind)
    # the CPU EP takes no options: with --kind cpu the algorithm name only labels the run
    return provider.with_options({"cudnn_conv_algo_search": algo}) if algo and kind != "cpu" else provider


def _factory(path: Path, model: str, kind: str, algo: str | None, spinning: bool | None = None,
             threads: int = 0) -> Any:
    """A side as --aaco-compare builds it; *spinning* None: the product's default (CompareSettings)."""
    from pytest_aaco.sidebyside.cycles import CompareSettings, LocalFactory

    entries = CompareSettings(spinning=bool(spinning)).session_config() if spinning is not None \
        else CompareSettings().session_config()
    return LocalFactory(path, _spec(model), _provider(kind, algo), iobinding="all" if kind == "cuda" else "none",
                        config_entries=entries, intra_op_threads=threads)


def _zoo_file(model: str) -> Path:
    from pytest_aaco.measure.registry import zoo_model_path

    return zoo_model_path(model)


def build_cosmetic(model: str, out: Path) -> Path:
    import onnx

    target = out / "models" / f"{model}-cosmetic.onnx"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        proto = onnx.load(str(_zoo_file(model)))
        proto.doc_string = "cosmetic change: same compute, different bytes"
        onnx.save(proto, str(target))
    return target


def build_slowed(model: str, matmuls: int, size: int, out: Path) -> Path:
    import onnx

    from pytest_aaco.measure.modelgen import add_extra_work

    target = out / "models" / f"{model}-xw{matmuls}x{size}.onnx"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(add_extra_work(onnx.load(str(_zoo_file(model))), matmuls=matmuls, size=size), str(target))
    return target


def paired_effect(base: Path, variant: Path, model: str, kind: str, algo: str | None, cycles: int,
                  discard: int = 2, spinning: bool | None = None, seed: int = 0, threads: int = 0) -> dict[str, Any]:
    """Interleave one fresh session of each for *cycles* cycles: mean per-cycle d, its se, spin bleed."""
    from pytest_aaco.measure.interleave import block_iterations, paired_log_ratios, run_cycles, spin_bleed
    from pytest_aaco.sidebyside.cycles import BASELINE, CANDIDATE

    a = _factory(base, model, kind, algo, spinning, threads).open(BASELINE)  # spinning None: product default
    b = _factory(variant, model, kind, algo, spinning, threads).open(CANDIDATE)
    its = {BASELINE: block_iterations(a.per_iteration_ms), CANDIDATE: block_iterations(b.per_iteration_ms)}
    cycles_run = run_cycles([a.runner, b.runner], its, cycles, discard=discard, rng=np.random.default_rng(seed))
    d = paired_log_ratios(cycles_run, BASELINE, CANDIDATE)
    lat = np.concatenate([c.block(BASELINE).latencies_ms for c in cycles_run])

    def whole(c: Any, side: str) -> float:  # the block's log-mean with its discarded iterations kept
        b = c.block(side)
        return float(np.log(np.concatenate([b.discarded_ms, b.latencies_ms])).mean())

    d_all = np.array([whole(c, CANDIDATE) - whole(c, BASELINE) for c in cycles_run])
    lat_b = np.concatenate([c.block(CANDIDATE).latencies_ms for c in cycles_run])
    p10 = float(np.percentile(lat_b, 10) / np.percentile(lat, 10))
    return {"effect": float(np.expm1(d.mean())), "effect_p10": p10 - 1.0,
            "se_log": float(d.std(ddof=1) / math.sqrt(d.size)),
            "sd_d": float(d.std(ddof=1)), "cycles": int(d.size), "base_ms": float(np.exp(np.log(lat).mean())),
            "effect_with_discarded": float(np.expm1(d_all.mean())), "sd_d_with_discarded": float(d_all.std(ddof=1)),
            "spin_bleed": spin_bleed(cycles_run).to_dict(), "iterations": its}


def calibrate(model: str, kind: str, algo: str | None, out: Path, log: Any, cycles: int = 40,
              threads: int = 0) -> dict[str, Any]:
    """MatMul steps for each target: probe 20 steps of 128x128, scale linearly, measure the result
    over *cycles* cycles (half that for the probe).

    The effects are ratios of the 10th percentiles of all iterations, not of the means: on a
    shared machine the means of a few dozen cycles moved by +-5% (se), while the lower quantiles
    show the extra compute itself, which is what a deterministic slowdown adds."""
    base = _zoo_file(model)
    probe = paired_effect(base, build_slowed(model, 20, 128, out), model, kind, algo, cycles=max(cycles // 2, 4),
                          threads=threads)
    per_step = max(probe["effect_p10"] / 20, 1e-4)
    chosen: dict[str, Any] = {}
    for name, target in TARGETS.items():
        matmuls = max(1, round(target / per_step))
        path = build_slowed(model, matmuls, 128, out)
        true = paired_effect(base, path, model, kind, algo, cycles=cycles, seed=1, threads=threads)
        chosen[name] = {"matmuls": matmuls, "size": 128, "path": str(path), "true_effect": true["effect_p10"],
                        "paired_mean_effect": true["effect"], "se_log": true["se_log"]}
        log(f"  {model} {name}: {matmuls} x 128 steps, true effect (p10 ratio) {true['effect_p10']:+.2%};"
            f" paired mean {true['effect']:+.2%} (se {true['se_log']:.2%})")
    return {"probe": probe, "variants": chosen}


def trial(args: argparse.Namespace) -> None:
    """One comparison in this process; prints one JSON line."""
    from pytest_aaco.sidebyside.cycles import BASELINE, CANDIDATE, CompareSettings, compare_sides, to_verdict
    from pytest_aaco.verdict.finish import render_message

    settings = CompareSettings(threshold=args.threshold, seed=args.seed, budget_s=args.budget,
                               discard=args.discard)
    t0 = time.perf_counter()
    result = compare_sides(_factory(Path(args.base), args.model, args.kind, args.algo, threads=args.threads),
                           _factory(Path(args.candidate), args.model, args.kind, args.algo, threads=args.threads),
                           settings, alpha=args.alpha, baseline_label="study", device=args.kind != "cpu")
    item_s = time.perf_counter() - t0
    data = result.to_dict()
    data.pop("sides", None)
    data["ratios_median"] = [[float(np.exp(np.median(np.log(c.block(CANDIDATE).latencies_ms))
                                                    - np.median(np.log(c.block(BASELINE).latencies_ms))))
                               for c in cs] for cs in result.measurement.cycles_by_pair]
    data["ratios_first"] = ([[float(math.exp(x)) for x in d] for d in result.first.log_ratios()]
                            if result.first else None)
    print(json.dumps({"model": args.model, "variant": args.variant, "kind": args.kind, "algo": args.algo,
                      "threads": args.threads,
                      "seed": args.seed, "item_s": item_s,
                      "message": render_message(to_verdict(result, f"{args.model}[{args.kind}]")),
                      **data}), flush=True)


def _run_trial(base: Path, candidate: Path, model: str, variant: str, kind: str, algo: str | None, seed: int,
               args: argparse.Namespace) -> dict[str, Any] | None:
    cmd = [sys.executable, str(HERE), "trial", "--base", str(base), "--candidate", str(candidate), "--model", model,
           "--variant", variant, "--kind", kind, "--seed", str(seed), "--threshold", str(args.threshold),
           "--alpha", str(args.alpha), "--budget", str(args.budget), "--discard", str(args.discard),
           "--threads", str(args.threads)]
    if algo:
        cmd += ["--algo", algo]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = next((x for x in proc.stdout.splitlines()[::-1] if x.startswith("{")), None)
    if proc.returncode or line is None:
        print(f"trial failed ({model} {variant} {algo}): {proc.stderr[-2000:]}", file=sys.stderr)
        return None
    record: dict[str, Any] = json.loads(line)
    record["process_s"] = time.perf_counter() - t0
    return record


def campaign(args: argparse.Namespace, kind: str, algos: list[str | None]) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.node(),
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "kind": kind,
            "python": platform.python_version(), "threshold": args.threshold, "alpha": args.alpha,
            "budget_s": args.budget, "discard": args.discard, "trials": args.trials, "models": args.models,
            "threads": args.threads}
    import onnxruntime as ort

    meta["onnxruntime"] = ort.__version__
    deadline = time.monotonic() + args.deadline
    results = out / "trials.jsonl"
    calib: dict[str, Any] = {}
    for algo in algos:
        for model in args.models:
            key = f"{model}/{algo}"
            print(f"calibrating {key}", flush=True)
            calib[key] = calibrate(model, kind, algo, out, lambda s: print(s, flush=True), args.calibration_cycles,
                                   args.threads)
            calib[key]["cosmetic"] = str(build_cosmetic(model, out))
    (out / "meta.json").write_text(json.dumps({**meta, "calibration": calib}, indent=1))
    with results.open("a") as sink:
        for seed in range(args.trials):
            for algo in algos:
                for model in args.models:
                    c = calib[f"{model}/{algo}"]
                    for variant in VARIANTS:
                        if time.monotonic() > deadline:
                            print("deadline reached; summarizing what ran", flush=True)
                            summarize(out)
                            return
                        candidate = Path(c["cosmetic"] if variant == "cosmetic" else c["variants"][variant]["path"])
                        record = _run_trial(_zoo_file(model), candidate, model, variant, kind, algo, seed, args)
                        if record is None:
                            continue
                        if variant != "cosmetic":
                            record["true_effect"] = c["variants"][variant]["true_effect"]
                        sink.write(json.dumps(record) + "\n")
                        sink.flush()
                        print(f"{seed} {model} {algo or ''} {variant}: {record['outcome']} {record['ratio'] - 1:+.2%}"
                              f" in {record['item_s']:.1f} s ({record['cycles']} cycles)", flush=True)
    summarize(out)


def spin(args: argparse.Namespace) -> None:
    """A/A cycles in fresh processes: spinning on with discard 0 and 2, and allow_spinning=0."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for rep in range(args.trials):
        for model in args.models:
            for label, spinning, threads in (("spinning on", True, 0), ("allow_spinning=0", False, 0),
                                             ("spinning on, 1 intra-op thread", True, 1)):
                cmd = [sys.executable, str(HERE), "spin-one", "--model", model, "--out", str(out), "--discard", "2",
                       "--seed", str(rep), "--threads", str(threads)] + ([] if spinning else ["--no-spinning"])
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
                line = next((x for x in proc.stdout.splitlines()[::-1] if x.startswith("{")), None)
                if line is None:
                    print(proc.stderr[-1500:], file=sys.stderr)
                    continue
                row = {"config": label, "model": model, **json.loads(line)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    (out / "spin.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summarize_spin(out)


def spin_one(args: argparse.Namespace) -> None:
    cosmetic = build_cosmetic(args.model, Path(args.out))
    print(json.dumps(paired_effect(_zoo_file(args.model), cosmetic, args.model, "cpu", None, cycles=30,
                                   discard=args.discard, spinning=not args.no_spinning, seed=args.seed,
                                   threads=args.threads)), flush=True)


def summarize_spin(out: Path) -> None:
    rows = [json.loads(x) for x in (out / "spin.jsonl").read_text().splitlines() if x]
    print("| model | config | processes | bleed of the first 2 iterations after the other side | after the same"
          " side | sd of d per cycle, first 2 discarded | kept | A latency ms | mean abs A/A effect, discarded |"
          " kept |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(r["model"], r["config"]) for r in rows})
    for model, config in keys:
        rs = [r for r in rows if r["model"] == model and r["config"] == config]

        def med(key: str, rs: list[dict[str, Any]] = rs) -> float:
            return float(np.nanmedian([r["spin_bleed"][key] for r in rs]))

        def mid(key: str, rs: list[dict[str, Any]] = rs) -> float:
            return float(np.median([r.get(key, np.nan) for r in rs]))

        def mean_abs(key: str, rs: list[dict[str, Any]] = rs) -> float:
            return float(np.mean([abs(r.get(key, np.nan)) for r in rs]))

        print(f"| {model} | {config} | {len(rs)} | {med('after_other'):+.1%} | {med('after_same'):+.1%} |"
              f" {mid('sd_d'):.1%} | {mid('sd_d_with_discarded'):.1%} | {mid('base_ms'):.1f} |"
              f" {mean_abs('effect'):.2%} | {mean_abs('effect_with_discarded'):.2%} |")


def _clopper_pearson_upper(k: int, n: int, level: float = 0.95) -> float:
    import scipy.stats

    return 1.0 if k == n else float(scipy.stats.beta.ppf(level, k + 1, n - k))


def _sd_d(record: dict[str, Any]) -> float:
    """sd of the per-cycle log-ratios of a trial's deciding measurement (pooled over session pairs)."""
    d = np.log([x for xs in record["ratios"] for x in xs])
    return float(d.std(ddof=1)) if d.size > 1 else float("nan")


def summarize(*folders: Path) -> None:
    """Print the table of outcomes per model, algorithm and variant, pooling the folders' trials."""
    rows = [json.loads(x) for out in folders if (Path(out) / "trials.jsonl").exists()
            for x in (Path(out) / "trials.jsonl").read_text().splitlines() if x]
    print("| model | EP / algo | variant | true effect | trials | regression | no regression | inconclusive |"
          " memory alarms | median time per item (s) | median cycles |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    groups = sorted({(r["model"], r["kind"], r.get("algo") or "", r["variant"]) for r in rows},
                    key=lambda g: (g[0], g[1], g[2], VARIANTS.index(g[3])))
    for model, kind, algo, variant in groups:
        rs = [r for r in rows if (r["model"], r["kind"], r.get("algo") or "", r["variant"]) == (model, kind, algo,
                                                                                                  variant)]
        n = len(rs)
        counts = {o: sum(r["outcome"] == o for r in rs) for o in ("regression", "no-regression", "inconclusive")}
        mem = sum(bool(r["memory"]) for r in rs)
        true = "0 (cosmetic)" if variant == "cosmetic" else f"{np.mean([r['true_effect'] for r in rs]):+.1%}"
        reg = f"{counts['regression']}/{n}"
        if variant == "cosmetic":
            reg += f" (95% upper bound {_clopper_pearson_upper(counts['regression'], n):.0%})"
        print(f"| {model} | {kind} {algo} | {variant} | {true} | {n} | {reg} | {counts['no-regression']} |"
              f" {counts['inconclusive']} | {mem} | {np.median([r['item_s'] for r in rs]):.1f} |"
              f" {np.median([r['cycles'] for r in rs]):.0f} |")
    print("\nBy the noise each trial met (sd of the per-cycle log-ratio d, pooled over its cycles):\n")
    print("| variant | noise band | trials | regression | no regression | inconclusive | median time (s) |"
          " median MDE |")
    print("|---|---|---|---|---|---|---|---|")
    bands = (("sd(d) < 5% (quiet)", 0.0, 0.05), ("5% <= sd(d) < 15%", 0.05, 0.15), ("sd(d) >= 15% (busy)", 0.15, 9.0))
    for variant in VARIANTS:
        for label, low, high in bands:
            rs = [r for r in rows if r["variant"] == variant and low <= _sd_d(r) < high]
            if not rs:
                continue
            counts = {o: sum(r["outcome"] == o for r in rs) for o in ("regression", "no-regression", "inconclusive")}
            print(f"| {variant} | {label} | {len(rs)} | {counts['regression']} | {counts['no-regression']} |"
                  f" {counts['inconclusive']} | {np.median([r['item_s'] for r in rs]):.1f} |"
                  f" {np.median([r['mde'] for r in rs]):.1%} |")
    bleed = [r["spin_bleed"]["after_other"] for r in rows if r["spin_bleed"]["after_other"] == r["spin_bleed"]
             ["after_other"]]
    if bleed:
        print(f"\nmedian spin bleed of the discarded iterations after the other side: {np.median(bleed):+.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("cpu", "gpu"):
        p = sub.add_parser(name)
        p.add_argument("--out", required=True)
        p.add_argument("--models", nargs="+", default=["squeezenet", "shufflenet"] if name == "cpu" else ["resnet50"])
        p.add_argument("--trials", type=int, default=20 if name == "cpu" else 30)
        p.add_argument("--calibration-cycles", type=int, default=40 if name == "cpu" else 20)
        p.add_argument("--deadline", type=float, default=3600.0 if name == "cpu" else 480.0,
                       help="stop starting trials after this many seconds, then summarize")
        p.add_argument("--algos", nargs="+", default=["EXHAUSTIVE", "HEURISTIC"])
        p.add_argument("--kind", default="cpu" if name == "cpu" else "cuda",
                       help="execution provider (gpu: 'cpu' runs the GPU path on the CPU EP, to debug the script)")
    for name in ("cpu", "gpu", "trial"):
        p = sub.choices[name] if name in sub.choices else sub.add_parser(name)
        p.add_argument("--threshold", type=float, default=0.03)
        p.add_argument("--alpha", type=float, default=0.05)
        p.add_argument("--budget", type=float, default=60.0)
        p.add_argument("--discard", type=int, default=2)
        p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: ORT's default)")
    t = sub.choices["trial"]
    for arg in ("--base", "--candidate", "--model", "--variant", "--kind"):
        t.add_argument(arg, required=True)
    t.add_argument("--algo", default=None)
    t.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("spin")
    s.add_argument("--out", required=True)
    s.add_argument("--models", nargs="+", default=["squeezenet"])
    s.add_argument("--trials", type=int, default=4)
    one = sub.add_parser("spin-one")
    for arg in ("--model", "--out"):
        one.add_argument(arg, required=True)
    one.add_argument("--discard", type=int, default=0)
    one.add_argument("--seed", type=int, default=0)
    one.add_argument("--no-spinning", action="store_true")
    one.add_argument("--threads", type=int, default=0)
    summ = sub.add_parser("summarize")
    summ.add_argument("out", nargs="+", help="one or more output folders (their trials are pooled)")
    args = parser.parse_args()
    if args.command == "cpu":
        campaign(args, "cpu", [None])
    elif args.command == "gpu":
        campaign(args, args.kind, list(args.algos))
    elif args.command == "trial":
        trial(args)
    elif args.command == "spin":
        spin(args)
    elif args.command == "spin-one":
        spin_one(args)
    else:
        summarize(*[Path(o) for o in args.out])
        for folder in args.out:
            if (Path(folder) / "spin.jsonl").exists():
                summarize_spin(Path(folder))


if __name__ == "__main__":
    main()
