"""Overhead of the side worker: a WorkerSide (another process) against an in-process LocalSide.

For each model (a zoo name, a name in ``onnx/backend/test/data/light/``, or a path) two interleaved
A/A measurements of the same model with :func:`pytest_aaco.api.run_cycles`, blocks of
about 0.2 s: ``local/local`` (two LocalSides, the reference) and ``worker/local`` (a WorkerSide in
``--python`` and a LocalSide). Per side the **overhead per block** (the block's wall time minus its
timed iterations, ms; for a WorkerSide also the pipe round trip, JSON and base64), median and p90;
per pair the **paired log-ratio** per cycle, mean and sd in % (about 0: its sd says whether the
process boundary adds noise). ``--allow-spinning 0`` is the side-by-side default; with ``--provider
cuda`` the worker's GPU memory (``nvidia-smi``) too. Prints a table, then the JSON (``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_aaco.api import (  # noqa: E402
    BlockRunner,
    LocalSide,
    WorkerSide,
    bind_run,
    block_iterations,
    build_session,
    make_inputs,
    paired_log_ratios,
    parse_provider,
    resolve_iobinding,
    run_cycles,
    warmup,
    zoo_model_path,
)


def model_path(name: str) -> Path:
    path = Path(name)
    return path if path.suffix == ".onnx" else zoo_model_path(name)


def local_side(name: str, path: Path, provider: Any, feeds: dict[str, np.ndarray], args: argparse.Namespace) -> Any:
    handle = build_session(path, provider, args.device_id, args.intra_op_threads, config_entries=config_entries(args))
    run = bind_run(handle, feeds, resolve_iobinding(args.iobinding, provider), args.device_id)
    _, warm_ms = warmup(run, 10)
    return LocalSide(name, run), float(np.median(warm_ms))


def config_entries(args: argparse.Namespace) -> dict[str, str]:
    return {"session.intra_op.allow_spinning": args.allow_spinning}


def measure(sides: list[BlockRunner], per_iteration_ms: float, args: argparse.Namespace) -> dict[str, Any]:
    count = block_iterations(per_iteration_ms)
    cycles = run_cycles(sides, {s.name: count for s in sides}, args.cycles, discard=args.discard,
                        rng=np.random.default_rng(1))
    result: dict[str, Any] = {"iterations_per_block": count, "sides": {}}
    for side in sides:
        blocks = [c.block(side.name) for c in cycles]
        overhead = np.array([(b.end_ns - b.start_ns) / 1e6 - b.latencies_ms.sum() - b.discarded_ms.sum()
                             for b in blocks])
        result["sides"][side.name] = {"overhead_ms_median": float(np.median(overhead)),
                             "overhead_ms_p90": float(np.percentile(overhead, 90)),
                             "latency_ms_median": float(np.median(np.concatenate([b.latencies_ms for b in blocks]))),
                             "block_ms_median": float(np.median([(b.end_ns - b.start_ns) / 1e6 for b in blocks]))}
    d = paired_log_ratios(cycles, sides[0].name, sides[1].name)
    result["d_mean_pct"] = float(np.expm1(d.mean()) * 100)
    result["d_sd_pct"] = float(d.std(ddof=1) * 100)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="squeezenet,densenet121")
    parser.add_argument("--provider", default="cpu")
    parser.add_argument("--python", default=sys.executable, help="the worker's interpreter (default: this one)")
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--discard", type=int, default=2)
    parser.add_argument("--iobinding", default="auto")
    parser.add_argument("--intra-op-threads", type=int, default=0)
    parser.add_argument("--device-id", type=int, default=0)
    parser.add_argument("--allow-spinning", default="1", choices=["0", "1"])
    parser.add_argument("--json", default="")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.models, args.cycles, args.discard = "squeezenet", 3, 1
    provider = parse_provider(args.provider)
    report: dict[str, Any] = {"provider": provider.short, "python": args.python, "cycles": args.cycles,
                              "discard": args.discard, "intra_op_threads": args.intra_op_threads,
                              "allow_spinning": args.allow_spinning, "models": {}}
    with WorkerSide(args.python, name="worker") as worker:
        info = worker.info
        report["worker"] = {"python": info.python_version, "onnxruntime": info.ort_version} if info else {}
        for name in [m.strip() for m in args.models.split(",") if m.strip()]:
            path = model_path(name)
            probe = build_session(path, provider, args.device_id, args.intra_op_threads)
            feeds = make_inputs(name, probe.session.get_inputs(), {}, {})
            del probe
            first, first_ms = local_side("local", path, provider, feeds, args)
            second, _ = local_side("local2", path, provider, feeds, args)
            start = time.perf_counter()
            pairs = {"local/local": measure([second, first], first_ms, args)}
            session = worker.load(path, provider, feeds, iobinding=args.iobinding, device_id=args.device_id,
                                  intra_op_threads=args.intra_op_threads, config_entries=config_entries(args))
            worker.warmup(10)
            pairs["worker/local"] = measure([worker, first], first_ms, args)
            memory = worker.memory()
            report["models"][name] = {"latency_ms": first_ms, "worker_create_ms": session.create_ms,
                                      "worker_rss_mb": memory.rss_mb, "worker_gpu_mb": memory.gpu_mb,
                                      "worker_gpu_source": memory.gpu_source, "pairs": pairs,
                                      "seconds": time.perf_counter() - start}
    print(f"{'model':<14}{'ms/iter':>9}{'pair':>14}{'it/block':>9}{'side':>8}{'overhead/block ms':>19}"
          f"{'p90':>7}{'d mean %':>10}{'d sd %':>8}")
    for name, entry in report["models"].items():
        for pair, figures in entry["pairs"].items():
            for side, row in figures["sides"].items():
                print(f"{name:<14}{entry['latency_ms']:>9.2f}{pair:>14}{figures['iterations_per_block']:>9}"
                      f"{side:>8}{row['overhead_ms_median']:>19.3f}{row['overhead_ms_p90']:>7.3f}"
                      f"{figures['d_mean_pct']:>+10.2f}{figures['d_sd_pct']:>8.2f}")
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
