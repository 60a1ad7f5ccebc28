"""Reference workload and stored-baseline verdict quality, measured in fresh processes (issue 11).

A study, not a CI test. Every measurement runs in a separate Python process (runs of one process
share its state; the gate compares runs of different processes), through the product's own
code: :func:`pytest_aaco.runner.run_benchmark` with a :class:`pytest_aaco.reference.Reference`.

Phases (``--phases``, comma-separated):

* ``candidates``: ``--processes`` processes each measure ResNet-50 (the item) once with every
  candidate reference (``--candidates``, in random order). Printed per candidate: the sd across
  processes of the raw run mean ln(item) and of the normalized ln(item) - ln(reference), and the
  reference's share of the measured time.
* ``quality``: for ResNet-50 and Inception (``--models``): ``--history`` processes recorded as
  the history, then ``--gates`` processes unchanged (A/A) interleaved with ``--gates`` processes of
  a variant made slower by ``--slowdown`` (default 9%) with :func:`pytest_aaco.modelgen.add_extra_work`,
  whose true slowdown is measured by interleaving A and B in one process. Every gate is judged
  with :func:`pytest_aaco.verdict.compare` on the same history twice, normalized (the reference
  valid) and raw (the reference dropped); printed: false alarms, detections, median MDE.
  Leave-one-out re-judging of all unchanged processes (each in turn the gate, 5 others the
  history) adds A/A judgements.

Measurements hold ``/work/coord/measure.lock`` when it exists (``flock``), one process at a time.

    python benchmarks/reference_study.py --phases candidates --processes 10
    python benchmarks/reference_study.py --phases quality --history 5 --gates 8
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LOCK = Path("/work/coord/measure.lock")


# ------------------------------------------------------------------------------- worker (one process)

def worker(args: argparse.Namespace) -> None:
    """Measure each model once per reference in this process; print one JSON line per measurement."""
    from pytest_aaco.inputs import batch_size, make_inputs
    from pytest_aaco.providers import parse_provider
    from pytest_aaco.reference import build_reference
    from pytest_aaco.runner import MeasureSettings, build_session, run_benchmark

    provider = parse_provider(args.provider)
    refs = [build_reference(name, provider, 0, args.threads, args.iobinding) for name in args.refs.split(",")]
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    settings = MeasureSettings(warmup=args.warmup, rounds=args.rounds, iobinding=args.iobinding)
    for model in args.models.split(","):
        name, _, path = model.partition("=")
        handle = build_session(Path(path), provider, 0, args.threads)
        feeds = make_inputs(name, handle.session.get_inputs(), {"batch": 1, "N": 1}, {})
        for ref in [refs[i] for i in rng.permutation(len(refs))]:
            result = run_benchmark(handle, feeds, settings, name, batch_size(feeds), reference=ref)
            series = result.reference
            assert series is not None
            print(json.dumps({"model": name, "reference": ref.name, "reference_id": ref.id,
                              "rounds": result.round_log_means.tolist(), "ref_log_means": series.log_means.tolist(),
                              "normalized": series.normalized.tolist(), "mean_ms": result.mean_ms,
                              "ref_mean_ms": series.mean_ms, "share": series.share, "pid": os.getpid(),
                              "time": time.time()}), flush=True)


def spawn(models: dict[str, Path], refs: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """One fresh worker process (under the measurement lock); its JSON lines."""
    cmd = [sys.executable, __file__, "--worker", "--models", ",".join(f"{k}={v}" for k, v in models.items()),
           "--refs", ",".join(refs), "--rounds", str(args.rounds), "--warmup", str(args.warmup),
           "--provider", args.provider, "--threads", str(args.threads), "--iobinding", args.iobinding]
    if LOCK.exists() and not args.no_lock:
        cmd = ["flock", str(LOCK), *cmd]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def model_file(name: str) -> Path:
    from pytest_aaco.registry import zoo_dir

    return zoo_dir() / f"light_{name}.onnx"


# ------------------------------------------------------------------------------- candidates phase

def candidates(args: argparse.Namespace, out: list[str]) -> None:
    refs = args.candidates.split(",")
    rows: list[dict[str, Any]] = []
    for i in range(args.processes):
        rows += spawn({"resnet50": model_file("resnet50")}, refs, args)
        print(f"  process {i + 1}/{args.processes} done", file=sys.stderr, flush=True)
    (args.workdir / "candidates.json").write_text(json.dumps(rows))
    out.append(f"### Reference candidates: ResNet-50 on {args.provider}, {args.processes} processes,"
               f" {args.rounds} rounds each\n")
    out.append("| reference | sd raw ln(item) | sd ln(item) - ln(reference) | reference ms/iteration |"
               " share of measured time |")
    out.append("|---|---|---|---|---|")
    for ref in refs:
        mine = [r for r in rows if r["reference"] == ref]
        raw = np.array([np.mean(r["rounds"]) for r in mine])
        norm = np.array([np.mean(r["normalized"]) for r in mine])
        out.append(f"| {ref} | {np.std(raw, ddof=1):.2%} | {np.std(norm, ddof=1):.2%} |"
                   f" {np.median([r['ref_mean_ms'] for r in mine]):.2f} | {np.median([r['share'] for r in mine]):.0%} |")
    out.append(f"\nResNet-50 mean latency: median {np.median([r['mean_ms'] for r in rows]):.1f} ms per iteration.")


# ------------------------------------------------------------------------------- quality phase

def slower_variant(name: str, slowdown: float, args: argparse.Namespace) -> tuple[Path, float]:
    """A copy of zoo model *name* about *slowdown* slower (extra MatMul/Tanh work), and its true
    slowdown measured by interleaving A and B blocks in this process (median of paired log-ratios)."""
    import onnx
    import onnxruntime as ort

    from pytest_aaco.inputs import make_inputs
    from pytest_aaco.interleave import LocalSide, block_iterations, paired_log_ratios, run_cycles
    from pytest_aaco.modelgen import add_extra_work, save_model_atomic

    base = onnx.load(str(model_file(name)))
    so = ort.SessionOptions()
    if args.threads:
        so.intra_op_num_threads = args.threads

    def side(label: str, model: Any) -> tuple[LocalSide, float]:
        session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        feeds = make_inputs(name, session.get_inputs(), {"batch": 1, "N": 1}, {})
        for _ in range(5):
            session.run(None, feeds)
        t0 = time.perf_counter()
        for _ in range(5):
            session.run(None, feeds)
        return LocalSide(label, lambda: session.run(None, feeds)), (time.perf_counter() - t0) / 5 * 1000

    a, a_ms = side("a", base)
    matmuls = max(1, round(slowdown * a_ms / 0.4))  # first guess: ~0.4 ms per 256² MatMul+Tanh here
    for _ in range(4):
        variant = add_extra_work(base, matmuls)
        b, _ = side("b", variant)
        n = block_iterations(a_ms, 0.3)
        cycles = run_cycles([a, b], {"a": n, "b": n}, 12, discard=1)
        true = float(np.exp(np.median(paired_log_ratios(cycles, "a", "b"))) - 1)
        print(f"  {name}: {matmuls} extra MatMuls -> {true:+.1%}", file=sys.stderr, flush=True)
        if abs(true - slowdown) < 0.015:
            break
        matmuls = max(1, round(matmuls * slowdown / max(true, 0.005)))
    path = args.workdir / f"{name}-slower.onnx"
    save_model_atomic(variant, path)
    return path, true


def quality(args: argparse.Namespace, out: list[str]) -> None:
    models = args.models.split(",")
    ref = args.reference
    state = args.workdir / "quality.json"
    data: dict[str, Any] = json.loads(state.read_text()) if state.exists() else {}
    if "variants" not in data:
        variants = {}
        for name in models:
            path, true = slower_variant(name, args.slowdown, args)
            variants[name] = {"path": str(path), "true": true}
        data["variants"] = variants
        state.write_text(json.dumps(data))
    a_models = {m: model_file(m) for m in models}
    b_models = {m: Path(data["variants"][m]["path"]) for m in models}
    data.setdefault("history", [])
    data.setdefault("aa", [])
    data.setdefault("ab", [])
    while len(data["history"]) < args.history:
        data["history"].append(spawn(a_models, [ref], args))
        state.write_text(json.dumps(data))
        print(f"  history {len(data['history'])}/{args.history}", file=sys.stderr, flush=True)
    while len(data["aa"]) < args.gates or len(data["ab"]) < args.gates:
        if len(data["aa"]) <= len(data["ab"]):
            data["aa"].append(spawn(a_models, [ref], args))
        else:
            data["ab"].append(spawn(b_models, [ref], args))
        state.write_text(json.dumps(data))
        print(f"  A/A {len(data['aa'])} A/B {len(data['ab'])} of {args.gates}", file=sys.stderr, flush=True)
    report_quality(data, models, args, out)


def as_result(row: dict[str, Any], with_reference: bool) -> Any:
    """A BenchmarkResult carrying the recorded round log-means (each round as its exp, one iteration)."""
    from pytest_aaco.results import BenchmarkResult, ReferenceSeries, RoundResult

    rounds = [RoundResult(i, np.array([np.exp(v)]), 0, 0) for i, v in enumerate(row["rounds"])]
    series = None
    if with_reference:
        series = ReferenceSeries(row["reference"], row["reference_id"], np.array(row["ref_log_means"]),
                                 np.array(row["normalized"]), row["ref_mean_ms"], 1, row["share"])
    return BenchmarkResult(row["model"], "cpu", rounds, 0, np.empty(0), 0.0, 0.0, ["CPUExecutionProvider"],
                           reference=series)


def judge(history_rows: list[dict[str, Any]], gate_row: dict[str, Any], with_reference: bool,
          workdir: Path) -> Any:
    from pytest_aaco.baseline import load_baseline, save_run
    from pytest_aaco.fingerprint import Fingerprint
    from pytest_aaco.verdict import GateSettings, compare

    fp = Fingerprint({"model": gate_row["model"], "provider": "CPUExecutionProvider"})
    path = workdir / "judge" / f"{gate_row['model']}-{os.getpid()}.json"
    path.unlink(missing_ok=True)
    for row in history_rows:
        save_run(path, gate_row["model"], fp, as_result(row, with_reference))
    baseline = load_baseline(path)
    return compare(as_result(gate_row, with_reference), baseline, fp, GateSettings(threshold=0.05),
                   level=0.05, label=gate_row["model"])


def report_quality(data: dict[str, Any], models: list[str], args: argparse.Namespace, out: list[str]) -> None:
    from pytest_aaco.verdict import REGRESSION

    out.append(f"### Stored-baseline gate on {args.provider}: {len(data['history'])}-run history,"
               f" {len(data['aa'])} unchanged (A/A) and {len(data['ab'])} slower (A/B) gate processes,"
               f" threshold 5%, level 0.05, reference {args.reference}\n")
    out.append("| model | series | A/A false alarms | A/A leave-one-out false alarms | median MDE (A/A) |"
               " A/B detected | true slowdown of B |")
    out.append("|---|---|---|---|---|---|---|")
    for name in models:
        hist = [next(r for r in proc if r["model"] == name) for proc in data["history"]]
        aa = [next(r for r in proc if r["model"] == name) for proc in data["aa"]]
        ab = [next(r for r in proc if r["model"] == name) for proc in data["ab"]]
        for with_ref in (True, False):
            v_aa = [judge(hist, g, with_ref, args.workdir) for g in aa]
            v_ab = [judge(hist, g, with_ref, args.workdir) for g in ab]
            pool = hist + aa
            loo = []
            for i in range(len(pool)):
                others = [pool[(i + k) % len(pool)] for k in range(1, len(hist) + 1)]
                loo.append(judge(others, pool[i], with_ref, args.workdir))
            fa = sum(v.outcome == REGRESSION for v in v_aa)
            fl = sum(v.outcome == REGRESSION for v in loo)
            det = sum(v.outcome == REGRESSION for v in v_ab)
            mde = np.median([v.mde for v in v_aa + loo if v.mde is not None])
            out.append(f"| {name} | {'normalized' if with_ref else 'raw'} | {fa}/{len(v_aa)} | {fl}/{len(loo)} |"
                       f" {mde:.1%} | {det}/{len(v_ab)} | {data['variants'][name]['true']:+.1%} |")
    drifts = []
    for proc in data["aa"] + data["ab"]:
        for r in proc:
            hist_ref = np.mean([np.mean(next(h for h in p if h["model"] == r["model"])["ref_log_means"])
                                for p in data["history"]])
            drifts.append(np.exp(np.mean(r["ref_log_means"]) - hist_ref) - 1)
    out.append(f"\nReference drift of the gate processes against the history: median {np.median(drifts):+.1%},"
               f" range {min(drifts):+.1%} .. {max(drifts):+.1%}.")


# ------------------------------------------------------------------------------- main

def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--refs", default="mix", help=argparse.SUPPRESS)
    p.add_argument("--phases", default="candidates,quality")
    p.add_argument("--candidates", default="mix,squeezenet,inception_v1")
    p.add_argument("--reference", default="mix", help="reference of the quality phase")
    p.add_argument("--models", default="resnet50,inception_v1")
    p.add_argument("--processes", type=int, default=10)
    p.add_argument("--history", type=int, default=5)
    p.add_argument("--gates", type=int, default=8)
    p.add_argument("--slowdown", type=float, default=0.09)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--provider", default="cpu")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--iobinding", default="none")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/aaco-reference-study"))
    p.add_argument("--no-lock", action="store_true", help="do not take /work/coord/measure.lock")
    p.add_argument("--out", type=Path, help="append the tables to this markdown file")
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    out = [f"## Reference study, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC\n",
           f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, shared with other"
           f" work (load average at start {os.getloadavg()[0]:.2f}).",
           f"Command: `python benchmarks/reference_study.py {' '.join(sys.argv[1:])}`\n"]
    for phase in args.phases.split(","):
        {"candidates": candidates, "quality": quality}[phase](args, out)
        out.append("")
    out.append(f"Load average at the end {os.getloadavg()[0]:.2f}.")
    text = "\n".join(out)
    print(text)
    if args.out:
        with args.out.open("a") as handle:
            handle.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
