"""The pooled run-to-run variance read from the baseline store: each baseline folder's items fitted
into a :class:`~pytest_aaco.verdict.pooling.Pool` (the statistics, which read no file, are in
:mod:`pytest_aaco.verdict.pooling`), the pooled tests the stored gate runs, and the GPU offsets
``aaco baseline show`` lists.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from pytest_aaco.history.store import Baseline, _runner_baselines
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.verdict import stats
from pytest_aaco.verdict.pooling import DEVICE, NORMALIZED, RAW, WALL, Pool, fit_pool, pooled_test, run_gpu, run_means


def _folder_signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    try:
        return tuple(sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in folder.glob("*.json")))
    except OSError:
        return ()


def folder_histories(folder: Path) -> list[list[JSONDict]]:
    """The live history of every readable baseline file in *folder* (unreadable files are skipped);
    the files the session has parsed already (the item's gate, the variance priors) are not parsed
    again (:func:`pytest_aaco.history.store.read_baseline`)."""
    return [b.history for b in _runner_baselines(folder)]


@lru_cache(maxsize=64)
def _cached_pool(folder: str, metric: str, kind: str, ref_id: str | None,
                 signature: tuple[tuple[str, int, int], ...]) -> Pool:
    items = [run_means(history, metric, kind, ref_id) for history in folder_histories(Path(folder))]
    return fit_pool([item for item in items if item])


def folder_pool(folder: Path, metric: str, kind: str, ref_id: str | None = None) -> Pool:
    """The :class:`Pool` of every baseline in *folder* (one runner and GPU model) for *metric*
    (:data:`DEVICE` or :data:`WALL`) and *kind` (:data:`RAW`, :data:`NORMALIZED` against reference
    *ref_id*); cached until a file in the folder changes."""
    return _cached_pool(str(folder), metric, kind, ref_id, _folder_signature(folder))


def result_gpu(result: BenchmarkResult) -> str | None:
    """The physical GPU a :class:`~pytest_aaco.measure.results.BenchmarkResult` ran on (its ``gpu``
    dict's ``uuid`` or ``pci_bus_id``, set by the gate), or None."""
    gpu = getattr(result, "gpu", None)
    return run_gpu({"gpu": gpu}) if isinstance(gpu, dict) else None


def device_comparison(result: BenchmarkResult, baseline: Baseline, kind: str
                      ) -> tuple[stats.Comparison, JSONDict] | None:
    """The pooled device-time test of *result* against *baseline* (a
    :class:`~pytest_aaco.history.store.Baseline`) on series *kind*, with what it used
    (``{"pooled": {"s0_sq", "d0", "items", "gpu", "gpu_offset"}}``), or None when pooling does not
    apply (adjusted series, fewer than 2 history runs, no prior). Raises ValueError as
    :func:`pooled_test` does."""
    dev = getattr(result, "device", None)
    if kind not in (RAW, NORMALIZED) or dev is None or not dev.blocks:
        return None
    ref = getattr(result, "reference", None)
    ref_id = ref.id if kind == NORMALIZED and ref is not None else None
    if kind == RAW:
        current = np.asarray(dev.log_means, float)
    else:
        ref_dev = getattr(ref, "device", None)
        if ref_dev is None:
            return None
        current = np.array([float(a) - float(b) for a, b in zip(dev.log_means, ref_dev.log_means, strict=False)])
    return _compare(result, baseline, DEVICE, kind, ref_id, current)


def wall_comparison(result: BenchmarkResult, baseline: Baseline, kind: str) -> tuple[stats.Comparison, JSONDict] | None:
    """The pooled wall-time test on the raw round log-means, each run's fastest quarter
    (:func:`pytest_aaco.verdict.stats.fastest_rounds`; *kind* ``raw``; None otherwise), as :func:`device_comparison`."""
    if kind != RAW or not len(result.round_log_means):
        return None
    return _compare(result, baseline, WALL, RAW, None, stats.fastest_rounds(result.round_log_means))


def _compare(result: BenchmarkResult, baseline: Baseline, metric: str, kind: str, ref_id: str | None,
             current: np.ndarray) -> tuple[stats.Comparison, JSONDict] | None:
    pool = folder_pool(Path(baseline.path).parent, metric, kind, ref_id)
    history = run_means(baseline.history, metric, kind, ref_id)
    gpu = result_gpu(result)
    comp = pooled_test(current, history, gpu, pool)
    if comp is None or pool.prior is None:
        return None
    offset = pool.offsets.of(gpu)[0]
    return comp, {"s0_sq": pool.prior.s0_sq, "d0": pool.prior.d0, "items": pool.prior.items, "gpu": gpu,
                  "gpu_offset": offset, "gpus": len(pool.offsets.offsets)}


def offsets_lines(folder: Path) -> list[str]:
    """Lines for ``aaco baseline show``: each physical GPU's fitted offset in *folder*, device time
    (raw) and wall time, e.g. ``GPU-1a2b3c4d5e6f: device time -0.41% (12 runs), wall time +0.20%
    (12 runs)``; empty when no item ran on two GPUs."""
    found: dict[str, list[str]] = {}
    for metric, label in ((DEVICE, "device time"), (WALL, "wall time")):
        offsets = folder_pool(folder, metric, RAW).offsets
        for gpu, value in sorted(offsets.offsets.items()):
            found.setdefault(gpu, []).append(f"{label} {math.expm1(value):+.2%} ({offsets.runs[gpu]} runs)")
    return [f"{gpu[:16]}: {', '.join(parts)}" for gpu, parts in found.items()]


