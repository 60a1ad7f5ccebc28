"""A history recorded on another runner, used on purpose: ``--aaco-baseline-runner=KEY`` (issue 43).

Baselines are filed by runner (:attr:`pytest_aaco.verdict.comparable.Fingerprint.machine_key`: CPU model,
cores, GPU), so a CI job on a new runner type has no history of its own. With this option the stored gate
reads the history in ``<baseline dir>/<KEY>/`` instead, and judges what a machine difference cannot move:

* **device time**, where both this run and the history traced it and both ran on the same GPU model
  (``gpu_name``): kernel time per run does not depend on the host CPU. It then gives the outcome word
  (:func:`pytest_aaco.history.judge.device_check`, the stored gate's own test); wall time is reported
  beside it and claims nothing.
* otherwise wall time's **reference-normalized** series, ``ln(item) - ln(reference)`` per block
  (:mod:`pytest_aaco.measure.reference_workload`): the reference workload runs on both machines, so the
  machines' difference in speed divides out as far as the item and the reference scale alike. That they
  scale alike is an assumption no saved run can check, so the test adds a between-runner term of
  :data:`ACROSS_RUNNER_SD` to its variance (:func:`across_comparison`), and the minimum detectable effect
  it states is the wider one that follows. Raw wall time, p99 and the reference's own drift are never
  compared across runners: they measure the machines' difference.

Nothing is written into the other runner's folder: ``--aaco-save-baseline`` saves into this runner's own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_aaco.history.judge import device_check, history_memory_growth, stability
from pytest_aaco.history.series import NORMALIZE_DURATION_RATIO, Blocks, reference_unstable, wall_track
from pytest_aaco.history.store import Baseline, baseline_path, read_baseline
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.options import GateSettings
from pytest_aaco.records.base import LATENCY, Outcome
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.verdict import multiplicity, run_stats, stats
from pytest_aaco.verdict.comparable import MACHINE_FIELDS, Fingerprint
from pytest_aaco.verdict.outcome import judgement_of
from pytest_aaco.verdict.percent import pct

#: sd (ln units) of what the reference cannot divide out between two runners: the item and the reference
#: workload speed up or slow down differently from one CPU model to another (vector width, caches, memory
#: bandwidth). No saved run can measure it for an item, so it is a prior: ln(1.05), a 5% sd, five times
#: the run-to-run prior on one runner (``--aaco-run-noise``, 1%). Added to the normalized test's variance
#: once (it does not shrink with more saved runs), it widens the MDE at a 5% level to about 13%
ACROSS_RUNNER_SD = math.log1p(0.05)


def across_fingerprint(fingerprint: Fingerprint, stored: Mapping[str, Any]) -> Fingerprint:
    """*fingerprint* with the machine fields (:data:`~pytest_aaco.verdict.comparable.MACHINE_FIELDS`) of the
    *stored* fingerprint, so that only the rest (model inputs, EP and options, versions, threads ...)
    decides whether another runner's history is comparable."""
    fields = {k: v for k, v in fingerprint.fields.items() if k not in MACHINE_FIELDS}
    fields.update({k: stored[k] for k in MACHINE_FIELDS if k in stored})
    return Fingerprint(fields)


def normalizable(ref: Blocks, pairs: list[tuple[list[float], dict[str, Any]]], baseline: Baseline,
                 ref_mean_ms: float) -> str:
    """Why the normalized series cannot judge across runners ('' when it can), by the stored gate's own guards
    (:mod:`pytest_aaco.history.judge`): the reference's blocks drifted or spread beyond the history's
    (:func:`pytest_aaco.history.series.reference_unstable`), or the item's mean iteration in the history and
    the reference's (ms; the history's where recorded, else this run's *ref_mean_ms*) differ more than
    :data:`pytest_aaco.history.series.NORMALIZE_DURATION_RATIO`: such an item responds to a machine's speed
    otherwise than the reference, so dividing adds a machine's difference instead of removing it (under
    load, an unchanged 10 us item normalized by a 2 ms reference read +133%). The history's durations are
    used, not this run's, so a large regression never hides itself."""
    unstable = reference_unstable(ref, [r for _, r in pairs])
    if unstable:
        return unstable
    item_ms = float(np.mean([run["summary"]["mean_ms"] for run in baseline.history]))
    ref_ms = [float(r["mean_ms"]) for _, r in pairs if isinstance(r.get("mean_ms"), (int, float)) and r["mean_ms"] > 0]
    reference_ms = float(np.mean(ref_ms)) if ref_ms else ref_mean_ms
    low, high = sorted((max(item_ms, 1e-9), max(reference_ms, 1e-9)))
    if high / low > NORMALIZE_DURATION_RATIO:
        return (f"the item's iteration ({item_ms:.3g} ms in the history) and the reference's ({reference_ms:.3g} ms)"
                f" differ more than {NORMALIZE_DURATION_RATIO:g}x, so they do not slow down alike from one machine to"
                " another; pick a reference workload of about the item's duration (--aaco-reference)")
    return ""


def across_comparison(current: np.ndarray, history: list[list[float]], run_noise: float,
                      between: float = ACROSS_RUNNER_SD) -> stats.Comparison:
    """Welch's test of this run's normalized block log-means (ln units, shape ``(rounds,)``) against another
    runner's history (one list per saved run) (:func:`pytest_aaco.verdict.stats.welch_rounds`, run-to-run
    term: the larger of *run_noise* (a fraction) and what the history shows,
    :func:`pytest_aaco.verdict.run_stats.run_offset_sd`), with *between* (ln units, :data:`ACROSS_RUNNER_SD`)
    added to the variance of the estimate: ``se² + between²``, same df. p-values from Student's t
    (``scipy.stats.t``). Raises ValueError for too few rounds."""
    from scipy.stats import t as student_t

    runs = [np.asarray(r, float) for r in history if len(r)]
    if not runs:
        raise ValueError("the other runner's history has no normalized rounds")
    run_sd = float(np.log1p(run_noise))
    learned = run_stats.run_offset_sd(runs)
    if np.isfinite(learned):
        run_sd = max(run_sd, learned)
    base = stats.welch_rounds(current, np.concatenate(runs), run_sd=run_sd, baseline_runs=len(runs))
    se = math.sqrt(base.se ** 2 + between ** 2)
    return stats.Comparison("welch", base.estimate, se, base.df, float(student_t.sf(base.estimate / se, base.df)),
                            float(student_t.cdf(base.estimate / se, base.df)), base.n_current, base.n_baseline)


def judge_across(result: BenchmarkResult, baseline: Baseline | None, fingerprint: Fingerprint,
                 settings: GateSettings, level: float, label: str, runner: str) -> Verdict:
    """Judge *result* against *baseline*, the history of the runner *runner* (another runner's), at *level*.

    Returns the verdict unfinished, like :func:`pytest_aaco.history.judge.judge_history`, with
    ``baseline_runner`` set: ``no-baseline`` when that runner has no history of the item; ``mismatch`` when
    the fingerprints differ beyond the machine fields; else judged by device time (same GPU model, traced
    on both sides) or by the normalized series (:func:`across_comparison`), or ``inconclusive`` naming
    what is missing when neither can be compared. Never raises for statistical corner cases."""
    t = settings.threshold
    whose = f"runner {runner}'s history (another runner's, --aaco-baseline-runner)"
    if baseline is None:
        return Verdict(Outcome.NO_BASELINE, label, t, current_mean_ms=result.mean_ms, baseline_runner=runner,
                       reason=f"no baseline for {label} in {whose}; record one there, or on this runner with"
                              " --aaco-save-baseline")
    same = across_fingerprint(fingerprint, baseline.fingerprint)
    versions = same.version_only(baseline.fingerprint)
    if not same.matches(baseline.fingerprint) and not versions:
        return Verdict(Outcome.MISMATCH, label, t, current_mean_ms=result.mean_ms, baseline_path=str(baseline.path),
                       fingerprint_diff=same.diff(baseline.fingerprint), baseline_runner=runner,
                       reason=f"not gated: fingerprint differs from {whose} {baseline.path.name}"
                              f" ({same.describe_diff(baseline.fingerprint)}) beyond the machine")
    facts = dict(current_mean_ms=result.mean_ms, baseline_path=str(baseline.path), fingerprint_id=fingerprint.id,
                 baseline_runner=runner, version_change=versions,
                 baseline_mean_ms=float(np.mean([run["summary"]["mean_ms"] for run in baseline.history])))
    notes = [f"compared with {whose}: raw wall time and p99 are not compared across runners"]
    gpus = (fingerprint.fields.get("gpu_name"), baseline.fingerprint.get("gpu_name"))
    dev = None
    if result.device is not None and gpus[0] == gpus[1]:
        dev = device_check(result, baseline, settings, level)
    elif result.device is not None:
        notes.append(f"device time not compared: the GPUs differ ({gpus[1]} there, {gpus[0]} here)")
    track = wall_track(result, baseline)
    wall_why = track.missing if track.ref is None else "" if track.pairs else track.no_pairs
    if not wall_why and track.ref is not None:
        wall_why = normalizable(track.ref, track.pairs, baseline, track.ref_mean_ms)
    verdict: Verdict | None = None
    if not wall_why and track.normalized is not None:
        current, history = track.normalized()
        try:
            comp = across_comparison(np.asarray(current, float), history, settings.run_noise)
        except ValueError as exc:
            wall_why = str(exc)
        else:
            wall = judgement_of(LATENCY, comp, t, level, series="normalized",
                                method="welch (across runners)")
            verdict = Verdict.judged(wall, label, current_rounds=comp.n_current, baseline_rounds=comp.n_baseline,
                                     baseline_runs=len(history), **facts)  # type: ignore[arg-type]
            narrow = across_comparison(np.asarray(current, float), history, settings.run_noise, between=0.0)
            notes.append(f"wall time normalized by the reference workload {track.ref_name}, with a between-runner"
                         f" term of {math.expm1(ACROSS_RUNNER_SD):.0%} sd in its test: minimum detectable effect"
                         f" {wall.mde:.1%}, against {narrow.mde(level):.1%} without that term")
    if dev is not None and dev.judgement is not None:
        if verdict is None:  # device time alone: a verdict with its word, no wall judgement, the figures said
            word = dev.outcome or Outcome.INCONCLUSIVE
            judged = dev.judgement
            runs = dev.figures.get("runs")
            low, high = judged.lower_bound or judged.ratio, judged.upper_bound or judged.ratio
            verdict = Verdict(word, label, t, baseline_runs=runs if isinstance(runs, int) else 0,
                              reason=f"{word.value} {label}: device time {pct(judged.ratio)} (bounds"
                                     f" {pct(low)} .. {pct(high)},"
                                     f" threshold {judged.threshold:.0%}) against {whose}; wall time not compared"
                                     f" ({wall_why or 'no normalized series'})",
                              **facts)  # type: ignore[arg-type]
        elif verdict.wall_outcome in (Outcome.REGRESSION, Outcome.IMPROVEMENT):
            notes.append(f"wall time {verdict.wall_outcome.value} not claimed across runners: device time gives"
                         " the word")
            verdict.set_wall_outcome(Outcome.INCONCLUSIVE)
        verdict.device_time = dev
        verdict.outcome = dev.outcome or Outcome.INCONCLUSIVE
    elif verdict is not None and dev is not None:
        verdict.device_time = dev
        notes.append(f"device time inconclusive: {dev.reason}")
    if verdict is None:
        why = wall_why or "no normalized series"
        return Verdict(Outcome.INCONCLUSIVE, label, t, **facts,  # type: ignore[arg-type]
                       reason=f"inconclusive for {label}: not judged against {whose}: wall time needs the"
                              f" reference workload's normalized series on both sides ({why}), and device time"
                              " was not traced on both sides of one GPU model")
    levels = baseline.run_levels()  # as the stored gate compares runs
    if verdict.raw_ratio is None and len(result.round_log_means) and levels:
        raw = float(np.mean(stats.fastest_rounds(result.round_log_means))) - float(np.mean(levels))
        verdict.raw_ratio = math.exp(raw)
        notes.append(f"raw wall time {pct(verdict.raw_ratio)}, fastest quarter of rounds (the machines' difference"
                     " included; not tested)")
    verdict.notes = notes + verdict.notes
    verdict.unstable = stability(result, baseline)
    verdict.memory = history_memory_growth(result, baseline, settings)
    return verdict


class AcrossRunnerGate:
    """The stored gate of one item against another runner's history (a :class:`pytest_aaco.gate.Gate`):
    :meth:`look` is :func:`judge_across`. ``stored``: confirmed and withheld for contention as the stored
    gate is; ``gated``: a comparable history was found (a LOND test spent)."""

    def __init__(self, baseline: Baseline | None, fingerprint: Fingerprint, settings: GateSettings, level: float,
                 label: str, runner: str, gated: bool) -> None:
        self.baseline, self.fingerprint, self.settings = baseline, fingerprint, settings
        self.level, self.label, self.runner = level, label, runner
        self.gated, self.stored = gated, True

    def look(self, result: BenchmarkResult) -> Verdict:
        """:func:`judge_across` of *result*: the verdict unfinished."""
        return judge_across(result, self.baseline, self.fingerprint, self.settings, self.level, self.label,
                            self.runner)


def other_runner_gate(baseline_dir: Path, runner: str, nodeid: str, fingerprint: Fingerprint, settings: GateSettings,
                      label: str, lond: multiplicity.LondFdr, fdr: float) -> tuple[AcrossRunnerGate, Baseline | None]:
    """The gate of the item *nodeid* against the history of *runner* (a folder under *baseline_dir*), with
    that history (None when the runner has none for the item). Read only, never written. Gated (a LOND
    level drawn from *lond*; *fdr* otherwise) when the history's fingerprint matches but for the machine
    fields (:func:`across_fingerprint`), or differs in versions only. Raises
    :class:`~pytest_aaco.jsonio.AacoFileError` for a file that cannot be read, as the stored gate does."""
    baseline = read_baseline(baseline_path(baseline_dir, runner, nodeid), nodeid)
    same = None if baseline is None else across_fingerprint(fingerprint, baseline.fingerprint)
    gated = baseline is not None and same is not None and (
        same.matches(baseline.fingerprint) or bool(same.version_only(baseline.fingerprint)))
    level = lond.next_level() if gated else fdr
    return AcrossRunnerGate(baseline, fingerprint, settings, level, label, runner, gated), baseline
