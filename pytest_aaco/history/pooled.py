"""The pooled run-to-run variance read from the baseline store: each baseline folder's items fitted
into a :class:`~pytest_aaco.verdict.pooling.Pool` (the statistics, which read no file, are in
:mod:`pytest_aaco.verdict.pooling`), the pools one item's stored gate tests with (:func:`item_pools`, read
before it judges), and the GPU offsets ``aaco baseline show`` lists.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from pytest_aaco.history.store import _runner_baselines
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.verdict.pooling import DEVICE, NORMALIZED, RAW, WALL, Pool, fit_pool, run_means


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


#: the pools of one item's stored gate, by (metric, series kind, reference id): :func:`item_pools`
Pools = Mapping[tuple[str, str, str | None], Pool]


def item_pools(folder: Path, result: BenchmarkResult) -> dict[tuple[str, str, str | None], Pool]:
    """The pools of *folder* (:func:`folder_pool`) that the stored gate of an item measured as *result* may
    test with, read before it judges (:func:`pytest_aaco.gate.gather`): wall time on raw figures (a run with
    rounds), device time on raw figures and normalized by the reference workload (a run with traced blocks;
    normalized only when the reference was traced too). Keyed by ``(metric, kind, reference id or None)``."""
    pools: dict[tuple[str, str, str | None], Pool] = {}
    if len(result.round_log_means):
        pools[(WALL, RAW, None)] = folder_pool(folder, WALL, RAW)
    dev = getattr(result, "device", None)
    if dev is not None and dev.blocks:
        pools[(DEVICE, RAW, None)] = folder_pool(folder, DEVICE, RAW)
        ref = getattr(result, "reference", None)
        if ref is not None and getattr(ref, "device", None) is not None:
            pools[(DEVICE, NORMALIZED, ref.id)] = folder_pool(folder, DEVICE, NORMALIZED, ref.id)
    return pools


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


