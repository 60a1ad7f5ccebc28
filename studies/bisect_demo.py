"""``aaco bisect`` on a history made for it: 8 commits, a real compute regression at commit 5.

    python studies/bisect_demo.py                      # CPU: an MLP of 4 layers -> 5 at commit 5 (+25% compute)
    python studies/bisect_demo.py --provider cuda --layers 20   # GPU: 20 -> 21 layers (+5% device time)
    python studies/bisect_demo.py --smoke              # CI: one layer -> two, threshold 20%, the mechanism only

A temporary repository's registry has two seeded chains of ``--layers`` Gemm + Relu (``--width`` units,
batch ``--batch``): ``target`` gets one more layer at commit 5; ``other`` new weights of the same shape at
commit 3 (unrelated, no regression); other commits change a text file; ``--broken 6`` breaks the registry
there (the skip). Runs ``aaco bisect HEAD~7 HEAD`` with the default rules and prints each step, the commit
named (expected: 5), its per cent, the steps and the wall time. Exit 0 when commit 5 was named, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]


def mlp(layers: int, width: int, batch: int, seed: int) -> onnx.ModelProto:
    """``x[batch, width] -> (Gemm(width x width) -> Relu) x layers -> y``, weights seeded."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = np.zeros(width, np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"g{i}"]),
                  helper.make_node("Relu", [f"g{i}"], [f"r{i}"])]
        x = f"r{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def build(root: Path, args: argparse.Namespace) -> dict[int, str]:
    """The 8 commits; returns their SHAs by number (0 = GOOD)."""
    registry = "models:\n  target:\n    path: target.onnx\n  other:\n    path: other.onnx\n"
    (root / "models.yaml").write_text(registry)
    (root / "test_perf.py").write_text((REPO / "tests" / "perf" / "test_models.py").read_text())
    (root / "pytest.ini").write_text("[pytest]\naaco_models = models.yaml\n")
    onnx.save(mlp(args.layers, args.width, args.batch, seed=1), str(root / "target.onnx"))
    onnx.save(mlp(args.layers, args.width, args.batch, seed=2), str(root / "other.onnx"))
    git(root, "init", "-q")
    git(root, "config", "user.email", "bisect@example.com")
    git(root, "config", "user.name", "bisect demo")
    shas = {}
    for n in range(8):
        if n == 3:
            onnx.save(mlp(args.layers, args.width, args.batch, seed=3), str(root / "other.onnx"))
        if n == 5:
            onnx.save(mlp(args.layers + 1, args.width, args.batch, seed=1), str(root / "target.onnx"))
        if args.broken is not None and n == args.broken:
            (root / "models.yaml").write_text("models: [unclosed\n")
        elif args.broken is not None and n == args.broken + 1:
            (root / "models.yaml").write_text(registry)
        (root / "notes.txt").write_text(f"commit {n}\n")
        git(root, "add", "-A")
        git(root, "commit", "-qm", f"commit {n}" + (" (target +1 layer)" if n == 5 else ""))
        shas[n] = git(root, "rev-parse", "HEAD")
    return shas


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", default="cpu")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--broken", type=int, default=None, help="this commit's registry cannot be parsed")
    parser.add_argument("--smoke", action="store_true", help="1 layer of 512 -> 2, threshold 20%%")
    parser.add_argument("--out", default=None, help="write the result JSON here")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments for each step (after --)")
    args = parser.parse_args()
    if args.smoke:
        args.layers, args.width, args.batch = 1, 512, 32
    step_args = [f"--aaco-provider={args.provider}", "-p", "no:cacheprovider", *args.pytest_args]
    smoke = "-k target --aaco-threshold=20% --aaco-cold-start=0 --aaco-confirm=off --aaco-intra-op-threads=1"
    step_args += smoke.split() if args.smoke else []  # the mechanism only: no cold start, no confirming cycles
    import importlib.metadata as md
    if not any(e.value.startswith("pytest_aaco") for e in md.entry_points(group="pytest11")):
        step_args += ["-p", "pytest_aaco.plugin"]  # the plugin on PYTHONPATH only
    if args.provider != "cpu":
        step_args += ["-p", "no:benchmark"]
    with tempfile.TemporaryDirectory(prefix="aaco-bisect-demo-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        shas = build(root, args)
        out = Path(args.out) if args.out else Path(tmp) / "result.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        load = os.getloadavg()
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest_aaco",
                               "bisect", "--out", str(out), "HEAD~7", "HEAD", "--", *step_args],
                              cwd=root, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - started
        print(done.stdout + done.stderr)
        if not out.exists():
            print("no result written")
            return 1
        result = json.loads(out.read_text())
    named = (result.get("first_bad") or {}).get("commit")
    print(f"layers {args.layers} -> {args.layers + 1} at commit 5 ({1 / args.layers:+.1%} compute),"
          f" provider {args.provider}; load before {load[0]:.2f} on {os.cpu_count()} cores")
    print(f"named: commit {[n for n, s in shas.items() if s == named] or ['none']}; steps"
          f" {result['measured_steps']}; skipped {[s['commit'][:12] for s in result['skipped']]};"
          f" wall time {seconds:.0f} s")
    return 0 if named == shas[5] else 1


if __name__ == "__main__":
    sys.exit(main())
