"""Calibrated slowdowns for the verdict-quality study (studies/verdict_quality.py).

A "B" model is the registry's model with ``extra_work: {matmuls: M, size: S}`` appended
(pytest_aaco.measure.modelgen.add_extra_work): a chain of S x S MatMul+Tanh steps that ORT cannot fold
away. Two steps, both outside the plugin:

1. :func:`step_costs` times one extra MatMul+Tanh step at sizes 256, 128 and 64 on its own, and
   :func:`calibrate_model` picks, per target slowdown, the largest size that still needs a handful
   of steps (so rounding M costs little), then
2. :func:`interleave` measures the true slowdown of every B variant by
   *interleaving* it with A: one InferenceSession per variant, blocks of ~0.25 s run in a fresh
   random order each cycle, and the slowdown is the mean over cycles of (B block log-mean - A block
   log-mean) in the same cycle, so slow drift and noisy neighbours cancel. Every session is built
   with ``session.intra_op.allow_spinning = "0"``: with spinning on, the intra-op threads of the
   session that ran last keep spinning and steal the cores from the next one, which distorts
   alternating sessions.

Model files are built through :func:`pytest_aaco.measure.registry.model_path`, so they are byte for byte
the files the plugin loads (same cache key under ``$AACO_CACHE_DIR``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: extra-work sizes the calibration may choose from, largest first
SIZES = (256, 128, 64)
#: fallback cost of one MatMul+Tanh step in ms, should a timing come out non-positive
PRIOR_COST_MS = {256: 0.35, 128: 0.05, 64: 0.012}
#: the calibration wants at least this many MatMuls for the smallest target (rounding error <= 1/(2*MIN))
MIN_MATMULS = 6
MAX_MATMULS = 400
BLOCK_S = 0.25


def spec(name: str, zoo: str, registry_path: Path, extra: dict[str, int] | None = None) -> Any:
    """A :class:`pytest_aaco.measure.registry.ModelSpec` as the registry would parse it."""
    from pytest_aaco.measure.registry import parse_model

    entry: dict[str, Any] = {"zoo": zoo}
    if extra:
        entry["extra_work"] = dict(extra)
    return parse_model(name, entry, registry_path, {})


def _session(path: Path) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])


def _timed_ms(run: Callable[[], Any], count: int) -> np.ndarray:
    out = np.empty(count)
    clock = time.perf_counter_ns
    for i in range(count):
        t0 = clock()
        run()
        out[i] = clock() - t0
    return out / 1e6


def interleave(paths: list[Path], zoo: str, cycles: int, block_s: float = BLOCK_S, seed: int = 0) -> dict[str, Any]:
    """Interleaved blocks of every model in *paths* (index 0 is A). Returns per-variant slowdown
    ``expm1(mean d)`` with ``d`` = B block log-mean - A block log-mean of the same cycle, its standard
    error (ln units, sd(d)/sqrt(cycles)), and A's geometric-mean latency in ms."""
    from pytest_aaco.measure.inputs import make_inputs

    sessions = [_session(p) for p in paths]
    feeds = make_inputs(zoo, sessions[0].get_inputs(), {}, {})
    runs = [(lambda s=s: s.run(None, feeds)) for s in sessions]
    counts = []
    for run in runs:  # warm up ~0.5 s each, then size the blocks
        lat = _timed_ms(run, 3)
        lat = _timed_ms(run, max(3, int(0.5 / max(np.median(lat) / 1e3, 1e-5))))
        counts.append(max(3, int(round(block_s / (np.median(lat) / 1e3)))))
    rng = np.random.default_rng(seed)
    logs = np.empty((cycles, len(runs)))
    for c in range(cycles):
        for k in rng.permutation(len(runs)):
            logs[c, k] = np.log(_timed_ms(runs[k], counts[k])).mean()
    d = logs[:, 1:] - logs[:, :1]
    se = d.std(axis=0, ddof=1) / math.sqrt(cycles) if cycles > 1 else np.full(d.shape[1], np.nan)
    del sessions
    return {
        "base_ms": float(np.exp(logs[:, 0].mean())),
        "variant_ms": [float(x) for x in np.exp(logs[:, 1:].mean(axis=0))],
        "slowdown": [float(x) for x in np.expm1(d.mean(axis=0))],
        "se_log": [float(x) for x in se],
        "cycles": cycles,
        "block_iterations": counts,
    }


def _choose(target: float, base_ms: float, cost_ms: dict[int, float]) -> dict[str, int]:
    """The (matmuls, size) for *target* (fraction): the largest size needing >= MIN_MATMULS steps."""
    extra_ms = target * base_ms
    for size in SIZES:
        cost = cost_ms.get(size)
        if cost is None or cost <= 0:
            continue
        m = extra_ms / cost
        if m >= MIN_MATMULS or size == SIZES[-1]:
            return {"matmuls": min(MAX_MATMULS, max(1, int(round(m)))), "size": size}
    return {"matmuls": max(1, int(round(extra_ms / PRIOR_COST_MS[64]))), "size": 64}


def step_costs(steps: int = 20, seconds: float = 1.0) -> dict[int, float]:
    """ms per extra MatMul+Tanh step at each size in :data:`SIZES`, timed on its own: a tiny model
    (ReduceMean of a [1, 3, 224, 224] input) with and without *steps* extra steps, medians of
    ~*seconds* of runs each, alternated."""
    import onnx
    from onnx import TensorProto, helper

    from pytest_aaco.measure.modelgen import add_extra_work

    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    tiny = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    tiny.ir_version = 8
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}

    def session(model: Any) -> Any:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])

    base = session(tiny)
    costs = {}
    for size in SIZES:
        work = session(add_extra_work(onnx.ModelProto.FromString(tiny.SerializeToString()), steps, size))
        medians = {"base": [], "work": []}
        for _ in range(4):
            for key, sess in (("base", base), ("work", work)):
                lat = _timed_ms(lambda s=sess: s.run(None, feeds), 3)
                n = max(5, int(seconds / 4 / max(np.median(lat) / 1e3, 1e-5)))
                medians[key].append(float(np.median(_timed_ms(lambda s=sess: s.run(None, feeds), n))))
        costs[size] = max((np.median(medians["work"]) - np.median(medians["base"])) / steps, 1e-4)
    return costs


def calibrate_model(name: str, zoo: str, targets: list[float], registry_path: Path, cost_ms: dict[int, float],
                    cycles: int = 20, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Choose ``extra_work`` of *zoo* for each target slowdown (fractions) and measure the result.

    M is chosen from *cost_ms* (:func:`step_costs`) and A's latency (additive model); the true
    slowdown of each variant is then measured by interleaving A and all variants for *cycles* cycles.
    There is no correction pass: on a shared 2-core machine the interleaved estimate of one pass
    is noisier (a few %) than the additive prediction, so correcting M from it makes things worse.
    Returns ``{"model", "base_ms", "variants": [{"target", "extra_work", "predicted",
    "true_slowdown", "se_log", "path"}], "measured"}``.
    """
    from pytest_aaco.measure.registry import model_path

    base_path = model_path(spec(name, zoo, registry_path))
    base_ms = interleave([base_path], zoo, cycles=6)["base_ms"]
    choice = [_choose(t, base_ms, cost_ms) for t in targets]
    paths = [model_path(spec(name, zoo, registry_path, c)) for c in choice]
    measured = interleave([base_path, *paths], zoo, cycles=cycles, seed=2)
    predicted = [c["matmuls"] * cost_ms[c["size"]] / base_ms for c in choice]
    log(f"  {name} (A {measured['base_ms']:.2f} ms): " + ", ".join(
        f"{t:.0%}: M={c['matmuls']}x{c['size']} predicted {p:+.1%} measured {s:+.1%}"
        for t, c, p, s in zip(targets, choice, predicted, measured["slowdown"], strict=True)))
    return {
        "model": name,
        "zoo": zoo,
        "base_ms": measured["base_ms"],
        "base_ms_choice": base_ms,
        "variants": [
            {"target": t, "extra_work": c, "predicted": p, "true_slowdown": s, "se_log": e, "path": str(pa)}
            for t, c, p, s, e, pa in zip(targets, choice, predicted, measured["slowdown"], measured["se_log"], paths,
                                         strict=True)
        ],
        "measured": measured,
    }


# ------------------------------------------------------------------ pytest-benchmark emulation check

PB_TEST = """\
import os

import onnxruntime as ort
import pytest

from pytest_aaco.measure.inputs import make_inputs

MODELS = {name: path for name, path in (x.split("=", 1) for x in os.environ["VQ_PB_MODELS"].split(";"))}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model(benchmark, name):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    session = ort.InferenceSession(MODELS[name], sess_options=so, providers=["CPUExecutionProvider"])
    zoo = name.split("_")[0]
    feeds = make_inputs(zoo, session.get_inputs(), {}, {})
    benchmark(session.run, None, feeds)
"""


def pb_rule_fails(current_mean: float, saved_mean: float, percent: int = 5) -> bool:
    """pytest-benchmark 5.x ``--benchmark-compare-fail=mean:5%``: ``PercentageRegressionCheck``
    fails when ``current / saved * 100 - 100 > percent`` (pytest_benchmark/utils.py)."""
    if not saved_mean:
        return True
    return current_mean / saved_mean * 100 - 100 > percent
