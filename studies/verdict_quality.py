"""How good is the gate's verdict? False alarms, detection and cost, measured on real models (issue 3).

A study, not a CI test. It runs the real plugin in separate pytest processes on the model-zoo
suite on CPU (5 models x 4 copies = 20 items per session, from a temporary registry):

1. history: ``--history`` sessions with ``--aaco-save-baseline`` (nothing changed);
2. A/A: ``--aa`` later sessions with nothing changed: false alarms per item and per session;
3. A/B: ``--ab`` sessions in which every item points at a B variant of its model made 3/5/10/20%
   slower with calibrated ``extra_work`` (each model gets each size once per session, the item
   names stay, the model hash change is reported but still gated): detection per size.
   A/A and A/B sessions are interleaved in time.

The true slowdown of each B variant is measured outside the plugin by interleaving A and B
InferenceSessions (studies/quality_calib.py). The recorded round data are then re-judged
offline (studies/quality_analysis.py): the plugin's own rule through
``pytest_aaco.history.judge.judge_history`` with a long history (5 runs, prediction interval) and a short one
(1 run, Welch on rounds), a naive Welch test on pooled iterations, and pytest-benchmark's
``--benchmark-compare-fail=mean:5%`` rule; a short real pytest-benchmark run checks that the rule
is emulated faithfully. Finally a noise model fitted to the A/A data drives thousands of simulated
sessions (studies/quality_sim.py) for precise rates, with the published scenarios (AR(1)
rho=0.5, a 2% run-to-run offset) beside them. The tables, the machine, the load average during the
runs and the command go to ``--out`` (``verdict-quality-report.md``; the dated tables in
studies/RESULTS.md came from such reports).

The pytest-benchmark check needs pytest-benchmark in a folder of its own, so that it does not load
into every pytest run of the project's environment (``--pb-path``)::

    python -m pip install --no-deps --target /tmp/vq-pb pytest-benchmark py-cpuinfo2

Before measuring it waits until the 1-minute load average is below ``--wait-load`` (polling every
30 s, at most ``--wait-max-min`` minutes) and stops starting sessions after ``--budget-min``.

    python studies/verdict_quality.py --history 5 --aa 8 --ab 3 --out /tmp/verdict-quality-report.md
    python studies/verdict_quality.py --phases report ...     # re-analyse the recorded data
    python studies/verdict_quality.py --rounds 3 --history 2 --aa 1 --ab 1 --copies 1 \\
        --models squeezenet,shufflenet --calib-cycles 3 --sim-sessions 200 --workdir /tmp/vq-tiny   # smoke test
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import quality_runs as qr  # noqa: E402

DEFAULT_MODELS = "squeezenet,shufflenet,densenet121,resnet50,inception_v1"
PHASES = ("calibrate", "sessions", "pbcheck", "report")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/aaco-verdict-quality"),
                   help="where sessions, baselines and the manifest go (default: %(default)s)")
    p.add_argument("--out", type=Path, default=Path("verdict-quality-report.md"),
                   help="markdown report (%(default)s); its dated tables go into studies/RESULTS.md by hand")
    p.add_argument("--models", default=DEFAULT_MODELS, help="zoo models, comma-separated (%(default)s)")
    p.add_argument("--copies", type=int, default=4, help="registry entries per model (%(default)s)")
    p.add_argument("--sizes", default="3,5,10,20", help="A/B slowdowns in percent (%(default)s)")
    p.add_argument("--history", type=int, default=5, help="history sessions saved first (%(default)s)")
    p.add_argument("--aa", type=int, default=8, help="A/A sessions (%(default)s)")
    p.add_argument("--ab", type=int, default=3,
                   help="A/B sessions; copy c of each model runs size (c + session) %% sizes, so with as many"
                        " copies as sizes every session has each size once per model and each size gets"
                        " ab x models items (%(default)s)")
    p.add_argument("--rounds", type=int, default=10, help="--aaco-rounds of every session (%(default)s)")
    p.add_argument("--plugin-args", default="", help="extra pytest arguments for every session, e.g."
                                                      " '--aaco-confirm=off'")
    p.add_argument("--calib-cycles", type=int, default=20, help="interleaved cycles per calibration (%(default)s)")
    p.add_argument("--wait-load", type=float, default=0.8, help="start when the 1-min load is below (%(default)s)")
    p.add_argument("--wait-max-min", type=float, default=35.0, help="wait at most this long (%(default)s)")
    p.add_argument("--budget-min", type=float, default=30.0,
                   help="start no new session after this many minutes of sessions (%(default)s)")
    p.add_argument("--sim-sessions", type=int, default=4000, help="simulated sessions per scenario (%(default)s)")
    p.add_argument("--seed", type=int, default=20261121, help="simulation seed (%(default)s)")
    p.add_argument("--pb-path", type=Path, default=Path("/tmp/vq-pb"),
                   help="a folder holding pytest-benchmark (pip install --target), put on PYTHONPATH of the"
                        " check only; the check is skipped when it is missing (%(default)s)")
    p.add_argument("--notes", type=Path, default=Path(__file__).resolve().parent / "verdict_quality_notes.md",
                   help="hand-written discussion appended to the report, if the file exists (%(default)s)")
    p.add_argument("--phases", default=",".join(PHASES), help=f"subset of {','.join(PHASES)} (%(default)s)")
    p.add_argument("--fresh", action="store_true", help="delete the work directory first")
    args = p.parse_args(argv)
    args.model_list = [m.strip() for m in args.models.split(",") if m.strip()]
    args.size_list = [float(s) / 100 for s in args.sizes.split(",")]
    args.phase_list = [x.strip() for x in args.phases.split(",") if x.strip()]
    unknown = set(args.phase_list) - set(PHASES)
    if unknown:
        p.error(f"unknown phase(s) {sorted(unknown)}")
    return args


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


# ------------------------------------------------------------------ manifest


def load_manifest(workdir: Path) -> dict[str, Any]:
    path = workdir / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def save_manifest(workdir: Path, manifest: dict[str, Any]) -> None:
    path = workdir / "manifest.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str))
    os.replace(tmp, path)


def machine_description() -> dict[str, Any]:
    import numpy as np
    import onnxruntime as ort
    import scipy

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cpu_model": cpu, "cores": os.cpu_count(), "memory_gb": mem_gb, "kernel": platform.release(),
        "python": platform.python_version(), "onnxruntime": ort.__version__, "numpy": np.__version__,
        "scipy": scipy.__version__, "providers": ort.get_available_providers(),
    }


# ------------------------------------------------------------------ phases


def phase_calibrate(args: argparse.Namespace, manifest: dict[str, Any], suite: Path) -> None:
    import quality_calib as qc

    calib = manifest.setdefault("calibration", {})
    if "step_cost_ms" not in manifest:
        costs = qc.step_costs()
        manifest["step_cost_ms"] = {str(k): v for k, v in costs.items()}
        log("ms per extra MatMul+Tanh step: " + ", ".join(f"{k}x{k}: {v:.4f}" for k, v in costs.items()))
    costs = {int(k): v for k, v in manifest["step_cost_ms"].items()}
    for model in args.model_list:
        if model in calib:
            continue
        log(f"calibrating extra_work for {model}")
        calib[model] = qc.calibrate_model(model, model, args.size_list, suite / "registry_a.yaml", costs,
                                          cycles=args.calib_cycles, log=log)
        save_manifest(args.workdir, manifest)


def ab_registry(args: argparse.Namespace, manifest: dict[str, Any], suite: Path, index: int) -> Path:
    """A/B session *index*: item (model, copy c) gets size (c + index) % len(sizes)."""
    items = qr.item_names(args.model_list, args.copies)
    extra, sizes = {}, {}
    for name, model, copy in items:
        k = (copy + index) % len(args.size_list)
        variant = manifest["calibration"][model]["variants"][k]
        extra[name] = variant["extra_work"]
        sizes[name] = k
    manifest.setdefault("ab_sizes", {})[f"ab{index:02d}"] = sizes
    return qr.write_registry(suite / f"registry_ab{index:02d}.yaml", items, extra)


def schedule(n_aa: int, n_ab: int) -> list[tuple[str, int]]:
    """A/A and A/B sessions interleaved evenly in time."""
    keyed = [((i + 0.5) / n_aa, "aa", i) for i in range(n_aa)] + [((i + 0.5) / n_ab, "ab", i) for i in range(n_ab)]
    return [(kind, i) for _, kind, i in sorted(keyed)]


def phase_sessions(args: argparse.Namespace, manifest: dict[str, Any], suite: Path,
                   monitor: qr.LoadMonitor) -> None:
    env = qr.subprocess_env(args.workdir)
    plugin_args = shlex.split(args.plugin_args)
    done = {s["name"] for s in manifest.setdefault("sessions", [])}
    registry_a = suite / "registry_a.yaml"
    plan = [("history", i) for i in range(args.history)] + schedule(args.aa, args.ab)
    budget_start = time.time()
    for kind, index in plan:
        name = f"{kind}{index:02d}"
        if name in done:
            continue
        if (time.time() - budget_start) / 60 > args.budget_min:
            log(f"budget of {args.budget_min} min spent: {name} and later sessions not run")
            manifest.setdefault("skipped_sessions", []).append(name)
            continue
        registry = registry_a if kind in ("history", "aa") else ab_registry(args, manifest, suite, index)
        log(f"session {name} ({registry.name}), load {os.getloadavg()[0]:.2f}")
        entry = qr.run_session(suite, env, name, registry, args.rounds, kind == "history", plugin_args, monitor)
        entry["kind"], entry["index"] = kind, index
        manifest["sessions"].append(entry)
        manifest["load_samples"] = monitor.samples
        save_manifest(args.workdir, manifest)
        log(f"  {name}: rc={entry['rc']} {entry['wall_s']:.0f} s, load {entry['load']}")


def phase_pbcheck(args: argparse.Namespace, manifest: dict[str, Any], suite: Path) -> None:
    """Run real pytest-benchmark twice (save, then compare with mean:5%) on a few models and
    check that our emulation of its rule gives the same verdicts on its own saved data."""
    import quality_calib as qc

    from pytest_aaco.measure.registry import model_path

    if not (args.pb_path / "pytest_benchmark").is_dir():
        manifest["pbcheck"] = {"skipped": f"pytest-benchmark not found under {args.pb_path}"}
        log(manifest["pbcheck"]["skipped"])
        return
    pbdir = suite / "pbcheck"
    shutil.rmtree(pbdir, ignore_errors=True)
    pbdir.mkdir(parents=True)
    (pbdir / "pytest.ini").write_text(qr.PYTEST_INI)
    (pbdir / "test_pb.py").write_text(qc.PB_TEST)
    calib = manifest["calibration"]
    picks = [m for m in ("squeezenet", "shufflenet", "densenet121") if m in calib] or list(calib)[:2]
    first, second = {}, {}
    for model in picks:
        variants = calib[model]["variants"]
        a_path = str(model_path(qc.spec(model, model, suite / "registry_a.yaml")))
        first[f"{model}_aa"] = second[f"{model}_aa"] = a_path
        big = variants[-1]
        first[f"{model}_b{round(big['target'] * 100)}"] = a_path
        second[f"{model}_b{round(big['target'] * 100)}"] = big["path"]
    env = qr.subprocess_env(args.workdir)
    env["PYTHONPATH"] = os.pathsep.join([str(args.pb_path), env.get("PYTHONPATH", "")]).strip(os.pathsep)
    base = [sys.executable, "-m", "pytest", "test_pb.py", "-q", "-p", "no:aaco", "--benchmark-storage=file://store",
            "--benchmark-save-data", "--benchmark-columns=mean,stddev,rounds,iterations"]
    runs = []
    for label, models, extra in (("save", first, ["--benchmark-save=base"]),
                                 ("compare", second, ["--benchmark-compare=0001", "--benchmark-compare-fail=mean:5%",
                                                      "--benchmark-save=cur"])):
        env["VQ_PB_MODELS"] = ";".join(f"{k}={v}" for k, v in models.items())
        proc = subprocess.run(base + extra, cwd=pbdir, env=env, capture_output=True, text=True)
        (pbdir / f"{label}.txt").write_text(proc.stdout + proc.stderr)
        failed = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if "has failed" in line]
        runs.append({"label": label, "rc": proc.returncode, "cmd": " ".join(base[1:] + extra), "failed_lines": failed})
        log(f"pytest-benchmark {label}: rc={proc.returncode}")
    saved = sorted((pbdir / "store").rglob("0001_base.json"))
    current = sorted((pbdir / "store").rglob("0002_cur.json"))
    result: dict[str, Any] = {"runs": runs, "models": picks}
    if saved and current:
        s = {b["name"]: b for b in json.loads(saved[0].read_text())["benchmarks"]}
        c = {b["name"]: b for b in json.loads(current[0].read_text())["benchmarks"]}
        failed_lines = runs[1]["failed_lines"]
        rows = []
        for name in sorted(c):
            mean_c, mean_s = c[name]["stats"]["mean"], s[name]["stats"]["mean"]
            data = c[name]["stats"].get("data") or []
            iters = c[name]["stats"].get("iterations", 1)
            emulated = qc.pb_rule_fails(mean_c, mean_s)
            reported = any(name in line for line in failed_lines)
            rows.append({
                "name": name, "saved_mean_ms": mean_s * 1e3, "current_mean_ms": mean_c * 1e3,
                "change_pct": (mean_c / mean_s - 1) * 100, "rounds": c[name]["stats"]["rounds"],
                "iterations": iters,
                "mean_of_data_ms": (sum(data) / len(data) * 1e3) if data else None,
                "emulated_fail": emulated, "pytest_benchmark_fail": reported,
            })
        result["rows"] = rows
        result["agree"] = all(r["emulated_fail"] == r["pytest_benchmark_fail"] for r in rows)
        result["regressed_message"] = "Performance has regressed" in (pbdir / "compare.txt").read_text()
    manifest["pbcheck"] = result
    save_manifest(args.workdir, manifest)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.fresh and args.workdir.exists():
        shutil.rmtree(args.workdir)
    args.workdir.mkdir(parents=True, exist_ok=True)
    os.environ["AACO_CACHE_DIR"] = str(args.workdir / "cache")
    manifest = load_manifest(args.workdir)
    manifest.setdefault("config", {}).update({
        k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
        if k not in ("phase_list", "command")
    })
    command = ["python", "studies/verdict_quality.py", *(sys.argv[1:] if argv is None else argv)]
    args.command = {"argv": command, "at": dt.datetime.now().isoformat(timespec="seconds")}
    manifest.setdefault("machine", machine_description())
    suite = qr.setup_suite(args.workdir)
    qr.write_registry(suite / "registry_a.yaml", qr.item_names(args.model_list, args.copies))
    measuring = {"calibrate", "sessions", "pbcheck"} & set(args.phase_list)
    if measuring:
        manifest.setdefault("commands", []).append(args.command)
    monitor = qr.LoadMonitor(interval=10.0)
    if measuring:
        wait = qr.wait_for_quiet(args.wait_load, args.wait_max_min * 60, log=log) if args.wait_load > 0 else {}
        manifest.setdefault("waits", []).append({**wait, "at": dt.datetime.now().isoformat(timespec="seconds")})
        monitor.samples = list(manifest.get("load_samples", []))
        monitor.start()
    try:
        t0 = time.time()
        if "calibrate" in args.phase_list:
            phase_calibrate(args, manifest, suite)
            manifest["calibration_wall_s"] = manifest.get("calibration_wall_s", 0) + round(time.time() - t0)
        if "sessions" in args.phase_list:
            phase_sessions(args, manifest, suite, monitor)
        if "pbcheck" in args.phase_list:
            phase_pbcheck(args, manifest, suite)
    finally:
        if measuring:
            monitor.stop()
            manifest["load_samples"] = monitor.samples
            save_manifest(args.workdir, manifest)
    if "report" in args.phase_list:
        import quality_analysis as qa

        text = qa.build_report(args, manifest, suite, log=log)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
