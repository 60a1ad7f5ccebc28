"""Finishing a verdict: the rules applied after a gate's test, and the one message rendered from it.

A gate (:class:`pytest_aaco.gate.Gate`: the stored baselines' :func:`pytest_aaco.history.judge.judge_history`,
the side-by-side :func:`pytest_aaco.sidebyside.cycles.to_verdict`) returns an *unfinished*
:class:`~pytest_aaco.records.verdict.Verdict`: its outcome and figures, no ``fails`` and no ``message``. The item
pipeline (:func:`pytest_aaco.gate.judge`) then applies, here:

* :func:`confirm`: the confirmation look, by the one intersection-union rule
  (:func:`pytest_aaco.verdict.outcome.confirmed_outcome`);
* :func:`under_contention`: a stored-baseline regression measured under CPU contention is withheld;
* :func:`finish`: whether the verdict fails (:func:`pytest_aaco.verdict.outcome.fails`) and its message
  (:func:`render_message`), once, after the last rule changed it.

:func:`settle` applies them in that order; it is the one place :func:`finish` is called (the item
pipeline, ``aaco diff``, and the verdicts no gate looked at: saved, error).

No pytest, no onnxruntime, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from pytest_aaco.options import GateSettings
from pytest_aaco.records.base import DEVICE_TIME, MEMORY, P99, Contention, Judgement, Outcome
from pytest_aaco.records.verdict import DeviceTimeRecord, FirstLook, Verdict
from pytest_aaco.verdict.metrics import history_own_cores, other_processes_cores, own_process_cores
from pytest_aaco.verdict.outcome import confirmed_outcome, fails
from pytest_aaco.verdict.percent import bound_text, kept_text, pct

REGRESSION = Outcome.REGRESSION
IMPROVEMENT = Outcome.IMPROVEMENT
NO_REGRESSION = Outcome.NO_REGRESSION
INCONCLUSIVE = Outcome.INCONCLUSIVE
#: the raw series' name (:data:`pytest_aaco.history.series.RAW`)
RAW = "raw"


def compared_text(ratio: float, ci_low: float | None, ci_high: float | None, lower: float | None,
                  upper: float | None, threshold: float) -> str:
    """The interval a message prints beside a change: the one-sided bound the outcome rule compared
    (:func:`pytest_aaco.verdict.percent.bound_text`, ``upper bound +7.7% < 10%``); for a record
    written before bounds were stored, its 95% two-sided CI (``95% CI -1.1% .. +9.0%``)."""
    text = bound_text(ratio, lower, upper, threshold)
    if text or ci_low is None or ci_high is None:
        return text
    return f"95% CI {pct(ci_low)} .. {pct(ci_high)}"

def flagged_metrics(v: Verdict) -> set[str]:
    """The timing metrics *v* found a regression in, for the confirmation rule: ``device time`` and/or
    ``wall time`` (p99 counts as wall time), read from :attr:`pytest_aaco.records.verdict.Verdict.regressions`."""
    return {"device time" if m == DEVICE_TIME else "wall time" for m in v.regressions if m != MEMORY}


_HEADS = {REGRESSION: "REGRESSION", IMPROVEMENT: "IMPROVEMENT", NO_REGRESSION: "no regression",
          INCONCLUSIVE: "inconclusive"}


def _memory_text(v: Verdict) -> str:
    return "".join(f"; MEMORY REGRESSION {line}" for line in v.memory)


def confirmation_note(first_look: FirstLook) -> str:
    """The note a confirmed regression carries about its first look."""
    return (f"confirmed by a second measurement (first look {pct(first_look.ratio or 1)},"
            f" p={first_look.p_value:.2g})")


def _device_text(dev: DeviceTimeRecord, judged: Judgement) -> str:
    """``device time +6.4% paired (lower bound +5.9% > 0, +6.4% >= 5%) (kernel time per run ...; kernels per
    run 219 -> 227; added 8x Conv...)`` from the device-time record *dev* and its judgement *judged* (as
    :attr:`pytest_aaco.records.verdict.Verdict.judgements` gives it), the per cent labelled with its series
    (``paired``, ``adjusted``, ``normalized``, ``raw``; records written before the label: ``paired``)."""
    bound = compared_text(judged.ratio, judged.ci_low, judged.ci_high, judged.lower_bound, judged.upper_bound,
                          judged.threshold)
    text = f"device time {pct(judged.ratio)} {judged.series or 'paired'} ({bound})"
    if dev.kernel_ms is not None and dev.kernel_ms.baseline is not None and dev.kernel_ms.candidate is not None:
        text += f" (kernel time per run {dev.kernel_ms.baseline:.3f} -> {dev.kernel_ms.candidate:.3f} ms"
    else:
        text += " (kernel time per run not recorded"
    if dev.kernels is not None and dev.kernels.baseline is not None and dev.kernels.candidate is not None:
        text += f"; kernels per run {dev.kernels.baseline:g} -> {dev.kernels.candidate:g}"
    if dev.kernels_added:
        text += "; added " + ", ".join(f"{n[:40]} x{c:g}" for n, c in dev.kernels_added[:3])
    if dev.kernels_removed:
        text += "; removed " + ", ".join(f"{n[:40]} x{c:g}" for n, c in dev.kernels_removed[:3])
    return text + ")"


def _stored_device_text(dev: DeviceTimeRecord, judged: Judgement) -> str:
    """The device-time part of a stored-baseline message: :func:`_device_text` with ``vs baseline``,
    its p, level and minimum detectable effect."""
    return (f"{_device_text(dev, judged)} vs baseline, p={judged.p_slower or 0.0:.2g}"
            f" at level {judged.level or 0.0:.2g}, device-time MDE {judged.mde or 0.0:.1%}")


def _side_by_side_text(v: Verdict) -> str:
    """The message of a side-by-side verdict, e.g. ``REGRESSION resnet50[cpu]: latency +9.4% paired vs
    origin/main (lower bound +7.1% > 0, +9.4% >= 5%); geometric mean 23.1 ms vs 21.1 ms (+9.5%); measured
    side by side over 24 cycles, p=2e-06 at level 0.041``, from *v* and ``v.side_by_side``
    (:class:`pytest_aaco.records.verdict.SideBySideSummary`). The geometric means are each side's over its blocks,
    with their own ratio; the paired per cent is the test's estimate of the per-cycle ratio."""
    sbs = v.side_by_side
    assert sbs is not None
    assert v.ratio is not None and v.ci_low is not None and v.ci_high is not None and v.level is not None
    pairs = int(sbs.session_pairs or 1)
    # under --aaco-compare-python both sides run in fresh workers (their details name the executable): each
    # session pair is then a pair of processes, the paired test's level (pytest_aaco/sidebyside/cycles.py)
    unit = "process" if "executable" in ((sbs.figures.get("sides") or {}).get("candidate") or {}) else "session"
    p_shown = v.p_faster if v.outcome == IMPROVEMENT else v.p_value
    dev, judged = sbs.device_time, v.judgements.get(DEVICE_TIME)
    wall = (f"{pct(v.ratio)} paired vs {sbs.ref}"
            f" ({compared_text(v.ratio, v.ci_low, v.ci_high, v.lower_bound, v.upper_bound, v.threshold)})")
    if v.current_mean_ms and v.baseline_mean_ms:  # each side's geometric mean over its blocks, with their own ratio
        wall += (f"; geometric mean {v.current_mean_ms:.4g} ms vs {v.baseline_mean_ms:.4g} ms"
                 f" ({pct(v.current_mean_ms / v.baseline_mean_ms)})")
    if dev is not None and judged is not None and v.decided_by == DEVICE_TIME:
        # device time decided the word, wall time did not: the message leads with device time
        text = (f"{_HEADS[v.outcome]} {v.label}: {_device_text(dev, judged)} vs {sbs.ref},"
                f" p={judged.p_slower or 0.0:.2g} at level {judged.level or 0.0:.2g}; wall time {wall},"
                f" p={p_shown:.2g} ({v.wall_outcome});"
                f" measured side by side over {sbs.cycles} cycles"
                + (f" on {pairs} fresh {unit} pairs" if pairs > 1 else ""))
    else:
        metric = "wall time" if judged is not None else "latency"
        text = (f"{_HEADS.get(v.outcome, str(v.outcome))} {v.label}: {metric} {wall}; measured side by side"
                f" over {sbs.cycles} cycles" + (f" on {pairs} fresh {unit} pairs" if pairs > 1 else "")
                + f", p={p_shown:.2g} at level {v.level:.2g}")
        if dev is not None and judged is not None:
            text += f"; {_device_text(dev, judged)}"
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
        of = f" of the {kept_text(v.rounds_kept).removesuffix(' of rounds')}" if v.rounds_kept else ""
        text += f"geometric mean{of} {v.current_geomean_ms:.4g} ms vs {v.baseline_geomean_ms:.4g} ms"
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
        explained = v.contention.explained
        bound = "" if v.wall is None or v.wall.lower_bound is None else f", lower bound {pct(v.wall.lower_bound)}"
        return (f"inconclusive {v.label}: not judged: CPU contention; looks like {pct(v.ratio or 1)}"
                f" (p={v.p_value:.2g}{bound}) but other processes kept {v.contention.cores:.2f} cores busy while it"
                f" was measured (limit {v.contention.limit:g})"
                + ("" if explained is None else f", which explains a slowdown of up to {pct(explained)}")
                + ": not failed (--aaco-fail-blind fails it); re-run on a quiet runner, or raise --aaco-max-contention"
                + _threads_hint(v) + _memory_text(v))
    if v.confirmed is False and v.first_look is not None:
        return (f"inconclusive {v.label}: first look suggested {pct(v.first_look.ratio or 1)}"
                f" (p={v.first_look.p_value:.2g}) but the confirmation measurement did not ({v.unconfirmed_by})"
                + _memory_text(v))
    if v.withheld is not None and v.ratio is not None and v.wall is not None:
        bound = compared_text(v.ratio, v.ci_low or v.ratio, v.ci_high or v.ratio, v.wall.lower_bound,
                              v.wall.upper_bound, v.threshold)
        return (f"inconclusive {v.label}: not judged: {v.withheld}; looks like {pct(v.ratio)} {v.series or RAW}"
                f" ({bound}), p={v.p_value if v.p_value is not None else float('nan'):.2g}: not failed"
                " (--aaco-fail-blind fails it); re-run on a quiet runner, or compare side by side (--aaco-compare)"
                + _threads_hint(v) + _memory_text(v))
    if v.reason is not None or v.ratio is None or v.outcome not in _HEADS:
        return v.reason or f"{v.outcome} {v.label}"
    assert v.ci_low is not None and v.ci_high is not None and v.level is not None  # set with the ratio
    p_shown = v.p_faster if v.outcome == IMPROVEMENT else v.p_value
    dev, judged = v.device_time, v.judgements.get(DEVICE_TIME)
    series = v.series or RAW
    runs = f"{v.baseline_runs} baseline run{'s' * (v.baseline_runs != 1)}"
    which = " (the confirmation measurement's)" if v.confirmed else ""
    bound = compared_text(v.ratio, v.ci_low, v.ci_high, v.lower_bound, v.upper_bound, v.threshold)
    kept = f", {kept_text(v.rounds_kept)}" if v.rounds_kept and series in (RAW, "adjusted") else ""
    wall = f"{pct(v.ratio)} {series}{kept} ({bound})"
    wall += _means_text(v, which, runs)
    fastest = v.fastest_iteration
    if fastest is not None and fastest.stood and v.outcome == REGRESSION:
        # contention or a machine speed change inflated wall time's level; the fastest iteration decided
        text = (f"{_HEADS[v.outcome]} {v.label}: latency {fastest_text(v)}; measured while the machine was busy or"
                f" slower than in the history, so wall time {wall}, p={p_shown:.2g} at level {v.level:.2g}, is"
                " not the change")
    elif dev is not None and judged is not None and v.decided_by == DEVICE_TIME:
        # device time decided the word, wall time did not: the message leads with device time
        text = (f"{_HEADS[v.outcome]} {v.label}: {_stored_device_text(dev, judged)}; wall time {wall},"
                f" p={p_shown:.2g} ({v.wall_outcome})")
    else:
        metric = "wall time" if judged is not None else "latency"
        text = f"{_HEADS[v.outcome]} {v.label}: {metric} {wall}; p={p_shown:.2g} at level {v.level:.2g}"
        if dev is not None and judged is not None:
            text += f"; {_stored_device_text(dev, judged)}"
    p99 = v.judgements.get(P99)
    if p99 is not None:  # the bound its rule compared (the bootstrap's one-sided bounds at the item's level)
        bound = bound_text(p99.ratio, p99.lower_bound, p99.upper_bound, p99.threshold)
        text += (f"; p99 {pct(p99.ratio)} vs the latest baseline run ({bound})"
                 + (" REGRESSED" if p99.outcome == REGRESSION else ""))
    text += _memory_text(v)
    if v.baseline_runner:  # --aaco-baseline-runner: which history, and that it is another runner's
        text += f"; against runner {v.baseline_runner}'s history (another runner's)"
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


def settle(first: Verdict, settings: GateSettings, *, again: Callable[[], Verdict] | None = None,
           busy: Callable[[], float | None] | None = None, max_contention: float | None = None,
           notes: Iterable[str] = (), explained: Callable[[Verdict], float | None] | None = None) -> Verdict:
    """The rules after a gate's look, in order, then :func:`finish` once; returns the finished verdict.

    *first*: the gate's unfinished verdict. *again*: takes the confirmation look (a fresh measurement,
    judged by the same gate), called only when *first* :func:`needs_confirmation`; None where the gate
    confirmed itself (side by side) or cannot measure again (``aaco diff``). *busy*: the cores other
    processes kept busy while measuring (read after the confirmation look, which it covers), compared
    with *max_contention* (cores, ``--aaco-max-contention``; None: not checked) by :func:`under_contention`.
    *explained*: the slowdown (a ratio, >= 1) that contention can explain for the verdict that stands
    (:func:`contention_bound`); None or absent: not known, so a regression under contention is withheld.
    *notes*: lines added to the verdict's notes. *settings*: which outcomes fail
    (:func:`pytest_aaco.verdict.outcome.fails`)."""
    verdict = first
    if again is not None and needs_confirmation(first):
        verdict = confirm(first, again(), settings)
    if busy is not None and max_contention is not None:
        verdict = under_contention(verdict, busy() or 0.0, max_contention,
                                   explained(verdict) if explained is not None else None)
    verdict.notes.extend(notes)
    return finish(verdict, settings)


def _latency_flagged(v: Verdict) -> bool:
    return v.outcome == REGRESSION or bool(v.p99_regressed)


def needs_confirmation(v: Verdict) -> bool:
    """A latency or memory regression on the first look: re-measure on a fresh session before failing."""
    return _latency_flagged(v) or bool(v.memory)


def confirm(first: Verdict, second: Verdict, settings: GateSettings | None = None) -> Verdict:
    """Combine the first look with the confirmation look (fresh session, fresh rounds); returns the
    verdict that stands, unfinished (the item pipeline finishes it once, :func:`finish`).

    A timing metric (wall time, p99 counted with it, device time) regresses only if both looks call
    it a regression: the one intersection-union rule, :func:`pytest_aaco.verdict.outcome.confirmed_outcome`,
    which the side-by-side gate applies to its fresh-session look too. The false-alarm probability is
    at most that of the second look alone, which is run at the item's full level α_i, so the
    session-wide guarantee holds without spending α twice. Memory likewise: it fails only if both
    sessions' footprints exceed the history's (the second look's figures are reported).
    ``--aaco-strict-inconclusive`` still fails an unconfirmed item.
    """
    settings = settings or GateSettings(threshold=second.threshold)
    first_look = FirstLook(first.ratio, first.p_value)
    memory = second.memory if first.memory and second.memory else []
    if first.memory and not memory:
        first.notes.append("memory growth not confirmed by a fresh session: " + "; ".join(first.memory))
    if not _latency_flagged(first):  # only memory was flagged: the latency verdict stands
        first.memory = memory
        return first
    second.memory = memory
    first.memory = memory
    flagged = flagged_metrics(first), flagged_metrics(second)

    def look(which: int, metric: str) -> Outcome:
        return REGRESSION if metric in flagged[which] else NO_REGRESSION

    common = {m for m in flagged[0] | flagged[1] if confirmed_outcome(look(0, m), look(1, m)) == REGRESSION}
    if _latency_flagged(second) and fails(second, settings) and common:
        second.confirmed = True
        second.first_look = first_look
        second.notes.append(confirmation_note(first_look))
        return second
    first.confirmed = False
    first.first_look = first_look
    if first.fastest_iteration is not None and first.fastest_iteration.stood:  # it stood for a look not confirmed
        first.fastest_iteration = replace(first.fastest_iteration, stood=False)
    first.outcome = INCONCLUSIVE
    if first.device_time is not None and first.device_time.outcome == REGRESSION:  # not confirmed either
        first.device_time = first.device_time.with_outcome(INCONCLUSIVE, first_outcome=REGRESSION)
    if first.wall is not None and first.wall.outcome == REGRESSION:
        first.set_wall_outcome(INCONCLUSIVE)
    first.p99 = None if first.p99 is None else replace(first.p99, regression=False)
    first.unconfirmed_by = render_message(second)
    first.notes.append("not confirmed: " + first.unconfirmed_by)
    if second.withheld:  # the confirmation could not be judged (a machine speed change): neither is the item
        first.withheld = second.withheld
    return first


def contention_bound(reference_drift: float | None, others_cores: float | None, own_cores: float | None,
                     cpu_count: int, history_own_cores: float | None = None) -> float | None:
    """The slowdown (a ratio, >= 1) that CPU contention can explain in one run, from what it did to that run.

    Two witnesses, the larger counts: the reference workload measured beside the item
    (``1 + reference_drift``, *reference_drift* a fraction, > 0 slower than in the history), and the CPU
    the process got. A fair scheduler stretches this process's wall time by at most ``(own + others) /
    cpu_count`` when this process (*own_cores*, mean cores it used) and the others (*others_cores*) asked
    for more than the *cpu_count* cores there are. With *history_own_cores* (the cores the item's process
    used in its saved runs, median), the CPU the process got against its wall time measures the stretch
    itself: an item that used 1.0 core in its history and got 0.4 now ran 2.5 times slower for the same
    work, while a change of its own work leaves the share alone; that ratio, at most the fair scheduler's
    bound, is the witness then. None when neither witness was measured."""
    found: list[float] = []
    if reference_drift is not None:
        found.append(1.0 + max(reference_drift, 0.0))
    if others_cores is not None and own_cores is not None and cpu_count >= 1:
        fair = max((own_cores + others_cores) / cpu_count, 1.0)
        if history_own_cores is not None and history_own_cores > 0 and own_cores > 0:
            fair = min(fair, max(history_own_cores / own_cores, 1.0))
        found.append(fair)
    return max(found) if found else None


def contention_explains(v: Verdict, telemetry: dict[str, Any] | None, cpu_count: int,
                        history: Iterable[Mapping[str, object]]) -> float | None:
    """:func:`contention_bound` for verdict *v* of a run whose sampler *telemetry* it reads (this run's, or the
    confirmation's), on *cpu_count* cores, against the saved *history* runs (their CPU share): the reference's
    drift counts on raw figures only (a normalized series took it out). The one bound the gate and ``aaco diff``
    pass to :func:`settle`."""
    series = None if v.wall is None else v.wall.series
    drift = v.reference_drift if series in (None, "raw") else None
    return contention_bound(drift, other_processes_cores(telemetry, cpu_count), own_process_cores(telemetry),
                            cpu_count, history_own_cores(history))


def fastest_text(v: Verdict) -> str:
    """The fastest-iteration figures of *v* as a message shows them ('' without them)."""
    f = v.fastest_iteration
    if f is None:
        return ""
    bound = f"lower bound {pct(f.lower_bound)}"
    if f.explained is not None:
        cores = f.parallel_bound is not None and f.parallel_bound > max(f.reference_ratio or 1.0, 1.0)
        source = "fewer cores for its threads" if cores else "the reference workload's fastest iteration"
        bound += f" >= {v.threshold:.0%} beyond the {pct(f.explained)} the machine explains: {source}"
    runs = f"{f.runs} baseline run{'s' * (f.runs != 1)}"
    return (f"fastest iteration {pct(f.ratio)} ({bound}); {f.current_ms:.4g} ms vs at most"
            f" {f.current_ms / f.ratio:.4g} ms over {runs}")


def _threads_hint(v: Verdict) -> str:
    """For a multi-threaded CPU session whose fastest iteration fewer cores could explain: what would let
    the gate judge it on a busy machine ('' otherwise)."""
    f = v.fastest_iteration
    if f is None or f.parallel_bound is None or f.parallel_bound <= 1.05 or f.lower_bound < 1.0 + v.threshold:
        return ""
    return (f"; its fastest iteration moved {pct(f.ratio)}, within the {pct(f.parallel_bound)} that fewer cores"
            " explain for a session of several threads: one intra-op thread (--aaco-intra-op-threads=1) is"
            " judged on its fastest iteration under contention")


def stands_on_fastest(v: Verdict, why: str) -> bool:
    """Whether the wall-time regression of *v*, which *why* (CPU contention, a machine speed change) would
    withhold, stands on the run's fastest iteration (:meth:`FastestIteration.stands
    <pytest_aaco.records.verdict.FastestIteration.stands>`); if so, marks it (``stood``, which makes the
    message lead with it) and adds a note saying why. Never for device time, which decides on its own."""
    f = v.fastest_iteration
    if v.outcome != REGRESSION or f is None or not f.stands(v.threshold):
        return False
    v.fastest_iteration = replace(f, stood=True)
    v.notes.append(f"{why}; waiting for a CPU lengthens the iterations it interrupts, not the fastest, and the"
                   f" {fastest_text(v)}: the regression stands")
    return True


def under_contention(v: Verdict, others_cores: float, limit: float, explained: float | None = None) -> Verdict:
    """Withhold a latency regression measured while other processes kept *others_cores* (> *limit*)
    cores busy, unless it is larger than contention can explain.

    *explained*: the slowdown (ratio) contention caused in the same run (:func:`contention_bound`). When
    the wall-time lower bound the gate compared exceeds it, contention cannot explain the slowdown: the
    regression stands (with a note). So does one whose run's fastest iteration clears the threshold and
    the reference's own change (:func:`stands_on_fastest`). Otherwise, or when *explained* is None, the verdict becomes
    inconclusive and the item is ``not judged`` (a memory regression, or ``--aaco-strict-inconclusive``
    / ``--aaco-fail-blind``, still fails). In the verdict-quality study withholding turned 14 of 160
    unchanged-model false alarms on a contended 2-core machine into 4 (studies/RESULTS.md). For stored
    baselines only: paired measurements (side by side) ran both sides under the same load. Returns *v*,
    unfinished."""
    if v.outcome != REGRESSION or others_cores <= limit or DEVICE_TIME in v.regressions:
        return v  # device time is what the GPU did: other processes on the host do not explain it
    lower = None if v.wall is None else v.wall.lower_bound
    if explained is not None and lower is not None and lower > explained:
        v.notes.append(f"other processes used {others_cores:.2f} cores while measuring (limit {limit:g}), which"
                       f" explains a slowdown of at most {pct(explained)}; the wall-time lower bound"
                       f" {pct(lower)} exceeds it, so the regression stands")
        return v
    if stands_on_fastest(v, f"other processes used {others_cores:.2f} cores while measuring (limit {limit:g})"
                         + ("" if explained is None else f", which explains a slowdown of up to {pct(explained)}")):
        return v
    v.outcome = INCONCLUSIVE
    if v.wall is not None and v.wall.outcome == REGRESSION:
        v.set_wall_outcome(INCONCLUSIVE)
    v.confirmed = None
    v.contention = Contention(others_cores, limit, explained)
    v.notes.append(f"other processes used {others_cores:.2f} cores while measuring (limit {limit:g})"
                   + ("" if explained is None else f", which explains a slowdown of up to {pct(explained)}"))
    return v
