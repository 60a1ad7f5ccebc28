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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pytest_aaco.history import pooled as pooled_store
from pytest_aaco.history.store import Baseline
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.options import GateSettings, default
from pytest_aaco.records import (
    DEVICE_TIME,
    LATENCY,
    DeviceTimeRecord,
    Outcome,
    Pair,
    QuantileComparison,
    ReferenceDrift,
    Verdict,
)
from pytest_aaco.verdict import pooling, stats
from pytest_aaco.verdict.comparable import Fingerprint
from pytest_aaco.verdict.metrics import kernel_changes
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
#: drift within the measured phase beyond this fraction (and p < DRIFT_P) flags an item unstable
DRIFT_FRACTION, DRIFT_P = 0.03, 0.01
#: round-to-round spread this many times the history's flags an item unstable
SPREAD_LIMIT = 3.0
#: a machine speed change beyond this fraction (the reference's drift, significant at REGIME_P, or
#: the offset shared by the session's items) is a regime change: raw figures cannot gate
REGIME_FRACTION, REGIME_P = 0.03, 0.01
#: beyond this machine drift even the normalized series is not trusted to declare a regression or an
#: improvement: in the busy-CPU study (studies/RESULTS.md) unchanged gates whose reference ran
#: 67% to 136% slower than in the history came out 17% to 53% slower normalized (CPU contention
#: time-shares the item and the reference unevenly)
NORMALIZED_REGIME_LIMIT = 0.30
#: the series a verdict was computed on
ADJUSTED, NORMALIZED, RAW = "adjusted", "normalized", "raw"
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

#: a short history is normalized by the reference (slope 1) only when the item's mean iteration and
#: the reference's are within this factor of each other: on the 2-core study machine the run means
#: of a 2 to 3 ms reference moved 2.5 times as much as ResNet-50's (21 ms) from process to process,
#: Inception's (20 ms) 0.7 times (studies/RESULTS.md, "Choosing the reference")
NORMALIZE_DURATION_RATIO = 3.0


def comparison(current: npt.ArrayLike, history_runs: Sequence[Sequence[float]], min_history: int,
               run_noise: float = default("run-noise"), prior: stats.VariancePrior | None = None,
               run_sd_floor: float = 0.0, keep: Callable[[npt.ArrayLike], np.ndarray] | None = None
               ) -> stats.Comparison:
    """The gate's test of this run's round log-means against earlier runs' round log-means.

    *current*: shape ``(rounds,)``, mean ln(ms) per round. *history_runs*: one sequence of round
    log-means per earlier run, oldest first. With at least *min_history* runs, the
    prediction-interval t-test on run means, whose variance is the history's own. With fewer,
    Welch's t-test on the rounds plus a run-to-run term: rounds of one run cannot show how much
    the next run will differ, so the term's sd is the larger of *run_noise* (a fraction, the
    prior) and what the history already shows (:func:`pytest_aaco.verdict.stats.run_offset_sd`).
    *prior* (a :class:`pytest_aaco.verdict.stats.VariancePrior` from the runner's other items) moderates
    the history's variance in the prediction-interval test. *run_sd_floor* (ln units): the least sd of the
    run-to-run term on a short history (:data:`SHORT_ROUND_SD` for rounds inside a time slice). *keep*: the
    rounds of a run whose mean is its level (:func:`pytest_aaco.verdict.stats.fastest_rounds` for wall time;
    None: all): the prediction-interval test compares levels, and on a short history
    :func:`pytest_aaco.verdict.stats.level_test` takes the levels' difference with every round's noise and the
    run term, learned from the history's levels (:func:`pytest_aaco.verdict.stats.level_offset_sd`).
    Returns a :class:`pytest_aaco.verdict.stats.Comparison`; raises ValueError for too few rounds or runs.
    """
    runs = [np.asarray(r, dtype=float) for r in history_runs if len(r)]
    if not runs:
        raise ValueError("the baseline has no measured rounds")
    current = np.asarray(current, dtype=float)
    if len(runs) >= min_history:
        level = keep or (lambda x: np.asarray(x, float))
        return stats.prediction_interval_test(level(current), np.array([level(r).mean() for r in runs]), prior)
    run_sd = max(float(np.log1p(run_noise)), run_sd_floor)
    learned = stats.run_offset_sd(runs) if keep is None else stats.level_offset_sd(runs, keep)
    if np.isfinite(learned):
        run_sd = max(run_sd, learned)
    if keep is not None:  # the run levels' estimate, every round's noise (stats.level_test)
        return stats.level_test(current, runs, run_sd=run_sd, keep=keep)
    return stats.welch_rounds(current, np.concatenate(runs), run_sd=run_sd, baseline_runs=len(runs))


@dataclass(frozen=True)
class Series:
    """The round log-means the verdict tests: *kind* ``adjusted``, ``normalized`` or ``raw``;
    *current* shape ``(rounds,)``; *history* one list per history run used; *reason* why raw
    (empty otherwise); *reference* the reference's figures (:func:`reference_drift`), None when no
    reference is comparable. For ``adjusted``, *current* and *history* are the item's raw round
    log-means, *covariate* the reference's block log-means of this run and *fit* the item's line
    on the reference over the history (:func:`pytest_aaco.verdict.stats.fit_reference`)."""

    kind: str
    current: np.ndarray
    history: list[list[float]]
    reason: str = ""
    reference: ReferenceDrift | None = None
    covariate: np.ndarray | None = None
    fit: stats.ReferenceFit | None = None
    keep: Callable[[npt.ArrayLike], np.ndarray] | None = None

    def test(self, min_history: int, run_noise: float, prior: stats.VariancePrior | None,
             adjusted_prior: stats.VariancePrior | None = None, run_sd_floor: float = 0.0) -> stats.Comparison:
        """The comparison of this series (:func:`comparison`, or
        :meth:`pytest_aaco.verdict.stats.ReferenceFit.test` for ``adjusted``); *prior* is used on raw
        figures only and *adjusted_prior* on adjusted ones, the populations they were fitted on;
        *run_sd_floor* as :func:`comparison` takes it. Raises ValueError as those do."""
        if self.kind == ADJUSTED and self.fit is not None:
            return self.fit.test(self.current, self.covariate, adjusted_prior)
        return comparison(self.current, self.history, min_history, run_noise, prior if self.kind == RAW else None,
                          run_sd_floor, self.keep if self.kind == RAW else None)


def reference_drift(current_log_means: npt.ArrayLike, history_log_means: list[list[float]], name: str = "",
                    ref_id: str = "", mean_ms: float = 0.0, share: float | None = None) -> ReferenceDrift:
    """The reference's change between the history and now, the machine's own change of speed.

    *current_log_means*: the reference's block log-means of this run, shape ``(rounds,)``;
    *history_log_means*: one list per history run. Welch's t-test (Welch 1947) of this run's blocks
    against the history's blocks, with no run-to-run term: the question is whether the machine's
    speed differs, not whether the item regressed. Returns a
    :class:`~pytest_aaco.records.ReferenceDrift`: ``drift`` = ratio - 1, ``ci_low``/``ci_high``
    (95%, fractions), ``p_value`` (two-sided), ``runs``; *name*, *ref_id*, *mean_ms* (ms) and *share*
    name the reference in it.
    """
    comp = stats.welch_rounds(current_log_means, np.concatenate([np.asarray(r, float) for r in history_log_means]))
    lo, hi = comp.ci(0.95)
    return ReferenceDrift(name=name, id=ref_id, mean_ms=mean_ms, share=share, drift=comp.ratio - 1, ci_low=lo - 1,
                          ci_high=hi - 1, p_value=min(1.0, 2 * min(comp.p_slower, comp.p_faster)),
                          runs=len(history_log_means))


def reference_unstable(ref: Blocks, history: list[dict[str, Any]]) -> str:
    """Why the reference cannot normalize this run ('' when it can): its blocks drifted within the
    measured phase, or their spread is :data:`SPREAD_LIMIT` times the history's. *ref* is the run's
    :class:`~pytest_aaco.measure.results.ReferenceSeries`; *history* the matching runs' reference records."""
    found = stats.drift(ref.log_means)
    if found is not None and found.p_value < DRIFT_P and abs(found.ratio - 1) > DRIFT_FRACTION:
        return (f"the reference drifted {pct(found.ratio)} within the measured phase"
                f" (p={found.p_value:.1g})")
    sds = [np.std(r["log_means"], ddof=1) for r in history if len(r["log_means"]) >= 2]
    spread = stats.spread_ratio(ref.log_means, np.array(sds)) if sds else None
    if spread is not None and spread > SPREAD_LIMIT:
        return f"the reference's block-to-block spread is {spread:.1f}x the history's"
    return ""


class Blocks(Protocol):
    """What :func:`build_series` reads of the reference's blocks this run: their log-means (ln ms)."""

    @property
    def log_means(self) -> npt.ArrayLike: ...


@dataclass(frozen=True)
class Track:
    """One timing metric's figures, from which :func:`build_series` builds the series its test runs on
    (wall time: :func:`wall_track`; device time: :func:`device_track`).

    *current*: this run's block log-means (ln ms), shape ``(rounds,)``; *history*: one list per history
    run with the metric; *mean_ms*: this run's mean of the metric (ms: an iteration, or kernel time per
    run); *what*: its name in reasons (``iteration``, ``kernel time per run``). The reference workload's
    same metric: *ref* (anything with ``log_means``, this run's blocks; None: *missing* says why),
    *ref_name*, *ref_id*, *ref_mean_ms* (ms), *ref_share*; *pairs* the history runs that have it, each
    ``(the item's log-means, the reference's record with "log_means")``, and *no_pairs* why there are
    none; *normalized* gives this run's and the pairs' ``ln(item) - ln(reference)`` per block."""

    current: np.ndarray
    history: list[list[float]]
    mean_ms: float
    what: str
    ref: Blocks | None = None
    missing: str = ""
    ref_name: str = ""
    ref_id: str = ""
    ref_mean_ms: float = 0.0
    ref_share: float | None = None
    pairs: list[tuple[list[float], dict[str, Any]]] = field(default_factory=list)
    no_pairs: str = ""
    normalized: Callable[[], tuple[np.ndarray, list[list[float]]]] | None = None
    #: the blocks of a run its level keeps (:func:`pytest_aaco.verdict.stats.fastest_rounds` for wall time);
    #: None keeps them all. Applied to the item's raw blocks and the reference's, not to the normalized ones
    keep: Callable[[npt.ArrayLike], np.ndarray] | None = None


def build_series(track: Track, raw_only: str = "", min_history: int = default("min-history")) -> Series:
    """The series a timing metric is tested on, built once for wall time and device time alike (see the module
    docstring): raw without a comparable reference (the reason says why); otherwise the reference's drift is
    computed, and the series is raw when *raw_only* (a version change, its reason) or the reference is unstable
    (:func:`reference_unstable`); ``adjusted`` with ``max(min_history, 4)`` history runs that have the reference;
    with fewer, ``normalized`` only when the item's mean and the reference's are within
    :data:`NORMALIZE_DURATION_RATIO` of each other, else raw with the reason. Either is used only where
    the history shows it steadier than the raw series (issue 43: on a quiet CPU the adjusted series of
    ResNet-50 was four times wider than the raw one): ``adjusted`` when the fit's prediction variance at
    the history's mean reference (how much of the item's run-to-run spread the reference explains) is
    below the raw run means' ``s² (1 + 1/H)``; ``normalized`` when the variance of its run means is below
    the raw one's, which needs 2 saved runs with the reference; raw otherwise, with the reason. Where the
    machine changed speed since the history, raw figures are then withheld as :func:`regime_change` says
    (inconclusive, honestly), rather than decided on a wider series.
    Raises ValueError for non-finite stored figures (:func:`pytest_aaco.verdict.stats.fit_reference`)."""
    def keep(blocks: npt.ArrayLike) -> np.ndarray:
        return track.keep(blocks) if track.keep is not None else np.asarray(blocks, float)

    raw = Series(RAW, track.current, track.history, keep=track.keep)
    if track.ref is None:
        return replace(raw, reason=track.missing)
    if not track.pairs:
        return replace(raw, reason=track.no_pairs)
    matching = [r for _, r in track.pairs]
    figures = reference_drift(keep(track.ref.log_means), [list(keep(r["log_means"])) for r in matching],
                              name=track.ref_name,
                              ref_id=track.ref_id, mean_ms=track.ref_mean_ms, share=track.ref_share)
    unstable = reference_unstable(track.ref, matching)
    if raw_only or unstable:
        return replace(raw, reason=raw_only or unstable, reference=figures)
    raw_means = [float(np.mean(keep(item))) for item, _ in track.pairs]  # the raw run levels the raw test compares
    raw_var = float(np.var(raw_means, ddof=1)) if len(raw_means) >= 2 else float("nan")
    if len(track.pairs) >= max(min_history, 4):
        fit = stats.fit_reference(raw_means, [np.mean(keep(r["log_means"])) for r in matching])
        adjusted_var = fit.prediction_var(fit.x_mean)
        plain_var = raw_var * (1.0 + 1.0 / len(raw_means))
        if not adjusted_var < plain_var:
            return replace(raw, reference=figures, reason=_not_steadier("adjusted", adjusted_var, plain_var,
                                                                        len(raw_means)))
        return Series(ADJUSTED, keep(track.current), [list(keep(item)) for item, _ in track.pairs],
                      reference=replace(figures, sensitivity=fit.slope),
                      covariate=keep(track.ref.log_means), fit=fit)
    durations = sorted((max(track.mean_ms, 1e-9), max(track.ref_mean_ms, 1e-9)))
    if durations[1] / durations[0] > NORMALIZE_DURATION_RATIO or track.normalized is None:
        why = (f"the item's {track.what} ({track.mean_ms:.3g} ms) and the reference's ({track.ref_mean_ms:.3g} ms)"
               f" differ more than {NORMALIZE_DURATION_RATIO:g}x, so dividing by it would add noise until"
               f" {max(min_history, 4)} runs with it let the gate fit the item's own sensitivity")
        return replace(raw, reference=figures, reason=why)
    current, history = track.normalized()
    normalized_var = (float(np.var([np.mean(h) for h in history], ddof=1)) if len(history) >= 2
                      else float("nan"))
    if not normalized_var < raw_var:
        return replace(raw, reference=figures, reason=_not_steadier("normalized", normalized_var, raw_var,
                                                                    len(raw_means)))
    return Series(NORMALIZED, np.asarray(current, float), history, reference=figures)


def _not_steadier(kind: str, series_var: float, raw_var: float, runs: int) -> str:
    """Why the *kind* series (``adjusted``, ``normalized``) is not tested: its run-to-run variance over the
    history (*series_var*, ln units squared) is not below the raw one's (*raw_var*), or *runs* < 2 cannot show it."""
    if runs < 2 or not (math.isfinite(series_var) and math.isfinite(raw_var)):
        return (f"the {kind} series is used only where the history shows it steadier than the raw one, and"
                f" {runs} saved run{'s' * (runs != 1)} with the reference cannot show it")
    return (f"the {kind} series varied more between the saved runs than the raw one (sd {math.sqrt(series_var):.2%}"
            f" vs {math.sqrt(raw_var):.2%} over {runs} runs), so the raw series is tested")


def wall_track(result: BenchmarkResult, baseline: Baseline) -> Track:
    """Wall time's :class:`Track`: the item's round log-means, the reference workload's blocks; each run's
    level is the mean of its fastest quarter of rounds (:func:`pytest_aaco.verdict.stats.fastest_rounds`)."""
    track = Track(result.round_log_means, baseline.run_round_log_means(), result.mean_ms, "iteration",
                  keep=stats.fastest_rounds)
    ref = result.reference
    if ref is None:
        return replace(track, missing="no reference workload was measured")
    pairs = baseline.reference_pairs(ref.id)
    known = baseline.reference_ids()
    return replace(track, ref=ref, ref_name=ref.name, ref_id=ref.id, ref_mean_ms=ref.mean_ms, ref_share=ref.share,
                   pairs=pairs,
                   no_pairs=(f"the reference changed since the history ({', '.join(known)} -> {ref.id})" if known
                             else "the history has no reference workload"),
                   normalized=lambda: (ref.normalized, [list(r["normalized"]) for _, r in pairs]))


def choose_series(result: BenchmarkResult, baseline: Baseline, raw_only: str = "",
                  min_history: int = default("min-history")) -> Series:
    """Wall time's series (:func:`build_series` of :func:`wall_track`): adjusted or normalized when the
    reference is valid, raw otherwise. *raw_only*, when not empty, forces the raw series and is the reason
    given (a version change). Raises ValueError as :func:`build_series` does."""
    return build_series(wall_track(result, baseline), raw_only, min_history)


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


def device_series(result: BenchmarkResult, baseline: Baseline, min_history: int = default("min-history")
                  ) -> Series | None:
    """The device-time series the history test runs on (:func:`build_series` of :func:`device_track`, the
    builder wall time's series comes from, with the same guards: an unstable reference and items much shorter
    or longer than the reference give raw figures with the reason), or None when this run or every history run
    lacks device time. Raises ValueError for non-finite stored figures."""
    track = device_track(result, baseline)
    return None if track is None else build_series(track, "", min_history)


def device_check(result: BenchmarkResult, baseline: Baseline, settings: GateSettings, level: float
                 ) -> DeviceTimeRecord | None:
    """Device time against the stored history, with the statistics wall time gets: the history
    test (:meth:`Series.test`: the prediction-interval t-test, Welch's test with the run-to-run term
    on a short history, or the reference-adjusted test) on the series of :func:`device_series`, the
    same outcome rule (:func:`pytest_aaco.verdict.outcome.outcome_of`) at the item's *level* and
    ``settings.device_threshold`` (``--aaco-device-threshold``), its own 95% CI and MDE (power 0.8).
    On raw and normalized series with 2 or more history runs, the run-to-run variance is pooled over
    the baseline folder's items and each physical GPU's offset taken out
    (:func:`pytest_aaco.history.pooled.device_comparison`, recorded under ``"pooled"``).

    Returns None when there is nothing to compare (this run or the history lacks device time), else a
    :class:`~pytest_aaco.records.DeviceTimeRecord`: the judgement, kernel time, busy time (ms per run) and
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
        pooled = pooled_store.device_comparison(result, baseline, series.kind)
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


def regime_change(reference: ReferenceDrift | None, machine_offset: float | None) -> str:
    """The reason raw figures cannot gate ('' when they can): the reference ran
    :data:`REGIME_FRACTION` slower or faster than in the history (p < :data:`REGIME_P`), or the
    session's items share an offset that large (*machine_offset*, a fraction from
    :func:`pytest_aaco.verdict.stats.common_offset`)."""
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
    drift = stats.drift(log_means)
    if drift is not None and drift.p_value < DRIFT_P and abs(drift.ratio - 1) > DRIFT_FRACTION:
        reasons.append(f"latency drifted {pct(drift.ratio)} from the first to the second half of the"
                       f" measured phase (p={drift.p_value:.1g})")
    if baseline is not None and baseline.runs:
        summary = stats.summarize_history(baseline.run_round_log_means())
        spread = stats.spread_ratio(log_means, summary["round_sds"][np.isfinite(summary["round_sds"])])
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
    comp = stats.bootstrap_quantile_ratio([r.latencies_ms for r in result.rounds], past, q=99.0,
                                          level=1 - 2 * level)
    return replace(comp, regression=bool(comp.p_slower <= level and comp.ratio - 1 >= threshold))


def judge_history(result: BenchmarkResult, baseline: Baseline | None, fingerprint: Fingerprint, settings: GateSettings,
                  level: float, label: str, other_runners: list[str] | None = None,
                  prior: stats.VariancePrior | None = None, machine_offset: float | None = None,
                  adjusted_prior: stats.VariancePrior | None = None) -> Verdict:
    """Judge *result* against *baseline* at significance *level* (the item's α_i).

    *label* names the item in messages, e.g. ``resnet50[cpu]``. *machine_offset* is the raw
    slowdown (fraction) shared by the session's other items (:func:`pytest_aaco.verdict.stats.common_offset`),
    None when unknown. *prior* moderates the prediction-interval test; it is fitted on raw
    histories, so it is used on the raw series only; *adjusted_prior*, fitted on the runner's
    residual variances, moderates the reference-adjusted test. Never raises for statistical corner cases:
    too few rounds make the verdict inconclusive.

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
    versions = fingerprint.version_only(baseline.fingerprint)
    if not fingerprint.matches(baseline.fingerprint) and not versions:
        return Verdict(MISMATCH, label, t, current_mean_ms=result.mean_ms, baseline_path=str(baseline.path),
                       fingerprint_diff=fingerprint.diff(baseline.fingerprint),
                       reason=f"not gated: fingerprint differs from {baseline.path.name}"
                              f" ({fingerprint.describe_diff(baseline.fingerprint)})")
    version_text = ""
    if versions:
        version_text = (f"compared across a version change ({fingerprint.describe_diff(baseline.fingerprint)})"
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
        pooled = pooled_store.wall_comparison(result, baseline, series.kind)
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
        baseline_path=str(baseline.path), fingerprint_id=fingerprint.id, raw_ratio=(raw_comp or comp).ratio,
        reference=series.reference, version_change=versions,
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
    regime = regime_change(series.reference, machine_offset)
    if regime:
        if withheld_by_regime(verdict, series, machine_offset):
            why = ("raw figures cannot tell it from the machine's change" if series.kind == RAW else
                   f"beyond the {NORMALIZED_REGIME_LIMIT:.0%} the reference is trusted to cancel; re-run when"
                   " the machine is back to its usual speed")
            verdict.notes.append(f"{verdict.outcome.value} withheld: {regime}; {why}")
            verdict.withheld = f"{regime}; {why}"
            verdict.outcome = INCONCLUSIVE
            verdict.set_wall_outcome(INCONCLUSIVE)
        else:
            verdict.notes.append(regime)
    if short and not pooled:  # the pooled test does not use the widened term
        verdict.notes.append(short)
    verdict.notes.insert(0, f"method: {_method_text(verdict)}")
    if fingerprint.subject_changes(baseline.fingerprint):
        verdict.notes.append("the model file changed since the baseline was recorded")
        verdict.changed, verdict.changed_since = ["model bytes"], "the baseline"
    _add_device_time(verdict, result, baseline, settings, level)
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

    def look(self, result: BenchmarkResult) -> Verdict:
        """:func:`judge_history` of *result*: the verdict unfinished."""
        return judge_history(result, self.baseline, self.fingerprint, self.settings, self.level, self.label,
                             self.other_runners, self.prior, self.machine_offset, self.adjusted_prior)


def _add_device_time(verdict: Verdict, result: BenchmarkResult, baseline: Baseline, settings: GateSettings,
                     level: float) -> None:
    """Judge device time too (:func:`device_check`) and keep it on *verdict*: a device-time
    regression makes the verdict a regression (``verdict.wall`` keeps wall time's own outcome); a
    run without device time, or a history without it, says so in a note and stays gated on wall time."""
    if result.device_note:
        verdict.notes.append(result.device_note)
    if result.device is None:
        return
    dev = device_check(result, baseline, settings, level)
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
    means = [float(np.mean(stats.fastest_rounds(r))) for r in baseline.run_round_log_means() if len(r)]
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
    item (:func:`pytest_aaco.verdict.stats.common_offset`): the gate passes :meth:`current` to
    :func:`judge_history` as *machine_offset*, then :meth:`record`\\ s the verdict."""

    log_changes: list[float] = field(default_factory=list)

    def record(self, verdict: Verdict) -> None:
        """Keep ``ln(raw ratio)`` of a judged item (ignored when it has none)."""
        if verdict.raw_ratio is not None and verdict.raw_ratio > 0:
            self.log_changes.append(float(np.log(verdict.raw_ratio)))

    def current(self) -> float | None:
        """The shared slowdown (fraction) of the items judged so far, or None."""
        return stats.common_offset(self.log_changes)
