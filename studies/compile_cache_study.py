"""What a side-by-side item costs when every compile takes N seconds: the compile cache, end to end.

    python studies/compile_cache_study.py [--compile-s 30] [--cache auto|off] [--keep]

Builds a throw-away git project (the zoo's squeezenet as ``models/net.onnx``, retrained in a second
commit so the item is measured side by side against ``HEAD~1``), installs the simulated compiling EP of
tests/fake_compiling_ep.py as ``MIGraphXExecutionProvider`` (it sleeps ``--compile-s`` seconds at session
creation unless its program is in the cache folder the plugin passes), and runs the plugin through
pytest in a fresh interpreter: ``--aaco-provider=migraphx --aaco-compare=HEAD~1`` with the defaults
(session pairs for a device EP, confirmation, the 5+5 cold-start sessions). Prints the pytest run's wall
time (s), the compiles per side, the sessions built, and the item's side-by-side and cold-start records.

Target (issue 20): with N = 30 s, at most 2 compiles per side and at most 2 x 30 s + 60 s per item.
``--cache off`` shows the cost without the cache (every fresh session compiles; use a small N).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

CONFTEST = """
import pytest
from fake_compiling_ep import CompilingEP, install

@pytest.fixture(autouse=True, scope="session")
def _simulated_migraphx():
    mp = pytest.MonkeyPatch()
    install(mp, CompilingEP(compile_s={compile_s}, log=__import__("pathlib").Path({log!r})))
    yield
    mp.undo()
"""

TEST = """
def test_latency(benchmark_model):
    benchmark_model()
"""

REGISTRY = """models:
  net:
    path: models/net.onnx
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def project(where: Path, compile_s: float, log: Path) -> Path:
    """The throw-away git project; returns its folder."""
    import onnx

    from pytest_aaco.measure.modelgen import add_extra_work
    from pytest_aaco.measure.registry import zoo_model_path

    repo = where / "project"
    (repo / "models").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "study@example.com")
    git(repo, "config", "user.name", "study")
    shutil.copy(zoo_model_path("squeezenet"), repo / "models" / "net.onnx")
    (repo / "models.yaml").write_text(REGISTRY)
    (repo / "test_perf.py").write_text(TEST)
    (repo / "conftest.py").write_text(CONFTEST.format(compile_s=compile_s, log=str(log)))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    onnx.save(add_extra_work(onnx.load(str(repo / "models" / "net.onnx")), matmuls=1, size=32),
              str(repo / "models" / "net.onnx"))
    git(repo, "commit", "-qam", "retrained")
    return repo


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-s", type=float, default=30.0, help="seconds per simulated compile")
    parser.add_argument("--cache", default="auto", help="auto (a folder in the temporary project) or off")
    parser.add_argument("--keep", action="store_true", help="keep the temporary project and print where")
    args = parser.parse_args()
    where = Path(tempfile.mkdtemp(prefix="aaco-compile-study-"))
    try:
        log = where / "events.jsonl"
        repo = project(where, args.compile_s, log)
        cache = "off" if args.cache == "off" else str(where / "compile-cache")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
               "AACO_CACHE_DIR": str(where / "user-cache")}
        command = [sys.executable, "-m", "pytest", "test_perf.py", "-q", "-p", "no:cacheprovider",
                   "--aaco-models=models.yaml", "--aaco-provider=migraphx", "--aaco-iobinding=none",
                   "--aaco-placement=off", "--aaco-reference=none", "--aaco-compare=HEAD~1",
                   f"--aaco-compile-cache={cache}"]
        start = time.monotonic()
        done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, check=False)
        wall = time.monotonic() - start
        events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        compiles = [e for e in events if e["event"] == "compile"]
        per_side = {side: sum(f"/{side}/" in e["folder"] + "/" for e in compiles) for side in ("baseline", "candidate")}
        print(f"compile {args.compile_s:g} s, cache {args.cache}: pytest exit {done.returncode}, wall {wall:.1f} s"
              f" (target <= {2 * args.compile_s + 60:.0f} s), sessions {len(events)}, compiles {len(compiles)}"
              f" (baseline {per_side['baseline']}, candidate {per_side['candidate']},"
              f" outside a side folder {len(compiles) - sum(per_side.values())})")
        bundles = sorted((repo / ".aaco" / "sessions").glob("*/items/*.json"))
        for item_file in bundles:
            item = json.loads(item_file.read_text())
            sbs = ((item.get("verdict") or {}).get("side_by_side")) or item.get("side_by_side") or {}
            cold = item.get("cold_start") or {}
            sides = sbs.get("sides", {})
            print(f"  {item.get('nodeid')}: side by side {sbs.get('duration_s', 0):.1f} s over {sbs.get('cycles')}"
                  f" cycles, sessions' cache {{baseline: {sides.get('baseline', {}).get('compile_cache')},"
                  f" candidate: {sides.get('candidate', {}).get('compile_cache')}}};"
                  f" cold start phase {cold.get('phase_s')} s, cache {cold.get('compile_cache')},"
                  f" with compile {cold.get('compile_ms')} ms vs baseline side"
                  f" {(cold.get('baseline_side') or {}).get('compile_ms')} ms")
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-2000:])
        if args.keep:
            print(f"kept: {where}")
        return 0 if done.returncode == 0 else 1
    finally:
        if not args.keep:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
