"""CUPTI kernel figures of the zoo models on the CUDA EP: kernels per run, KAR, GPU active ratio,
microkernel share, top kernels, and the bottleneck diagnosis they lead to.

For each model (the registry's ``zoo: <name>`` model, generated with seed 0; ONNX nodes counted in the file):

1. an InferenceSession on the CUDA EP through pytest-aaco's own runner (options, IO binding);
2. warmup, then ``--rounds`` x ``--runs`` timed runs with CUPTI off: the untraced p50;
3. the CUPTI phase (:func:`pytest_aaco.passes.kernels.cupti_pass`): ``--runs`` runs with
   ``CONCURRENT_KERNEL`` activity on, wall time on CUPTI's clock;
4. the same timed runs again with CUPTI off: shows that the traced phase leaves nothing behind.

Output: a markdown table on stdout (for docs/gpu.md) and every figure as JSON
(``$OUT/cupti_zoo.json`` when ``$OUT`` is set, else ``./cupti_zoo.json``).

Setup on the GPU machine (no network; carry the wheels; the driver must be at least the
CUDA version of nvidia-cuda-cupti, so pick the 13.0 wheels for a 580 driver)::

    pip install --no-deps wheels/cupti_python-13.0.1-*.whl wheels/nvidia_cuda_cupti-13.0.85-*.whl \\
        wheels/cuda_bindings-13.0.3-*.whl wheels/cuda_pathfinder-1.9.0-*.whl
    pip install -e . --no-deps
    python studies/cupti_zoo.py            # six zoo models, IO binding "all", 20 traced runs each

A CUPTI error (e.g. ``CUPTI_ERROR_INSUFFICIENT_PRIVILEGES``: profiling restricted to admin users
by ``NVreg_RestrictProfilingToAdminUsers``) is printed per model and the script exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

MODELS = ("resnet50", "squeezenet", "densenet121", "inception_v1", "inception_v2", "shufflenet")


def timed_p50(run, rounds: int, runs: int, sync) -> float:
    """Median over *rounds* of the mean ms of *runs* runs (synchronised after each round)."""
    means = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(runs):
            run()
        if sync is not None:
            sync()
        means.append((time.perf_counter_ns() - start) / 1e6 / runs)
    return statistics.median(means)


def one_model(name: str, args: argparse.Namespace) -> dict:
    import os as _os

    from pytest_aaco.measure.inference import bind_run, build_session
    from pytest_aaco.measure.inputs import make_inputs
    from pytest_aaco.measure.providers import parse_provider
    from pytest_aaco.measure.registry import zoo_model_path
    from pytest_aaco.passes.kernels import cupti_pass as trace_runs
    from pytest_aaco.passes.kernels import onnx_node_count
    from pytest_aaco.verdict.diagnosis import classify_bottleneck

    path = zoo_model_path(name)
    provider = parse_provider(args.provider)
    handle = build_session(path, provider, args.device_id)
    feeds = make_inputs(name, handle.session.get_inputs(), {}, {})
    run = bind_run(handle, feeds, args.iobinding, args.device_id)
    binding = getattr(run, "binding", None)
    sync = binding.synchronize_outputs if binding is not None and hasattr(binding, "synchronize_outputs") else None
    for _ in range(args.warmup):
        run()
    before = timed_p50(run, args.rounds, args.runs, sync)
    metrics = trace_runs(run, args.runs, node_count=onnx_node_count(path), sync=sync)
    after = timed_p50(run, args.rounds, args.runs, sync)
    diagnosis = classify_bottleneck(None, None, _os.cpu_count() or 1, kernel_data=metrics.to_diagnosis())
    return {"model": name, "provider": provider.short, "iobinding": args.iobinding,
            "untraced_ms_before": round(before, 4), "untraced_ms_after": round(after, 4),
            "traced_wall_ms": round(metrics.wall_ms, 4), "metrics": metrics.to_dict(),
            "diagnosis": diagnosis.to_dict() if diagnosis else None}


def table(rows: list[dict]) -> str:
    lines = ["| model | ONNX nodes | kernels/run | KAR | GPU active | microkernels (<10 µs) | p50 ms untraced"
             " (before / after) | traced ms/run | top kernels (share of kernel time) | diagnosis |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['model']} | error: {row['error']} |||||||||")
            continue
        m = row["metrics"]
        top = "; ".join(f"`{t['name'][:48]}` {t['share']:.0%}" for t in m["top"][:3])
        diag = (row["diagnosis"] or {}).get("category", "-")
        lines.append(f"| {row['model']} | {m['node_count']} | {m['kernels_per_run']:.0f} | {m['kar']:.2f} |"
                     f" {m['active_ratio']:.0%} | {m['microkernel_share']:.0%} | {row['untraced_ms_before']:.3f} /"
                     f" {row['untraced_ms_after']:.3f} | {row['traced_wall_ms']:.3f} | {top} | {diag} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--provider", default="cuda")
    parser.add_argument("--iobinding", default="all", choices=("none", "inputs", "all"))
    parser.add_argument("--device-id", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20, help="runs per timed round and in the CUPTI phase")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()

    import onnxruntime as ort

    print(f"onnxruntime {ort.__version__}, providers {ort.get_available_providers()}", file=sys.stderr)
    rows, failed = [], False
    for name in args.models:
        try:
            rows.append(one_model(name, args))
        except Exception as exc:  # noqa: BLE001 - one model's failure must not hide the others
            failed = True
            rows.append({"model": name, "error": f"{type(exc).__name__}: {exc}"})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    out = Path(os.environ.get("OUT") or ".") / "cupti_zoo.json"
    out.write_text(json.dumps({"onnxruntime": ort.__version__, "rows": rows}, indent=1), encoding="utf-8")
    print(table(rows))
    print(f"\nJSON: {out}")
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
