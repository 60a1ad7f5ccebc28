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
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_aaco.history.comparable import Fingerprint
from pytest_aaco.history.store import Baseline
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.options import GateSettings, default
from pytest_aaco.records import (
    DEVICE_TIME,
    MEMORY,
    Contention,
    FirstLook,
    Outcome,
    QuantileComparison,
    ReferenceDrift,
    Verdict,
)
from pytest_aaco.verdict import pooling, stats
from pytest_aaco.verdict.outcome import NO_REGRESSION_ALPHA, fails, outcome_of
from pytest_aaco.verdict.percent import bound_text, pct

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
#: noise is unknown and the rounds' spread does not show it: a regression or improvement is withheld
#: unless the change exceeds this fraction. An unchanged 6 us MatMul chain under two busy processes
#: ran its rounds at 6.4 or 8.3 us (two states, 30% apart) and was once failed as +46% confirmed
#: (issue 22, fault 8); a doubling is beyond both
SHORT_ROUND_LIMIT = 1.0
SHORT_HISTORY_RUNS = 3

#: a short history is normalized by the reference (slope 1) only when the item's mean iteration and
#: the reference's are within this factor of each other: on the 2-core study machine the run means
#: of a 2 to 3 ms reference moved 2.5 times as much as ResNet-50's (21 ms) from process to process,
#: Inception's (20 ms) 0.7 times (studies/RESULTS.md, "Choosing the reference")
NORMALIZE_DURATION_RATIO = 3.0


def compared_text(ratio: float, ci_low: float | None, ci_high: float | None, lower: float | None,
                  upper: float | None, threshold: float) -> str:
    """The interval a message prints beside a change: the one-sided bound the outcome rule compared
    (:func:`pytest_aaco.verdict.percent.bound_text`, ``upper bound +7.7% < 10%``); for a record
    written before bounds were stored, its 95% two-sided CI (``95% CI -1.1% .. +9.0%``)."""
    text = bound_text(ratio, lower, upper, threshold)
    if text or ci_low is None or ci_high is None:
        return text
    return f"95% CI {pct(ci_low)} .. {pct(ci_high)}"


def comparison(current: npt.ArrayLike, history_runs: list[list[float]] | list[Any], min_history: int,
               run_noise: float = default("run-noise"), prior: stats.VariancePrior | None = None
               ) -> stats.Comparison:
    """The gate's test of this run's round log-means against earlier runs' round log-means.

    *current*: shape ``(rounds,)``, mean ln(ms) per round. *history_runs*: one sequence of round
    log-means per earlier run, oldest first. With at least *min_history* runs, the
    prediction-interval t-test on run means, whose variance is the history's own. With fewer,
    Welch's t-test on the rounds plus a run-to-run term: rounds of one run cannot show how much
    the next run will differ, so the term's sd is the larger of *run_noise* (a fraction, the
    prior) and what the history already shows (:func:`pytest_aaco.verdict.stats.run_offset_sd`).
    *prior* (a :class:`pytest_aaco.verdict.stats.VariancePrior` from the runner's other items) moderates
    the history's variance in the prediction-interval test.
    Returns a :class:`pytest_aaco.verdict.stats.Comparison`; raises ValueError for too few rounds or runs.
    """
    runs = [np.asarray(r, dtype=float) for r in history_runs if len(r)]
    if not runs:
        raise ValueError("the baseline has no measured rounds")
    current = np.asarray(current, dtype=float)
    if len(runs) >= min_history:
        return stats.prediction_interval_test(current, np.array([r.mean() for r in runs]), prior)
    run_sd = float(np.log1p(run_noise))
    learned = stats.run_offset_sd(runs)
    if np.isfinite(learned):
        run_sd = max(run_sd, learned)
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

    def test(self, min_history: int, run_noise: float, prior: stats.VariancePrior | None,
             adjusted_prior: stats.VariancePrior | None = None) -> stats.Comparison:
        """The comparison of this series (:func:`comparison`, or
        :meth:`pytest_aaco.verdict.stats.ReferenceFit.test` for ``adjusted``); *prior* is used on raw
        figures only and *adjusted_prior* on adjusted ones, the populations they were fitted on.
        Raises ValueError as those do."""
        if self.kind == ADJUSTED and self.fit is not None:
            return self.fit.test(self.current, self.covariate, adjusted_prior)
        return comparison(self.current, self.history, min_history, run_noise, prior if self.kind == RAW else None)


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


def reference_unstable(ref: Any, history: list[dict[str, Any]]) -> str:
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


def choose_series(result: BenchmarkResult, baseline: Baseline, raw_only: str = "",
                  min_history: int = default("min-history")) -> Series:
    """Adjusted or normalized when the reference is valid, raw otherwise (see the module docstring).

    *raw_only*, when not empty, forces the raw series and is the reason given (a version change).
    *min_history*: history runs with this reference needed for the adjusted test (at least 4).
    The reference's drift is computed whenever this run and some history run share a reference.
    Raises ValueError for non-finite stored figures (:func:`pytest_aaco.verdict.stats.fit_reference`).
    """
    raw = Series(RAW, result.round_log_means, baseline.run_round_log_means())
    ref = result.reference
    if ref is None:
        return replace(raw, reason="no reference workload was measured")
    pairs = baseline.reference_pairs(ref.id)
    matching = [r for _, r in pairs]
    if not matching:
        known = baseline.reference_ids()
        why = (f"the reference changed since the history ({', '.join(known)} -> {ref.id})" if known
               else "the history has no reference workload")
        return replace(raw, reason=why)
    figures = reference_drift(ref.log_means, [r["log_means"] for r in matching], name=ref.name, ref_id=ref.id,
                              mean_ms=ref.mean_ms, share=ref.share)
    unstable = reference_unstable(ref, matching)
    if raw_only or unstable:
        return replace(raw, reason=raw_only or unstable, reference=figures)
    if len(pairs) >= max(min_history, 4):
        fit = stats.fit_reference([np.mean(rounds) for rounds, _ in pairs], [np.mean(r["log_means"]) for r in matching])
        return Series(ADJUSTED, result.round_log_means, [rounds for rounds, _ in pairs],
                      reference=replace(figures, sensitivity=fit.slope), covariate=np.asarray(ref.log_means, float),
                      fit=fit)
    durations = sorted((max(result.mean_ms, 1e-9), max(ref.mean_ms, 1e-9)))
    if durations[1] / durations[0] > NORMALIZE_DURATION_RATIO:
        why = (f"the item's iteration ({result.mean_ms:.3g} ms) and the reference's ({ref.mean_ms:.3g} ms) differ more"
               f" than {NORMALIZE_DURATION_RATIO:g}x, so dividing by it would add noise until"
               f" {max(min_history, 4)} runs with it let the gate fit the item's own sensitivity")
        return replace(raw, reference=figures, reason=why)
    return Series(NORMALIZED, np.asarray(ref.normalized, float), [list(r["normalized"]) for r in matching],
                  reference=figures)


def _device_record(run: dict[str, Any]) -> dict[str, Any] | None:
    """A history run's item device time (``device_time`` with at least one block log-mean), or None."""
    dev = run.get("device_time")
    return dev if isinstance(dev, dict) and dev.get("log_means") else None


def _paired_logs(item: list[float], reference: list[float]) -> list[float]:
    """Per block ``ln(item) - ln(reference)`` over the blocks both have (a failed trace leaves fewer)."""
    return [float(a) - float(b) for a, b in zip(item, reference, strict=False)]


def device_series(result: BenchmarkResult, baseline: Baseline, min_history: int = default("min-history")
                  ) -> Series | None:
    """The device-time series the history test runs on, or None when this run or every history run
    lacks device time.

    The item's traced blocks' ln(kernel time per run) (:attr:`pytest_aaco.measure.device_time.
    DeviceSeries.log_means`), chosen as :func:`choose_series` chooses wall time, on the reference
    workload's *device time* (clocks move kernels too): with ``max(min_history, 4)`` history runs
    whose reference (same id) was traced, ``adjusted`` (the item's run means regressed on the
    reference's, :func:`pytest_aaco.verdict.stats.fit_reference`); with fewer, ``normalized`` (per block
    ``ln(item) - ln(reference)``); ``raw`` when the reference has no device time here or in the history
    (the reason says which). Raises ValueError for non-finite stored figures.
    """
    dev = result.device
    if dev is None or not dev.blocks:
        return None
    history = [(run, rec) for run in baseline.history if (rec := _device_record(run)) is not None]
    if not history:
        return None
    current = np.asarray(dev.log_means, float)
    raw = Series(RAW, current, [list(rec["log_means"]) for _, rec in history])
    ref = result.reference
    ref_dev = ref.device if ref is not None else None
    if ref is None:
        return replace(raw, reason="no reference workload was measured")
    if ref_dev is None:
        return replace(raw, reason="the reference workload was not traced")
    pairs = [(rec, run["reference"]["device_time"]) for run, rec in history
             if isinstance(run.get("reference"), dict) and run["reference"].get("id") == ref.id
             and isinstance(run["reference"].get("device_time"), dict)
             and run["reference"]["device_time"].get("log_means")]
    if not pairs:
        return replace(raw, reason="the history has no device time of this reference workload")
    figures = reference_drift(ref_dev.log_means, [r["log_means"] for _, r in pairs], ref.name, ref.id,
                              ref_dev.kernel_ms)
    if len(pairs) >= max(min_history, 4):
        fit = stats.fit_reference([np.mean(item["log_means"]) for item, _ in pairs],
                                  [np.mean(r["log_means"]) for _, r in pairs])
        return Series(ADJUSTED, current, [list(item["log_means"]) for item, _ in pairs],
                      reference=replace(figures, sensitivity=fit.slope), covariate=np.asarray(ref_dev.log_means, float),
                      fit=fit)
    return Series(NORMALIZED, np.asarray(_paired_logs(dev.log_means, ref_dev.log_means), float),
                  [_paired_logs(item["log_means"], r["log_means"]) for item, r in pairs], reference=figures)


def kernel_changes(before: dict[str, float], after: dict[str, float], top: int = 5
                   ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Kernel names whose launches per run grew (*added*) or shrank (*removed*) by more than 0.5
    between *before* and *after* (name -> launches per run), largest change first, *top* of each."""
    delta = {n: float(after.get(n, 0.0)) - float(before.get(n, 0.0)) for n in set(before) | set(after)}
    added = sorted(((n, d) for n, d in delta.items() if d > 0.5), key=lambda x: (-x[1], x[0]))[:top]
    removed = sorted(((n, -d) for n, d in delta.items() if d < -0.5), key=lambda x: (-x[1], x[0]))[:top]
    return added, removed


def device_check(result: BenchmarkResult, baseline: Baseline, settings: GateSettings, level: float
                 ) -> dict[str, Any] | None:
    """Device time against the stored history, with the statistics wall time gets: the history
    test (:meth:`Series.test`: the prediction-interval t-test, Welch's test with the run-to-run term
    on a short history, or the reference-adjusted test) on the series of :func:`device_series`, the
    same outcome rule (:func:`pytest_aaco.verdict.outcome.outcome_of`) at the item's *level* and
    ``settings.device_threshold`` (``--aaco-device-threshold``), its own 95% CI and MDE (power 0.8).
    On raw and normalized series with 2 or more history runs, the run-to-run variance is pooled over
    the baseline folder's items and each physical GPU's offset taken out
    (:func:`pytest_aaco.verdict.pooling.device_comparison`, recorded under ``"pooled"``).

    Returns None when there is nothing to compare (this run or the history lacks device time), else
    ``{"outcome", "threshold", "ratio", "ci_low", "ci_high", "p_slower", "p_faster", "level", "mde", "method",
    "series", "reason", "runs", "kernel_ms", "busy_ms", "kernels"`` (each ``{"baseline",
    "candidate"}``, ms per run and kernels per run), ``"kernels_added", "kernels_removed"`` (``[name,
    launches per run]``, vs the latest traced history run), ``"reference"``}; a ValueError from the
    statistics becomes ``outcome`` inconclusive with the reason.
    """
    try:
        series = device_series(result, baseline, settings.min_history)
    except ValueError as exc:
        return {"outcome": str(INCONCLUSIVE), "reason": str(exc)}
    if series is None or result.device is None:
        return None
    dev = result.device
    records = [rec for run in baseline.history if (rec := _device_record(run)) is not None]
    try:  # the run-to-run variance pooled over the folder's items, GPU offsets taken out (verdict/pooling.py)
        pooled = pooling.device_comparison(result, baseline, series.kind)
        comp = pooled[0] if pooled else series.test(settings.min_history, settings.run_noise, None, None)
    except ValueError as exc:
        return {"outcome": str(INCONCLUSIVE), "reason": str(exc)}
    lo, hi = comp.ci(0.95)

    def past(key: str) -> float:
        values = [float(r[key]) for r in records if isinstance(r.get(key), (int, float))]
        return float(np.median(values)) if values else float("nan")

    added, removed = kernel_changes(records[-1].get("kernel_names") or {}, dev.names_per_run())
    return {"outcome": str(outcome_of(comp, settings.device_threshold, level)), "ratio": float(comp.ratio),
            "threshold": settings.device_threshold,
            "ci_low": float(lo), "ci_high": float(hi), "lower_bound": float(comp.lower(level)),
            "upper_bound": float(comp.upper(max(level, NO_REGRESSION_ALPHA))), "p_slower": float(comp.p_slower),
            "p_faster": float(comp.p_faster), "level": float(level), "mde": float(comp.mde(level)),
            "method": comp.method, "series": series.kind, "reason": series.reason, "runs": len(series.history),
            "kernel_ms": {"baseline": past("kernel_ms"), "candidate": dev.kernel_ms},
            "busy_ms": {"baseline": past("busy_ms"), "candidate": dev.busy_ms},
            "kernels": {"baseline": past("kernels"), "candidate": dev.kernels},
            "kernels_added": [[n, c] for n, c in added], "kernels_removed": [[n, c] for n, c in removed],
            "reference": series.reference.to_dict() if series.reference is not None else None,
            "pooled": pooled[1] if pooled else None}


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
    return (f"Welch t-test on {v.current_rounds} vs {v.baseline_rounds} rounds ({runs} baseline run{'s' * (runs != 1)},"
            " run-to-run term included)")


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


def withheld_for_short_rounds(v: Verdict, result: BenchmarkResult, baseline: Baseline) -> str:
    """Why a regression or improvement is withheld for rounds shorter than a time slice with a
    history of 1 or 2 runs ('' when it is not): see :data:`SHORT_ROUND_LIMIT`.

    With such a history the gate's test is Welch's on rounds plus a prior run-to-run term (2%,
    measured on items with long rounds); rounds inside one time slice can all land in one
    scheduling state, so their spread says nothing of how far runs apart can differ, and the
    test's confidence interval is too narrow. A change beyond :data:`SHORT_ROUND_LIMIT` still
    counts; the fix is longer rounds or more history, which the reason says.
    """
    if v.outcome not in (REGRESSION, IMPROVEMENT) or v.ratio is None or baseline.runs >= SHORT_HISTORY_RUNS:
        return ""
    shortest = round_ms(result, baseline)
    if shortest is None or shortest >= SCHEDULER_SLICE_MS or abs(math.log(v.ratio)) > math.log1p(SHORT_ROUND_LIMIT):
        return ""
    return (f"{v.outcome.value} withheld: its rounds last {shortest:.3g} ms, inside one scheduler time slice"
            f" ({SCHEDULER_SLICE_MS:g} ms), and the history has {baseline.runs} run{'s' * (baseline.runs != 1)}:"
            " such rounds can all land in one scheduling state, so they do not show how much runs differ; until"
            f" {SHORT_HISTORY_RUNS} runs, only a change beyond {1 + SHORT_ROUND_LIMIT:g}x (slower or faster)"
            " counts. Raise --aaco-iterations (or iterations: in the registry) so that a round lasts"
            f" {SCHEDULER_SLICE_MS:g} ms or more, or save more runs (--aaco-save-baseline)")


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
    leak produces. A first-look memory regression is confirmed on a fresh session
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
        if now > reference * (1 + settings.memory_threshold) and now - reference > settings.memory_slack_mb:
            found.append(f"{label if field_name == key else 'peak RSS'} {now:.0f} MB vs baseline {reference:.0f} MB"
                         f" (+{now - reference:.0f} MB, limit +{settings.memory_threshold:.0%}"
                         f" and +{settings.memory_slack_mb:.0f} MB)")
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
    """
    t = settings.threshold
    if baseline is None:
        hint = f" (other runners have one: {', '.join(other_runners)})" if other_runners else ""
        return finish(Verdict(NO_BASELINE, label, t, current_mean_ms=result.mean_ms,
                              other_runners=list(other_runners or []),
                              reason=f"no baseline for {label}{hint}; record one with --aaco-save-baseline"), settings)
    versions = fingerprint.version_only(baseline.fingerprint)
    if not fingerprint.matches(baseline.fingerprint) and not versions:
        return finish(Verdict(MISMATCH, label, t, current_mean_ms=result.mean_ms, baseline_path=str(baseline.path),
                              fingerprint_diff=fingerprint.diff(baseline.fingerprint),
                              reason=f"not gated: fingerprint differs from {baseline.path.name}"
                                     f" ({fingerprint.describe_diff(baseline.fingerprint)})"), settings)
    version_text = ""
    if versions:
        version_text = (f"compared across a version change ({fingerprint.describe_diff(baseline.fingerprint)})"
                        " on raw figures: weaker than a side-by-side comparison (--aaco-compare-python)")
    raw_comp = None
    try:
        series = choose_series(result, baseline, raw_only=version_text, min_history=settings.min_history)
        if series.kind != RAW:
            raw_comp = comparison(result.round_log_means, baseline.run_round_log_means(), settings.min_history,
                                  settings.run_noise, prior)
        pooled = pooling.wall_comparison(result, baseline, series.kind)  # the folder's items' pooled variance
        comp = pooled[0] if pooled else series.test(settings.min_history, settings.run_noise, prior, adjusted_prior)
    except ValueError as exc:
        return finish(Verdict(INCONCLUSIVE, label, t, current_mean_ms=result.mean_ms, baseline_path=str(baseline.path),
                              reason=f"inconclusive for {label}: {exc}"), settings)
    lo, hi = comp.ci(0.95)
    verdict = Verdict(
        outcome_of(comp, t, level), label, t, method=comp.method, ratio=comp.ratio, ci_low=lo, ci_high=hi,
        p_value=comp.p_slower, p_faster=comp.p_faster, level=level, mde=comp.mde(level),
        current_mean_ms=result.mean_ms,
        baseline_mean_ms=float(np.mean([run["summary"]["mean_ms"] for run in baseline.history])),
        current_rounds=comp.n_current, baseline_rounds=comp.n_baseline, baseline_runs=len(series.history),
        baseline_path=str(baseline.path), fingerprint_id=fingerprint.id, series=series.kind,
        raw_ratio=(raw_comp or comp).ratio, reference=series.reference, version_change=versions,
        lower_bound=comp.lower(level), upper_bound=comp.upper(max(level, NO_REGRESSION_ALPHA)),
    )
    if len(result.round_log_means) and verdict.raw_ratio:  # the means whose ratio the raw per cent is
        verdict.current_geomean_ms = float(np.exp(np.mean(result.round_log_means)))
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
            verdict.outcome = INCONCLUSIVE
        else:
            verdict.notes.append(regime)
    short = withheld_for_short_rounds(verdict, result, baseline)
    if short:
        verdict.notes.append(short)
        verdict.outcome = INCONCLUSIVE
    verdict.notes.insert(0, f"method: {_method_text(verdict)}")
    if fingerprint.subject_changes(baseline.fingerprint):
        verdict.notes.append("the model file changed since the baseline was recorded")
        verdict.changed, verdict.changed_since = ["model bytes"], "the baseline"
    _add_device_time(verdict, result, baseline, settings, level)
    verdict.unstable = stability(result, baseline)
    verdict.memory = history_memory_growth(result, baseline, settings)
    if settings.gate_p99:
        verdict.p99 = p99_check(result, baseline, level, t)
    return finish(verdict, settings)


def _add_device_time(verdict: Verdict, result: BenchmarkResult, baseline: Baseline, settings: GateSettings,
                     level: float) -> None:
    """Judge device time too (:func:`device_check`) and keep it on *verdict*: a device-time
    regression makes the verdict a regression (``wall_outcome`` keeps wall time's own outcome); a
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
    dev["wall_outcome"] = str(verdict.outcome)
    verdict.device_time = dev
    if "ratio" not in dev:
        verdict.notes.append(f"device time inconclusive: {dev.get('reason')}")
    else:
        if dev["outcome"] == REGRESSION:
            verdict.outcome = REGRESSION
        elif dev["outcome"] == NO_REGRESSION and verdict.outcome == INCONCLUSIVE:
            # device time decides the word when wall time is inconclusive: what the GPU did did not grow
            verdict.outcome = NO_REGRESSION
        if dev.get("reason"):
            verdict.notes.append(f"device time on raw figures: {dev['reason']}")


def flagged_metrics(v: Verdict) -> set[str]:
    """The timing metrics *v* found a regression in, for the confirmation rule: ``device time`` and/or
    ``wall time`` (p99 counts as wall time), read from :attr:`pytest_aaco.records.Verdict.regressions`."""
    return {"device time" if m == DEVICE_TIME else "wall time" for m in v.regressions if m != MEMORY}


_HEADS = {REGRESSION: "REGRESSION", IMPROVEMENT: "IMPROVEMENT", NO_REGRESSION: "no regression",
          INCONCLUSIVE: "inconclusive"}


def _memory_text(v: Verdict) -> str:
    return "".join(f"; MEMORY REGRESSION {line}" for line in v.memory)


def confirmation_note(first_look: FirstLook) -> str:
    """The note a confirmed regression carries about its first look."""
    return (f"confirmed by a second measurement (first look {pct(first_look.ratio or 1)},"
            f" p={first_look.p_value:.2g})")


def _device_text(dev: dict[str, Any]) -> str:
    """``device time +6.4% [+5.9, +6.9%] paired (kernels 219 -> 227; added 8x Conv...)`` from a
    ``device_time`` record (:meth:`pytest_aaco.sidebyside.cycles.DeviceLook.to_dict`, or
    :func:`device_check`'s), the per cent labelled with its series (``paired``, ``adjusted``,
    ``normalized``, ``raw``; records written before the label: ``paired``)."""
    k = dev.get("kernels") or {}
    kb, kc = k.get("baseline"), k.get("candidate")
    threshold = dev.get("threshold")
    bound = compared_text(dev["ratio"], dev.get("ci_low"), dev.get("ci_high"), dev.get("lower_bound"),
                          dev.get("upper_bound"), float(threshold if isinstance(threshold, (int, float)) else 0.0))
    text = (f"device time {pct(dev['ratio'])} {dev.get('series') or 'paired'} ({bound})"
            f" (kernel time per run {dev['kernel_ms']['baseline']:.3f} ->"
            f" {dev['kernel_ms']['candidate']:.3f} ms")
    if kb is not None and kc is not None:
        text += f"; kernels per run {kb:g} -> {kc:g}"
    added = dev.get("kernels_added") or []
    if added:
        text += "; added " + ", ".join(f"{n[:40]} x{c:g}" for n, c in added[:3])
    removed = dev.get("kernels_removed") or []
    if removed:
        text += "; removed " + ", ".join(f"{n[:40]} x{c:g}" for n, c in removed[:3])
    return text + ")"


def _stored_device_text(dev: dict[str, Any], v: Verdict) -> str:
    """The device-time part of a stored-baseline message: :func:`_device_text` with ``vs baseline``,
    its p, level, minimum detectable effect and threshold, from :func:`device_check`'s record."""
    return (f"{_device_text(dev)} vs baseline, p={dev['p_slower']:.2g} at level {dev['level']:.2g},"
            f" device-time MDE {dev['mde']:.1%}")


def _side_by_side_text(v: Verdict) -> str:
    """The message of a side-by-side verdict, e.g. ``REGRESSION resnet50[cpu]: latency +9.4% paired vs
    origin/main (lower bound +7.1% > 0, +9.4% >= 5%); geometric mean 23.1 ms vs 21.1 ms (+9.5%); measured
    side by side over 24 cycles, p=2e-06 at level 0.041``, from *v* and ``v.side_by_side``
    (:class:`pytest_aaco.records.SideBySideSummary`). The geometric means are each side's over its blocks,
    with their own ratio; the paired per cent is the test's estimate of the per-cycle ratio."""
    sbs = v.side_by_side
    assert sbs is not None
    assert v.ratio is not None and v.ci_low is not None and v.ci_high is not None and v.level is not None
    pairs = int(sbs.session_pairs or 1)
    p_shown = v.p_faster if v.outcome == IMPROVEMENT else v.p_value
    dev = sbs.device_time
    wall = (f"{pct(v.ratio)} paired vs {sbs.ref}"
            f" ({compared_text(v.ratio, v.ci_low, v.ci_high, v.lower_bound, v.upper_bound, v.threshold)})")
    if v.current_mean_ms and v.baseline_mean_ms:  # each side's geometric mean over its blocks, with their own ratio
        wall += (f"; geometric mean {v.current_mean_ms:.4g} ms vs {v.baseline_mean_ms:.4g} ms"
                 f" ({pct(v.current_mean_ms / v.baseline_mean_ms)})")
    if dev and v.decided_by == DEVICE_TIME:
        # device time decided the word, wall time did not: the message leads with device time
        text = (f"{_HEADS[v.outcome]} {v.label}: {_device_text(dev)} vs {sbs.ref}, p={dev['p_slower']:.2g}"
                f" at level {dev['level']:.2g}; wall time {wall}, p={p_shown:.2g} ({v.wall_outcome});"
                f" measured side by side over {sbs.cycles} cycles"
                + (f" on {pairs} fresh session pairs" if pairs > 1 else ""))
    else:
        metric = "wall time" if dev else "latency"
        text = (f"{_HEADS.get(v.outcome, str(v.outcome))} {v.label}: {metric} {wall}; measured side by side"
                f" over {sbs.cycles} cycles" + (f" on {pairs} fresh session pairs" if pairs > 1 else "")
                + f", p={p_shown:.2g} at level {v.level:.2g}")
        if dev:
            text += f"; {_device_text(dev)}"
    first = sbs.first_look
    if v.confirmed:
        text += f"; confirmed by {sbs.cycles} more cycles on fresh sessions"
    elif v.confirmed is False and first:
        text += (f"; the first look said {pct(first.ratio)} (p={first.p_slower:.2g}) but fresh sessions did"
                 " not confirm it")
    return text + _memory_text(v)  # method notes are the report's (Verdict.report_notes), not the message's


def _means_text(v: Verdict, which: str, runs: str) -> str:
    """The means beside a stored verdict's per cent, each per cent the ratio of the means printed
    beside it: ``; raw +4.7% = geometric mean 40.02 vs 38.22 ms; mean 41.91 ms vs 40.04 ms (+4.7%) over
    5 baseline runs`` (without ``raw +4.7% =`` when the raw series was tested). The raw per cent is
    the ratio of the rounds' geometric means (the test works on ln latency); the arithmetic means
    are the table's, with their own ratio."""
    text = ""
    if v.raw_ratio is not None and v.current_geomean_ms is not None and v.baseline_geomean_ms is not None:
        text += "; " if (v.series or RAW) == RAW else f"; raw {pct(v.raw_ratio)} = "
        text += f"geometric mean {v.current_geomean_ms:.4g} ms vs {v.baseline_geomean_ms:.4g} ms"
    elif (v.series or RAW) != RAW and v.raw_ratio is not None:
        text += f", raw {pct(v.raw_ratio)}"
    if v.current_mean_ms is not None and v.baseline_mean_ms:
        text += (f"; mean {v.current_mean_ms:.2f} ms{which} vs {v.baseline_mean_ms:.2f} ms"
                 f" ({pct(v.current_mean_ms / v.baseline_mean_ms)}) over {runs}")
    return text


def render_message(v: Verdict) -> str:
    """The one-line message a person can act on, rendered from the final fields of *v*.

    Called once, by :func:`finish`, after the last rule (confirmation, contention) changed *v*.
    """
    if v.side_by_side is not None and v.ratio is not None:
        return _side_by_side_text(v)
    if v.contention is not None:
        return (f"inconclusive {v.label}: looks like {pct(v.ratio or 1)} (p={v.p_value:.2g}) but other processes"
                f" kept {v.contention.cores:.2f} cores busy while it was measured (CPU contention, limit"
                f" {v.contention.limit:g}): not failed; re-run on a quiet runner, or raise --aaco-max-contention"
                + _memory_text(v))
    if v.confirmed is False and v.first_look is not None:
        return (f"inconclusive {v.label}: first look suggested {pct(v.first_look.ratio or 1)}"
                f" (p={v.first_look.p_value:.2g}) but the confirmation measurement did not ({v.unconfirmed_by})"
                + _memory_text(v))
    if v.reason is not None or v.ratio is None or v.outcome not in _HEADS:
        return v.reason or f"{v.outcome} {v.label}"
    assert v.ci_low is not None and v.ci_high is not None and v.level is not None  # set with the ratio
    p_shown = v.p_faster if v.outcome == IMPROVEMENT else v.p_value
    dev = v.device_time if v.device_time and "ratio" in v.device_time else None
    series = v.series or RAW
    runs = f"{v.baseline_runs} baseline run{'s' * (v.baseline_runs != 1)}"
    which = " (the confirmation measurement's)" if v.confirmed else ""
    bound = compared_text(v.ratio, v.ci_low, v.ci_high, v.lower_bound, v.upper_bound, v.threshold)
    wall = f"{pct(v.ratio)} {series} ({bound})"
    wall += _means_text(v, which, runs)
    if dev is not None and v.decided_by == DEVICE_TIME:
        # device time decided the word, wall time did not: the message leads with device time
        text = (f"{_HEADS[v.outcome]} {v.label}: {_stored_device_text(dev, v)}; wall time {wall}, p={p_shown:.2g}"
                f" ({v.wall_outcome})")
    else:
        metric = "wall time" if dev else "latency"
        text = f"{_HEADS[v.outcome]} {v.label}: {metric} {wall}; p={p_shown:.2g} at level {v.level:.2g}"
        if dev is not None:
            text += f"; {_stored_device_text(dev, v)}"
    if v.p99 is not None:
        text += (f"; p99 {pct(v.p99.ratio)} vs the latest baseline run (CI {pct(v.p99.ci_low)} .."
                 f" {pct(v.p99.ci_high)})" + (" REGRESSED" if v.p99.regression else ""))
    text += _memory_text(v)
    if v.confirmed:
        text += "; confirmed by a second measurement with a fresh session"
    # how it was tested (the method, reference drift, raw-figure reasons, the MDE and what to do) is the
    # report's and the bundle's: Verdict.report_notes
    return text


def finish(v: Verdict, settings: GateSettings) -> Verdict:
    """Set whether *v* fails (:func:`pytest_aaco.verdict.outcome.fails`) and render its message from its
    final fields; returns *v*."""
    v.fails = fails(v, settings)
    v.message = render_message(v)
    return v


def _latency_flagged(v: Verdict) -> bool:
    return v.outcome == REGRESSION or bool(v.p99_regressed)


def needs_confirmation(v: Verdict) -> bool:
    """A latency or memory regression on the first look: re-measure on a fresh session before failing."""
    return _latency_flagged(v) or bool(v.memory)


def confirm(first: Verdict, second: Verdict, settings: GateSettings | None = None) -> Verdict:
    """Combine the first look with the confirmation look (fresh session, fresh rounds).

    The item fails for latency only if both looks call a regression (intersection–union rule):
    the false-alarm probability is at most that of the second look alone, which is run at the
    item's full level α_i, so the session-wide guarantee holds without spending α twice. Memory
    likewise: it fails only if both sessions' footprints exceed the history's (the second look's
    figures are reported). ``--aaco-strict-inconclusive`` still fails an unconfirmed item.
    """
    settings = settings or GateSettings(threshold=second.threshold)
    first_look = FirstLook(first.ratio, first.p_value)
    memory = second.memory if first.memory and second.memory else []
    if first.memory and not memory:
        first.notes.append("memory growth not confirmed by a fresh session: " + "; ".join(first.memory))
    if not _latency_flagged(first):  # only memory was flagged: the latency verdict stands
        first.memory = memory
        return finish(first, settings)
    second.memory = memory
    first.memory = memory
    common = flagged_metrics(first) & flagged_metrics(second)
    if _latency_flagged(second) and fails(second, settings) and common:
        second.confirmed = True
        second.first_look = first_look
        second.notes.append(confirmation_note(first_look))
        return finish(second, settings)
    first.confirmed = False
    first.first_look = first_look
    first.outcome = INCONCLUSIVE
    if first.device_time and first.device_time.get("outcome") == REGRESSION:  # not confirmed either
        first.device_time = {**first.device_time, "outcome": str(INCONCLUSIVE), "first_outcome": str(REGRESSION)}
    if first.device_time and first.device_time.get("wall_outcome") == REGRESSION:
        first.device_time = {**first.device_time, "wall_outcome": str(INCONCLUSIVE)}
    first.p99 = None if first.p99 is None else replace(first.p99, regression=False)
    first.unconfirmed_by = second.message
    first.notes.append("not confirmed: " + second.message)
    return finish(first, settings)


def under_contention(v: Verdict, others_cores: float, limit: float, settings: GateSettings) -> Verdict:
    """Withhold a latency regression measured while other processes kept *others_cores* (> *limit*)
    cores busy: the slowdown cannot be told from the neighbours' load, so the verdict becomes
    inconclusive (a memory regression, or ``--aaco-strict-inconclusive``, still fails). In the
    verdict-quality study this turned 14 of 160 unchanged-model false alarms on a contended
    2-core machine into 4, keeping most detections (studies/RESULTS.md)."""
    if v.outcome != REGRESSION or others_cores <= limit or DEVICE_TIME in v.regressions:
        return v  # device time is what the GPU did: other processes on the host do not explain it
    v.outcome = INCONCLUSIVE
    if v.device_time is not None and v.device_time.get("wall_outcome") == REGRESSION:
        v.device_time = {**v.device_time, "wall_outcome": str(INCONCLUSIVE)}
    v.confirmed = None
    v.contention = Contention(others_cores, limit)
    v.notes.append(f"other processes used {others_cores:.2f} cores while measuring (limit {limit:g})")
    return finish(v, settings)


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
