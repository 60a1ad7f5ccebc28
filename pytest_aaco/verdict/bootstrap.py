"""Tail latency: a percentile ratio with its interval from a cluster bootstrap over rounds (no pytest, no I/O).

Reference: Davison, A. C. & Hinkley, D. V. (1997). *Bootstrap Methods and their Application*, CUP,
section 3.8 (resampling clustered data).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pytest_aaco.records.base import QuantileComparison
from pytest_aaco.verdict.stats import _as_1d, _check_prob

# Elements (resamples x iterations) processed at once by the bootstrap; bounds its memory.
_BOOT_CHUNK_ELEMENTS = 2_000_000


# ---------------------------------------------------------------------------------------------
# Tail latency: cluster bootstrap over rounds
# ---------------------------------------------------------------------------------------------


def _rounds_as_arrays(rounds: Sequence[npt.ArrayLike], name: str) -> list[np.ndarray]:
    if isinstance(rounds, np.ndarray) and rounds.ndim == 2:
        rounds = list(rounds)
    arrays = [_as_1d(r, f"{name} round {i}", 1) for i, r in enumerate(rounds)]
    if len(arrays) < 2:
        raise ValueError(f"{name} needs at least 2 rounds for a bootstrap over rounds, got {len(arrays)}")
    for i, a in enumerate(arrays):
        if np.any(a <= 0.0):
            raise ValueError(f"{name} round {i} holds a latency <= 0 ms")
    return arrays


def _weighted_percentile(sorted_values: np.ndarray, weights: np.ndarray, q: float) -> np.ndarray:
    """``np.percentile(np.repeat(sorted_values, w), q)`` (linear method) for each row ``w`` of *weights*.

    *sorted_values*: shape ``(M,)``, ascending. *weights*: shape ``(B, M)``, non-negative integers,
    each row with a positive sum. Returns shape ``(B,)``. Works without materialising the
    repeated samples: the k-th order statistic of a row is the first value whose cumulative
    weight exceeds k.
    """
    cw = np.cumsum(weights, axis=1, dtype=weights.dtype)
    total = cw[:, -1]
    h = (total - 1) * (q / 100.0)
    k_lo = np.floor(h).astype(cw.dtype)
    k_hi = np.minimum(k_lo + 1, total - 1)
    frac = h - k_lo
    j_lo = np.sum(cw <= k_lo[:, None], axis=1)
    j_hi = np.sum(cw <= k_hi[:, None], axis=1)
    v_lo = sorted_values[j_lo]
    v_hi = sorted_values[j_hi]
    return v_lo + (v_hi - v_lo) * frac


def _bootstrap_percentiles(
    rounds: list[np.ndarray], q: float, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """q-th percentile of the pooled iterations of *n_boot* resamples of whole rounds; shape ``(n_boot,)``."""
    n_rounds = len(rounds)
    values = np.concatenate(rounds)
    labels = np.repeat(np.arange(n_rounds), [r.size for r in rounds])
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    sorted_labels = labels[order]
    # How many times each round is drawn when n_rounds rounds are drawn with replacement.
    counts = rng.multinomial(n_rounds, np.full(n_rounds, 1.0 / n_rounds), size=n_boot)
    # A resample holds at most n_rounds * values.size iterations; int32 halves the memory traffic.
    if n_rounds * values.size < np.iinfo(np.int32).max:
        counts = counts.astype(np.int32)
    out = np.empty(n_boot, dtype=float)
    chunk = max(1, _BOOT_CHUNK_ELEMENTS // values.size)
    for start in range(0, n_boot, chunk):
        weights = counts[start : start + chunk][:, sorted_labels]
        out[start : start + chunk] = _weighted_percentile(sorted_values, weights, q)
    return out


def bootstrap_quantile_ratio(
    current_rounds: Sequence[npt.ArrayLike],
    baseline_rounds: Sequence[npt.ArrayLike],
    q: float = 99.0,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int | None = 0,
) -> QuantileComparison:
    """Compare a latency percentile (e.g. p99) of two runs with a cluster bootstrap over rounds.

    Args:
        current_rounds, baseline_rounds: sequences of 1-D arrays of per-iteration latencies (ms,
            > 0), one array per round, at least 2 rounds each; rounds may differ in length.
        q: percentile in [0, 100].
        level: confidence level of the two-sided interval, in (0, 1).
        n_boot: number of bootstrap resamples, >= 1.
        seed: seed for ``np.random.default_rng``; the result is deterministic for an int seed.

    Each resample draws ROUNDS with replacement within each side (never single iterations,
    which are autocorrelated within a round), pools the drawn rounds' iterations and takes the
    q-th percentile (numpy's linear method). ``ratio`` is computed on the original pooled data;
    ``ci_low``/``ci_high`` are the ``(1 -/+ level)/2`` percentiles of the bootstrap ratios;
    ``p_slower = (#{bootstrap ratio <= 1} + 1) / (n_boot + 1)``. Vectorised: the pooled data are
    sorted once and each resample is a vector of round multiplicities, so no resample is sorted.

    Raises:
        ValueError: fewer than 2 rounds on a side, an empty round, a latency that is not finite
            and positive, or *q*, *level*, *n_boot* out of range.

    Source: Davison & Hinkley, *Bootstrap Methods and their Application* (1997), section 3.8
    (resampling clusters as the units).
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q is a percentile and must lie in [0, 100], got {q!r}")
    _check_prob(level, "level")
    if isinstance(n_boot, bool) or int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")
    n_boot = int(n_boot)
    cur = _rounds_as_arrays(current_rounds, "current")
    base = _rounds_as_arrays(baseline_rounds, "baseline")
    ratio = float(np.percentile(np.concatenate(cur), q) / np.percentile(np.concatenate(base), q))
    rng = np.random.default_rng(seed)
    boot_cur = _bootstrap_percentiles(cur, q, n_boot, rng)
    boot_base = _bootstrap_percentiles(base, q, n_boot, rng)
    boot_ratio = boot_cur / boot_base
    tail = 100.0 * (1.0 - level) / 2.0
    ci_low, ci_high = np.percentile(boot_ratio, [tail, 100.0 - tail])
    p_slower = (int(np.count_nonzero(boot_ratio <= 1.0)) + 1) / (n_boot + 1)
    return QuantileComparison(float(q), ratio, float(ci_low), float(ci_high), float(p_slower), n_boot)
