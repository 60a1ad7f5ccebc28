#!/usr/bin/env python3
"""End-to-end check of pytest-aaco on a GPU execution provider (CUDA by default).

Runs on any machine whose onnxruntime offers the EP, and with ``--provider cpu`` anywhere (for
debugging the script itself). Every phase writes into ``--out`` as it finishes, so a run cut
short keeps what it measured:

``env``        ORT version and EPs; GPU name, driver and CUDA version from NVML.
``options``    provider options reach the EP (``get_provider_options()``); an unknown option
               and a bad ``device_id`` are refused with a message naming them.
``iobinding``  per model, one session: ``--aaco-iobinding`` none / inputs / all measured in
               interleaved blocks (never alternating sessions), plus CUDA graphs
               (``enable_cuda_graph=1``, one session per mode) with an output check; picks the
               mode for ``auto`` (written to ``--state`` for ``--iobinding measured``).
``placement``  node counts per EP from an ORT profile for every model, and models with an op the
               EP may lack, caught by :func:`pytest_aaco.measure.placement.fallback_problem`.
``fallback``   a pytest run with a registry holding a clean model, an unknown provider option, a
               bad device id and the CPU-op model; unwired (today's plugin) and wired (placement
               checked before measuring) tests side by side.
``aa``         ``pytest tests/perf --aaco-provider=EP --aaco-save-baseline`` N times, then M
               plain runs against that history: any regression verdict is a false alarm.
``ab``         the same history, one run with a registry whose A/B model has
               ``extra_work: {matmuls: K, size: S}`` appended (must fail as a regression), and
               one with the unchanged model (must not).
``overhead``   a pytest run in which each item measures the plugin (``benchmark_model()``) and a
               bare ``run``/``run_with_iobinding`` loop on the same session, in separate blocks
               P B P B; also the NVML telemetry of the session bundle.
``graphrun``   tests/perf once with ``--aaco-provider-option enable_cuda_graph=1``.

Usage::

    python studies/gpu_check.py --provider cuda --out gpu_out
    python studies/gpu_check.py --provider cpu --models squeezenet --aa-save 2 --aa-plain 1 \\
        --pytest-args="--aaco-rounds=4" --out /tmp/gpu_check_cpu       # the script itself, on a CPU
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ALL_PHASES = ("env", "options", "iobinding", "placement", "fallback", "aa", "ab", "overhead", "graphrun")
MODES = ("none", "inputs", "all")
#: ops tried for the CPU-fallback demo, in order: the first one the EP leaves to the CPU is used
CPU_OP_CANDIDATES = ("Celu", "Hardmax", "LpNormalization", "Mish", "MatMulInt64")
RESULTS: dict[str, Any] = {}


# ------------------------------------------------------------------------------------- helpers


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def dump(out: Path) -> None:
    (out / "gpu_check.json").write_text(json.dumps(RESULTS, indent=1, sort_keys=True, default=str))


def pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 100:+.2f}%"


def table(rows: list[list[Any]], head: list[str]) -> str:
    cells = [[str(c) for c in head]] + [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def report(out: Path, title: str, text: str) -> None:
    block = f"\n== {title} ==\n{text}\n"
    print(block, flush=True)
    with open(out / "tables.txt", "a", encoding="utf-8") as handle:
        handle.write(block)


def plugin_args() -> list[str]:
    """``-p pytest_aaco.plugin`` when pytest-aaco is importable but not installed (no entry point)."""
    from importlib.metadata import entry_points

    names = {ep.value for ep in entry_points(group="pytest11")}
    return [] if "pytest_aaco.plugin" in names else ["-p", "pytest_aaco.plugin"]


def run_pytest(
    args: list[str], cwd: Path, log_path: Path, env_extra: dict[str, str] | None = None, timeout: float = 900
) -> dict[str, Any]:
    """Run pytest in a subprocess; its output goes to *log_path*. Returns rc, seconds, the tail."""
    env = {**os.environ, **(env_extra or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin_args(), *args]
    start = time.time()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        rc, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, text = -9, f"TIMEOUT after {timeout}s\n{exc.stdout or ''}{exc.stderr or ''}"
    seconds = time.time() - start
    log_path.write_text(" ".join(cmd) + "\n\n" + str(text))
    log(f"pytest rc={rc} in {seconds:.0f}s -> {log_path.name}")
    return {"rc": rc, "seconds": round(seconds, 1), "log": log_path.name, "tail": str(text)[-1500:]}


def newest_bundle(session_dir: Path) -> dict[str, Any] | None:
    from pytest_aaco.reports.bundle import list_sessions, load_session

    found = list_sessions(session_dir)
    return load_session(found[0]) if found else None


def item_rows(bundle: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per item of a bundle: model, outcome, verdict outcome/change/p, summary figures, error."""
    rows = []
    for nodeid, item in sorted((bundle or {}).get("items", {}).items()):
        verdict = item.get("verdict") or {}
        summary = (item.get("result") or {}).get("summary") or {}
        rows.append(
            {
                "nodeid": nodeid,
                "model": item.get("model"),
                "outcome": item.get("outcome"),
                "verdict": verdict.get("outcome"),
                "change_pct": verdict.get("change_pct"),
                "p_value": verdict.get("p_value"),
                "ci": [verdict.get("ci_low"), verdict.get("ci_high")],
                "method": verdict.get("method"),
                "confirmed": verdict.get("confirmed"),
                "mean_ms": summary.get("mean_ms"),
                "p50_ms": summary.get("p50_ms"),
                "p99_ms": summary.get("p99_ms"),
                "first_run_ms": summary.get("first_run_ms"),
                "iobinding": (item.get("result") or {}).get("iobinding"),
                "providers_used": (item.get("result") or {}).get("providers_used"),
                "error": item.get("error"),
                "message": verdict.get("message"),
            }
        )
    return rows


def load_models(names: list[str] | None) -> list[Any]:
    from pytest_aaco.measure.registry import load_registry

    models = load_registry()
    if names:
        unknown = set(names) - {m.name for m in models}
        if unknown:
            raise SystemExit(f"unknown model(s) {sorted(unknown)}; registry has {[m.name for m in models]}")
        models = [m for m in models if m.name in names]
    return models


def feeds_for(model: Any, session: Any) -> dict[str, np.ndarray]:
    from pytest_aaco.measure.inputs import make_inputs

    return make_inputs(model.name, session.get_inputs(), model.dims, model.inputs)


def timed_block(run: Any, n: int) -> np.ndarray:
    from pytest_aaco.measure.interleave import time_iterations

    return time_iterations(run, n) / 1e6


# ------------------------------------------------------------------------------------- phases


def phase_env(ctx: argparse.Namespace) -> dict[str, Any]:
    import onnxruntime as ort

    from pytest_aaco.measure.environment import gpu_identity

    info: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "python": sys.version.split()[0],
        "onnxruntime": ort.__version__,
        "onnxruntime_file": ort.__file__,
        "available_providers": ort.get_available_providers(),
        "gpu": gpu_identity(ctx.provider, ctx.device_id) if ctx.provider != "cpu" else None,
        "cpu_count": os.cpu_count(),
    }
    try:
        import onnx

        info["onnx"] = onnx.__version__
    except ImportError:
        pass
    report(ctx.out, "environment", json.dumps(info, indent=1))
    return info


def phase_options(ctx: argparse.Namespace) -> dict[str, Any]:
    """Options reach the EP; an unknown key and a bad device id are refused with their names."""
    import contextlib
    import io

    import onnxruntime as ort

    from pytest_aaco.measure.inference import SessionError, build_session
    from pytest_aaco.measure.registry import model_path

    model = ctx.small_model
    path = model_path(model)
    out: dict[str, Any] = {"model": model.name}
    asked = (
        {"cudnn_conv_algo_search": "HEURISTIC", "use_tf32": "0", "enable_cuda_graph": "0", "device_id": "0"}
        if ctx.provider == "cuda"
        else {}
    )
    handle = build_session(path, ctx.spec.with_options(asked), ctx.device_id)
    reported = handle.session.get_provider_options().get(ctx.spec.ep_name, {})
    out["asked"] = asked
    out["reported"] = {k: reported.get(k) for k in asked}
    out["all_reported_keys"] = sorted(reported)
    out["reached"] = all(str(reported.get(k)) == v for k, v in asked.items())
    out["providers"] = handle.session.get_providers()
    # what ORT itself does with an unknown option (before pytest-aaco's check)
    printed = io.StringIO()
    raw: dict[str, Any] = {}
    try:
        with contextlib.redirect_stdout(printed):
            sess = ort.InferenceSession(
                str(path), providers=[(ctx.spec.ep_name, {"bogus_option": "1"}), "CPUExecutionProvider"]
            )
        raw["raised"] = False
        raw["providers"] = sess.get_providers()
        raw["reported_has_bogus"] = "bogus_option" in sess.get_provider_options().get(ctx.spec.ep_name, {})
    except Exception as exc:  # noqa: BLE001
        raw["raised"] = True
        raw["error"] = f"{type(exc).__name__}: {exc}"[:500]
    raw["printed"] = printed.getvalue()[-800:]
    out["ort_unknown_option"] = raw
    for label, opts in (("unknown_option", {"bogus_option": "1"}), ("bad_device", {"device_id": 7})):
        try:
            build_session(path, ctx.spec.with_options(opts), ctx.device_id)
            out[label] = {"refused": False}
        except SessionError as exc:
            out[label] = {"refused": True, "message": str(exc)[:600]}
    report(ctx.out, "provider options", json.dumps(out, indent=1))
    return out


def _outputs(session: Any, run: Any, mode: str) -> list[np.ndarray]:
    result = run()
    if mode == "none":
        return [np.asarray(r) for r in result]
    return [np.asarray(v) for v in run.binding.copy_outputs_to_cpu()]


def _close(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and np.allclose(x, y, rtol=1e-2, atol=1e-3) for x, y in zip(a, b, strict=False)
    )


def phase_iobinding(ctx: argparse.Namespace) -> dict[str, Any]:
    """Per model: none / inputs / all (and CUDA graphs) on one session, interleaved blocks."""
    from pytest_aaco.measure.inference import bind_run, build_session
    from pytest_aaco.measure.registry import model_path

    results: dict[str, Any] = {}
    rows: list[list[Any]] = []
    graph = ctx.provider == "cuda" and os.environ.get("AACO_GPU_GRAPH", "1") == "1"
    for model in ctx.models:
        path = model_path(model)
        per: dict[str, Any] = {}
        reference: list[np.ndarray] | None = None
        # plain session: the three modes on ONE session, blocks interleaved (never alternating sessions)
        # CUDA graphs: one session per mode (a graph replays the addresses of the binding it captured)
        groups: list[tuple[dict[str, Any], list[str]]] = [({}, list(MODES))]
        if graph:
            groups += [({"enable_cuda_graph": "1"}, [mode]) for mode in MODES]
        for opts, modes in groups:
            tag = "+graph" if opts else ""
            try:
                handle = build_session(path, ctx.spec.with_options(opts), ctx.device_id)
            except Exception as exc:  # noqa: BLE001
                per["session" + tag] = {"error": str(exc)[:400]}
                continue
            feeds = feeds_for(model, handle.session)
            runners: dict[str, Any] = {}
            for mode in modes:
                key = mode + tag
                try:
                    run = bind_run(handle, feeds, mode, ctx.device_id)
                    first = timed_block(run, 1)[0]
                    warm = timed_block(run, 5)
                    outs = _outputs(handle.session, run, mode)
                    if reference is None:
                        reference = outs
                    timed_block(run, 20)
                    outs_later = _outputs(handle.session, run, mode)
                    per[key] = {"first_ms": float(first), "warm_ms": warm.tolist(),
                                "correct": _close(outs, reference) and _close(outs_later, reference)}
                    runners[key] = run
                except Exception as exc:  # noqa: BLE001
                    per[key] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            if not runners:
                continue
            # block size: about ctx.block_s at the slowest mode's warm median
            slowest = max(float(np.median(per[k]["warm_ms"])) for k in runners)
            n = int(np.clip(ctx.block_s * 1000 / max(slowest, 1e-3), 5, 2000))
            blocks: dict[str, list[np.ndarray]] = {k: [] for k in runners}
            for _ in range(ctx.blocks):
                for key, run in runners.items():
                    blocks[key].append(timed_block(run, n))
            for key in runners:
                lat = np.concatenate(blocks[key])
                block_p50 = [float(np.median(b)) for b in blocks[key]]
                per[key].update(p50_ms=float(np.median(lat)), p99_ms=float(np.percentile(lat, 99)),
                                mean_ms=float(lat.mean()), block_p50_ms=block_p50,
                                block_cv=float(np.std(block_p50, ddof=1) / np.mean(block_p50)) if len(block_p50) > 1
                                else None, n_per_block=n)
                per[key].pop("warm_ms", None)
            del handle, runners
        results[model.name] = per
        base = (per.get("none") or {}).get("p50_ms")
        for key, val in per.items():
            if "p50_ms" in val:
                change = pct(val["p50_ms"] / base - 1) if base else "-"
                rows.append([model.name, key, val["p50_ms"], val["p99_ms"], change,
                             f"{(val.get('block_cv') or 0) * 100:.2f}%", val.get("first_ms", float("nan")),
                             val.get("correct")])
            else:
                rows.append([model.name, key, "ERROR", val.get("error", "")[:110], "", "", "", ""])
        dump_partial(ctx, "iobinding", results)
    choice = choose_iobinding(results)
    results["_choice"] = choice
    (ctx.state / "iobinding_choice.txt").write_text(choice["mode"])
    report(ctx.out, "IO binding (p50/p99 ms; plain modes interleaved on one session; +graph: one session each)",
           table(rows, ["model", "mode", "p50 ms", "p99 ms", "p50 vs none", "block CV", "first run ms", "outputs ok"])
           + f"\nchoice for auto: {json.dumps(choice)}")
    return results


def choose_iobinding(results: dict[str, Any]) -> dict[str, Any]:
    """The ``auto`` mode: among the plain modes that ran correctly on every model, the one with the
    lowest geometric-mean p50 relative to ``none`` (the least time outside the model's own work);
    also reported: on how many models each mode was the fastest.

    (A first version preferred the mode keeping more of the host path when within 1% of the best;
    on 2026-11-21 that flipped between ``inputs`` and ``all`` from one H200 session to the next
    while ``all`` stayed the fastest by geometric mean in both, so the tie-break was dropped.)"""
    ratios: dict[str, list[float]] = {m: [] for m in MODES}
    ok = {m: True for m in MODES}
    for per in results.values():
        if not isinstance(per, dict) or "none" not in per or "p50_ms" not in per["none"]:
            continue
        for mode in MODES:
            val = per.get(mode) or {}
            if "p50_ms" not in val or not val.get("correct", False):
                ok[mode] = False
                continue
            ratios[mode].append(val["p50_ms"] / per["none"]["p50_ms"])
    geo = {m: float(np.exp(np.mean(np.log(r)))) for m, r in ratios.items() if r and ok[m]}
    if not geo:
        return {"mode": "none", "geomean_vs_none": {}, "why": "no mode measured"}
    mode = min(geo, key=lambda m: geo[m])
    wins = {m: 0 for m in MODES}
    for per in results.values():
        if isinstance(per, dict) and all("p50_ms" in (per.get(m) or {}) for m in MODES):
            wins[min(MODES, key=lambda m: per[m]["p50_ms"])] += 1
    return {"mode": mode, "geomean_vs_none": geo, "fastest_on_models": wins, "valid_on_all_models": ok}


def dump_partial(ctx: argparse.Namespace, key: str, value: Any) -> None:
    RESULTS[key] = value
    dump(ctx.out)


def build_cpu_op_model(op: str, channels: int = 64, size: int = 112) -> Any:
    """``x[1,3,S,S] -> Conv -> Relu -> OP -> Conv -> y``: a GPU-friendly model with one op in the
    middle that the EP may lack; the op works on a ``[1,C,S,S]`` tensor so a CPU fallback costs
    real time (and two device<->host copies)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((channels, 3, 3, 3)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((channels, channels, 3, 3)) * 0.05).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    ]
    opset = 17
    if op == "Celu":
        nodes.append(helper.make_node("Celu", ["r1"], ["m"], alpha=1.0, name="odd_op"))
    elif op == "Hardmax":
        nodes.append(helper.make_node("Hardmax", ["r1"], ["m"], axis=-1, name="odd_op"))
    elif op == "LpNormalization":
        nodes.append(helper.make_node("LpNormalization", ["r1"], ["m"], axis=-1, p=2, name="odd_op"))
    elif op == "Mish":
        opset = 18
        nodes.append(helper.make_node("Mish", ["r1"], ["m"], name="odd_op"))
    elif op == "MatMulInt64":
        inits.append(numpy_helper.from_array(np.eye(size, dtype=np.int64), "eye"))
        nodes += [
            helper.make_node("Cast", ["r1"], ["ri"], to=TensorProto.INT64, name="to_int"),
            helper.make_node("MatMul", ["ri", "eye"], ["mi"], name="odd_op"),
            helper.make_node("Cast", ["mi"], ["m"], to=TensorProto.FLOAT, name="to_float"),
        ]
    else:
        raise ValueError(op)
    nodes.append(helper.make_node("Conv", ["m", "w2"], ["y"], pads=[1, 1, 1, 1], name="conv2"))
    graph = helper.make_graph(
        nodes,
        f"cpu_op_{op}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, size, size])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="pytest-aaco")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def phase_placement(ctx: argparse.Namespace) -> dict[str, Any]:
    from pytest_aaco.measure.modelgen import save_model_atomic
    from pytest_aaco.measure.placement import describe_placement, fallback_problem, placement_report
    from pytest_aaco.measure.registry import model_path

    profiles = ctx.out / "profiles"
    profiles.mkdir(exist_ok=True)
    results: dict[str, Any] = {"models": {}, "candidates": {}}
    rows = []
    for model in ctx.models:
        try:
            keep = profiles / f"{model.name}_{ctx.provider}.json" if model.name in ("squeezenet",) else None
            pl = placement_report(model_path(model), ctx.spec, ctx.device_id, dims=model.dims, keep_profile=keep)
            problem = fallback_problem(pl, ctx.spec)
            results["models"][model.name] = {**pl.to_dict(), "problem": problem}
            rows.append([model.name, describe_placement(pl), f"{pl.cpu_time_share:.1%}", problem or "ok"])
        except Exception as exc:  # noqa: BLE001
            results["models"][model.name] = {"error": str(exc)[:400]}
            rows.append([model.name, "ERROR", "", str(exc)[:100]])
    demo_dir = ctx.state / "demo_models"
    demo_dir.mkdir(parents=True, exist_ok=True)
    chosen = None
    for op in CPU_OP_CANDIDATES:
        path = demo_dir / f"cpu_op_{op}.onnx"
        try:
            save_model_atomic(build_cpu_op_model(op), path)
            pl = placement_report(
                path, ctx.spec, ctx.device_id, keep_profile=profiles / f"cpu_op_{op}_{ctx.provider}.json"
            )
            problem = fallback_problem(pl, ctx.spec)
            results["candidates"][op] = {**pl.to_dict(), "problem": problem}
            rows.append([f"demo:{op}", describe_placement(pl), f"{pl.cpu_time_share:.1%}", problem or "ok"])
            if chosen is None and (problem or ctx.provider == "cpu"):
                chosen = op
        except Exception as exc:  # noqa: BLE001
            results["candidates"][op] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            rows.append([f"demo:{op}", "ERROR", "", str(exc)[:100]])
    results["demo_op"] = chosen
    if chosen:
        (ctx.state / "demo_op.txt").write_text(chosen)
    report(
        ctx.out,
        "node placement (ORT profile: nodes from the first run, times from the last of 3)",
        table(rows, ["model", "placement", "CPU share of run", "verdict"]),
    )
    return results


OVERHEAD_TEST = '''
"""Harness overhead: the plugin's measurement vs a bare loop on the same session, separate blocks."""
import json
import os
import time

import numpy as np

from pytest_aaco.measure.inputs import make_inputs
from pytest_aaco.measure.inference import MIN_WARMUP_S, resolve_iobinding


def bare_binding(session, feeds, mode, device, device_id):
    if mode == "none":
        return None
    import onnxruntime as ort
    binding = session.io_binding()
    for name, array in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(array, device, device_id))
    names = [o.name for o in session.get_outputs()]
    for name in names:
        if mode == "all":
            binding.bind_output(name, device, device_id)
        else:
            binding.bind_output(name)
    session.run_with_iobinding(binding)
    if mode == "all":
        for name, value in zip(names, binding.get_outputs()):
            binding.bind_ortvalue_output(name, value)
    return binding


def bare_block(session, feeds, binding, n):
    """The plainest loop there is: perf_counter_ns around run / run_with_iobinding."""
    lat = np.empty(n, dtype=np.int64)
    clock = time.perf_counter_ns
    if binding is None:
        run = session.run
        end = clock() + int(MIN_WARMUP_S * 1e9)
        while clock() < end:
            run(None, feeds)
        for i in range(n):
            t0 = clock()
            run(None, feeds)
            lat[i] = clock() - t0
    else:
        run = session.run_with_iobinding
        end = clock() + int(MIN_WARMUP_S * 1e9)
        while clock() < end:
            run(binding)
        for i in range(n):
            t0 = clock()
            run(binding)
            lat[i] = clock() - t0
    return lat / 1e6


def stats(lat):
    return {"p50_ms": float(np.median(lat)), "p99_ms": float(np.percentile(lat, 99)),
            "mean_ms": float(lat.mean()), "n": int(lat.size)}


def test_overhead(benchmark_model, ort_session, aaco_model, aaco_config):
    # the same session and the same seeded inputs as the plugin's, through public fixtures
    session, provider = ort_session.session, ort_session.provider
    feeds = make_inputs(aaco_model.name, session.get_inputs(), aaco_model.dims, aaco_model.inputs)
    mode = resolve_iobinding(aaco_config.iobinding, provider)
    device = provider.ep.ort_device
    binding = bare_binding(session, feeds, mode, device, aaco_config.device_id)
    blocks = []
    for _ in range(int(os.environ.get("AACO_OVERHEAD_PAIRS", "2"))):
        result = benchmark_model()
        blocks.append({"kind": "plugin", **stats(result.latencies_ms), "first_run_ms": result.first_run_ms,
                       "iterations": [r.n for r in result.rounds],
                       "telemetry": (result.telemetry or {}).get("summary", {})})
        blocks.append({"kind": "bare", **stats(bare_block(session, feeds, binding, result.measure_iterations))})
    with open(os.environ["AACO_OVERHEAD_OUT"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"model": aaco_model.name, "mode": mode, "blocks": blocks}) + "\\n")
'''


NVML_FIELDS = ("gpu_util_percent", "power_w", "gfx_clock_mhz", "mem_clock_mhz", "temp_edge_c", "vram_used_mb")


def phase_overhead(ctx: argparse.Namespace) -> dict[str, Any]:
    work = ctx.state / "overhead"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "test_overhead.py").write_text(OVERHEAD_TEST)
    out_file = work / "overhead.jsonl"
    sessions = work / "sessions"
    args = [
        "test_overhead.py",
        f"--aaco-provider={ctx.provider}",
        f"--aaco-session-dir={sessions}",
        f"--aaco-baseline-dir={work / 'baselines'}",
        *ctx.iobinding_args,
        *ctx.pytest_args,
    ]
    registry = write_registry(work / "models.yaml", ctx.models)
    args.append(f"--aaco-models={registry}")
    res = run_pytest(
        args,
        work,
        ctx.out / "logs" / "overhead.log",
        {"AACO_OVERHEAD_OUT": str(out_file), "AACO_OVERHEAD_PAIRS": str(ctx.overhead_pairs)},
    )
    rows, per = [], {}
    lines = out_file.read_text().splitlines() if out_file.exists() else []
    for line in lines:
        rec = json.loads(line)
        plugin = [b for b in rec["blocks"] if b["kind"] == "plugin"]
        bare = [b for b in rec["blocks"] if b["kind"] == "bare"]
        p50_plugin = float(np.mean([b["p50_ms"] for b in plugin]))
        p50_bare = float(np.mean([b["p50_ms"] for b in bare]))
        p99_plugin = float(np.mean([b["p99_ms"] for b in plugin]))
        p99_bare = float(np.mean([b["p99_ms"] for b in bare]))
        over = p50_plugin / p50_bare - 1
        per[rec["model"]] = {
            **rec,
            "p50_plugin_ms": p50_plugin,
            "p50_bare_ms": p50_bare,
            "p99_plugin_ms": p99_plugin,
            "p99_bare_ms": p99_bare,
            "overhead_p50": over,
            "within_2pct": abs(over) <= 0.02,
        }
        tele = plugin[-1].get("telemetry", {})
        rows.append(
            [
                rec["model"],
                rec["mode"],
                p50_plugin,
                p50_bare,
                pct(over),
                p99_plugin,
                p99_bare,
                " ".join(f"{b['p50_ms']:.3f}" for b in rec["blocks"]),
                plugin[0].get("first_run_ms", float("nan")),
                ", ".join(
                    f"{k.split('_')[0]}={tele[k]['mean']:.0f}"
                    for k in NVML_FIELDS
                    if isinstance(tele.get(k), dict) and tele[k].get("mean") is not None
                ),
            ]
        )
    bundle = newest_bundle(sessions)
    nvml = nvml_from_bundle(bundle)
    if bundle is not None:
        keep = ctx.out / "bundle_overhead"
        shutil.copytree(bundle["path"], keep, dirs_exist_ok=True)
    report(
        ctx.out,
        "harness overhead (p50/p99 ms; blocks in order P B P B on one session)",
        table(
            rows,
            [
                "model",
                "mode",
                "p50 plugin",
                "p50 bare",
                "overhead",
                "p99 plugin",
                "p99 bare",
                "block p50s",
                "first run ms",
                "NVML means (util % power W clock MHz ...)",
            ],
        )
        + f"\npytest rc={res['rc']}",
    )
    report(ctx.out, "NVML telemetry in the session bundle (per item, measured phase)", nvml["text"])
    return {"pytest": res, "models": per, "nvml": nvml["items"]}


def nvml_from_bundle(bundle: dict[str, Any] | None) -> dict[str, Any]:
    rows, items = [], {}
    for nodeid, item in sorted((bundle or {}).get("items", {}).items()):
        tele = (item.get("result") or {}).get("telemetry") or {}
        summary = tele.get("summary") or {}
        sampler = (tele.get("samplers") or {}).get("nvidia_gpu") or {}
        items[nodeid] = {
            "summary": {k: summary.get(k) for k in (*NVML_FIELDS, "perf_level", "clock_event_reasons") if k in summary},
            "error": (tele.get("errors") or {}).get("nvidia_gpu") or sampler.get("error"),
            "samples": len(sampler.get("samples") or []),
        }
        row = [item.get("model")]
        for key in NVML_FIELDS:
            stat = summary.get(key) or {}
            row.append("-" if stat.get("mean") is None else f"{stat['mean']:.0f}/{stat['max']:.0f}")
        row.append(items[nodeid]["samples"])
        row.append(items[nodeid]["error"] or "")
        rows.append(row)
    text = (
        table(
            rows, ["model", "util % mean/max", "power W", "SM MHz", "mem MHz", "temp C", "VRAM MB", "samples", "error"]
        )
        if rows
        else "no bundle"
    )
    return {"text": text, "items": items}


def write_registry(
    path: Path,
    models: list[Any],
    extra: dict[str, dict[str, Any]] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """A registry YAML with *models* (as in the built-in registry) plus *extra* entries."""
    import yaml

    from pytest_aaco.measure.registry import BUILTIN_REGISTRY

    builtin = yaml.safe_load(BUILTIN_REGISTRY.read_text())["models"]
    entries = {m.name: dict(builtin[m.name]) for m in models if m.name in builtin}
    for name, patch in (overrides or {}).items():
        entries[name] = {**entries.get(name, {}), **patch}
    entries.update(extra or {})
    path.write_text(yaml.safe_dump({"models": entries}, sort_keys=False))
    return path


FALLBACK_TEST = '''
"""Unwired: today's plugin. Wired: the node-level placement check before measuring."""
import pytest

from pytest_aaco.measure.placement import describe_placement, fallback_problem, placement_report


def test_unwired(benchmark_model):
    result = benchmark_model()
    assert result.measure_iterations > 0


def test_wired(benchmark_model, ort_session, aaco_model, aaco_config):
    report = placement_report(ort_session.model_path, ort_session.provider, aaco_config.device_id,
                              dims=aaco_model.dims)
    problem = fallback_problem(report, ort_session.provider)
    if problem:
        pytest.fail(f"{aaco_model.name}[{ort_session.provider.short}]: {problem}", pytrace=False)
    print("placement:", describe_placement(report))
    benchmark_model()
'''


def phase_fallback(ctx: argparse.Namespace) -> dict[str, Any]:
    work = ctx.state / "fallback"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "test_fallback.py").write_text(FALLBACK_TEST)
    op = (
        (ctx.state / "demo_op.txt").read_text().strip()
        if (ctx.state / "demo_op.txt").exists()
        else CPU_OP_CANDIDATES[0]
    )
    demo = ctx.state / "demo_models" / f"cpu_op_{op}.onnx"
    if not demo.exists():
        from pytest_aaco.measure.modelgen import save_model_atomic

        save_model_atomic(build_cpu_op_model(op), demo)
    small = ctx.small_model.name
    extra = {
        f"{small}_bogus_option": {"zoo": small, "providers": {ctx.provider: {"bogus_option": 1}}},
        f"{small}_bad_device": {"zoo": small, "providers": {ctx.provider: {"device_id": 7}}},
        f"cpu_op_{op}": {"path": str(demo)},
    }
    registry = write_registry(work / "models.yaml", [ctx.small_model], extra)
    sessions = work / "sessions"
    res = run_pytest(
        [
            "test_fallback.py",
            f"--aaco-provider={ctx.provider}",
            f"--aaco-models={registry}",
            f"--aaco-session-dir={sessions}",
            f"--aaco-baseline-dir={work / 'baselines'}",
            "-rA",
            "--aaco-rounds=3",
            *ctx.iobinding_args,
            *ctx.pytest_args,
        ],
        work,
        ctx.out / "logs" / "fallback.log",
    )
    rows = item_rows(newest_bundle(sessions))
    table_rows = [
        [
            r["nodeid"].split("::")[-1],
            r["outcome"],
            r["verdict"] or "-",
            ",".join(p.replace("ExecutionProvider", "") for p in r["providers_used"] or []) or "-",
            (r["error"] or r["message"] or "")[:150],
        ]
        for r in rows
    ]
    log_text = (ctx.out / "logs" / "fallback.log").read_text()
    short = [line for line in log_text.splitlines() if line.startswith(("PASSED", "FAILED", "ERROR", "SKIPPED"))]
    report(
        ctx.out,
        f"fallback demo (CPU-only op: {op})",
        table(table_rows, ["item", "outcome", "verdict", "providers", "error / message"])
        + "\n"
        + "\n".join(s[:300] for s in short)
        + f"\npytest rc={res['rc']}",
    )
    return {"op": op, "pytest": res, "items": rows, "short_summary": short}


def phase_aa(ctx: argparse.Namespace) -> dict[str, Any]:
    """N save runs then M plain runs of the real suite (tests/perf) against that history."""
    base = ctx.state / "aa"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    common = [
        "tests/perf",
        f"--aaco-provider={ctx.provider}",
        f"--aaco-baseline-dir={base / 'baselines'}",
        "-W",
        "default::pytest_aaco.warnings.AacoWarning",
        *ctx.iobinding_args,
        *ctx.pytest_args,
    ]
    if ctx.model_names:
        common.append(f"--aaco-models={write_registry(base / 'models.yaml', ctx.models)}")
    runs = []
    for i in range(ctx.aa_save + ctx.aa_plain):
        save = i < ctx.aa_save
        sessions = base / f"sessions{i}"
        args = [*common, f"--aaco-session-dir={sessions}"] + (["--aaco-save-baseline"] if save else [])
        res = run_pytest(args, ROOT, ctx.out / "logs" / f"aa{i}_{'save' if save else 'plain'}.log")
        bundle = newest_bundle(sessions)
        runs.append({"save": save, "pytest": res, "items": item_rows(bundle)})
        if i == ctx.aa_save and bundle is not None:  # the first plain run's bundle: NVML telemetry et al.
            shutil.copytree(bundle["path"], ctx.out / "bundle_aa_plain", dirs_exist_ok=True)
            report(ctx.out, "NVML telemetry in the A/A session bundle", nvml_from_bundle(bundle)["text"])
        dump_partial(ctx, "aa", {"runs": runs})
    rows = []
    plain = [r for r in runs if not r["save"]]
    models = sorted({it["model"] for r in runs for it in r["items"]})
    for model in models:
        row = [model]
        for r in runs:
            it = next((x for x in r["items"] if x["model"] == model), None)
            if it is None:
                row.append("-")
            elif r["save"]:
                row.append(f"{it['p50_ms']:.3f}" if it["p50_ms"] else it["outcome"])
            else:
                row.append(f"{it['verdict']} {pct((it['change_pct'] or float('nan')) / 100)}")
        rows.append(row)
    false_alarms = sum(
        1 for r in plain for it in r["items"] if it["verdict"] == "regression" or it["outcome"] == "failed"
    )
    head = ["model"] + [f"{'save' if r['save'] else 'plain'}{i}" for i, r in enumerate(runs)]
    report(
        ctx.out,
        "A/A (save runs: p50 ms; plain runs: verdict and change)",
        table(rows, head) + f"\nplain-run exit codes: {[r['pytest']['rc'] for r in plain]};"
        f" false alarms: {false_alarms} of {sum(len(r['items']) for r in plain)} verdicts",
    )
    return {"runs": runs, "false_alarms": false_alarms}


def phase_ab(ctx: argparse.Namespace) -> dict[str, Any]:
    """One run of tests/perf against the A/A history with the A/B model slowed by extra_work."""
    base = ctx.state / "aa"
    if not (base / "baselines").exists():
        return {"error": "no A/A baselines (run the aa phase first)"}
    model = next((m for m in ctx.models if m.name == ctx.ab_model), None)
    if model is None:
        return {"error": f"A/B model {ctx.ab_model} not among the models"}
    out: dict[str, Any] = {"model": model.name, "extra_work": {"matmuls": ctx.ab_matmuls, "size": ctx.ab_size}}
    variants = [("B", {"extra_work": {"matmuls": ctx.ab_matmuls, "size": ctx.ab_size}}), ("A", {})]
    rows = []
    for label, patch in variants:
        registry = write_registry(base / f"models_{label}.yaml", [model], overrides={model.name: patch})
        sessions = base / f"sessions_ab_{label}"
        res = run_pytest(
            [
                "tests/perf",
                f"--aaco-provider={ctx.provider}",
                f"--aaco-baseline-dir={base / 'baselines'}",
                f"--aaco-models={registry}",
                f"--aaco-session-dir={sessions}",
                "-W",
                "default::pytest_aaco.warnings.AacoWarning",
                *ctx.iobinding_args,
                *ctx.pytest_args,
            ],
            ROOT,
            ctx.out / "logs" / f"ab_{label}.log",
        )
        items = item_rows(newest_bundle(sessions))
        out[label] = {"pytest": res, "items": items}
        for it in items:
            rows.append(
                [
                    label,
                    it["model"],
                    it["verdict"],
                    pct((it["change_pct"] or float("nan")) / 100),
                    f"{it['ci'][0]:.3f}..{it['ci'][1]:.3f}" if it["ci"][0] else "-",
                    it["p_value"] or "-",
                    it["confirmed"],
                    res["rc"],
                    (it["message"] or it["error"] or "")[:160],
                ]
            )
    report(
        ctx.out,
        f"A/B ({model.name} + extra_work matmuls={ctx.ab_matmuls} size={ctx.ab_size})",
        table(rows, ["run", "model", "verdict", "change", "ratio 95% CI", "p", "confirmed", "rc", "message"]),
    )
    return out


def phase_graphrun(ctx: argparse.Namespace) -> dict[str, Any]:
    """tests/perf once with ``--aaco-provider-option enable_cuda_graph=1`` (no baseline): the option
    reaches the EP through the plugin, and CUDA-graph latencies per model."""
    if ctx.provider != "cuda":
        return {"skipped": "CUDA graphs are a CUDA EP option"}
    base = ctx.state / "graphrun"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    args = ["tests/perf", f"--aaco-provider={ctx.provider}", "--aaco-provider-option=enable_cuda_graph=1",
            f"--aaco-baseline-dir={base / 'baselines'}", f"--aaco-session-dir={base / 'sessions'}", "-W", "default",
            *ctx.iobinding_args, *ctx.pytest_args]
    if ctx.model_names:
        args.append(f"--aaco-models={write_registry(base / 'models.yaml', ctx.models)}")
    res = run_pytest(args, ROOT, ctx.out / "logs" / "graphrun.log")
    bundle = newest_bundle(base / "sessions")
    items = item_rows(bundle)
    raw_items = (bundle or {}).get("items", {})
    rows = []
    for it in items:
        fingerprint = (raw_items.get(it["nodeid"]) or {}).get("fingerprint") or {}
        option = (fingerprint.get("provider_options") or {}).get("enable_cuda_graph")
        rows.append([it["model"], it["iobinding"], it["p50_ms"], it["p99_ms"], it["first_run_ms"], it["outcome"],
                     option, (it["error"] or "")[:100]])
    report(ctx.out, "CUDA graphs through the plugin (tests/perf, --aaco-provider-option enable_cuda_graph=1)",
           table(rows, ["model", "iobinding", "p50 ms", "p99 ms", "first run ms", "outcome",
                        "option in fingerprint", "error"]) + f"\npytest rc={res['rc']}")
    return {"pytest": res, "items": items}


PHASES = {
    "env": phase_env,
    "options": phase_options,
    "iobinding": phase_iobinding,
    "placement": phase_placement,
    "overhead": phase_overhead,
    "fallback": phase_fallback,
    "aa": phase_aa,
    "ab": phase_ab,
    "graphrun": phase_graphrun,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--provider", default="cuda", help="execution provider short name (default: cuda)")
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--models", default="", help="comma-separated registry models (default: all)")
    ap.add_argument("--small-model", default="squeezenet", help="model for the option and fallback checks")
    ap.add_argument("--phases", default=",".join(ALL_PHASES), help=f"comma-separated, from {', '.join(ALL_PHASES)}")
    ap.add_argument("--out", default="gpu_check_out", type=Path, help="folder for logs, JSON and tables")
    ap.add_argument(
        "--state",
        default=Path(tempfile.gettempdir()) / "aaco-gpu-state",
        type=Path,
        help="scratch folder kept between invocations (baselines, demo models)",
    )
    ap.add_argument(
        "--iobinding",
        default="auto",
        help="--aaco-iobinding for the pytest runs; 'measured' uses the iobinding phase's choice",
    )
    ap.add_argument("--blocks", type=int, default=6, help="interleaved blocks per IO-binding mode")
    ap.add_argument("--block-s", type=float, default=0.15, help="seconds per IO-binding block")
    ap.add_argument("--overhead-pairs", type=int, default=2, help="plugin/bare block pairs per model")
    ap.add_argument("--aa-save", type=int, default=3)
    ap.add_argument("--aa-plain", type=int, default=3)
    ap.add_argument("--ab-model", default="resnet50")
    ap.add_argument("--ab-matmuls", type=int, default=8)
    ap.add_argument("--ab-size", type=int, default=1024)
    ap.add_argument("--pytest-args", default="", help="extra pytest arguments for every pytest run")
    ctx = ap.parse_args(argv)

    from pytest_aaco.measure.providers import parse_provider
    from pytest_aaco.measure.registry import load_registry

    ctx.out.mkdir(parents=True, exist_ok=True)
    (ctx.out / "logs").mkdir(exist_ok=True)
    ctx.state.mkdir(parents=True, exist_ok=True)
    ctx.spec = parse_provider(ctx.provider)
    ctx.provider = ctx.spec.short
    ctx.model_names = [m for m in ctx.models.split(",") if m]
    ctx.models = load_models(ctx.model_names)
    ctx.small_model = next(m for m in load_registry() if m.name == ctx.small_model)
    ctx.pytest_args = ctx.pytest_args.split()
    phases = [p for p in ctx.phases.split(",") if p]
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise SystemExit(f"unknown phase(s) {sorted(unknown)}; valid: {', '.join(ALL_PHASES)}")
    if (ctx.out / "gpu_check.json").exists():
        RESULTS.update(json.loads((ctx.out / "gpu_check.json").read_text()))
    for name in phases:
        if name in ("overhead", "fallback", "aa", "ab", "graphrun"):
            mode = ctx.iobinding
            if mode == "measured":
                choice = ctx.state / "iobinding_choice.txt"
                mode = choice.read_text().strip() if choice.exists() else "auto"
            ctx.iobinding_args = [f"--aaco-iobinding={mode}"]
        else:
            ctx.iobinding_args = []
        log(f"phase {name} ...")
        start = time.time()
        try:
            RESULTS[name] = PHASES[name](ctx)
        except Exception:  # noqa: BLE001 - one phase failing must not lose the others
            RESULTS[name] = {"error": traceback.format_exc()[-3000:]}
            report(ctx.out, f"{name}: ERROR", RESULTS[name]["error"])
        RESULTS.setdefault("_seconds", {})[name] = round(time.time() - start, 1)
        log(f"phase {name} done in {time.time() - start:.0f}s")
        dump(ctx.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
