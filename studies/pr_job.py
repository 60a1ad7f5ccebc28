"""A pull-request job as a new user runs it: ``pytest --aaco-compare=HEAD~1`` in a git repository.

Builds a throwaway git repository holding ``models.yaml``, ``test_perf.py`` and a zoo model, then
for each trial commits a candidate on top of the base and runs pytest in a fresh process:

* ``cosmetic``: the same graph with another ``doc_string`` (same compute, other bytes): must pass;
* ``slowed``: the model plus ``--matmuls`` MatMul+Tanh steps of ``--size`` (calibrate the count
  for the effect you want on your EP; 10 x 128 is about +10% for resnet50 on an H100's CUDA EP):
  must fail with a REGRESSION line.

Prints one line per trial (outcome, the item's line of the results table, the REGRESSION line)
and a summary. Needs pytest-aaco importable (installed, or ``PYTHONPATH`` and ``-p`` below) and
git. Example, on a GPU machine::

    python studies/pr_job.py --provider cuda --model resnet50 --trials 3 --matmuls 10 --size 128
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST_FILE = """
def test_latency(benchmark_model):
    benchmark_model()
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(root: Path, model: str) -> Path:
    """The base commit: ``models.yaml`` with one model ``net`` (a copy of the zoo's *model*)."""
    from pytest_aaco.measure.registry import zoo_model_path

    root.mkdir(parents=True)
    shutil.copy(zoo_model_path(model), root / "net.onnx")
    (root / "models.yaml").write_text("models:\n  net:\n    path: net.onnx\n")
    (root / "test_perf.py").write_text(TEST_FILE)
    git(root, "init", "-q")
    git(root, "config", "user.email", "pr@example.com")
    git(root, "config", "user.name", "pr")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    return root


def candidate(root: Path, base_model: Path, variant: str, matmuls: int, size: int, seed: int) -> None:
    """Commit the candidate model on top of the base (the base commit is HEAD~1)."""
    import onnx

    from pytest_aaco.measure.modelgen import add_extra_work

    model = onnx.load(str(base_model))
    if variant == "cosmetic":
        model.doc_string = f"same compute, different bytes ({seed})"
    else:
        model = add_extra_work(model, matmuls=matmuls, size=size, seed=seed)
    onnx.save(model, str(root / "net.onnx"))
    git(root, "commit", "-qam", f"{variant} {seed}")


def run_job(root: Path, args: argparse.Namespace) -> dict[str, str | float | int]:
    cmd = [sys.executable, "-m", "pytest", "test_perf.py", "--aaco-models=models.yaml", "--aaco-compare=HEAD~1",
           f"--aaco-provider={args.provider}", f"--aaco-threshold={args.threshold}", "-p", "no:cacheprovider",
           "-p", "no:benchmark", *args.extra]
    if args.load_plugin:
        cmd += ["-p", "pytest_aaco.plugin"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    text = proc.stdout + proc.stderr
    row = next((line for line in text.splitlines() if re.match(r"\s*net\s", line)), "")
    regression = next((line for line in text.splitlines() if line.startswith("REGRESSION")), "")
    return {"rc": proc.returncode, "s": time.perf_counter() - start, "row": row.strip(),
            "regression": regression.strip(), "tail": text[-1500:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--provider", default="cpu")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--matmuls", type=int, default=10)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--threshold", default="5%")
    parser.add_argument("--load-plugin", action="store_true", help="pass -p pytest_aaco.plugin (not installed)")
    parser.add_argument("extra", nargs="*", help="more pytest arguments, after --")
    args = parser.parse_args()
    from pytest_aaco.measure.registry import zoo_model_path

    work = Path(tempfile.mkdtemp(prefix="aaco-pr-"))
    root = make_repo(work / "repo", args.model)
    base_model = zoo_model_path(args.model)
    counts: dict[str, list[int]] = {"cosmetic": [], "slowed": []}
    for seed in range(args.trials):
        for variant in ("cosmetic", "slowed"):
            candidate(root, base_model, variant, args.matmuls, args.size, seed)
            job = run_job(root, args)
            counts[variant].append(int(job["rc"]))
            print(f"{seed} {variant}: exit {job['rc']} in {job['s']:.0f} s | {job['row']}", flush=True)
            if job["regression"]:
                print(f"    {job['regression']}", flush=True)
            if job["rc"] not in (0, 1):
                print(job["tail"], flush=True)
    print(f"\ncosmetic (must pass, exit 0): {counts['cosmetic'].count(0)}/{len(counts['cosmetic'])} passed")
    print(f"slowed (must fail, exit 1): {counts['slowed'].count(1)}/{len(counts['slowed'])} failed")
    print(f"provider {args.provider}, model {args.model}, slowed = +{args.matmuls} x {args.size} MatMul steps,"
          f" threshold {args.threshold}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, pid {os.getpid()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
