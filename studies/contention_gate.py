"""The stored gate on a busy CPU: does contention hide a real regression, and does it stay quiet on an
unchanged model? Two MLPs with seeded weights (4 and 6 hidden layers: +50% compute); 2 saved runs of the
4-layer one, then *spinners* busy processes (stopped by PID at the end) while each gate runs in its own
pytest process: the 6-layer model *slow* times, the 4-layer model *same* times. Prints each verdict, the
failed gates (exit 1) and the sessions whose results lead with ``not judged:``.

The sessions run one intra-op thread (``--threads 1``), so a regression under contention can stand on the
run's fastest iteration; with ``--threads 0`` (ONNX Runtime's default) fewer cores slow even that one.

    python studies/contention_gate.py [--keep DIR]   # 3 slowed gates, 5 unchanged, 4 spinners
    python studies/contention_gate.py --threads 0    # the same with ONNX Runtime's default threads
    python studies/contention_gate.py --smoke        # 1 and 1

Extra pytest options go through PYTEST_ADDOPTS; on a larger machine pin it to two cores (``taskset -c 2,3``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TEST_FILE = "def test_latency(benchmark_model):\n    benchmark_model()\n"
REGISTRY = "models:\n  mlp:\n    path: model.onnx\n"
ARGS = ("--aaco-models=models.yaml", "--aaco-baseline-dir=baselines", "--aaco-session-dir=bundles", "-p",
        "no:cacheprovider", "--aaco-warmup=3", "--aaco-rounds=6", "--aaco-iterations=20")


def mlp(layers: int, width: int = 384, batch: int = 32, seed: int = 0) -> onnx.ModelProto:
    """An MLP of *layers* hidden MatMul+Relu layers, width x width, float32 [batch, width] -> [batch, width];
    weights from numpy's seeded generator (the first layers of a deeper MLP equal a shallower one's)."""
    rng = np.random.default_rng(seed)
    nodes, inits, name = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("MatMul", [name, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Relu", [f"m{i}"], [f"h{i}"])]
        name = f"h{i}"
    graph = helper.make_graph(nodes, f"mlp{layers}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, [batch, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def gate(suite: Path, *extra: str) -> tuple[int, str, str]:
    """One pytest process in *suite*; (exit status, the first line of the pytest-aaco results section, the
    item's verdict: its message and what contention explained, from the session bundle)."""
    done = subprocess.run([sys.executable, "-m", "pytest", *ARGS, *extra], cwd=suite, capture_output=True,
                          text=True, errors="replace", timeout=600)
    lines = done.stdout.splitlines()
    heads = [i for i, line in enumerate(lines) if "pytest-aaco results" in line]
    first = lines[heads[0] + 1] if heads and heads[0] + 1 < len(lines) else ""
    items = sorted((suite / "bundles").glob("*/items/*.json"), key=lambda p: p.stat().st_mtime)
    verdict = json.loads(items[-1].read_text()).get("verdict") or {} if items else {}
    fig = verdict.get("fastest_iteration") or {}
    fastest = {k: round(v, 3) if isinstance(v, float) else v for k, v in fig.items()}
    told = f"{verdict.get('outcome')}; fastest iteration {fastest or '-'}; {str(verdict.get('message'))[:260]}"
    return done.returncode, first, told


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="1 slowed and 1 unchanged gate")
    parser.add_argument("--slow", type=int, default=3, metavar="N", help="slowed gates (default 3)")
    parser.add_argument("--same", type=int, default=5, metavar="N", help="unchanged gates (default 5)")
    parser.add_argument("--spinners", type=int, default=4, metavar="N", help="busy processes (default 4)")
    parser.add_argument("--keep", metavar="DIR", help="copy the suite (baselines, bundles) to DIR at the end")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="--aaco-intra-op-threads of every session (default 1; 0: ONNX Runtime's default)")
    args = parser.parse_args()
    threads = (f"--aaco-intra-op-threads={args.threads}",) if args.threads > 0 else ()
    if args.smoke:
        args.slow, args.same = 1, 1
    suite = Path(tempfile.mkdtemp(prefix="aaco-contention-"))
    for name, text in (("pytest.ini", "[pytest]\n"), ("test_perf.py", TEST_FILE), ("models.yaml", REGISTRY)):
        (suite / name).write_text(text)
    four, six = suite / "mlp4.onnx", suite / "mlp6.onnx"
    onnx.save(mlp(4), four)
    onnx.save(mlp(6), six)
    shutil.copy(four, suite / "model.onnx")
    for _ in range(2):
        rc, first, _ = gate(suite, "--aaco-save-baseline", *threads)
        if rc != 0:
            print(f"saving the baseline failed (exit {rc}): {first}")
            return 2
    print(f"suite {suite}; baseline: 2 saved runs of mlp4; load before spinning: {os.getloadavg()[0]:.1f}")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.spinners)]
    counts = {"slow_failed": 0, "same_failed": 0, "not_judged_first": 0}
    try:
        for which, model, n in (("slow", six, args.slow), ("same", four, args.same)):
            shutil.copy(model, suite / "model.onnx")
            for i in range(n):
                rc, first, told = gate(suite, *threads)
                counts[f"{which}_failed"] += rc == 1
                counts["not_judged_first"] += first.startswith("not judged:")
                print(f"{which} {i + 1}: exit {rc}; load {os.getloadavg()[0]:.1f}; first line: {first[:160]}")
                print(f"    {told}")
    finally:
        for p in spinners:  # stopped by PID, each one this script started
            os.kill(p.pid, signal.SIGTERM)
            p.wait()
    print(f"+50% compute (mlp4 -> mlp6) under {args.spinners} spinners: failed {counts['slow_failed']} of {args.slow}")
    print(f"unchanged under {args.spinners} spinners: failed {counts['same_failed']} of {args.same}")
    print(f"sessions whose results lead with 'not judged:': {counts['not_judged_first']} of {args.slow + args.same}")
    if args.keep:
        shutil.copytree(suite, args.keep, dirs_exist_ok=True)
    shutil.rmtree(suite, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
