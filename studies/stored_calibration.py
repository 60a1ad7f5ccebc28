"""Calibration of the stored gate and of ``aaco diff`` on the CPU, with the real plugin in pytest processes.

    python studies/stored_calibration.py gate [--k 4]    # ResNet-50, 5 saves, then 3 unchanged gates and 2 gates
                                                         # of a slower variant, interleaved
    python studies/stored_calibration.py gate --smoke    # squeezenet, 2 saves, 1 + 1 gates
    python studies/stored_calibration.py diff --pairs 10 # aaco diff A/A over pairs of back-to-back saves

``gate``: the variant comes from ../shared/tools/slow_model.py (``--k`` 3x3 convs of ``--channels``,
outputs unchanged); its bare slowdown (two InferenceSessions alternated, median of ``--bare-runs`` pair
ratios) is printed beside the gates. Prints every gate's outcome and message, the counts, and the load
average before and after; work in ``--work`` (default /tmp/aaco-calibration-MODE).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pytest_aaco.api import zoo_model_path

REPO = Path(__file__).resolve().parents[1]
SLOW_MODEL = REPO.parent / "shared" / "tools" / "slow_model.py"  # ../shared beside the checkout, as in CI
TEST = "def test_latency(benchmark_model):\n    assert benchmark_model().measure_iterations > 0\n"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def project(work: Path, model: str) -> Path:
    """A pytest project gating one registry item ``m`` whose file ``m.onnx`` the caller swaps; returns it."""
    proj = work / "proj"
    proj.mkdir(parents=True, exist_ok=True)
    aa = work / "aa.onnx"
    if not aa.exists():
        aa.write_bytes(zoo_model_path(model).read_bytes())  # the registry's ``zoo: MODEL``
    (proj / "models.yaml").write_text("models:\n  m:\n    path: m.onnx\n")
    (proj / "test_perf.py").write_text(TEST)
    (proj / "pytest.ini").write_text("[pytest]\naaco_models = models.yaml\n")
    return proj


def slow_variant(work: Path, k: int, channels: int) -> Path:
    out = work / f"k{k}c{channels}.onnx"
    if not out.exists():
        subprocess.run([sys.executable, str(SLOW_MODEL), str(work / "aa.onnx"), str(out), str(k), str(channels)],
                       check=True)
    return out


def bare_slowdown(aa: Path, slow: Path, threads: int, runs: int) -> float:
    """Median over *runs* alternated pairs of (slow / aa) latency, each session on *threads* intra-op threads."""
    import onnxruntime as ort

    def session(path: Path) -> tuple[ort.InferenceSession, dict[str, np.ndarray]]:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        s = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        feed = {i.name: np.random.default_rng(0).standard_normal(
            [d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32) for i in s.get_inputs()}
        return s, feed

    (a, fa), (b, fb) = session(aa), session(slow)
    for _ in range(3):
        a.run(None, fa)
        b.run(None, fb)
    ratios = []
    for _ in range(runs):
        t0 = time.perf_counter()
        a.run(None, fa)
        t1 = time.perf_counter()
        b.run(None, fb)
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / (t1 - t0))
    return float(np.median(ratios))


def pytest_run(proj: Path, model_file: Path, baselines: Path, bundle: Path, extra: list[str]) -> dict:
    """One pytest process on *model_file*; returns the item's record from its session bundle (with ``rc``)."""
    (proj / "m.onnx").write_bytes(model_file.read_bytes())
    cmd = [sys.executable, "-m", "pytest", "test_perf.py", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
           "--aaco-provider=cpu", f"--aaco-baseline-dir={baselines}", f"--aaco-session-dir={bundle}",
           "--aaco-cold-start=0", *extra]
    proc = subprocess.run(cmd, cwd=proj, capture_output=True, text=True, errors="replace")
    items = sorted(bundle.glob("*/items/*.json"))
    record = json.loads(items[-1].read_text()) if items else {"verdict": {"message": proc.stdout[-400:]}}
    record["rc"] = proc.returncode
    return record


def gate(args: argparse.Namespace) -> int:
    work = Path(args.work or "/tmp/aaco-calibration-gate" + ("-smoke" if args.smoke else ""))
    model = "squeezenet" if args.smoke else args.model
    saves, steps = (2, ["aa", "slow"]) if args.smoke else (args.saves, ["aa", "slow", "aa", "slow", "aa"])
    print(f"load average before: {load()}; model {model}, {saves} saves, gates {' '.join(steps)}")
    proj = project(work, model)
    slow = slow_variant(work, args.k, args.channels)
    bare = bare_slowdown(work / "aa.onnx", slow, args.intra_op_threads, args.bare_runs)
    print(f"bare slowdown of the variant (k={args.k}, {args.channels} channels): {bare - 1:+.1%}"
          f" (median of {args.bare_runs} alternated pairs)")
    extra = [f"--aaco-intra-op-threads={args.intra_op_threads}"] + (["--aaco-rounds=5"] if args.smoke else [])
    baselines = work / "baselines"
    for i in range(saves):
        rec = pytest_run(proj, work / "aa.onnx", baselines, work / f"save{i}", ["--aaco-save-baseline", *extra])
        summary = (rec.get('result') or {}).get('summary') or {}
        print(f"save {i + 1}: rc={rec['rc']} mean {summary.get('mean_ms', float('nan')):.3f} ms")
    found: dict[str, list[dict]] = {"aa": [], "slow": []}
    for i, step in enumerate(steps):
        rec = pytest_run(proj, work / "aa.onnx" if step == "aa" else slow, baselines, work / f"gate{i}", extra)
        v = rec.get("verdict") or {}
        found[step].append({"failed": rec["rc"] != 0, "outcome": v.get("outcome"), "ratio": v.get("ratio"),
                            "raw": v.get("raw_ratio")})
        print(f"gate {i + 1} {step}: rc={rec['rc']} {v.get('outcome')} | {str(v.get('message'))[:240]}")
    aa_failed = sum(r["failed"] for r in found["aa"])
    caught = sum(r["failed"] and r["outcome"] == "regression" for r in found["slow"])
    raws = [r["raw"] - 1 for r in found["slow"] if r["raw"]]
    print(f"slowdown caught in {caught} of {len(found['slow'])} gates (bare {bare - 1:+.1%}; raw change median"
          f" {statistics.median(raws):+.1%})" if raws else f"slowdown caught in {caught} of {len(found['slow'])}")
    print(f"unchanged gates failed: {aa_failed} of {len(found['aa'])}; words"
          f" {[r['outcome'] for r in found['aa']]}")
    print(f"load average after: {load()}")
    return 0


def diff(args: argparse.Namespace) -> int:
    work = Path(args.work or "/tmp/aaco-calibration-diff")
    print(f"load average before: {load()}; model {args.diff_model}, {args.pairs} pairs of back-to-back saves")
    proj = project(work, args.diff_model)
    extra = [f"--aaco-intra-op-threads={args.intra_op_threads}", "--aaco-save-baseline"]
    words = []
    for i in range(args.pairs):
        sides = []
        for side in "ab":
            folder = work / f"pair{i}" / side
            pytest_run(proj, work / "aa.onnx", folder, work / f"pair{i}" / f"bundle-{side}", extra)
            sides.append(folder)
        proc = subprocess.run([sys.executable, "-m", "pytest_aaco", "diff", str(sides[0]), str(sides[1])],
                              capture_output=True, text=True, errors="replace")
        row = next((line for line in proc.stdout.splitlines() if line.startswith("test_latency[")), "")
        word = row.split()[-1] if row else f"(no row, rc {proc.returncode})"
        words.append(word)
        print(f"pair {i + 1}: rc={proc.returncode} {word} | {' '.join(row.split()[1:])[:200]}")
    other = sum(w != "no-regression" for w in words)
    print(f"aaco diff A/A: {args.pairs - other} of {args.pairs} read no-regression, {other} other"
          f" ({', '.join(sorted(set(words)))}); load average after: {load()}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("gate", "diff"))
    p.add_argument("--smoke", action="store_true", help="gate: squeezenet, 2 saves, 1 unchanged + 1 slowed gate")
    p.add_argument("--model", default="resnet50", metavar="ZOO", help="gate: zoo model (default: resnet50)")
    p.add_argument("--diff-model", default="squeezenet", metavar="ZOO", help="diff: zoo model (default: squeezenet)")
    p.add_argument("--saves", type=int, default=5, metavar="N", help="gate: saved runs (default: 5)")
    p.add_argument("--k", type=int, default=2, metavar="K", help="slow variant: extra 3x3 convs (default: 2)")
    p.add_argument("--channels", type=int, default=8, metavar="C", help="slow variant: their channels (default: 8)")
    p.add_argument("--bare-runs", type=int, default=60, metavar="N", help="bare A/B pairs (default: 60)")
    p.add_argument("--intra-op-threads", type=int, default=1, metavar="N", help="ORT intra-op threads (default: 1)")
    p.add_argument("--pairs", type=int, default=10, metavar="N", help="diff: pairs of saves (default: 10)")
    p.add_argument("--work", default=None, metavar="DIR", help="working folder (default: /tmp/aaco-calibration-MODE)")
    args = p.parse_args()
    return gate(args) if args.mode == "gate" else diff(args)


if __name__ == "__main__":
    sys.exit(main())
