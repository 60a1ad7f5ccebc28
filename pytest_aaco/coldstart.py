"""Cold start: session creation and first run over repeated fresh InferenceSessions, gated on their own.

What a service pays before its first answer is the InferenceSession's creation (graph
optimisation, constant folding, and for compiling EPs the MIGraphX compile or the TensorRT engine
build) plus the first ``run()`` (allocations, algorithm search, and the compile where the EP defers
it to the first shapes it sees). :func:`measure_cold_start` builds :data:`COLD_SESSIONS` fresh
sessions one after another and times both for each; the steady-state gate never sees these.

**The test.** Contention only ever adds time to a fresh session, so each run is summarised by
the minimum over its fresh sessions, the location estimate that noise of that kind disturbs
least (Chen & Revels, "Robust benchmarking in noisy environments", HPEC 2016). Runs differ by more
than their sessions do (another process, another moment of the machine), so the unit of the test
is the run, as for the latency gate's long histories: ln(this run's minimum) against the
prediction interval of the earlier runs' ln(minimum) (Hahn & Meeker 1991;
:func:`pytest_aaco.stats.prediction_interval_test`). The history's variance is moderated towards a
prior of :data:`COLD_RUN_NOISE` with :data:`COLD_PRIOR_DF` degrees of freedom (Smyth 2004), so
one or two earlier runs already give a usable, wide interval, and a long quiet history a narrow
one. A Mann-Whitney test of 5 against 5 sessions, or a bootstrap of so few samples (Davison &
Hinkley 1997, ch. 2: poor coverage below n = 10), would treat sessions as independent and miss the
run-to-run offset: on this project's shared machine they failed half of the unchanged runs.
Both figures are tested at half the level (Bonferroni), and a regression must also reach the
threshold (``--aaco-cold-start-threshold``, default :data:`DEFAULT_COLD_START_THRESHOLD`); one
measured while other processes kept the CPU busy is withheld, as the latency gate does.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .interleave import balanced_orders
from .measure import SessionError, build_session
from .records import Outcome
from .stats import VariancePrior, prediction_interval_test
from .verdict import outcome_of

#: fresh sessions per item
COLD_SESSIONS = 5
#: a cold-start regression must be at least this much slower (fraction)
DEFAULT_COLD_START_THRESHOLD = 0.20
#: significance level of the cold-start verdict, split over :data:`METRICS`
COLD_START_ALPHA = 0.01
#: prior sd (fraction) of a run's cold-start minimum from run to run (docs/cold-start.md)
COLD_RUN_NOISE = 0.10
#: how many runs' worth of evidence that prior carries
COLD_PRIOR_DF = 4.0
#: a cold-start regression must also add at least this many ms (a sub-millisecond first run is timer noise)
COLD_START_SLACK_MS = 5.0
#: the gated figures, as (key, words for messages)
METRICS = (("session_create_ms", "session creation"), ("first_run_ms", "first run"))
#: what EPs compile while a session is created or first run: those figures include it
COMPILES = {"migraphx": "the MIGraphX compile", "tensorrt": "the TensorRT engine build",
            "openvino": "the OpenVINO compile"}


@dataclass
class ColdStart:
    """Cold-start samples of one item, one per fresh InferenceSession (ms).

    ``compiles``: what the EP compiles inside these figures (None for EPs that do not compile);
    ``others_cores``: cores that other processes kept busy on average while they were measured
    (None when unknown).
    """

    session_create_ms: list[float]
    first_run_ms: list[float]
    compiles: str | None = None
    others_cores: float | None = None

    def values(self, key: str) -> list[float]:
        """The samples of metric *key* (``session_create_ms`` or ``first_run_ms``)."""
        return list(getattr(self, key))

    def minimum(self, key: str) -> float:
        """The smallest sample of *key* (ms): the run's summary in the verdict; NaN without samples."""
        return min(self.values(key), default=math.nan)

    def median(self, key: str) -> float:
        ordered = sorted(self.values(key))
        if not ordered:
            return math.nan
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the samples (ms, 3 decimals), their medians, ``compiles``."""
        data: dict[str, Any] = {key: [round(v, 3) for v in self.values(key)] for key, _ in METRICS}
        data.update({f"median_{key}": round(self.median(key), 3) for key, _ in METRICS})
        data.update({f"min_{key}": round(self.minimum(key), 3) for key, _ in METRICS})
        data["compiles"] = self.compiles
        data["others_cores"] = None if self.others_cores is None else round(self.others_cores, 3)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ColdStart:
        """The inverse of :meth:`to_dict`; raises ValueError naming the key for a bad record."""
        values = {}
        for key, _ in METRICS:
            raw = data.get(key)
            if not isinstance(raw, list) or not raw or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in raw):
                raise ValueError(f"cold-start record: {key!r} must be a non-empty list of positive ms, got {raw!r}")
            values[key] = [float(v) for v in raw]
        others = data.get("others_cores")
        return cls(values["session_create_ms"], values["first_run_ms"], data.get("compiles"),
                   float(others) if isinstance(others, (int, float)) else None)


def _fresh_session(model_path: Path, provider: Any, feeds: Mapping[str, Any], device_id: int,
                   intra_op_threads: int) -> tuple[float, float]:
    """``(creation ms, first run ms)`` of one new InferenceSession, dropped before returning."""
    handle = build_session(model_path, provider, device_id, intra_op_threads)
    try:
        start = time.perf_counter_ns()
        handle.session.run(None, dict(feeds))
        first_ms = (time.perf_counter_ns() - start) / 1e6
    except Exception as exc:
        raise SessionError(f"first run of a fresh session of {model_path.name} failed: {exc}") from exc
    create_ms = handle.create_ms
    del handle
    gc.collect()
    return create_ms, first_ms


def measure_cold_start(model_path: str | Path, provider: Any, feeds: Mapping[str, Any], *, device_id: int = 0,
                       intra_op_threads: int = 0, sessions: int = COLD_SESSIONS) -> ColdStart:
    """Build *sessions* fresh InferenceSessions of *model_path* on *provider* (a ProviderSpec), one
    at a time, timing each creation and its first ``run(None, feeds)`` (ms, ``perf_counter_ns``).

    Each session is dropped (and garbage collected) before the next is built, so at most one
    extra session is alive beside the item's own. ``others_cores`` is read from psutil's CPU times
    around the whole phase (:func:`others_cores`). Raises :class:`~pytest_aaco.measure.SessionError`
    when a session cannot be built or run.
    """
    before = _cpu_reading()
    samples = [_fresh_session(Path(model_path), provider, feeds, device_id, intra_op_threads)
               for _ in range(max(1, sessions))]
    compiles = COMPILES.get(getattr(provider, "short", ""))
    return ColdStart([c for c, _ in samples], [f for _, f in samples], compiles, others_cores(before, _cpu_reading()))


def measure_side_by_side(baseline_path: str | Path, candidate_path: str | Path, provider: Any,
                         feeds: Mapping[str, Any], *, device_id: int = 0, intra_op_threads: int = 0,
                         cycles: int = COLD_SESSIONS, seed: int = 0) -> tuple[ColdStart, ColdStart]:
    """Fresh sessions of two models alternating in one process: ``(baseline, candidate)`` samples,
    the i-th of each from the same cycle.

    Each cycle builds one fresh session of each side in the order :func:`pytest_aaco.interleave.balanced_orders`
    gives (AB and BA equally often, shuffled with *seed*), so a neighbour's load or a slow phase of the
    machine hits both sides of a cycle: the paired ln ratios of a cycle cancel what a history of
    separate runs cannot (DESIGN.md section 3; Abedi & Brecht, ICPE 2017). Raises
    :class:`~pytest_aaco.measure.SessionError` as :func:`measure_cold_start`.
    """
    import numpy as np

    paths = {"A": Path(baseline_path), "B": Path(candidate_path)}
    got: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    before = _cpu_reading()
    for order in balanced_orders(("A", "B"), max(1, cycles), np.random.default_rng(seed)):
        for side in order:
            got[side].append(_fresh_session(paths[side], provider, feeds, device_id, intra_op_threads))
    busy = others_cores(before, _cpu_reading())
    compiles = COMPILES.get(getattr(provider, "short", ""))
    baseline, candidate = (ColdStart([c for c, _ in got[side]], [f for _, f in got[side]], compiles, busy)
                           for side in ("A", "B"))
    return baseline, candidate


def _cpu_reading() -> tuple[float, float, float]:
    """(wall s, host busy CPU s over all cores, this process's CPU s)."""
    import psutil

    host = psutil.cpu_times()
    busy = sum(host) - host.idle - getattr(host, "iowait", 0.0)
    mine = psutil.Process().cpu_times()
    return time.monotonic(), busy, mine.user + mine.system


def others_cores(before: tuple[float, float, float], after: tuple[float, float, float]) -> float | None:
    """Cores other processes kept busy between two :func:`_cpu_reading` s: (host busy CPU s - this
    process's CPU s) / wall s, floored at 0; None for a window under 10 ms."""
    wall = after[0] - before[0]
    if wall < 0.01:
        return None
    return max(((after[1] - before[1]) - (after[2] - before[2])) / wall, 0.0)


@dataclass
class ColdStartVerdict:
    """The cold-start outcome of one item: ``regression``, ``no-regression``, ``inconclusive``,
    ``improvement`` or ``no-baseline`` (the worst over :data:`METRICS`), per metric its figures
    (``ratio``, ``ci_low``, ``ci_high``, ``p_value``, ``current_ms``, ``baseline_ms``, ``outcome``),
    and the message."""

    outcome: Outcome
    message: str
    threshold: float
    level: float
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    baseline_runs: int = 0

    @property
    def fails(self) -> bool:
        return self.outcome == Outcome.REGRESSION

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": str(self.outcome), "message": self.message, "threshold": self.threshold, "level": self.level,
                "baseline_runs": self.baseline_runs, "fails": self.fails,
                "metrics": {k: dict(v) for k, v in self.metrics.items()}}


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f}%"


def cold_start_verdict(current: ColdStart, history: Sequence[ColdStart], label: str, *,
                       threshold: float = DEFAULT_COLD_START_THRESHOLD, alpha: float = COLD_START_ALPHA,
                       run_noise: float = COLD_RUN_NOISE, prior_df: float = COLD_PRIOR_DF,
                       slack_ms: float = COLD_START_SLACK_MS, max_contention: float | None = None) -> ColdStartVerdict:
    """Judge *current* against the cold starts of earlier runs (*history*, oldest first).

    Per metric of :data:`METRICS`: :func:`pytest_aaco.stats.prediction_interval_test` of
    ln(min of this run's samples) against ln(min) of each earlier run, the history's variance
    moderated towards the prior ``(ln(1 + run_noise))²`` with *prior_df* df; then
    :func:`pytest_aaco.verdict.outcome_of` at level ``alpha / 2`` and *threshold* (fractions); a
    regression that adds less than *slack_ms* (ms) is no regression. The
    item's outcome is the worst of the two (regression > inconclusive > improvement >
    no-regression). *label* names the item in the message (``resnet50[cpu]``). With
    *max_contention* (cores), a regression measured while other processes kept more cores busy
    (``current.others_cores``) is withheld as inconclusive, as
    :func:`pytest_aaco.verdict.under_contention` does for latency. Never raises: a metric without
    samples is inconclusive.
    """
    level = alpha / len(METRICS)
    if not history:
        return ColdStartVerdict(Outcome.NO_BASELINE, f"cold start {label}: no cold-start history yet; it is"
                                                     " recorded with --aaco-save-baseline", threshold, level)
    prior = VariancePrior(math.log1p(run_noise) ** 2, prior_df, 0)
    rank = {Outcome.REGRESSION: 3, Outcome.INCONCLUSIVE: 2, Outcome.IMPROVEMENT: 1, Outcome.NO_REGRESSION: 0}
    figures: dict[str, dict[str, Any]] = {}
    worst, parts = Outcome.NO_REGRESSION, []
    for key, words in METRICS:
        now = current.minimum(key)
        past = [run.minimum(key) for run in history]
        try:
            comp = prediction_interval_test([math.log(now)], [math.log(v) for v in past], prior)
        except ValueError as exc:
            figures[key] = {"outcome": str(Outcome.INCONCLUSIVE), "error": str(exc)}
            parts.append(f"{words}: {exc}")
            worst = max(worst, Outcome.INCONCLUSIVE, key=rank.__getitem__)
            continue
        outcome = outcome_of(comp, threshold, level)
        lo, hi = comp.ci(0.95)
        baseline_ms = float(now / comp.ratio)
        small = outcome == Outcome.REGRESSION and now - baseline_ms < slack_ms
        if small:
            outcome = Outcome.NO_REGRESSION
        figures[key] = {"outcome": str(outcome), "ratio": comp.ratio, "ci_low": lo, "ci_high": hi,
                        "p_value": comp.p_slower, "current_ms": now, "baseline_ms": baseline_ms, "method": comp.method}
        under = f", under the {slack_ms:g} ms that count" if small else ""
        parts.append(f"{words} {now:.1f} ms vs {baseline_ms:.1f} ms ({_pct(comp.ratio)}, 95% CI {_pct(lo)} .."
                     f" {_pct(hi)}, p={comp.p_slower:.2g}{under})")
        worst = max(worst, outcome, key=rank.__getitem__)
    withheld = (worst == Outcome.REGRESSION and max_contention is not None and current.others_cores is not None
                and current.others_cores > max_contention)
    if withheld:
        worst = Outcome.INCONCLUSIVE
    head = {Outcome.REGRESSION: "COLD START REGRESSION", Outcome.INCONCLUSIVE: "cold start inconclusive",
            Outcome.IMPROVEMENT: "cold start improved", Outcome.NO_REGRESSION: "cold start: no regression"}[worst]
    grown = [words for key, words in METRICS if figures[key]["outcome"] == str(Outcome.REGRESSION)]
    text = f"{head} {label}" + (f" ({' and '.join(grown)})" if grown else "") + ": " + "; ".join(parts)
    if withheld:
        text += (f"; not failed: other processes kept {current.others_cores:.2f} cores busy while it was measured"
                 f" (CPU contention, limit {max_contention:g})")
    text += (f"; fastest of {len(current.session_create_ms)} fresh sessions vs {len(history)} earlier run(s),"
             f" threshold {threshold:.0%}, level {level:.2g} per figure")
    if current.compiles:
        text += f"; these figures include {current.compiles}"
    return ColdStartVerdict(worst, text, threshold, level, figures, len(history))
