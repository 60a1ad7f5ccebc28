"""Cold start: session creation and first run over repeated fresh InferenceSessions, gated on their own.

What a service pays before its first answer is the InferenceSession's creation (graph
optimisation, constant folding, and for compiling EPs the MIGraphX compile or the TensorRT engine
build) plus the first ``run()`` (allocations, algorithm search, and the compile where the EP defers
it to the first shapes it sees). :func:`measure_cold_start` builds :data:`COLD_SESSIONS` fresh
sessions one after another and times both for each; the steady-state gate never sees these.

**The test.** Each fresh session is one sample, like a round of the latency gate: its log time is
roughly normal (timings are multiplicative), and samples of one process share that process's
offset (page cache, allocator, CPU frequency), which the next process will not share. So the
verdict reuses the latency gate's rule (:func:`pytest_aaco.verdict.comparison`): Welch's t-test
on log values with a run-to-run term while the history is short, the prediction-interval test on
run means once it is long enough (Welch 1947; Kalibera & Jones, ISMM 2013). A Mann-Whitney test
on 5 vs 5 samples cannot reach p below 0.004 and, like a bootstrap of so few samples (Davison &
Hinkley 1997, ch. 2: poor coverage for n < 10), ignores the between-process offset that makes a
single run's samples look more alike than two runs are. Both metrics are tested at half the level
(Bonferroni), and a regression needs the slowdown to reach the threshold too
(``--aaco-cold-start-threshold``, default :data:`DEFAULT_COLD_START_THRESHOLD`).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: fresh sessions per item
COLD_SESSIONS = 5
#: a cold-start regression must be at least this much slower (fraction)
DEFAULT_COLD_START_THRESHOLD = 0.20
#: significance level of the cold-start verdict, split over :data:`METRICS`
COLD_START_ALPHA = 0.01
#: prior sd (fraction) of the offset a process adds to its cold starts, until the history shows its own;
#: measured in docs/cold-start.md
COLD_RUN_NOISE = 0.10
#: history runs from which the prediction-interval test takes over
COLD_MIN_HISTORY = 5
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


def measure_cold_start(model_path: str | Path, provider: Any, feeds: Mapping[str, Any], *, device_id: int = 0,
                       intra_op_threads: int = 0, sessions: int = COLD_SESSIONS) -> ColdStart:
    """Build *sessions* fresh InferenceSessions of *model_path* on *provider* (a ProviderSpec), one
    at a time, timing each creation and its first ``run(None, feeds)`` (ms, ``perf_counter_ns``).

    Each session is dropped (and garbage collected) before the next is built, so at most one
    extra session is alive beside the item's own. ``others_cores`` is read from psutil's CPU times
    around the whole phase (:func:`others_cores`). Raises :class:`~pytest_aaco.runner.SessionError`
    when a session cannot be built or run.
    """
    from .runner import SessionError, build_session

    creates, firsts = [], []
    before = _cpu_reading()
    for _ in range(max(1, sessions)):
        handle = build_session(Path(model_path), provider, device_id, intra_op_threads)
        try:
            start = time.perf_counter_ns()
            handle.session.run(None, dict(feeds))
            firsts.append((time.perf_counter_ns() - start) / 1e6)
        except Exception as exc:
            raise SessionError(f"first run of a fresh session of {Path(model_path).name} failed: {exc}") from exc
        creates.append(handle.create_ms)
        del handle
        gc.collect()
    compiles = COMPILES.get(getattr(provider, "short", ""))
    return ColdStart(creates, firsts, compiles, others_cores(before, _cpu_reading()))


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

    outcome: str
    message: str
    threshold: float
    level: float
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    baseline_runs: int = 0

    @property
    def fails(self) -> bool:
        from .verdict import REGRESSION

        return self.outcome == REGRESSION

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "message": self.message, "threshold": self.threshold, "level": self.level,
                "baseline_runs": self.baseline_runs, "fails": self.fails,
                "metrics": {k: dict(v) for k, v in self.metrics.items()}}


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f}%"


def cold_start_verdict(current: ColdStart, history: Sequence[ColdStart], label: str, *,
                       threshold: float = DEFAULT_COLD_START_THRESHOLD, alpha: float = COLD_START_ALPHA,
                       run_noise: float = COLD_RUN_NOISE, min_history: int = COLD_MIN_HISTORY,
                       max_contention: float | None = None) -> ColdStartVerdict:
    """Judge *current* against the cold starts of earlier runs (*history*, oldest first).

    Per metric of :data:`METRICS`: :func:`pytest_aaco.verdict.comparison` on ln(ms) samples (Welch
    with a run-to-run term of sd ``ln(1 + run_noise)`` below *min_history* runs, else the
    prediction-interval test), :func:`pytest_aaco.verdict.classify` at level ``alpha / 2`` and
    *threshold*. The item's outcome is the worst of the two (regression > inconclusive >
    improvement > no-regression). *label* names the item in the message (``resnet50[cpu]``).
    With *max_contention* (cores), a regression measured while other processes kept more cores
    busy (``current.others_cores``) is withheld as inconclusive, as the latency gate does
    (:func:`pytest_aaco.verdict.under_contention`). Never raises: a metric with fewer than 2
    samples on a side is inconclusive.
    """
    from .verdict import IMPROVEMENT, INCONCLUSIVE, NO_BASELINE, NO_REGRESSION, REGRESSION, classify, comparison

    level = alpha / len(METRICS)
    if not history:
        return ColdStartVerdict(NO_BASELINE, f"cold start {label}: no cold-start history yet; it is recorded with"
                                             " --aaco-save-baseline", threshold, level)
    rank = {REGRESSION: 3, INCONCLUSIVE: 2, IMPROVEMENT: 1, NO_REGRESSION: 0}
    figures: dict[str, dict[str, Any]] = {}
    worst, parts = NO_REGRESSION, []
    for key, words in METRICS:
        now = current.values(key)
        past = [[math.log(v) for v in run.values(key)] for run in history]
        baseline_ms = math.exp(sum(sum(r) / len(r) for r in past) / len(past))
        current_ms = math.exp(sum(math.log(v) for v in now) / len(now))
        try:
            comp = comparison([math.log(v) for v in now], past, min_history, run_noise)
            outcome = classify(comp, threshold, level)
            lo, hi = comp.ci(0.95)
            entry = {"outcome": outcome, "ratio": comp.ratio, "ci_low": lo, "ci_high": hi, "p_value": comp.p_slower,
                     "current_ms": current_ms, "baseline_ms": baseline_ms, "method": comp.method}
            parts.append(f"{words} {current_ms:.1f} ms vs {baseline_ms:.1f} ms ({_pct(comp.ratio)}, 95% CI"
                         f" {_pct(lo)} .. {_pct(hi)}, p={comp.p_slower:.2g})")
        except ValueError as exc:
            outcome = INCONCLUSIVE
            entry = {"outcome": outcome, "current_ms": current_ms, "baseline_ms": baseline_ms, "error": str(exc)}
            parts.append(f"{words}: {exc}")
        figures[key] = entry
        worst = max(worst, outcome, key=rank.__getitem__)
    withheld = (worst == REGRESSION and max_contention is not None and current.others_cores is not None
                and current.others_cores > max_contention)
    if withheld:
        worst = INCONCLUSIVE
    head = {REGRESSION: "COLD START REGRESSION", INCONCLUSIVE: "cold start inconclusive",
            IMPROVEMENT: "cold start improved", NO_REGRESSION: "cold start: no regression"}[worst]
    grown = [words for key, words in METRICS if figures[key]["outcome"] == REGRESSION]
    text = f"{head} {label}" + (f" ({' and '.join(grown)})" if grown else "") + ": " + "; ".join(parts)
    if withheld:
        text += (f"; not failed: other processes kept {current.others_cores:.2f} cores busy while it was measured"
                 f" (CPU contention, limit {max_contention:g})")
    text += f"; threshold {threshold:.0%}, level {level:.2g} per figure, {len(history)} baseline run(s)"
    if current.compiles:
        text += f"; these figures include {current.compiles}"
    return ColdStartVerdict(worst, text, threshold, level, figures, len(history))
