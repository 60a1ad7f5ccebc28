"""Cold-start gate on CPU: what measuring it costs, false failures on unchanged runs, and detection.

Each *run* is a fresh Python process, as a CI job is: the item's own InferenceSession, 3 runs, then
:func:`pytest_aaco.api.measure_cold_start` builds ``--sessions`` fresh sessions. Per model, ``--history``
unchanged runs form the history; ``--aa`` more are judged against it (:func:`pytest_aaco.api.cold_start_verdict`):
each ``regression`` is a false failure; ``--ab`` runs of a candidate whose session creation is about 2x slower
(a constant MatMul chain ORT folds at creation, :func:`add_folding_work`) are detections. Also printed: the
phase's median wall time, the run-to-run sd of a process's offset (:func:`pytest_aaco.api.run_offset_sd`) and
of each run's fastest creation (``COLD_RUN_NOISE``). ``--side-by-side`` compares model and candidate as
``--aaco-compare`` does (:func:`pytest_aaco.api.compare_cold_start`; A/A: the model against itself).

    flock /work/coord/measure.lock python studies/cold_start_study.py --models squeezenet resnet50
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def own_session_feeds(model_path: str, name: str) -> dict:
    """The item's own InferenceSession, run 3 times (the state the cold-start phase starts in); its inputs."""
    import onnxruntime as ort

    from pytest_aaco.api import make_inputs

    own = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    feeds = make_inputs(name, own.get_inputs(), {}, {})
    for _ in range(3):
        own.run(None, feeds)
    return feeds


def child(model_path: str, name: str, sessions: int) -> None:
    """One run: the item's own session, 3 runs, then the timed cold-start phase; prints JSON."""
    from pytest_aaco.api import measure_cold_start, parse_provider

    feeds = own_session_feeds(model_path, name)
    start = time.perf_counter()
    cold = measure_cold_start(model_path, parse_provider("cpu"), feeds, sessions=sessions)
    data = cold.to_dict()
    data["phase_s"] = time.perf_counter() - start
    print(json.dumps(data))


def run_child(model_path: Path, name: str, sessions: int, candidate: Path | None = None) -> dict:
    extra = [str(candidate)] if candidate is not None else []
    out = subprocess.run([sys.executable, __file__, "--child", str(model_path), name, str(sessions), *extra],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def child_side_by_side(model_path: str, name: str, cycles: int, candidate: str) -> None:
    """One side-by-side run as the plugin makes it under ``--aaco-compare``: the item's own
    session, then :func:`pytest_aaco.api.compare_cold_start` (fresh sessions of the model
    and of *candidate* alternating, AB/BA, the shipped verdict with its confirmation look, no
    contention guard: the parent applies it); prints the samples and the verdict."""
    from pytest_aaco.api import LocalSessions, compare_cold_start, parse_provider

    feeds = own_session_feeds(model_path, name)
    cpu = parse_provider("cpu")
    start = time.perf_counter()
    no_spinning = {"session.intra_op.allow_spinning": "0"}  # the side-by-side gate's session configuration
    found = compare_cold_start(LocalSessions(Path(model_path), cpu, feeds, config_entries=dict(no_spinning)),
                               LocalSessions(Path(candidate), cpu, feeds, config_entries=dict(no_spinning)),
                               name, "baseline", cycles=cycles)
    print(json.dumps({**found.record(), "phase_s": time.perf_counter() - start}))


def side_by_side(name: str, args: argparse.Namespace, folder: Path) -> dict:
    """A/A: the model against itself; A/B: against the folded candidate; the shipped verdicts
    (:func:`pytest_aaco.api.compare_cold_start`), with and without the contention guard."""
    from pytest_aaco.api import zoo_model_path

    path = zoo_model_path(name)
    base_create = statistics.median(run_child(path, name, 3)["median_session_create_ms"] for _ in range(3))
    candidate, steps = folded_variant(path, name, base_create, folder)
    out: dict = {"model": name, "mode": "side-by-side", "cycles": args.sessions, "candidate_fold_steps": steps}
    for kind, other, runs in (("aa", path, args.aa), ("ab", candidate, args.ab)):
        records = [run_child(path, name, args.sessions, other) for _ in range(runs)]
        verdicts = [r["verdict"] for r in records]
        busy = [r.get("others_cores") for r in records]
        out[f"{kind}_runs"] = runs
        out[f"{kind}_failures"] = sum(v["fails"] for v in verdicts)
        out[f"{kind}_failures_with_contention_guard"] = sum(
            v["fails"] and (b is None or b <= args.max_contention) for v, b in zip(verdicts, busy, strict=True))
        out[f"{kind}_outcomes"] = [v["outcome"] for v in verdicts]
        out[f"{kind}_ratios"] = [round(v["metrics"]["session_create_ms"].get("ratio", math.nan), 3) for v in verdicts]
        out[f"{kind}_confirmation_looks"] = sum(r.get("first_look") is not None for r in records)
        out[f"{kind}_others_cores"] = busy
        out[f"{kind}_phase_s_median"] = round(statistics.median(r["phase_s"] for r in records), 3) if records else None
    return out


def add_folding_work(model_path: Path, steps: int, path: Path, size: int = 512) -> Path:
    """*path*, written: the model plus a chain of *steps* constant ``[size, size]`` MatMul + Tanh steps
    (2 size³ FLOP each) ending in an extra scalar output: every input is an initializer, so ORT folds
    the chain while it creates the session and the runs never see it (slower creation, the same runs)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model, rng = onnx.load(str(model_path)), np.random.default_rng(0)
    for i in range(steps + 1):  # fw.h0, then the weights of each step
        w = (rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32)
        model.graph.initializer.append(numpy_helper.from_array(w, f"fw.W{i}" if i else "fw.h0"))
        model.graph.node.extend([helper.make_node("MatMul", [f"fw.h{i - 1}", f"fw.W{i}"], [f"fw.mm{i}"]),
                                 helper.make_node("Tanh", [f"fw.mm{i}"], [f"fw.h{i}"])] if i else [])
    model.graph.node.append(helper.make_node("ReduceSum", [f"fw.h{steps}"], ["aaco_folding_work"], keepdims=0))
    model.graph.output.append(helper.make_tensor_value_info("aaco_folding_work", TensorProto.FLOAT, []))
    onnx.save(model, str(path))
    return path


def folded_variant(model_path: Path, name: str, base_create_ms: float, folder: Path) -> tuple[Path, int]:
    """The model plus enough folded 512x512 MatMul steps (about 0.27 GFLOP each) to double its
    session creation, sized from a 16-step probe: a smaller probe (32 steps of 256) added less
    than resnet50's run-to-run noise and sized its candidate 14 to 37x instead of 2x."""
    probe = add_folding_work(model_path, 16, folder / f"{name}-probe.onnx")
    probe_ms = statistics.median(run_child(probe, name, 3)["median_session_create_ms"] for _ in range(3))
    per_step = max((probe_ms - base_create_ms) / 16, 0.5)
    steps = max(1, round(base_create_ms / per_step))
    # one refinement: the probe's estimate was off by 3 to 4x for resnet50 (candidates at 6 to 9x)
    sized = add_folding_work(model_path, steps, folder / f"{name}-fold{steps}.onnx")
    sized_ms = statistics.median(run_child(sized, name, 3)["median_session_create_ms"] for _ in range(3))
    if sized_ms > base_create_ms:
        steps = max(1, round(steps * base_create_ms / (sized_ms - base_create_ms)))
    return add_folding_work(model_path, steps, folder / f"{name}-fold{steps}.onnx"), steps


def study(name: str, args: argparse.Namespace, folder: Path) -> dict:
    from pytest_aaco.api import ColdStart, cold_start_verdict, run_offset_sd, zoo_model_path

    path = zoo_model_path(name)
    unchanged = [run_child(path, name, args.sessions) for _ in range(args.history + args.aa)]
    history = [ColdStart.from_dict(r) for r in unchanged[: args.history]]
    base_create = statistics.median(r["median_session_create_ms"] for r in unchanged[: args.history])
    false_failures, guarded_failures, aa_outcomes = 0, 0, []
    for record in unchanged[args.history:]:
        verdict = cold_start_verdict(ColdStart.from_dict(record), history, name)
        aa_outcomes.append(verdict.outcome)
        false_failures += verdict.fails
        guarded_failures += cold_start_verdict(ColdStart.from_dict(record), history, name,
                                               max_contention=args.max_contention).fails
    candidate, steps = folded_variant(path, name, base_create, folder)
    detections, guarded_detections, ab_ratios, ab_outcomes, ab_others = 0, 0, [], [], []
    for _ in range(args.ab):
        record = run_child(candidate, name, args.sessions)
        verdict = cold_start_verdict(ColdStart.from_dict(record), history, name)
        ab_outcomes.append(verdict.outcome)
        ab_ratios.append(round(verdict.metrics["session_create_ms"].get("ratio", math.nan), 3))
        ab_others.append(record.get("others_cores"))
        detections += verdict.fails
        guarded_detections += cold_start_verdict(ColdStart.from_dict(record), history, name,
                                                 max_contention=args.max_contention).fails
    logs = [[math.log(v) for v in r["session_create_ms"]] for r in unchanged]
    first_logs = [[math.log(v) for v in r["first_run_ms"]] for r in unchanged]
    mins = [math.log(min(r["session_create_ms"])) for r in unchanged]
    return {
        "model": name,
        "sessions": args.sessions,
        "phase_s_median": round(statistics.median(r["phase_s"] for r in unchanged), 3),
        "session_create_ms_median": round(base_create, 2),
        "first_run_ms_median": round(statistics.median(r["median_first_run_ms"] for r in unchanged), 2),
        "run_offset_sd_create": round(math.expm1(run_offset_sd(logs)), 4),
        "run_offset_sd_first_run": round(math.expm1(run_offset_sd(first_logs)), 4),
        "run_to_run_sd_of_min_create": round(math.expm1(statistics.stdev(mins)), 4),
        "others_cores": [r.get("others_cores") for r in unchanged],
        "aa_runs": args.aa, "aa_false_failures": false_failures, "aa_outcomes": aa_outcomes,
        "aa_false_failures_with_contention_guard": guarded_failures,
        "candidate_fold_steps": steps, "ab_runs": args.ab, "ab_detections": detections,
        "ab_detections_with_contention_guard": guarded_detections,
        "ab_create_ratios": ab_ratios, "ab_outcomes": ab_outcomes, "ab_others_cores": ab_others,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        if len(sys.argv) > 5:
            child_side_by_side(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        else:
            child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["squeezenet", "resnet50"])
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--history", type=int, default=5)
    parser.add_argument("--aa", type=int, default=10)
    parser.add_argument("--ab", type=int, default=5)
    parser.add_argument("--max-contention", type=float, default=0.1, help="the contention guard's limit (cores)")
    parser.add_argument("--side-by-side", action="store_true",
                        help="judge fresh sessions of baseline and candidate alternating in one process instead")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.models, args.sessions, args.history, args.aa, args.ab = ["squeezenet"], 2, 2, 1, 1
    with tempfile.TemporaryDirectory(prefix="aaco-cold-") as tmp:
        for name in args.models:
            found = side_by_side(name, args, Path(tmp)) if args.side_by_side else study(name, args, Path(tmp))
            print(json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
