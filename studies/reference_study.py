"""Reference workload and stored-baseline verdict quality, measured in fresh processes (issue 11).

A study, not a CI test. Every measurement runs in a separate Python process (runs of one process
share its state; the gate compares runs of different processes), through the product's own
code: :func:`pytest_aaco.measure.inference.run_benchmark` with a
:class:`pytest_aaco.measure.reference_workload.Reference`.

Phases (``--phases``, comma-separated):

* ``candidates``: ``--processes`` processes each measure ResNet-50 (the item) once with every
  candidate reference (``--candidates``, in random order). Printed per candidate: the sd across
  processes of the raw run mean ln(item) and of the normalized ln(item) - ln(reference), and the
  reference's share of the measured time.
* ``quality``: for ResNet-50 and Inception (``--models``): ``--history`` processes recorded as
  the history, then ``--gates`` processes unchanged (A/A) interleaved with ``--gates`` processes of
  a variant made slower by ``--slowdown`` (default 9%) with :func:`pytest_aaco.measure.modelgen.add_extra_work`,
  whose true slowdown is measured by interleaving A and B in one process. Every gate is judged
  with :func:`pytest_aaco.history.judge.judge_history` on the same history twice, normalized (the reference
  valid) and raw (the reference dropped); printed: false alarms, detections, median MDE.
  Leave-one-out re-judging of all unchanged processes (each in turn the gate, 5 others the
  history) adds A/A judgements.

Measurements hold ``/work/coord/measure.lock`` when it exists (``flock``), one process at a time.

    python studies/reference_study.py --phases candidates --processes 10
    python studies/reference_study.py --phases quality --history 5 --gates 8

* ``gpu``: on ``--provider cuda`` (one command within 9 minutes, ``--minutes``): the slower
  variant is calibrated (``--slowdown``, default 9%; use 0.10), ``--history`` processes are the
  history, then gate processes (3 unchanged, 1 slower, repeated) run until the time budget, at
  least ``--min-aa`` unchanged. Each gate process measures twice, the second time on a fresh
  session after releasing the first (the confirmation look), and records RSS growth, the
  process's own device memory (:class:`pytest_aaco.samplers.gpu_memory.DeviceMemoryProbe`) and the
  device-wide peak. Printed per gate: the verdict on the normalized series, the raw change, the
  machine's drift, memory figures, and what the old device-peak VRAM rule would have said.

    python studies/reference_study.py --phases gpu --provider cuda --iobinding all --no-lock \\
        --models resnet50 --slowdown 0.10 --minutes 8 --workdir /tmp/rs-gpu --out gpu_reference.md
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

def measure_once(handle_args: tuple[Any, ...], name: str, ref: Any, args: argparse.Namespace) -> dict[str, Any]:
    """One look as the plugin measures an item: device-memory probe and RSS around the session's
    creation and the measured rounds, telemetry during the rounds, the reference alongside."""
    from pytest_aaco.benchmark import add_rss_growth, rss_mb
    from pytest_aaco.history.store import run_record
    from pytest_aaco.measure.inference import MeasureSettings, build_session, run_benchmark
    from pytest_aaco.measure.inputs import make_inputs
    from pytest_aaco.samplers import TelemetrySession, build_samplers
    from pytest_aaco.samplers.gpu_memory import DeviceMemoryProbe, record_own_vram

    path, provider = handle_args
    probe = DeviceMemoryProbe(provider.short, 0)
    probe.start()
    before = rss_mb()
    handle = build_session(Path(path), provider, 0, args.threads)
    build_rss = rss_mb() - before
    feeds = make_inputs(name, handle.session.get_inputs(), {"batch": 1, "N": 1}, {})
    settings = MeasureSettings(warmup=args.warmup, rounds=args.rounds, iobinding=args.iobinding)
    start = rss_mb()
    telemetry = TelemetrySession(build_samplers(provider.short, 0, 0.1)) if args.memory else None
    result = run_benchmark(handle, feeds, settings, name, 1, telemetry=telemetry, reference=ref)
    add_rss_growth(result, build_rss, start)
    mb, method = probe.stop()
    summary = (result.telemetry or {}).setdefault("summary", {})
    record_own_vram(summary, mb, method)
    series = result.reference
    assert series is not None
    return {"model": name, "reference": ref.name, "reference_id": ref.id,
            "rounds": result.round_log_means.tolist(), "ref_log_means": series.log_means.tolist(),
            "normalized": series.normalized.tolist(), "mean_ms": result.mean_ms,
            "ref_mean_ms": series.mean_ms, "share": series.share, "pid": os.getpid(), "time": time.time(),
            "record": run_record(result) if args.memory else None}


def worker(args: argparse.Namespace) -> None:
    """Measure each model once per reference (and per look) in this process; one JSON line each.

    With ``--looks 2`` the second look is the confirmation: the first session is released, then
    a fresh one is built and measured, as the plugin's confirmation does."""
    import gc

    from pytest_aaco.measure.reference_workload import build_reference

    provider = study_provider(args)
    refs = [build_reference(name, provider, 0, args.threads, args.iobinding) for name in args.refs.split(",")]
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    for model in args.models.split(","):
        name, _, path = model.partition("=")
        for ref in [refs[i] for i in rng.permutation(len(refs))]:
            for look in range(args.looks):
                row = measure_once((path, provider), name, ref, args)
                row["look"] = look
                print(json.dumps(row), flush=True)
                gc.collect()  # the look's session is released before the next one is built


def study_provider(args: argparse.Namespace) -> Any:
    """The EP of ``--provider`` with the ``--provider-option KEY=VALUE`` options."""
    from dataclasses import replace

    from pytest_aaco.measure.providers import parse_provider

    options = dict(option.split("=", 1) for option in args.provider_option)
    return replace(parse_provider(args.provider), options=options)


def spawn(models: dict[str, Path], refs: list[str], args: argparse.Namespace, looks: int = 1) -> list[dict[str, Any]]:
    """One fresh worker process (under the measurement lock); its JSON lines."""
    cmd = [sys.executable, __file__, "--worker", "--models", ",".join(f"{k}={v}" for k, v in models.items()),
           "--refs", ",".join(refs), "--rounds", str(args.rounds), "--warmup", str(args.warmup),
           "--provider", args.provider, "--threads", str(args.threads), "--iobinding", args.iobinding,
           "--looks", str(looks)] + (["--memory"] if args.memory else [])
    cmd += [f"--provider-option={option}" for option in args.provider_option]
    if LOCK.exists() and not args.no_lock:
        cmd = ["flock", str(LOCK), *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=args.spawn_timeout)
    if done.returncode:
        raise SystemExit(f"worker failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-3000:]}")
    out = done.stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def model_file(name: str) -> Path:
    from pytest_aaco.measure.registry import zoo_model_path

    return zoo_model_path(name)


# ------------------------------------------------------------------------------- candidates phase

def candidates(args: argparse.Namespace, out: list[str]) -> None:
    from pytest_aaco.verdict.stats import fit_reference

    refs = args.candidates.split(",")
    saved = args.workdir / "candidates.json"
    rows: list[dict[str, Any]] = json.loads(saved.read_text()) if saved.is_file() else []
    if not rows:  # a second command with the same --workdir only recomputes the table
        for i in range(args.processes):
            rows += spawn({"resnet50": model_file("resnet50")}, refs, args)
            print(f"  process {i + 1}/{args.processes} done", file=sys.stderr, flush=True)
        saved.write_text(json.dumps(rows))
    processes = len(rows) // len(refs)
    out.append(f"### Reference candidates: ResNet-50 on {args.provider}, {processes} processes,"
               f" {args.rounds} rounds each\n")
    out.append("| reference | sd raw ln(item) | sd ln(item) - ln(reference) | slope of ln(item) on ln(reference)"
               " (correlation) | residual sd of that line | reference ms/iteration | share of measured time |")
    out.append("|---|---|---|---|---|---|---|")
    for ref in refs:
        mine = [r for r in rows if r["reference"] == ref]
        raw = np.array([np.mean(r["rounds"]) for r in mine])
        ref_means = np.array([np.mean(r["ref_log_means"]) for r in mine])
        norm = np.array([np.mean(r["normalized"]) for r in mine])
        fit = fit_reference(raw, ref_means, slope_prior_sd=float("inf"))
        ref_ms, share = np.median([r["ref_mean_ms"] for r in mine]), np.median([r["share"] for r in mine])
        out.append(f"| {ref} | {np.std(raw, ddof=1):.2%} | {np.std(norm, ddof=1):.2%} | {fit.slope:.2f}"
                   f" ({np.corrcoef(raw, ref_means)[0, 1]:.2f}) | {np.sqrt(fit.residual_var):.2%} | {ref_ms:.2f} |"
                   f" {share:.0%} |")
    out.append(f"\nResNet-50 mean latency: median {np.median([r['mean_ms'] for r in rows]):.1f} ms per iteration.")


# ------------------------------------------------------------------------------- quality phase

def slower_variant(name: str, slowdown: float, args: argparse.Namespace) -> tuple[Path, float]:
    """A copy of zoo model *name* about *slowdown* slower (extra MatMul/Tanh work), and its true
    slowdown measured by interleaving A and B blocks in this process on ``--provider`` (median of
    the paired log-ratios, :func:`pytest_aaco.measure.interleave.paired_log_ratios`)."""
    import onnx

    from pytest_aaco.measure.inference import bind_run, build_session, warmup
    from pytest_aaco.measure.inputs import make_inputs
    from pytest_aaco.measure.interleave import LocalSide, block_iterations, paired_log_ratios, run_cycles
    from pytest_aaco.measure.modelgen import add_extra_work, save_model_atomic

    provider = study_provider(args)
    base = onnx.load(str(model_file(name)))

    def side(label: str, path: Path) -> tuple[LocalSide, float]:
        handle = build_session(path, provider, 0, args.threads)
        feeds = make_inputs(name, handle.session.get_inputs(), {"batch": 1, "N": 1}, {})
        run = bind_run(handle, feeds, args.iobinding, 0)
        _, warm = warmup(run, 20)
        return LocalSide(label, run), float(np.median(warm[len(warm) // 2:]))

    a, a_ms = side("a", model_file(name))
    per_matmul_ms = 0.4 if provider.short == "cpu" else 0.01  # first guess: a 256² MatMul+Tanh step
    matmuls = max(1, round(slowdown * a_ms / per_matmul_ms))
    path = args.workdir / f"{name}-{provider.short}-slower.onnx"
    true = 0.0
    for _ in range(5):
        save_model_atomic(add_extra_work(base, matmuls), path)
        b, _ = side("b", path)
        n = block_iterations(a_ms, 0.3)
        cycles = run_cycles([a, b], {"a": n, "b": n}, 12, discard=1)
        true = float(np.exp(np.median(paired_log_ratios(cycles, "a", "b"))) - 1)
        print(f"  {name}: {matmuls} extra MatMuls -> {true:+.1%}", file=sys.stderr, flush=True)
        if abs(true - slowdown) < 0.015:
            break
        matmuls = max(1, round(matmuls * slowdown / max(true, 0.005)))
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


def as_result(row: dict[str, Any], with_reference: bool, telemetry: bool = False) -> Any:
    """A BenchmarkResult carrying the recorded round log-means (each round as its exp, one iteration)
    and, with *telemetry*, the recorded telemetry summary (memory figures)."""
    from pytest_aaco.measure.results import BenchmarkResult, ReferenceSeries, RoundResult

    rounds = [RoundResult(i, np.array([np.exp(v)]), 0, 0) for i, v in enumerate(row["rounds"])]
    series = None
    if with_reference:
        series = ReferenceSeries(row["reference"], row["reference_id"], np.array(row["ref_log_means"]),
                                 np.array(row["normalized"]), row["ref_mean_ms"], 1, row["share"])
    summary = (row.get("record") or {}).get("telemetry", {}) if telemetry else {}
    return BenchmarkResult(row["model"], "cpu", rounds, 0, np.empty(0), 0.0, 0.0, ["CPUExecutionProvider"],
                           reference=series, telemetry={"summary": summary})


def judge(history_rows: list[dict[str, Any]], gate_row: dict[str, Any], with_reference: bool,
          workdir: Path, telemetry: bool = False, level: float = 0.05, priors: Any = None) -> Any:
    """The plugin's first look on recorded rows; *priors* (``RunnerPriors``) moderate the variances."""
    from pytest_aaco.history.fingerprint import Fingerprint
    from pytest_aaco.history.judge import judge_history
    from pytest_aaco.history.store import load_baseline, save_run
    from pytest_aaco.options import GateSettings

    fp = Fingerprint({"model": gate_row["model"], "provider": "CPUExecutionProvider"})
    path = workdir / "judge" / f"{gate_row['model']}-{os.getpid()}.json"
    path.unlink(missing_ok=True)
    for row in history_rows:
        save_run(path, gate_row["model"], fp, as_result(row, with_reference, telemetry))
    baseline = load_baseline(path)
    return judge_history(as_result(gate_row, with_reference, telemetry), baseline, fp, GateSettings(threshold=0.05),
                         level=level, label=gate_row["model"], prior=priors and priors.raw,
                         adjusted_prior=priors and priors.adjusted)


def study_priors(data: dict[str, Any], models: list[str], workdir: Path) -> Any:
    """The runner's variance priors (``pytest_aaco.history.store.runner_priors``) fitted on the history
    runs of every model, as the plugin fits them on a baseline folder (3 models at least)."""
    from pytest_aaco.history.fingerprint import Fingerprint
    from pytest_aaco.history.store import runner_priors, save_run

    folder = workdir / "priors"
    folder.mkdir(parents=True, exist_ok=True)
    for name in models:
        path = folder / f"{name}.json"
        path.unlink(missing_ok=True)
        for proc in data["history"]:
            row = next(r for r in proc if r["model"] == name)
            save_run(path, name, Fingerprint({"model": name, "provider": "CPUExecutionProvider"}),
                     as_result(row, True))
    return runner_priors(folder)


def report_quality(data: dict[str, Any], models: list[str], args: argparse.Namespace, out: list[str]) -> None:
    from pytest_aaco.history.judge import REGRESSION

    out.append(f"### Stored-baseline gate on {args.provider}: {len(data['history'])}-run history,"
               f" {len(data['aa'])} unchanged (A/A) and {len(data['ab'])} slower (A/B) gate processes,"
               f" threshold 5%, level {args.level:g} (LOND's first level for {len(models)} items at FDR 0.05),"
               f" reference {args.reference}\n")
    out.append("| model | series | A/A false alarms | A/A leave-one-out false alarms | median MDE (A/A) |"
               " A/B detected | true slowdown of B |")
    out.append("|---|---|---|---|---|---|---|")
    runner = study_priors(data, models, args.workdir)
    for name in models:
        hist = [next(r for r in proc if r["model"] == name) for proc in data["history"]]
        aa = [next(r for r in proc if r["model"] == name) for proc in data["aa"]]
        ab = [next(r for r in proc if r["model"] == name) for proc in data["ab"]]
        for with_ref in (True, False):
            for priors in [None] + ([runner] if (runner.adjusted if with_ref else runner.raw) else []):
                v_aa = [judge(hist, g, with_ref, args.workdir, level=args.level, priors=priors) for g in aa]
                v_ab = [judge(hist, g, with_ref, args.workdir, level=args.level, priors=priors) for g in ab]
                pool = hist + aa
                loo = []
                for i in range(len(pool)):
                    others = [pool[(i + k) % len(pool)] for k in range(1, len(hist) + 1)]
                    loo.append(judge(others, pool[i], with_ref, args.workdir, level=args.level, priors=priors))
                fa = sum(v.outcome == REGRESSION for v in v_aa)
                fl = sum(v.outcome == REGRESSION for v in loo)
                det = sum(v.outcome == REGRESSION for v in v_ab)
                mde = np.median([v.mde for v in v_aa + loo if v.mde is not None])
                kinds = "/".join(sorted({v.series for v in v_aa if v.series}))
                out.append(f"| {name} | {kinds}{' + runner prior' if priors else ''} | {fa}/{len(v_aa)} |"
                           f" {fl}/{len(loo)} | {mde:.1%} | {det}/{len(v_ab)} |"
                           f" {data['variants'][name]['true']:+.1%} |")
    drifts = []
    for proc in data["aa"] + data["ab"]:
        for r in proc:
            hist_ref = np.mean([np.mean(next(h for h in p if h["model"] == r["model"])["ref_log_means"])
                                for p in data["history"]])
            drifts.append(np.exp(np.mean(r["ref_log_means"]) - hist_ref) - 1)
    out.append(f"\nReference drift of the gate processes against the history: median {np.median(drifts):+.1%},"
               f" range {min(drifts):+.1%} .. {max(drifts):+.1%}.")


# ------------------------------------------------------------------------------- gpu phase

def _gate(history_rows: list[dict[str, Any]], looks: list[dict[str, Any]], workdir: Path,
          with_reference: bool = True) -> Any:
    """The plugin's rule on one gate: first look, and the confirmation look when it regressed."""
    from pytest_aaco.options import GateSettings
    from pytest_aaco.verdict.finish import confirm, needs_confirmation

    settings = GateSettings(threshold=0.05)
    first = judge(history_rows, looks[0], with_reference, workdir, telemetry=True)
    if needs_confirmation(first) and len(looks) > 1:
        second = judge(history_rows, looks[1], with_reference, workdir, telemetry=True)
        return confirm(first, second, settings)
    return first


def device_peak_rule(history_rows: list[dict[str, Any]], row: dict[str, Any]) -> float | None:
    """The old memory rule, for contrast: peak device-used VRAM now minus the history's median (MB),
    when it exceeds +10% and +50 MB; None when it passes or there is no figure."""
    def peak(r: dict[str, Any]) -> float | None:
        value = ((r.get("record") or {}).get("telemetry", {}).get("vram_used_mb") or {}).get("max")
        return float(value) if isinstance(value, (int, float)) else None

    past = [p for p in (peak(r) for r in history_rows) if p is not None]
    now = peak(row)
    if now is None or not past:
        return None
    median = float(np.median(past))
    return now - median if now > median * 1.10 and now - median > 50 else None


def gpu(args: argparse.Namespace, out: list[str]) -> None:
    """History of 5 processes, then unchanged (A/A) and slower (A/B) gates until the time budget."""
    from pytest_aaco.history.judge import REGRESSION

    deadline = time.monotonic() + args.minutes * 60
    args.memory = True
    try:
        import pynvml  # noqa: F401
    except ImportError:
        out.append("WARNING: nvidia-ml-py (pynvml) is not importable: no own device-memory figures.\n")
    name = args.models.split(",")[0]
    state = args.workdir / "gpu.json"
    if state.is_file():  # a second command goes on gating against the same history (the "≥ 10 minutes")
        saved = json.loads(state.read_text())
        history, gates, true = saved["history"], saved["gates"], saved["true"]
        b_path = Path(saved["b_path"])
        print(f"  resuming: {len(history)} history runs, {len(gates)} gates", file=sys.stderr, flush=True)
    else:
        b_path, true = slower_variant(name, args.slowdown, args)
        t0 = time.time()
        history = [spawn({name: model_file(name)}, [args.reference], args)[0] for _ in range(args.history)]
        gates = []
        print(f"  history of {len(history)} runs in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    a_models, b_models = {name: model_file(name)}, {name: b_path}
    per_gate = 0.0
    while True:
        kind = "A/B" if len(gates) % 4 == 3 else "A/A"
        left = deadline - time.monotonic()
        aa_done = sum(g["kind"] == "A/A" for g in gates)
        if left < per_gate * 1.2 + 5 and aa_done >= args.min_aa:
            break
        if left < per_gate + 5:
            print("  out of time before the planned gates were done", file=sys.stderr, flush=True)
            break
        started = time.monotonic()
        looks = spawn(b_models if kind == "A/B" else a_models, [args.reference], args, looks=2)
        per_gate = max(per_gate, time.monotonic() - started)
        v = _gate(history, looks, args.workdir)
        v_raw = _gate(history, looks, args.workdir, with_reference=False)
        gates.append({"kind": kind, "t_s": looks[0]["time"] - history[0]["time"], "verdict": v.to_dict(),
                      "raw_verdict": v_raw.to_dict(), "old_memory_mb": device_peak_rule(history, looks[0]),
                      "own_vram_mb": ((looks[0]["record"]["telemetry"].get("vram_own_mb") or {}).get("max"),
                                      (looks[0]["record"]["telemetry"].get("vram_own_mb") or {}).get("method")),
                      "peak_vram_mb": (looks[0]["record"]["telemetry"].get("vram_used_mb") or {}).get("max"),
                      "rss_growth_mb": (looks[0]["record"]["telemetry"].get("rss_growth_mb") or {}).get("max")})
        gates[-1]["looks"] = looks
        state.write_text(json.dumps({"history": history, "gates": gates, "true": true, "b_path": str(b_path)},
                                    default=str))
        print(f"  {kind} gate {len(gates)} at +{gates[-1]['t_s']:.0f} s: {v.outcome} {v.change_pct or 0:+.1f}%"
              f" (raw {((v.raw_ratio or 1) - 1) * 100:+.1f}%, machine {(v.reference_drift or 0) * 100:+.1f}%)"
              f" memory {v.memory}", file=sys.stderr, flush=True)
    out.append(f"### Stored-baseline gate on {args.provider}: {name}, {len(history)}-run history, reference"
               f" {args.reference}, threshold 5%, level 0.05, confirmation look on a fresh session\n")
    out.append("| gate | at (s) | kind | outcome | series | change (series tested) | raw change |"
               " machine drift (reference) | own device MB (method) | device peak MB | memory failures |"
               " old rule: peak VRAM |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for i, g in enumerate(gates, 1):
        v = g["verdict"]
        old = f"FAIL +{g['old_memory_mb']:.0f} MB" if g["old_memory_mb"] else "pass"
        own, method = g["own_vram_mb"]
        out.append(f"| {i} | {g['t_s']:.0f} | {g['kind']} | {v['outcome']}{' (fails)' if v['fails'] else ''} |"
                   f" {v['series']} | {v['change_pct'] or 0:+.1f}% | {((v['raw_ratio'] or 1) - 1) * 100:+.1f}% |"
                   f" {(v['reference_drift'] or 0) * 100:+.1f}% | {own if own is None else round(own)} ({method}) |"
                   f" {g['peak_vram_mb'] if g['peak_vram_mb'] is None else round(g['peak_vram_mb'])} |"
                   f" {len(v['memory'])} | {old} |")
    aa = [g for g in gates if g["kind"] == "A/A"]
    ab = [g for g in gates if g["kind"] == "A/B"]
    span = (gates[-1]["t_s"] if gates else 0.0) / 60
    out.append(f"\nUnchanged gates: {len(aa)}, false failures {sum(g['verdict']['fails'] for g in aa)}"
               f" (latency {sum(g['verdict']['outcome'] == REGRESSION and g['verdict']['fails'] for g in aa)},"
               f" memory {sum(bool(g['verdict']['memory']) for g in aa)}); on raw figures they would have been"
               f" {sum(g['raw_verdict']['fails'] for g in aa)}; the old device-peak VRAM rule would have failed"
               f" {sum(bool(g['old_memory_mb']) for g in aa)}.")
    out.append(f"Slower variant (true {true:+.1%}, interleaved A/B in one process): detected"
               f" {sum(g['verdict']['outcome'] == REGRESSION and g['verdict']['fails'] for g in ab)}/{len(ab)}.")
    out.append(f"History to last gate: {span:.1f} minutes.")


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
    p.add_argument("--provider-option", action="append", default=[],
                   help="KEY=VALUE provider option, repeatable (cudnn_conv_algo_search=HEURISTIC)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--iobinding", default="none")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/aaco-reference-study"))
    p.add_argument("--no-lock", action="store_true", help="do not take /work/coord/measure.lock")
    p.add_argument("--looks", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--memory", action="store_true", help="probe RSS and own device memory (the gpu phase sets it)")
    p.add_argument("--spawn-timeout", type=float, default=300.0, help="seconds one worker process may take")
    p.add_argument("--minutes", type=float, default=8.0, help="gpu phase: wall-time budget of the whole phase")
    p.add_argument("--level", type=float, default=0.025, help="quality phase: the items' test level")
    p.add_argument("--min-aa", type=int, default=10, help="gpu phase: at least this many unchanged gates")
    p.add_argument("--out", type=Path, help="append the tables to this markdown file")
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    out = [f"## Reference study, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC\n",
           f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, shared with other"
           f" work (load average at start {os.getloadavg()[0]:.2f}).",
           f"Command: `python studies/reference_study.py {' '.join(sys.argv[1:])}`\n"]
    for phase in args.phases.split(","):
        {"candidates": candidates, "quality": quality, "gpu": gpu}[phase](args, out)
        out.append("")
    out.append(f"Load average at the end {os.getloadavg()[0]:.2f}.")
    text = "\n".join(out)
    print(text)
    if args.out:
        with args.out.open("a") as handle:
            handle.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
