"""What ``--aaco-cold-start N`` costs an item, on the six zoo models on CPU.

Runs the perf suite (``python -m pytest tests/perf --aaco-provider=cpu``) ``--repeats`` times with
``--aaco-cold-start 0`` and with ``--aaco-cold-start N``, alternating, each in a fresh temporary
baseline folder (no baseline: every item is measured, none is gated) and bundle folder. Per item
it reads pytest's own ``--durations=0`` (setup + call: building the session, the measured rounds,
the extra passes, the verdict) and the bundle's ``cold_start.phase_s`` (the wall time of the
cold-start phase itself), and prints one JSON line per model and a summary:

* ``item_s_off`` / ``item_s_on``: median item time without / with the phase (s);
* ``phase_s``: median wall time of the phase (s), and ``phase_share``: phase / (item time with
  the phase minus the phase), the extra time relative to the item's normal measurement.

``--creation-profiler`` also measures what turning ORT's profiler on during a session's creation
(as :class:`pytest_aaco.passes.coldstart.LocalSessions` does, for the load / initialization split)
adds to the creation: fresh sessions with and without it, alternating, ``--pairs`` each.

On a shared machine it takes the measurement lock itself per pytest run (``flock``), so other
measurements can interleave between runs: ``--lock PATH``, by default ``/work/coord/measure.lock``
when that file exists; without it (a machine of one's own) the runs take no lock, as with ``--no-lock``::

    python studies/cold_start_cost.py --sessions 5 --repeats 2 --creation-profiler
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = "/work/coord/measure.lock"
DURATION = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+\S+::test_latency\[(\w+)-cpu\]")


def under_lock(command: list[str], lock: str | None) -> list[str]:
    """*command* under ``flock LOCK``, or as it is when *lock* is None."""
    return command if lock is None else ["flock", lock, *command]


def choose_lock(lock: str | None, no_lock: bool) -> str | None:
    """The lock file the runs take: *lock* (``--lock``), else :data:`LOCK` when it exists, else none
    (``--no-lock``, or a machine without the shared one). Exits naming what is missing when a lock is
    asked for but ``flock`` is not on PATH."""
    chosen = None if no_lock else lock or (LOCK if Path(LOCK).exists() else None)
    if chosen is not None and shutil.which("flock") is None:
        raise SystemExit(f"--lock {chosen}: flock is not on PATH (util-linux); install it or pass --no-lock")
    return chosen


def this_checkout() -> dict[str, str]:
    """The environment for a child process that imports this checkout's ``pytest_aaco`` first: ``python
    studies/cold_start_cost.py --only-profiler`` puts ``studies/`` first on ``sys.path``, so an editable
    install elsewhere would supply ``pytest_aaco`` (``python -m pytest`` here finds the checkout anyway)."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def perf_run(sessions: int, lock: str | None, extra: tuple[str, ...] = ()) -> dict[str, dict[str, float]]:
    """One perf-suite run: per model ``{"item_s": setup + call + teardown, "phase_s": ...}``. Exits with
    the run's exit status and the end of its output and errors when no duration line can be read."""
    with tempfile.TemporaryDirectory(prefix="aaco-cost-") as tmp:
        command = under_lock([sys.executable, "-m", "pytest", "tests/perf", "--aaco-provider=cpu",
                              "-p", "no:cacheprovider", "-q", "--durations=0", "-vv", f"--aaco-cold-start={sessions}",
                              f"--aaco-baseline-dir={tmp}/baselines", f"--aaco-session-dir={tmp}/sessions",
                              *extra], lock)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, env=this_checkout())
        out = done.stdout
        found: dict[str, dict[str, float]] = {}
        for line in out.splitlines():
            match = DURATION.match(line)
            if match:
                entry = found.setdefault(match.group(3), {"item_s": 0.0})
                entry["item_s"] += float(match.group(1))
        for path in Path(tmp, "sessions").glob("*/items/*.json"):
            record = json.loads(path.read_text())
            phase = (record.get("cold_start") or {}).get("phase_s")
            if record.get("model") in found and isinstance(phase, (int, float)):
                found[record["model"]]["phase_s"] = float(phase)
        if not found:
            raise SystemExit(f"no durations in the perf run's output (exit status {done.returncode}):"
                             f" {' '.join(command)}\n{out[-3000:]}{done.stderr[-3000:]}")
        return found


def creation_profiler_overhead(pairs: int) -> dict[str, dict[str, float]]:
    """Median ms of a fresh session's creation with ORT's profiler on and off, per zoo model."""
    import onnxruntime as ort

    from pytest_aaco.measure.registry import zoo_model_path

    found = {}
    for name in ("squeezenet", "resnet50", "densenet121"):
        path = str(zoo_model_path(name))
        times: dict[bool, list[float]] = {False: [], True: []}
        with tempfile.TemporaryDirectory(prefix="aaco-prof-") as tmp:
            for i in range(2 * pairs):
                profiled = bool(i % 2) if (i // 2) % 2 else not bool(i % 2)  # ABBA
                options = ort.SessionOptions()
                options.log_severity_level = 3
                if profiled:
                    options.enable_profiling = True
                    options.profile_file_prefix = f"{tmp}/p"
                start = time.perf_counter_ns()
                session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
                times[profiled].append((time.perf_counter_ns() - start) / 1e6)
                if profiled:
                    session.end_profiling()
                del session
        off, on = statistics.median(times[False]), statistics.median(times[True])
        found[name] = {"create_ms_off": round(off, 2), "create_ms_on": round(on, 2), "ratio": round(on / off, 3)}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--lock", default=None, help=f"the lock file each run takes (default: {LOCK} if it exists)")
    parser.add_argument("--no-lock", action="store_true", help="take no lock")
    parser.add_argument("--creation-profiler", action="store_true")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that the script runs")
    args = parser.parse_args()
    extra: tuple[str, ...] = ()
    if args.smoke:  # one model, few rounds, no lock
        args.sessions, args.repeats, args.pairs, args.no_lock = 1, 1, 1, True
        extra = ("-k", "squeezenet", "--aaco-rounds=2", "--aaco-warmup=1")
    lock = choose_lock(args.lock, args.no_lock)
    runs: dict[int, list[dict[str, dict[str, float]]]] = {0: [], args.sessions: []}
    for i in range(args.repeats):
        for sessions in ((0, args.sessions) if i % 2 == 0 else (args.sessions, 0)):
            runs[sessions].append(perf_run(sessions, lock, extra))
    shares = []
    for model in runs[0][0]:
        off = statistics.median(r[model]["item_s"] for r in runs[0] if model in r)
        on = statistics.median(r[model]["item_s"] for r in runs[args.sessions] if model in r)
        phase = statistics.median(r[model].get("phase_s", 0.0) for r in runs[args.sessions] if model in r)
        share = phase / max(on - phase, 1e-9)
        shares.append(share)
        print(json.dumps({"model": model, "item_s_off": round(off, 2), "item_s_on": round(on, 2),
                          "phase_s": round(phase, 3), "phase_share": round(share, 3)}), flush=True)
    print(json.dumps({"sessions": args.sessions, "repeats": args.repeats,
                      "phase_share_median": round(statistics.median(shares), 3),
                      "phase_share_max": round(max(shares), 3)}), flush=True)
    if args.creation_profiler:
        subprocess.run(under_lock([sys.executable, __file__, "--only-profiler", str(args.pairs)], lock),
                       cwd=ROOT, check=True, env=this_checkout())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--only-profiler":
        print(json.dumps({"creation_profiler": creation_profiler_overhead(int(sys.argv[2]))}), flush=True)
    else:
        main()
