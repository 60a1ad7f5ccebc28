"""The wall-time series the stored gate tests, and its test: raw figures, normalized by the reference
workload, or adjusted for it (a fitted slope); which of them is steadier and may be trusted (the reference's
drift within the run, its spread against the history's), and the comparison of one run against the
history (:func:`comparison`: a prediction interval on run means, or Welch's t-test on rounds with a
run-to-run term). :mod:`pytest_aaco.history.judge` judges with them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pytest_aaco.history.store import Baseline
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.options import default
from pytest_aaco.records.verdict import ReferenceDrift
from pytest_aaco.verdict import run_stats, stats
from pytest_aaco.verdict.percent import pct

#: drift within the measured phase beyond this fraction (and p < DRIFT_P) flags an item unstable
DRIFT_FRACTION, DRIFT_P = 0.03, 0.01
#: round-to-round spread this many times the history's flags an item unstable
SPREAD_LIMIT = 3.0
#: the series a verdict was computed on
ADJUSTED, NORMALIZED, RAW = "adjusted", "normalized", "raw"

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
    prior) and what the history already shows (:func:`pytest_aaco.verdict.run_stats.run_offset_sd`).
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
    learned = run_stats.run_offset_sd(runs) if keep is None else stats.level_offset_sd(runs, keep)
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
    :class:`~pytest_aaco.records.verdict.ReferenceDrift`: ``drift`` = ratio - 1, ``ci_low``/``ci_high``
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
    found = run_stats.drift(ref.log_means)
    if found is not None and found.p_value < DRIFT_P and abs(found.ratio - 1) > DRIFT_FRACTION:
        return (f"the reference drifted {pct(found.ratio)} within the measured phase"
                f" (p={found.p_value:.1g})")
    sds = [np.std(r["log_means"], ddof=1) for r in history if len(r["log_means"]) >= 2]
    spread = run_stats.spread_ratio(ref.log_means, np.array(sds)) if sds else None
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
