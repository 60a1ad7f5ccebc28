"""BenchmarkResult + Baseline → Verdict: the decision rule of the gate, in one place.

The unit of the test is the round (its mean ln latency), never the iteration: iterations are
autocorrelated and runs differ by more than iterations do (Kalibera & Jones, ISMM 2013).

* History shorter than ``min_history`` runs: Welch's t-test (Welch 1947) of this run's round
  log-means against the history's rounds.
* Longer history: the prediction-interval t-test, whose variance comes from the spread of the
  history's run means, so runner drift between CI runs is accounted for (Bencher's t-test
  threshold; Hahn & Meeker 1991).

Which series is tested (:func:`choose_series`): with a reference workload measured alongside
(:mod:`pytest_aaco.measure.reference_workload`) and valid (measured now and in history runs with the same
reference id, and stable):

* with at least ``min_history`` such runs, the *reference-adjusted* test: the item's run means
  regressed on the reference's over the history, this run judged against the prediction at the
  reference's speed now (:meth:`pytest_aaco.verdict.stats.ReferenceFit.test`; the slope is the
  item's own sensitivity to the machine's speed);
* with fewer, the *normalized* round log-means ``ln(item) - ln(reference)`` (a slope of 1), but
  only when the item's iteration lasts about as long as the reference's (within
  :data:`NORMALIZE_DURATION_RATIO`): items much shorter or longer than the reference respond to
  the machine's speed differently, and dividing then adds noise instead of removing it;
* the raw round log-means otherwise, with the reason said. When the
reference's own drift, or the offset shared by the session's items, shows the machine changed
speed between the history and now, a latency regression or improvement on *raw* figures becomes
inconclusive, naming the cause (:func:`regime_change`). A fingerprint that differs only in
versions (ORT, GPU driver) is compared on raw figures, with the change named and the verdict
said to be weaker than side by side.

Outcomes, with slowdown = ratio - 1 and δ the practical threshold, at the item's level α_i:

* ``regression``: one-sided p ≤ α_i **and** estimated slowdown ≥ δ (then confirmed, see plugin);
* ``improvement``: p(faster) ≤ α_i and estimated speed-up ≥ δ (fails only with fail-on-improvement);
* ``no-regression``: the one-sided upper confidence bound of the slowdown is below δ;
* ``inconclusive``: neither; the minimum detectable effect (power 0.8) is reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from pytest_aaco.history import pooled as pooled_store
from pytest_aaco.history.series import (
    ADJUSTED,
    DRIFT_FRACTION,
    DRIFT_P,
    NORMALIZED,
    RAW,
    SPREAD_LIMIT,
    Series,
    Track,
    build_series,
    choose_series,
    comparison,
)
from pytest_aaco.history.store import Baseline
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.options import GateSettings, default
from pytest_aaco.records.base import DEVICE_TIME, LATENCY, FastestIteration, Outcome, QuantileComparison
from pytest_aaco.records.verdict import DeviceTimeRecord, Pair, ReferenceDrift, Verdict
from pytest_aaco.verdict import bootstrap, pooling, run_stats, stats
from pytest_aaco.verdict.comparable import Fingerprint, FingerprintMatch
from pytest_aaco.verdict.finish import stands_on_fastest
from pytest_aaco.verdict.metrics import history_own_cores, kernel_changes, own_process_cores
from pytest_aaco.verdict.outcome import judgement_of
from pytest_aaco.verdict.percent import pct

#: the outcome words as module constants (``verdict.outcome == REGRESSION``)
REGRESSION = Outcome.REGRESSION
IMPROVEMENT = Outcome.IMPROVEMENT
NO_REGRESSION = Outcome.NO_REGRESSION
INCONCLUSIVE = Outcome.INCONCLUSIVE
NO_BASELINE = Outcome.NO_BASELINE
MISMATCH = Outcome.MISMATCH
SAVED = Outcome.SAVED
ERROR = Outcome.ERROR
UNCHANGED = Outcome.UNCHANGED
NEW = Outcome.NEW
#: a machine speed change beyond this fraction (the reference's drift, significant at REGIME_P, or
#: the offset shared by the session's items) is a regime change: raw figures cannot gate
REGIME_FRACTION, REGIME_P = 0.03, 0.01
#: beyond this machine drift even the normalized series is not trusted to declare a regression or an
#: improvement: in the busy-CPU study (studies/RESULTS.md) unchanged gates whose reference ran
#: 67% to 136% slower than in the history came out 17% to 53% slower normalized (CPU contention
#: time-shares the item and the reference unevenly)
NORMALIZED_REGIME_LIMIT = 0.30
#: a round shorter than this (ms) runs inside one scheduler time slice: Linux's EEVDF scheduler
#: gives a task 0.75 ms x (1 + log2 CPUs), at most 3 ms (``sysctl_sched_base_slice``,
#: kernel/sched/fair.c; CFS's minimum granularity had the same scale), so such a round sees one
#: scheduling and cache state, and a run of a few of them can land in one state together
SCHEDULER_SLICE_MS = 3.0
#: with rounds that short and a history of fewer than SHORT_HISTORY_RUNS runs, the run-to-run
#: noise is unknown and the rounds' spread does not show it. An unchanged 6 us MatMul chain under two
#: busy processes ran its rounds at 6.4 or 8.3 us (two states, 30% apart) and was once failed as +46%
#: confirmed (issue 22, fault 8); a doubling is beyond both. So the test's run-to-run term is widened
#: to SHORT_ROUND_SD: a change of SHORT_ROUND_LIMIT (a fraction) against a 1-run history is then at the
#: edge of significance at the 5% level (normal approximation: ln(1 + limit) = z_0.95 x sd x sqrt(2),
#: the run term's variance being sd^2 x (1 + 1/runs)), and the printed interval and MDE say so
SHORT_ROUND_LIMIT = 1.0
SHORT_HISTORY_RUNS = 3
SHORT_ROUND_SD = math.log1p(SHORT_ROUND_LIMIT) / (NormalDist().inv_cdf(0.95) * math.sqrt(2))


def _device_record(run: Mapping[str, object]) -> dict[str, Any] | None:
    """A history run's item device time (``device_time`` with at least one block log-mean), or None."""
    dev = run.get("device_time")
    return dev if isinstance(dev, dict) and dev.get("log_means") else None


def _paired_logs(item: list[float], reference: list[float]) -> list[float]:
    """Per block ``ln(item) - ln(reference)`` over the blocks both have (a failed trace leaves fewer)."""
    return [float(a) - float(b) for a, b in zip(item, reference, strict=False)]


def device_track(result: BenchmarkResult, baseline: Baseline) -> Track | None:
    """Device time's :class:`Track`, or None when this run or every history run lacks device time: the item's
    traced blocks' ln(kernel time per run) (:attr:`pytest_aaco.measure.device_time.DeviceSeries.log_means`)
    and the reference workload's *device time* (clocks move kernels too), from history runs whose reference
    (same id) was traced."""
    dev = result.device
    if dev is None or not dev.blocks:
        return None
    history = [(run, rec) for run in baseline.history if (rec := _device_record(run)) is not None]
    if not history:
        return None
    track = Track(np.asarray(dev.log_means, float), [list(rec["log_means"]) for _, rec in history], dev.kernel_ms,
                  "kernel time per run")
    ref = result.reference
    if ref is None:
        return replace(track, missing="no reference workload was measured")
    ref_dev = ref.device
    if ref_dev is None:
        return replace(track, missing="the reference workload was not traced")
    pairs = [(list(rec["log_means"]), run["reference"]["device_time"]) for run, rec in history
             if isinstance(run.get("reference"), dict) and run["reference"].get("id") == ref.id
             and isinstance(run["reference"].get("device_time"), dict)
             and run["reference"]["device_time"].get("log_means")]
    return replace(track, ref=ref_dev, ref_name=ref.name, ref_id=ref.id, ref_mean_ms=ref_dev.kernel_ms, pairs=pairs,
                   no_pairs="the history has no device time of this reference workload",
                   normalized=lambda: (np.asarray(_paired_logs(dev.log_means, ref_dev.log_means), float),
                                       [_paired_logs(item, r["log_means"]) for item, r in pairs]))


def _pooled(result: BenchmarkResult, baseline: Baseline, metric: str, kind: str, ref_id: str | None,
            current: np.ndarray, pools: pooled_store.Pools | None) -> tuple[stats.Comparison, dict[str, Any]] | None:
    """The pooled test (:func:`pytest_aaco.verdict.pooling.pooled_comparison`) of *current* (this run's
    log-means of *metric* on series *kind*) against *baseline*'s runs, with the folder's pool from *pools*
    (read before judging) or, when not there, read now (:func:`pytest_aaco.history.pooled.folder_pool`)."""
    pool = None if pools is None else pools.get((metric, kind, ref_id))
    if pool is None:
        pool = pooled_store.folder_pool(Path(baseline.path).parent, metric, kind, ref_id)
    gpu = getattr(result, "gpu", None)  # the physical GPU this run used (its uuid or PCI bus id), set by the gate
    return pooling.pooled_comparison(current, pooling.run_means(baseline.history, metric, kind, ref_id),
                                     pooling.run_gpu({"gpu": gpu}) if isinstance(gpu, dict) else None, pool)


def device_pooled(result: BenchmarkResult, baseline: Baseline, kind: str, pools: pooled_store.Pools | None = None
                  ) -> tuple[stats.Comparison, dict[str, Any]] | None:
    """The pooled device-time test of *result* against *baseline* on series *kind* (raw, or normalized by the
    reference's device time), with what it used (``{"s0_sq", "d0", "items", "gpu", "gpu_offset", "gpus"}``), or
    None when pooling does not apply (adjusted series, no traced blocks, fewer than 2 history runs, no prior).
    Raises ValueError as :func:`pytest_aaco.verdict.pooling.pooled_test` does."""
    dev = getattr(result, "device", None)
    if kind not in (RAW, NORMALIZED) or dev is None or not dev.blocks:
        return None
    ref = getattr(result, "reference", None)
    if kind == RAW:
        return _pooled(result, baseline, pooling.DEVICE, RAW, None, np.asarray(dev.log_means, float), pools)
    ref_dev = getattr(ref, "device", None)
    if ref is None or ref_dev is None:
        return None
    return _pooled(result, baseline, pooling.DEVICE, NORMALIZED, ref.id,
                   np.asarray(_paired_logs(dev.log_means, ref_dev.log_means), float), pools)


def device_series(result: BenchmarkResult, baseline: Baseline, min_history: int = default("min-history")
                  ) -> Series | None:
    """The device-time series the history test runs on (:func:`build_series` of :func:`device_track`, the
    builder wall time's series comes from, with the same guards: an unstable reference and items much shorter
    or longer than the reference give raw figures with the reason), or None when this run or every history run
    lacks device time. Raises ValueError for non-finite stored figures."""
    track = device_track(result, baseline)
    return None if track is None else build_series(track, "", min_history)


def device_check(result: BenchmarkResult, baseline: Baseline, settings: GateSettings, level: float,
                 pools: pooled_store.Pools | None = None) -> DeviceTimeRecord | None:
    """Device time against the stored history, with the statistics wall time gets: the history
    test (:meth:`Series.test`: the prediction-interval t-test, Welch's test with the run-to-run term
    on a short history, or the reference-adjusted test) on the series of :func:`device_series`, the
    same outcome rule (:func:`pytest_aaco.verdict.outcome.outcome_of`) at the item's *level* and
    ``settings.device_threshold`` (``--aaco-device-threshold``), its own 95% CI and MDE (power 0.8).
    On raw and normalized series with 2 or more history runs, the run-to-run variance is pooled over
    the baseline folder's items and each physical GPU's offset taken out (:func:`device_pooled`, with the
    folder's *pools* when read before judging; recorded under ``"pooled"``).

    Returns None when there is nothing to compare (this run or the history lacks device time), else a
    :class:`~pytest_aaco.records.verdict.DeviceTimeRecord`: the judgement, kernel time, busy time (ms per run) and
    kernels per run on both sides, the kernels added and removed (launches per run, vs the latest traced
    history run), and as figures ``runs``, ``reference`` and ``pooled``; a ValueError from the statistics
    gives a record without a judgement, with the reason.
    """
    try:
        series = device_series(result, baseline, settings.min_history)
    except ValueError as exc:
        return DeviceTimeRecord(None, reason=str(exc))
    if series is None or result.device is None:
        return None
    dev = result.device
    records = [rec for run in baseline.history if (rec := _device_record(run)) is not None]
    try:  # the run-to-run variance pooled over the folder's items, GPU offsets taken out (verdict/pooling.py)
        pooled = device_pooled(result, baseline, series.kind, pools)
        comp = pooled[0] if pooled else series.test(settings.min_history, settings.run_noise, None, None)
    except ValueError as exc:
        return DeviceTimeRecord(None, reason=str(exc))
    judged = judgement_of(DEVICE_TIME, comp, settings.device_threshold, level, series=series.kind,
                          reason=series.reason)

    def past(key: str) -> float:
        values = [float(r[key]) for r in records if isinstance(r.get(key), (int, float))]
        return float(np.median(values)) if values else float("nan")

    added, removed = kernel_changes(records[-1].get("kernel_names") or {}, dev.names_per_run())
    return DeviceTimeRecord(
        judged, kernel_ms=Pair(past("kernel_ms"), dev.kernel_ms), busy_ms=Pair(past("busy_ms"), dev.busy_ms),
        kernels=Pair(past("kernels"), dev.kernels), kernels_added=tuple((n, float(c)) for n, c in added),
        kernels_removed=tuple((n, float(c)) for n, c in removed),
        figures={"runs": len(series.history),
                 "reference": series.reference.to_dict() if series.reference is not None else None,
                 "pooled": pooled[1] if pooled else None})


def withheld_by_regime(v: Verdict, series: Series, machine_offset: float | None) -> bool:
    """Whether a regression or improvement must be withheld because the machine changed speed.

    The machine's change is the reference's drift (else the session's shared offset). On raw
    figures the verdict is withheld unless its change is more than twice the machine's, in ln
    units (raw = true change x machine change, so only a change far beyond the machine's is
    evidence); on normalized figures only beyond :data:`NORMALIZED_REGIME_LIMIT`, and then unless
    the change exceeds the machine's. A 10x slowdown is never hidden by a 30% slower machine.
    """
    if v.outcome not in (REGRESSION, IMPROVEMENT) or v.ratio is None:
        return False
    drift = series.reference.drift if series.reference is not None else machine_offset
    if drift is None:
        return False
    machine = abs(math.log1p(drift))
    change = abs(math.log(v.ratio))
    if series.kind == RAW:
        return change <= 2 * machine
    return abs(drift) > NORMALIZED_REGIME_LIMIT and change <= machine


def _run_fastest_ms(run: Mapping[str, Any]) -> float | None:
    """A history run's fastest iteration (ms): the least of its rounds' ``min_ms``; None when a round lacks it."""
    found = [r.get("min_ms") for r in run.get("rounds") or [] if isinstance(r, Mapping)]
    numbers = [float(v) for v in found if isinstance(v, (int, float)) and v > 0]
    return min(numbers) if numbers and len(numbers) == len(found) else None


def fastest_iteration(result: BenchmarkResult, baseline: Baseline, level: float,
                      run_noise: float) -> FastestIteration | None:
    """The run's fastest iteration against the history's: the witness the stored gate asks for before it
    withholds a regression for CPU contention or a machine speed change
    (:meth:`~pytest_aaco.records.verdict.FastestIteration.stands`).

    A process that waits for a CPU loses whole time slices (milliseconds) in the iterations the waits
    interrupt; an iteration shorter than a slice often runs uninterrupted, at the speed the item's own work
    sets. So the run's fastest iteration (ms, the minimum of its rounds, the estimator Chen & Revels 2016
    argue for) moves with the item's work and hardly with the wait; on the 2-core study VM with 4 busy
    processes an unchanged MLP's fastest iteration moved -1% to +5% while its mean moved +140% to +240%, and a
    +50% change of its work moved it +43% to +46% (studies/contention_gate.py, studies/RESULTS.md).

    ``ratio`` = current / the slowest history run's fastest iteration; its lower bound divides by
    ``exp(z s sqrt(1 + 1/n))``, *s* the sd of the *n* history runs' ln fastest iterations (at least
    *run_noise*, a fraction) and *z* the normal quantile at the item's *level*: a prediction bound for one
    new run (a normal model of ln minima, an approximation). What the machine did to an iteration no wait
    interrupted (shared caches, memory bandwidth, clocks) is bounded by the reference workload's fastest
    iteration now against its fastest in the history; it counts only when the reference's iteration is at
    least as long as the item's, so that it was no likelier than the item's to run uninterrupted
    (``reference_ratio`` None otherwise, and then nothing stands on this figure). A session of several
    intra-op threads that got fewer cores than in its history runs even its uninterrupted iterations on
    fewer threads: with 4 busy processes on 2 cores, an unchanged 2-thread MLP's fastest iteration was
    +55% in 1 run of 8; ``parallel_bound`` (the cores it used in the history, at most their ratio to the
    cores it got now, :func:`pytest_aaco.verdict.metrics.history_own_cores`) bounds that.

    None when fewer than 2 history runs have a fastest iteration (baselines saved before it), the run has
    no rounds, or its session's first execution provider is not the CPU's (a GPU iteration's wall time
    carries the device's time and the launches: the witness is measured for CPU sessions only)."""
    if not result.rounds or result.providers_used[:1] != ["CPUExecutionProvider"]:
        return None  # a GPU iteration's wall time is the device's too: waiting for a CPU is not all that moves it
    history = [v for v in (_run_fastest_ms(run) for run in baseline.history) if v is not None]
    if len(history) < 2:
        return None
    current = float(min(r.latencies_ms.min() for r in result.rounds))
    logs = np.log(history)
    spread = max(float(np.std(logs, ddof=1)), run_noise)
    z = NormalDist().inv_cdf(1.0 - min(max(level, 1e-12), 0.5))
    ratio = current / max(history)
    lower = ratio / math.exp(z * spread * math.sqrt(1.0 + 1.0 / len(history)))
    reference_ratio = None
    ref = result.reference
    if ref is not None and ref.min_ms is not None and ref.min_ms >= current:
        ref_history = [float(run["reference"]["min_ms"]) for run in baseline.history
                       if isinstance(run.get("reference"), Mapping) and run["reference"].get("id") == ref.id
                       and isinstance(run["reference"].get("min_ms"), (int, float)) and run["reference"]["min_ms"] > 0]
        if ref_history:
            reference_ratio = ref.min_ms / min(ref_history)
    used, got = history_own_cores(baseline.history), own_process_cores(result.telemetry)
    parallel = None if used is None or got is None or got <= 0 else max(1.0, min(used, used / got))
    return FastestIteration(current, max(history), ratio, lower, reference_ratio, len(history), parallel)


def regime_change(reference: ReferenceDrift | None, machine_offset: float | None) -> str:
    """The reason raw figures cannot gate ('' when they can): the reference ran
    :data:`REGIME_FRACTION` slower or faster than in the history (p < :data:`REGIME_P`), or the
    session's items share an offset that large (*machine_offset*, a fraction from
    :func:`pytest_aaco.verdict.run_stats.common_offset`)."""
    if reference is not None and abs(reference.drift) > REGIME_FRACTION and reference.p_value < REGIME_P:
        return (f"the machine ran {abs(reference.drift):.0%} {'slower' if reference.drift > 0 else 'faster'}"
                f" than in the history (reference workload {reference.name}, p={reference.p_value:.1g})")
    if machine_offset is not None and abs(machine_offset) > REGIME_FRACTION:
        return (f"this session's items are {abs(machine_offset):.0%} {'slower' if machine_offset > 0 else 'faster'}"
                " together than their histories (a machine speed change)")
    return ""


def _method_text(v: Verdict) -> str:
    if v.method == pooling.METHOD:
        return (f"prediction-interval t-test over {v.baseline_runs} baseline runs, run-to-run variance pooled over"
                " this runner's items (moderated t, Smyth 2004)")
    if v.method == "prediction-interval":
        return f"prediction-interval t-test over {v.baseline_runs} baseline runs"
    if v.method == "reference-adjusted":
        return f"prediction interval of a regression on the reference workload over {v.baseline_runs} baseline runs"
    runs = v.baseline_runs
    levels = ("the levels' difference (each run's fastest quarter of rounds) with the standard error of a "
              if v.rounds_kept and (v.series or RAW) == RAW else "")
    return (f"{levels}Welch t-test on {v.current_rounds} vs {v.baseline_rounds} rounds ({runs} baseline"
            f" run{'s' * (runs != 1)}, run-to-run term included)")


def round_ms(result: BenchmarkResult, baseline: Baseline) -> float | None:
    """The shortest median round duration (ms: iterations x mean latency) of this run and the
    history's runs, or None when no round is known. A round's duration is what it can average
    over: a round inside one scheduler time slice (:data:`SCHEDULER_SLICE_MS`) averages nothing."""
    found = [float(np.median([r.latencies_ms.sum() for r in result.rounds]))] if result.rounds else []
    for run in baseline.history:
        rounds = [r["mean_ms"] * r["n"] for r in run.get("rounds") or [] if "mean_ms" in r and "n" in r]
        if rounds:
            found.append(float(np.median(rounds)))
    return min(found) if found else None


def short_rounds(result: BenchmarkResult, baseline: Baseline) -> str:
    """Why the run-to-run term is widened to :data:`SHORT_ROUND_SD` ('' when it is not): rounds shorter than
    a time slice (:data:`SCHEDULER_SLICE_MS`) with a history of fewer than :data:`SHORT_HISTORY_RUNS` runs.

    With such a history the gate's test is Welch's on rounds plus a prior run-to-run term
    (``--aaco-run-noise``, 1%, measured on the levels of items with long rounds); rounds inside one time
    slice can all land in one scheduling state, so their spread says nothing of how far runs apart can
    differ. The wider term goes into the test itself, so the interval printed and the minimum detectable
    effect are the ones it used; a change well beyond :data:`SHORT_ROUND_LIMIT` still counts. The fix is
    longer rounds or more history, which the reason says.
    """
    if baseline.runs >= SHORT_HISTORY_RUNS:
        return ""
    shortest = round_ms(result, baseline)
    if shortest is None or shortest >= SCHEDULER_SLICE_MS:
        return ""
    return (f"run-to-run term widened to {math.expm1(SHORT_ROUND_SD):.0%}: its rounds last {shortest:.3g} ms, inside"
            f" one scheduler time slice ({SCHEDULER_SLICE_MS:g} ms), and the history has {baseline.runs}"
            f" run{'s' * (baseline.runs != 1)}: such rounds can all land in one scheduling state, so they do not"
            f" show how much runs differ; until {SHORT_HISTORY_RUNS} runs, only a change of about"
            f" {1 + SHORT_ROUND_LIMIT:g}x (slower or faster) or more can count. Raise --aaco-iterations (or"
            f" iterations: in the registry) so that a round lasts {SCHEDULER_SLICE_MS:g} ms or more, or save more"
            " runs (--aaco-save-baseline)")


def stability(result: BenchmarkResult, baseline: Baseline | None) -> list[str]:
    """Reasons to flag the item unstable: drift between the halves of the measured phase, or a
    round-to-round spread far above the history's."""
    reasons = []
    log_means = result.round_log_means
    drift = run_stats.drift(log_means)
    if drift is not None and drift.p_value < DRIFT_P and abs(drift.ratio - 1) > DRIFT_FRACTION:
        reasons.append(f"latency drifted {pct(drift.ratio)} from the first to the second half of the"
                       f" measured phase (p={drift.p_value:.1g})")
    if baseline is not None and baseline.runs:
        summary = run_stats.summarize_history(baseline.run_round_log_means())
        spread = run_stats.spread_ratio(log_means, summary["round_sds"][np.isfinite(summary["round_sds"])])
        if spread is not None and spread > SPREAD_LIMIT:
            reasons.append(f"round-to-round spread is {spread:.1f}x the history's")
    return reasons


#: telemetry summary fields gated for memory growth: (field, fallback field, label). Both are the
#: item's own footprint; the device-wide peak (``vram_used_mb``) is reported, never gated: it moves
#: with cuDNN workspaces, a confirmation's second session and other processes (issue 11)
MEMORY_FIELDS = (("rss_growth_mb", "rss_mb", "RSS growth"), ("vram_own_mb", None, "own device memory"))


def _memory_figure(telemetry_summary: dict[str, Any], key: str, method: str | None = None) -> float | None:
    entry = telemetry_summary.get(key) or {}
    if method is not None and entry.get("method") != method:
        return None
    value = entry.get("max")
    return float(value) if isinstance(value, (int, float)) else None


def history_memory_growth(result: BenchmarkResult, baseline: Baseline, settings: GateSettings) -> list[str]:
    """Memory growth beyond both ``memory_threshold`` (fraction) and ``memory_slack_mb`` (MB).

    RSS is judged as the item's own footprint: peak RSS during the measured rounds minus the RSS
    just before its InferenceSession was built (``rss_growth_mb``), so what earlier items or the
    plugin itself loaded does not count; older baselines without it fall back to peak RSS.
    Device memory is the growth of this process's own device memory around session creation and
    the measured rounds (``vram_own_mb``, :class:`pytest_aaco.samplers.gpu_memory.DeviceMemoryProbe`),
    compared only with history runs measured the same way (its ``method``).

    The figure is compared with the *largest* the history recorded, not its median: a session's
    footprint is granular. On the H100 (docs/gpu.md) fresh sessions of one unchanged ResNet-50 held
    either about 280 or about 406 MB of device memory (and 131 or 135 MB of RSS), at random from
    process to process; against the median of a history with both, 18 of 25 unchanged gates
    failed. Growth beyond every footprint the history has seen is what a bigger initializer or a
    leak produces. The growth must also exceed the spread of the saved runs' footprints (largest minus
    smallest, MB): a footprint seen to move that far between processes can move as far again (issue 43:
    an unchanged VGG-19's own device memory read 1308 MB against 1176 MB). A first-look memory
    regression is confirmed on a fresh session
    (:func:`confirm`) before it fails.
    """
    current = (result.telemetry or {}).get("summary", {})
    found = []
    for key, fallback, label in MEMORY_FIELDS:
        field_name = key
        method = (current.get(key) or {}).get("method")
        past = [_memory_figure((run.get("telemetry") or {}), key, method) for run in baseline.history]
        if fallback and (_memory_figure(current, key) is None or not any(p is not None for p in past)):
            field_name = fallback
            past = [_memory_figure((run.get("telemetry") or {}), fallback) for run in baseline.history]
        now = _memory_figure(current, field_name)
        known = [p for p in past if p is not None]
        if now is None or not known:
            continue
        reference = float(max(known))
        spread = float(max(known) - min(known))  # how far the saved runs' footprints moved between processes
        if (now > reference * (1 + settings.memory_threshold) and now - reference > settings.memory_slack_mb
                and now - reference > spread):
            spread_text = (f", beyond the saved runs' spread {spread:.0f} MB" if spread > settings.memory_slack_mb
                           else "")
            found.append(f"{label if field_name == key else 'peak RSS'} {now:.0f} MB vs baseline {reference:.0f} MB"
                         f" (+{now - reference:.0f} MB, limit +{settings.memory_threshold:.0%}"
                         f" and +{settings.memory_slack_mb:.0f} MB{spread_text})")
    return found


def p99_check(result: BenchmarkResult, baseline: Baseline, level: float,
              threshold: float) -> QuantileComparison | None:
    """Bootstrap over rounds of the p99 ratio against the latest baseline run's raw iterations."""
    past = [np.asarray(r, dtype=float) for r in baseline.latest_latencies_ms if len(r)]
    if len(past) < 2 or len(result.rounds) < 2:
        return None
    comp = bootstrap.bootstrap_quantile_ratio([r.latencies_ms for r in result.rounds], past, q=99.0,
                                          level=1 - 2 * level)
    return replace(comp, regression=bool(comp.p_slower <= level and comp.ratio - 1 >= threshold))


def judge_history(result: BenchmarkResult, baseline: Baseline | None, fingerprint: Fingerprint, settings: GateSettings,
                  level: float, label: str, other_runners: list[str] | None = None,
                  prior: stats.VariancePrior | None = None, machine_offset: float | None = None,
                  adjusted_prior: stats.VariancePrior | None = None, match: FingerprintMatch | None = None,
                  pools: pooled_store.Pools | None = None) -> Verdict:
    """Judge *result* against *baseline* at significance *level* (the item's α_i).

    *label* names the item in messages, e.g. ``resnet50[cpu]``. *machine_offset* is the raw
    slowdown (fraction) shared by the session's other items (:func:`pytest_aaco.verdict.run_stats.common_offset`),
    None when unknown. *prior* moderates the prediction-interval test; it is fitted on raw
    histories, so it is used on the raw series only; *adjusted_prior*, fitted on the runner's
    residual variances, moderates the reference-adjusted test. *match*: *fingerprint* compared with the
    baseline's (:meth:`~pytest_aaco.verdict.comparable.Fingerprint.against`), and *pools*: the baseline folder's
    pooled run-to-run variances (:func:`pytest_aaco.history.pooled.item_pools`), when the caller read them
    before judging (the item pipeline, :func:`pytest_aaco.gate.gather`); compared and read here otherwise.
    Never raises for statistical corner cases: too few rounds make the verdict inconclusive.

    Returns the verdict *unfinished* (no ``fails``, no ``message``): the stored gate's first look, which
    the item pipeline confirms, withholds for contention and finishes once
    (:func:`pytest_aaco.gate.judge`, :func:`pytest_aaco.verdict.finish.finish`).
    """
    t = settings.threshold
    if baseline is None:
        hint = f" (other runners have one: {', '.join(other_runners)})" if other_runners else ""
        return Verdict(NO_BASELINE, label, t, current_mean_ms=result.mean_ms,
                       other_runners=list(other_runners or []),
                       reason=f"no baseline for {label}{hint}; record one with --aaco-save-baseline")
    match = match or fingerprint.against(baseline.fingerprint)
    versions = match.versions
    if match.diff and not versions:
        return Verdict(MISMATCH, label, t, current_mean_ms=result.mean_ms, baseline_path=str(baseline.path),
                       fingerprint_diff=list(match.diff),
                       reason=f"not gated: fingerprint differs from {baseline.path.name} ({match.described})")
    version_text = ""
    if versions:
        version_text = (f"compared across a version change ({match.described})"
                        " on raw figures: weaker than a side-by-side comparison (--aaco-compare-python)")
    raw_comp = None
    short = short_rounds(result, baseline)  # widens the test's run-to-run term (SHORT_ROUND_SD)
    floor = SHORT_ROUND_SD if short else 0.0
    try:
        series = choose_series(result, baseline, raw_only=version_text, min_history=settings.min_history)
        if series.kind != RAW:
            raw_comp = comparison(result.round_log_means, baseline.run_round_log_means(), settings.min_history,
                                  settings.run_noise, prior, floor, stats.fastest_rounds)
        # the folder's items' pooled run-to-run variance (history/pooled.py): it estimates the run-to-run term
        # from runs of the runner's items, so it replaces the prior and the short-rounds widening when it applies
        pooled = (_pooled(result, baseline, pooling.WALL, RAW, None, stats.fastest_rounds(result.round_log_means),
                          pools) if series.kind == RAW and len(result.round_log_means) else None)
        comp = pooled[0] if pooled else series.test(settings.min_history, settings.run_noise, prior, adjusted_prior,
                                                    floor)
    except ValueError as exc:
        return Verdict(INCONCLUSIVE, label, t, current_mean_ms=result.mean_ms, baseline_path=str(baseline.path),
                       reason=f"inconclusive for {label}: {exc}")
    # why raw figures were tested is a note of the verdict (below), as its JSON has always kept it
    wall = judgement_of(LATENCY, comp, t, level, series=series.kind)
    verdict = Verdict.judged(
        wall, label, current_mean_ms=result.mean_ms,
        baseline_mean_ms=float(np.mean([run["summary"]["mean_ms"] for run in baseline.history])),
        current_rounds=comp.n_current, baseline_rounds=comp.n_baseline, baseline_runs=len(series.history),
        baseline_path=str(baseline.path), fingerprint_id=match.id, raw_ratio=(raw_comp or comp).ratio,
        reference=series.reference, version_change=list(versions),
    )
    if len(result.round_log_means) and verdict.raw_ratio:  # the means whose ratio the raw per cent is
        # a run's level: the geometric mean of its fastest quarter of rounds, which the raw test compares
        verdict.current_geomean_ms = float(np.exp(np.mean(stats.fastest_rounds(result.round_log_means))))
        verdict.rounds_kept = stats.FASTEST_ROUNDS
        verdict.baseline_geomean_ms = verdict.current_geomean_ms / verdict.raw_ratio
    if series.kind == RAW and result.reference is not None and not versions:
        verdict.notes.append(f"raw figures: {series.reason}")
    if versions:
        verdict.notes.append(version_text)
    if series.kind == NORMALIZED:
        verdict.notes.append(f"normalized by the reference workload {series.reference and series.reference.name}"
                             f" (raw {pct(verdict.raw_ratio or 1)})")
    if series.kind == ADJUSTED and series.reference is not None and series.fit is not None:
        fit = series.fit
        verdict.notes.append(f"adjusted for the reference workload {series.reference.name} (sensitivity"
                             f" {fit.slope:.2f} over {fit.runs} runs; raw {pct(verdict.raw_ratio or 1)})")
    verdict.fastest_iteration = fastest_iteration(result, baseline, level, settings.run_noise)
    regime = regime_change(series.reference, machine_offset)
    if regime:
        if withheld_by_regime(verdict, series, machine_offset) and not (
                series.kind == RAW and stands_on_fastest(verdict, regime)):
            why = ("raw figures cannot tell it from the machine's change" if series.kind == RAW else
                   f"beyond the {NORMALIZED_REGIME_LIMIT:.0%} the reference is trusted to cancel; re-run when"
                   " the machine is back to its usual speed")
            verdict.notes.append(f"{verdict.outcome.value} withheld: {regime}; {why}")
            verdict.withheld = f"{regime}; {why}"
            verdict.outcome = INCONCLUSIVE
            verdict.set_wall_outcome(INCONCLUSIVE)
        elif verdict.fastest_iteration is None or not verdict.fastest_iteration.stood:  # else its note says it
            verdict.notes.append(regime)
    if short and not pooled:  # the pooled test does not use the widened term
        verdict.notes.append(short)
    verdict.notes.insert(0, f"method: {_method_text(verdict)}")
    if match.subject_changes:
        verdict.notes.append("the model file changed since the baseline was recorded")
        verdict.changed, verdict.changed_since = ["model bytes"], "the baseline"
    _add_device_time(verdict, result, baseline, settings, level, pools)
    verdict.unstable = stability(result, baseline)
    verdict.memory = history_memory_growth(result, baseline, settings)
    if settings.gate_p99:
        verdict.p99 = p99_check(result, baseline, level, t)
    return verdict


@dataclass(frozen=True)
class StoredGate:
    """The stored baselines' gate of one item (a :class:`pytest_aaco.gate.Gate`): :meth:`look` judges a
    measurement against *baseline* by :func:`judge_history` with these arguments, unfinished. ``stored``:
    the pipeline takes its confirmation look with it and withholds for CPU contention. ``gated``: a
    baseline with this fingerprint (or one differing in versions only) gates the item (a LOND test)."""

    baseline: Baseline | None
    fingerprint: Fingerprint
    settings: GateSettings
    level: float
    label: str
    other_runners: list[str] | None = None
    prior: stats.VariancePrior | None = None
    machine_offset: float | None = None
    adjusted_prior: stats.VariancePrior | None = None
    gated: bool = False
    stored: bool = True
    #: the fingerprint compared with the baseline's, and the folder's pools, read before judging
    match: FingerprintMatch | None = None
    pools: pooled_store.Pools | None = None

    def look(self, result: BenchmarkResult) -> Verdict:
        """:func:`judge_history` of *result*: the verdict unfinished."""
        return judge_history(result, self.baseline, self.fingerprint, self.settings, self.level, self.label,
                             self.other_runners, self.prior, self.machine_offset, self.adjusted_prior, self.match,
                             self.pools)


def _add_device_time(verdict: Verdict, result: BenchmarkResult, baseline: Baseline, settings: GateSettings,
                     level: float, pools: pooled_store.Pools | None = None) -> None:
    """Judge device time too (:func:`device_check`) and keep it on *verdict*: a device-time
    regression makes the verdict a regression (``verdict.wall`` keeps wall time's own outcome); a
    run without device time, or a history without it, says so in a note and stays gated on wall time."""
    if result.device_note:
        verdict.notes.append(result.device_note)
    if result.device is None:
        return
    dev = device_check(result, baseline, settings, level, pools)
    if dev is None:
        verdict.notes.append("device time: the baseline has no device time yet, gated on wall time (each"
                             " --aaco-save-baseline now records it)")
        return
    verdict.device_time = dev
    if dev.judgement is None:
        verdict.notes.append(f"device time inconclusive: {dev.reason}")
    else:
        if dev.outcome in (REGRESSION, NO_REGRESSION, IMPROVEMENT):
            # device time traced and decided gives the word; wall time keeps a claim only through its
            # test between processes (:func:`calibrated_wall_claim`), and a wall regression that passes it fails too
            wall = calibrated_wall_claim(verdict, result, baseline, settings, level)
            verdict.outcome = REGRESSION if wall == REGRESSION else dev.outcome
        if dev.judgement.reason:
            verdict.notes.append(f"device time on raw figures: {dev.judgement.reason}")


#: the wall-time tests whose variance already comes from the saved runs' means (between processes)
BETWEEN_RUN_METHODS = (pooling.METHOD, "prediction-interval", "reference-adjusted")


def calibrated_wall_claim(verdict: Verdict, result: BenchmarkResult, baseline: Baseline, settings: GateSettings,
                          level: float) -> Outcome:
    """Wall time's own outcome once it stands beside a decided device time, and the verdict's wall
    judgement set to it.

    A wall-time regression or improvement stands only when a test whose variance comes from the saved
    runs' means says so: the pooled, prediction-interval or reference-adjusted test that judged it
    already does; Welch's test on rounds (a short history) is checked again by
    :func:`pytest_aaco.verdict.stats.between_run_test` on the raw run means (``H - 1`` df; needs 2 saved
    runs), at the item's *level* and ``settings.threshold``. On the H200 (issue 43) the rounds of one
    process read unchanged models' wall time 8% to 11.5% faster at p = 0.003 while device time was flat:
    the spread between processes was not in the test. A claim that does not pass becomes
    ``inconclusive``, with a note naming both tests. Returns the wall outcome that stands.
    """
    own = verdict.wall_outcome
    if own not in (REGRESSION, IMPROVEMENT) or verdict.method in BETWEEN_RUN_METHODS:
        return own
    means = baseline.run_levels()
    held = INCONCLUSIVE
    if len(means) >= 2 and len(result.round_log_means):
        comp = stats.between_run_test(stats.fastest_rounds(result.round_log_means), means)
        held = judgement_of(LATENCY, comp, settings.threshold, level, series=RAW).outcome
        why = (f"{pct(comp.ratio)}, p={min(comp.p_slower, comp.p_faster):.2g} over {len(means)} saved runs"
               f" ({len(means) - 1} df)")
    else:
        why = "fewer than 2 saved runs"
    if held != own:
        verdict.notes.append(f"wall time {own.value} not claimed: the rounds of one run said so, the test between"
                             f" processes did not ({why}); device time gives the word")
        verdict.set_wall_outcome(INCONCLUSIVE)
        return INCONCLUSIVE
    return own


@dataclass
class MachineOffset:
    """The session's running record of raw changes, to see a machine speed change that moves every
    item (:func:`pytest_aaco.verdict.run_stats.common_offset`): the gate passes :meth:`current` to
    :func:`judge_history` as *machine_offset*, then :meth:`record`\\ s the verdict."""

    log_changes: list[float] = field(default_factory=list)

    def record(self, verdict: Verdict) -> None:
        """Keep ``ln(raw ratio)`` of a judged item (ignored when it has none)."""
        if verdict.raw_ratio is not None and verdict.raw_ratio > 0:
            self.log_changes.append(float(np.log(verdict.raw_ratio)))

    def current(self) -> float | None:
        """The shared slowdown (fraction) of the items judged so far, or None."""
        return run_stats.common_offset(self.log_changes)
