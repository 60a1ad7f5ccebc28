"""Derived metrics of one measured phase: spread, warmup behaviour, drift and throughput.

These describe a run for people and for :mod:`pytest_aaco.verdict.diagnosis`; the regression verdict uses
:mod:`pytest_aaco.verdict.stats` on round summaries instead.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from pytest_aaco.jsonio import JSONDict


def _nan() -> float:
    return float("nan")


def derived_metrics(
    latencies_ms: np.ndarray,
    warmup_latencies_ms: np.ndarray,
    first_run_ms: float,
    batch_size: int = 1,
) -> JSONDict:
    """Scalar descriptions of the measured latencies.

    Parameters: *latencies_ms*, shape ``(n,)``, the measured iterations in ms in time order;
    *warmup_latencies_ms*, shape ``(w,)``, the warmup iterations in ms (may be empty);
    *first_run_ms*, the very first ``run()`` of the session in ms; *batch_size*, samples per run.

    Returns (ms unless stated; NaN where the input is too short):

    - ``n``; ``mean_ms``; ``std_ms`` (sample sd, ddof=1); ``min_ms``; ``max_ms``;
      ``p50_ms``, ``p90_ms``, ``p95_ms``, ``p99_ms`` (numpy linear interpolation);
    - ``cov``: coefficient of variation, std / mean (unitless);
    - ``iqr_ms``: p75 - p25; ``mad_ms``: median absolute deviation from the median (unscaled);
    - ``throughput``: samples/s at the mean latency, ``batch_size * 1000 / mean_ms``;
    - ``warmup_ratio``: ``first_run_ms / p50_ms`` (how much slower the cold first run was);
    - ``warmup_tail_ratio``: median of the last quarter of the warmup (at least 1 iteration)
      divided by ``p50_ms``; well above 1 means the warmup ended before the steady state;
    - ``drift_ratio``: median of the last 10% / median of the first 10% - 1 over the measured
      iterations (at least 5 iterations in each tenth, else NaN): a slow trend such as thermal
      throttling or memory growth. A ratio of positive latencies, so never below -1 (-100%);
    - ``lag1_autocorr``: lag-1 autocorrelation of the latencies (the DESIGN notes 0.1 to 0.3);
    - ``outlier_fraction``: share of iterations above ``p50 + 5 * 1.4826 * MAD`` (a robust
      5-sigma bound; Leys et al., "Detecting outliers", J. Exp. Soc. Psych. 2013); when the MAD
      is 0 (quantised timings) the sample sd is the scale instead.
    """
    lat = np.asarray(latencies_ms, dtype=float).ravel()
    warm = np.asarray(warmup_latencies_ms, dtype=float).ravel()
    n = int(lat.size)
    out: JSONDict = {"n": n, "batch_size": int(batch_size)}
    if n == 0:
        for key in (
            "mean_ms std_ms min_ms max_ms p50_ms p90_ms p95_ms p99_ms cov iqr_ms mad_ms throughput "
            "warmup_ratio warmup_tail_ratio drift_ratio lag1_autocorr outlier_fraction"
        ).split():
            out[key] = _nan()
        return out

    mean = float(lat.mean())
    std = float(lat.std(ddof=1)) if n > 1 else _nan()
    p25, p50, p75, p90, p95, p99 = (float(v) for v in np.percentile(lat, [25, 50, 75, 90, 95, 99]))
    mad = float(np.median(np.abs(lat - p50)))
    out.update(
        mean_ms=mean,
        std_ms=std,
        min_ms=float(lat.min()),
        max_ms=float(lat.max()),
        p50_ms=p50,
        p90_ms=p90,
        p95_ms=p95,
        p99_ms=p99,
        cov=std / mean if mean > 0 and not math.isnan(std) else _nan(),
        iqr_ms=p75 - p25,
        mad_ms=mad,
        throughput=batch_size * 1000.0 / mean if mean > 0 else _nan(),
    )

    out["warmup_ratio"] = float(first_run_ms) / p50 if p50 > 0 and first_run_ms is not None else _nan()
    if warm.size and p50 > 0:
        tail = warm[-max(1, warm.size // 4) :]
        out["warmup_tail_ratio"] = float(np.median(tail)) / p50
    else:
        out["warmup_tail_ratio"] = _nan()

    tenth = n // 10
    first_tenth = float(np.median(lat[:tenth])) if tenth >= 5 else 0.0
    if first_tenth > 0:
        out["drift_ratio"] = float(np.median(lat[-tenth:])) / first_tenth - 1.0
    else:
        out["drift_ratio"] = _nan()

    if n > 2 and float(lat.var()) > 0:
        centred = lat - mean
        out["lag1_autocorr"] = float(np.dot(centred[:-1], centred[1:]) / np.dot(centred, centred))
    else:
        out["lag1_autocorr"] = _nan()

    scale = 1.4826 * mad if mad > 0 else (std if n > 1 and not math.isnan(std) else 0.0)
    out["outlier_fraction"] = float(np.mean(lat > p50 + 5 * scale)) if scale > 0 else 0.0
    return out


def other_processes_cores(telemetry: dict[str, Any] | None, cpu_count: int) -> float | None:
    """Cores that processes other than this one kept busy during the measured phase (mean).

    From the SystemSampler's cumulative counters, when the telemetry has them: the host's busy
    CPU seconds minus this process's CPU seconds, over the monotonic seconds between the first
    and the last reading (``system_busy_cpu_s``, ``process_cpu_s``, ``monotonic_s``). That holds
    for a phase of 0.1 s as for one of minutes: the start and the stop readings suffice. Older
    telemetry: ``system_cpu_percent`` (0..100 over all cores, mean) times *cpu_count*, minus
    ``process_cpu_percent`` (100 = one core, mean). None when the figures are missing. A shared
    CI runner whose neighbours take CPU shows here first.
    """
    summary = (telemetry or {}).get("summary") or {}

    def change(key: str) -> float | None:
        entry = summary.get(key) or {}
        first, last = entry.get("first"), entry.get("last")
        if not isinstance(first, (int, float)) or not isinstance(last, (int, float)) or (entry.get("n") or 0) < 2:
            return None
        return float(last - first)

    busy, own, seconds = change("system_busy_cpu_s"), change("process_cpu_s"), change("monotonic_s")
    if busy is not None and own is not None and seconds is not None and seconds > 0:
        return max((busy - own) / seconds, 0.0)
    system = (summary.get("system_cpu_percent") or {}).get("mean")
    process = (summary.get("process_cpu_percent") or {}).get("mean")
    if not isinstance(system, (int, float)) or not isinstance(process, (int, float)) or cpu_count < 1:
        return None
    return max((system * cpu_count - process) / 100.0, 0.0)


def own_process_cores(telemetry: dict[str, Any] | None) -> float | None:
    """Mean cores this process used during the measured phase: its CPU seconds (``process_cpu_s``) over
    the monotonic seconds (``monotonic_s``) between the SystemSampler's first and last reading. None when
    the telemetry lacks them (fewer than two readings, or an older record)."""
    summary = (telemetry or {}).get("summary") or {}
    spans = []
    for key in ("process_cpu_s", "monotonic_s"):
        entry = summary.get(key) or {}
        first, last = entry.get("first"), entry.get("last")
        if not isinstance(first, (int, float)) or not isinstance(last, (int, float)) or (entry.get("n") or 0) < 2:
            return None
        spans.append(float(last - first))
    return spans[0] / spans[1] if spans[1] > 0 else None


def history_own_cores(runs: Iterable[Mapping[str, object]]) -> float | None:
    """The cores the item's process used while measuring in its saved runs: the median over the history
    runs (baseline ``history`` entries, whose ``telemetry`` is the sampler summary) that have them
    (:func:`own_process_cores`), or None."""
    found = [c for run in runs if isinstance(tel := run.get("telemetry"), dict)
             and (c := own_process_cores({"summary": tel})) is not None]
    return float(statistics.median(found)) if found else None


def kernel_changes(before: dict[str, float], after: dict[str, float], top: int = 5
                   ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Kernel names whose launches per run grew (*added*) or shrank (*removed*) by more than 0.5
    between *before* and *after* (name -> launches per run), largest change first, *top* of each."""
    delta = {n: float(after.get(n, 0.0)) - float(before.get(n, 0.0)) for n in set(before) | set(after)}
    added = sorted(((n, d) for n, d in delta.items() if d > 0.5), key=lambda x: (-x[1], x[0]))[:top]
    removed = sorted(((n, -d) for n, d in delta.items() if d < -0.5), key=lambda x: (-x[1], x[0]))[:top]
    return added, removed
