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
:func:`pytest_aaco.verdict.stats.prediction_interval_test`). The history's variance is moderated towards a
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
import os
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.compile_cache import recorded_compile_ms
from pytest_aaco.measure.inference import SessionError, build_session
from pytest_aaco.measure.inputs import make_inputs
from pytest_aaco.measure.interleave import balanced_orders
from pytest_aaco.measure.ortprofile import ProfileError, read_events
from pytest_aaco.measure.providers import ProviderSpec
from pytest_aaco.measure.registry import ModelSpec
from pytest_aaco.measure.results import FreshSample
from pytest_aaco.options import COLD_SESSIONS, default
from pytest_aaco.records.base import Judgement, Outcome
from pytest_aaco.records.device import COLD_START_METRICS as METRICS
from pytest_aaco.records.device import COLD_START_PHASES as PHASES
from pytest_aaco.verdict.outcome import NO_REGRESSION_ALPHA, fails, judgement_of, outcome_of
from pytest_aaco.verdict.paired import paired_t
from pytest_aaco.verdict.percent import bound_text, pct
from pytest_aaco.verdict.stats import Comparison, VariancePrior, prediction_interval_test

if TYPE_CHECKING:
    import numpy as np

#: a cold-start regression must be at least this much slower (fraction)
DEFAULT_COLD_START_THRESHOLD = default("cold-start-threshold")
#: significance level of the cold-start verdict, split over :data:`METRICS`
COLD_START_ALPHA = 0.01
#: prior sd (fraction) of a run's cold-start minimum from run to run (studies/RESULTS.md)
COLD_RUN_NOISE = 0.10
#: how many runs' worth of evidence that prior carries
COLD_PRIOR_DF = 4.0
#: a cold-start regression must also add at least this many ms (a sub-millisecond first run is timer noise)
COLD_START_SLACK_MS = 5.0
#: side by side, fresh sessions of each side built and not measured before the cycles: the first
#: fresh session of a phase took 1.7x (resnet50, 121 vs 70 ms) and 2.4x (squeezenet) the later
#: ones on this machine, and in one cycle of five that alone moved the paired ratio by 10 to 20%
SIDE_BY_SIDE_DISCARD = 1
#: a compile (the "with compile" figure, :attr:`ColdStart.compile_ms`) fails side by side when the candidate's
#: takes more than this fraction longer than the baseline side's (1.0: twice as long) and at least
#: :data:`COMPILE_SLACK_MS` more. One compile per side is all there is (the cache keeps the program), so the
#: limit is wide: it catches a compiler's 10x regression (ROCm/AMDMIGraphX#5234), not a few per cent.
COMPILE_THRESHOLD = 1.0
COMPILE_SLACK_MS = 1000.0
#: ORT profiler events (``cat: "Session"``) of each phase: the model's parsing (from a file or
#: bytes), and ``InferenceSession::Initialize`` (onnxruntime/core/session/inference_session.cc)
PHASE_EVENTS = {"load_ms": ("model_loading_uri", "model_loading_array"), "init_ms": ("session_initialization",)}


@dataclass
class ColdStart:
    """Cold-start samples of one item, one per fresh InferenceSession (ms).

    ``compiles``: what the EP compiles inside these figures (None for EPs that do not compile);
    ``others_cores``: cores that other processes kept busy on average while they were measured
    (None when unknown). ``load_ms`` and ``init_ms``: the split of each session's creation that
    ORT's own profiler reports (:data:`PHASES`; empty when not read, e.g. in a side worker):
    parsing the model, and ``session_initialization`` (graph optimization, partitioning, and the
    EP compile of compiling EPs for static shapes). Recorded and shown, not gated. ``phase_s``:
    the wall time the whole cold-start phase took (s, both sides when measured side by side):
    what the pass costs an item.

    With a compile cache (``--aaco-compile-cache``, :mod:`pytest_aaco.measure.compile_cache`) the
    fresh sessions of a compiling EP load the program the item's first session compiled: they are the
    "warm cache" figures, and ``compile_cache`` holds each one's ``hit``/``miss``. ``compile_ms`` is the
    "with compile" figure: creation + first run of the session that compiled this side's program (ms,
    from the record it left in the cache folder; None without a cache).

    ``reused_sessions``: how many of the samples (the first ones) were not built by the cold-start pass
    but taken from the fresh sessions the side-by-side latency measurement opened
    (:func:`compare_cold_start`'s *reused*); 0 when all were built for the cold start.
    """

    session_create_ms: list[float]
    first_run_ms: list[float]
    compiles: str | None = None
    others_cores: float | None = None
    load_ms: list[float] = field(default_factory=list)
    init_ms: list[float] = field(default_factory=list)
    phase_s: float | None = None
    compile_cache: list[str] = field(default_factory=list)
    compile_ms: float | None = None
    reused_sessions: int = 0

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

    def to_dict(self) -> JSONDict:
        """JSON-ready: the samples (ms, 3 decimals), their medians, ``compiles``."""
        data: JSONDict = {key: [round(v, 3) for v in self.values(key)] for key, _ in METRICS}
        data.update({f"median_{key}": round(self.median(key), 3) for key, _ in METRICS})
        data.update({f"min_{key}": round(self.minimum(key), 3) for key, _ in METRICS})
        data["compiles"] = self.compiles
        data["others_cores"] = None if self.others_cores is None else round(self.others_cores, 3)
        data["phase_s"] = None if self.phase_s is None else round(self.phase_s, 3)
        for key, _ in PHASES:
            if getattr(self, key):
                data[key] = [round(v, 3) for v in getattr(self, key)]
                data[f"min_{key}"] = round(min(getattr(self, key)), 3)
        if self.compile_cache:
            data["compile_cache"] = list(self.compile_cache)
        if self.compile_ms is not None:
            data["compile_ms"] = round(self.compile_ms, 3)
        if self.reused_sessions:
            data["reused_sessions"] = self.reused_sessions
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
        phases = {key: [float(v) for v in data.get(key) or [] if isinstance(v, (int, float))
                        and not isinstance(v, bool)] for key, _ in PHASES}
        phase_s = data.get("phase_s")
        compile_ms = data.get("compile_ms")
        reused = data.get("reused_sessions")
        return cls(values["session_create_ms"], values["first_run_ms"], data.get("compiles"),
                   float(others) if isinstance(others, (int, float)) else None, **phases,
                   phase_s=float(phase_s) if isinstance(phase_s, (int, float)) else None,
                   compile_cache=[str(v) for v in data.get("compile_cache") or [] if isinstance(v, str)],
                   compile_ms=float(compile_ms) if isinstance(compile_ms, (int, float)) else None,
                   reused_sessions=reused if isinstance(reused, int) and not isinstance(reused, bool) and reused > 0
                   else 0)


def creation_phases(events: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """``{"load_ms": ..., "init_ms": ...}`` (ms) from the events of an ORT profile that covered a
    session's creation (:func:`pytest_aaco.measure.ortprofile.event_list`): the summed ``dur`` (µs) of its
    :data:`PHASE_EVENTS`, None for a phase without an event.

    ORT emits no event of its own for an EP's compile (onnxruntime 1.32: the Session events of a
    creation are ``model_loading_*`` and ``session_initialization``); compiling EPs compile inside
    ``session_initialization`` (graph partitioning calls the EP's Compile) for static shapes, and
    at the first run for shapes known only then. What is left of the creation besides both phases
    is the Python layer and the EPs' own setup (a CUDA context, for instance).
    """
    found: dict[str, float | None] = {}
    for key, names in PHASE_EVENTS.items():
        durations = [float(e.get("dur", 0)) for e in events if e.get("cat") == "Session" and e.get("name") in names
                     and isinstance(e.get("dur"), (int, float))]
        found[key] = sum(durations) / 1000.0 if durations else None
    return found


class FreshSessions(Protocol):
    """One side of a cold-start measurement: ``fresh()`` builds a new InferenceSession, runs it
    once, drops it and returns the :class:`FreshSample`; it raises
    :class:`~pytest_aaco.measure.inference.SessionError` when the session cannot be built or run (a side in
    another interpreter may also raise :class:`~pytest_aaco.sidebyside.worker_client.WorkerError`)."""

    def fresh(self) -> FreshSample: ...


@dataclass
class LocalSessions:
    """Fresh sessions of *model_path* on *provider* (a ProviderSpec) in this process.

    ``feeds``: the inputs of the first run; None makes them from the first session's inputs and
    *spec* (``name``, ``dims``, ``inputs``: the registry entry, seeded, the same values every time).
    ``config_entries`` go to ``SessionOptions.add_session_config_entry``.
    """

    model_path: Path
    provider: ProviderSpec
    feeds: Mapping[str, np.ndarray] | None = None
    spec: ModelSpec | None = None
    device_id: int = 0
    intra_op_threads: int = 0
    config_entries: dict[str, str] = field(default_factory=dict)

    def fresh(self) -> FreshSample:
        """Build, run once and drop one session (garbage collected before returning). ORT's profiler
        is on during the creation only (stopped before the first run), for :func:`creation_phases`."""
        with tempfile.TemporaryDirectory(prefix="aaco-cold-") as tmp:
            handle = build_session(self.model_path, self.provider, self.device_id, self.intra_op_threads,
                                   profile_prefix=os.path.join(tmp, "creation"), config_entries=self.config_entries)
            try:
                phases = creation_phases(read_events(handle.session.end_profiling()))
            except ProfileError:
                phases = {}
        if self.feeds is None:
            spec = self.spec
            self.feeds = make_inputs(self.model_path.stem if spec is None else spec.name, handle.session.get_inputs(),
                                     {} if spec is None else dict(spec.dims), {} if spec is None else dict(spec.inputs))
        feeds = dict(self.feeds)
        try:  # the compile-cache lock, held since creation, is given back once the first run has finished
            start = time.perf_counter_ns()
            handle.session.run(None, feeds)
            first_ms = (time.perf_counter_ns() - start) / 1e6
        except Exception as exc:
            handle.release_compile_lock()
            raise SessionError(f"first run of a fresh session of {self.model_path.name} failed: {exc}") from exc
        create_ms, status = handle.create_ms, handle.settle_cache(first_ms)
        compile_ms = recorded_compile_ms(handle.cache.folder)
        del handle
        gc.collect()
        return FreshSample(create_ms, first_ms, phases.get("load_ms"), phases.get("init_ms"), status, compile_ms)


def compiles_for(provider: ProviderSpec) -> str | None:
    """What *provider*'s EP compiles while a session is created or first run, so inside the cold-start
    figures (:attr:`pytest_aaco.eps.CompileCache.what`), or None."""
    compile_cache = eps.get(getattr(provider, "short", "")).compile
    return compile_cache.what if compile_cache else None


def _samples(found: Sequence[FreshSample], compiles: str | None, before: tuple[float, float, float],
             reused: int = 0) -> ColdStart:
    """The :class:`ColdStart` of *found*, with the contention and wall time since the reading *before*;
    *reused*: how many of *found* (the first ones) came from the side-by-side measurement."""
    after = _cpu_reading()
    phases = {key: [v for v in (getattr(s, key) for s in found) if v is not None] for key, _ in PHASES}
    compiled = [s.compile_ms for s in found if getattr(s, "compile_ms", None) is not None]
    return ColdStart([s.create_ms for s in found], [s.first_run_ms for s in found], compiles,
                     others_cores(before, after), **{k: v if len(v) == len(found) else [] for k, v in phases.items()},
                     phase_s=after[0] - before[0],
                     compile_cache=[str(getattr(s, "compile_cache", None)) for s in found
                                    if getattr(s, "compile_cache", None) is not None],
                     compile_ms=compiled[-1] if compiled else None, reused_sessions=reused)


def measure_cold_start(model_path: str | Path, provider: ProviderSpec, feeds: Mapping[str, np.ndarray], *,
                       device_id: int = 0,
                       intra_op_threads: int = 0, sessions: int = COLD_SESSIONS) -> ColdStart:
    """Build *sessions* fresh InferenceSessions of *model_path* on *provider* (a ProviderSpec), one
    at a time, timing each creation and its first ``run(None, feeds)`` (ms, ``perf_counter_ns``).

    Each session is dropped (and garbage collected) before the next is built, so at most one
    extra session is alive beside the item's own. ``others_cores`` is read from psutil's CPU times
    around the whole phase (:func:`others_cores`). Raises :class:`~pytest_aaco.measure.inference.SessionError`
    when a session cannot be built or run.
    """
    side = LocalSessions(Path(model_path), provider, feeds, device_id=device_id, intra_op_threads=intra_op_threads)
    before = _cpu_reading()
    found = [side.fresh() for _ in range(max(1, sessions))]
    return _samples(found, compiles_for(provider), before)


def measure_side_by_side(baseline: FreshSessions, candidate: FreshSessions, *, cycles: int = COLD_SESSIONS,
                         seed: int = 0, compiles: str | None = None, discard: int = SIDE_BY_SIDE_DISCARD,
                         reused: tuple[Sequence[FreshSample], Sequence[FreshSample]] = ((), ()),
                         ) -> tuple[ColdStart, ColdStart]:
    """Fresh sessions of two sides alternating: ``(baseline, candidate)`` samples, the i-th of
    each from the same cycle. First *discard* fresh sessions of each side are built and not
    measured (:data:`SIDE_BY_SIDE_DISCARD`).

    *reused*: ``(baseline, candidate)`` samples of fresh sessions already built in pairs elsewhere
    (the side-by-side latency measurement's, the i-th of each from one pair): the first *cycles* of
    them are taken as the first cycles, and only the cycles still missing are built (none when
    there are enough; *discard* is then up to the caller). ``ColdStart.reused_sessions`` counts them.

    Each cycle builds one fresh session of each side in the order :func:`pytest_aaco.measure.interleave.balanced_orders`
    gives (AB and BA equally often, shuffled with *seed*), so a neighbour's load or a slow phase of the
    machine hits both sides of a cycle: the paired ln ratios of a cycle cancel what a history of
    separate runs cannot (studies/RESULTS.md; Abedi & Brecht, ICPE 2017). *compiles*: what the
    EP compiles inside these figures (:func:`compiles_for`). Raises what the sides raise.
    """
    import numpy as np

    sides = {"A": baseline, "B": candidate}
    cycles = max(1, cycles)
    taken = min(len(reused[0]), len(reused[1]), cycles)
    got: dict[str, list[FreshSample]] = {"A": list(reused[0][:taken]), "B": list(reused[1][:taken])}
    before = _cpu_reading()
    if taken < cycles:
        for _ in range(discard):
            baseline.fresh()
            candidate.fresh()
        for order in balanced_orders(("A", "B"), cycles - taken, np.random.default_rng(seed)):
            for side in order:
                got[side].append(sides[side].fresh())
    return _samples(got["A"], compiles, before, taken), _samples(got["B"], compiles, before, taken)


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
    ``improvement`` or ``no-baseline`` (the worst over :data:`METRICS`), per tested metric its
    :class:`~pytest_aaco.records.base.Judgement` (``judgements``: ratio, bounds, p, level, MDE, threshold,
    outcome), per metric its figures (``metrics``: ``current_ms`` and ``baseline_ms`` in ms, the fastest
    sessions' ratio, the geometric means of a paired comparison, ``withheld``, an ``error``; the
    "with compile" figure's own rule), and the message. ``method``: ``history`` (against the stored
    baseline's earlier runs, ``baseline_runs`` of them) or ``side-by-side`` (against the baseline side ``ref``, over
    ``cycles`` paired fresh sessions; ``confirmed``: None without a confirmation look)."""

    outcome: Outcome
    message: str
    threshold: float
    level: float
    metrics: dict[str, JSONDict] = field(default_factory=dict)
    judgements: dict[str, Judgement] = field(default_factory=dict)
    baseline_runs: int = 0
    method: str = "history"
    ref: str | None = None
    cycles: int = 0
    confirmed: bool | None = None

    @property
    def regressed_besides(self) -> bool:
        """Always False: the cold start has no memory or p99 figure besides its outcome."""
        return False

    @property
    def fails(self) -> bool:
        """The cold start fails the item (:func:`pytest_aaco.verdict.outcome.fails`, no opt-in: only a regression)."""
        return fails(self)

    def to_dict(self) -> JSONDict:
        data: JSONDict = {"outcome": str(self.outcome), "message": self.message, "threshold": self.threshold,
                "level": self.level, "baseline_runs": self.baseline_runs, "fails": self.fails, "method": self.method,
                "metrics": {k: {**(self.judgements[k].to_dict() if k in self.judgements else {}), **v}
                            for k, v in self.metrics.items()}}
        if self.method == SIDE_BY_SIDE:
            data.update(ref=self.ref, cycles=self.cycles, confirmed=self.confirmed)
        return data


#: ``ColdStartVerdict.method`` of a comparison with the baseline side
SIDE_BY_SIDE = "side-by-side"
#: how bad an outcome is, for the item's worst over :data:`METRICS`
_RANK = {Outcome.REGRESSION: 3, Outcome.INCONCLUSIVE: 2, Outcome.IMPROVEMENT: 1, Outcome.NO_REGRESSION: 0}
_HEAD = {Outcome.REGRESSION: "COLD START REGRESSION", Outcome.INCONCLUSIVE: "cold start inconclusive",
         Outcome.IMPROVEMENT: "cold start improved", Outcome.NO_REGRESSION: "cold start: no regression"}


@dataclass
class _Judging:
    """The per-metric decisions of one cold-start verdict, gathered into its outcome and message:
    ``judgements`` of the tested metrics (:func:`pytest_aaco.verdict.outcome.judgement_of`), ``figures``
    beside them (ms), the message ``parts`` and the ``worst`` outcome."""

    threshold: float
    level: float
    slack_ms: float
    figures: dict[str, JSONDict] = field(default_factory=dict)
    judgements: dict[str, Judgement] = field(default_factory=dict)
    parts: list[str] = field(default_factory=list)
    worst: Outcome = Outcome.NO_REGRESSION

    def outcome(self, key: str) -> Outcome | None:
        """*key*'s outcome: its judgement's, else its figures' (the "with compile" rule, an error)."""
        if key in self.judgements:
            return self.judgements[key].outcome
        word = self.figures.get(key, {}).get("outcome")
        return None if word is None else Outcome.parse(word, Outcome.INCONCLUSIVE)

    def failed(self, key: str, words: str, exc: ValueError) -> None:
        """*key* could not be tested (too few or bad samples): inconclusive, with the reason."""
        self.figures[key] = {"outcome": str(Outcome.INCONCLUSIVE), "error": str(exc)}
        self.parts.append(f"{words}: {exc}")
        self.worst = max(self.worst, Outcome.INCONCLUSIVE, key=_RANK.__getitem__)

    def judge(self, key: str, words: str, comp: Comparison, current_ms: float, baseline_ms: float, vs: str = "",
              floor_ratio: float | None = None, geomeans: tuple[float, float] | None = None) -> None:
        """Decide *key* on *comp* (a :class:`~pytest_aaco.verdict.stats.Comparison`) with
        :func:`pytest_aaco.verdict.outcome.outcome_of`; a regression that adds less than ``slack_ms`` (ms,
        *current_ms* - *baseline_ms*) is no regression; with *floor_ratio* (the fastest sessions'
        ratio) a regression whose fastest sessions differ by less than the threshold is inconclusive.
        *geomeans*: ``(candidate, baseline)`` geometric means (ms) of a paired comparison, whose ratio
        *comp*'s is: the message prints them beside its per cent, and the fastest beside theirs."""
        outcome = outcome_of(comp, self.threshold, self.level)
        lo, hi = comp.ci(0.95)
        # the interval printed is the one-sided bound the rule compared, with its side
        bound = bound_text(comp.ratio, comp.lower(self.level), comp.upper(max(self.level, NO_REGRESSION_ALPHA)),
                           self.threshold)
        note = ""
        if outcome == Outcome.REGRESSION and current_ms - baseline_ms < self.slack_ms:
            outcome, note = Outcome.NO_REGRESSION, f", under the {self.slack_ms:g} ms that count"
        elif outcome == Outcome.REGRESSION and floor_ratio is not None and floor_ratio - 1 < self.threshold:
            outcome = Outcome.INCONCLUSIVE
            note = f"; the fastest sessions differ by only {pct(floor_ratio, 0)}"
        series = "paired" if geomeans is not None else "fastest session"
        self.judgements[key] = judgement_of(key, comp, self.threshold, self.level, series=series, ci=(lo, hi),
                                            outcome=outcome, reason=note.lstrip(",; "))
        self.figures[key] = {"current_ms": current_ms, "baseline_ms": baseline_ms}
        if floor_ratio is not None:
            self.figures[key]["fastest_ratio"] = floor_ratio
        if geomeans is not None:  # every per cent beside the means it is the ratio of
            self.figures[key].update(geomean_current_ms=geomeans[0], geomean_baseline_ms=geomeans[1])
            self.parts.append(f"{words} geometric mean {geomeans[0]:.4g} ms vs {geomeans[1]:.4g} ms{vs}"
                              f" ({pct(comp.ratio, 0)}, {bound}, p={comp.p_slower:.2g}{note});"
                              f" fastest {current_ms:.4g} ms vs {baseline_ms:.4g} ms"
                              f" ({pct(current_ms / baseline_ms, 0)})")
        else:
            self.parts.append(f"{words} {current_ms:.1f} ms vs {baseline_ms:.1f} ms{vs} ({pct(comp.ratio, 0)}, {bound},"
                              f" p={comp.p_slower:.2g}{note})")
        self.worst = max(self.worst, outcome, key=_RANK.__getitem__)

    def compile(self, current_ms: float, baseline_ms: float, vs: str) -> None:
        """Judge the "with compile" figure: a regression when *current_ms* exceeds *baseline_ms* (ms)
        by more than :data:`COMPILE_THRESHOLD` and :data:`COMPILE_SLACK_MS`, an improvement for the reverse."""
        ratio = current_ms / baseline_ms
        if ratio - 1 > COMPILE_THRESHOLD and current_ms - baseline_ms >= COMPILE_SLACK_MS:
            outcome = Outcome.REGRESSION
        elif 1 / ratio - 1 > COMPILE_THRESHOLD and baseline_ms - current_ms >= COMPILE_SLACK_MS:
            outcome = Outcome.IMPROVEMENT
        else:
            outcome = Outcome.NO_REGRESSION
        self.figures["compile_ms"] = {"outcome": str(outcome), "ratio": ratio, "current_ms": current_ms,
                                      "baseline_ms": baseline_ms, "limit_ratio": 1 + COMPILE_THRESHOLD}
        self.parts.append(f"compile (session creation + first run of the session that compiled the program)"
                          f" {current_ms / 1000:.1f} s vs {baseline_ms / 1000:.1f} s{vs} ({ratio:.2f}x, limit"
                          f" {1 + COMPILE_THRESHOLD:g}x)")
        self.worst = max(self.worst, outcome, key=_RANK.__getitem__)

    def split(self, current: ColdStart, baseline_phases: Mapping[str, float]) -> None:
        """Add ORT's split of the fastest session creation (:data:`PHASES`, ms) against
        *baseline_phases* to the session-creation figures, and to the message when it regressed."""
        figures = self.figures.get("session_create_ms") if "session_create_ms" in self.judgements else None
        split = {key: {"current_ms": min(getattr(current, key)), "baseline_ms": float(baseline_phases[key])}
                 for key, _ in PHASES if getattr(current, key) and key in baseline_phases}
        if figures is None or not split:
            return
        figures["phases"] = split
        if self.outcome("session_create_ms") == Outcome.REGRESSION:
            self.parts.append("session creation split by ORT's profiler: " + ", ".join(
                f"{words} {split[key]['current_ms']:.1f} ms vs {split[key]['baseline_ms']:.1f} ms"
                for key, words in PHASES if key in split))

    def verdict(self, label: str, current: ColdStart, max_contention: float | None, how: str,
                **fields: Any) -> ColdStartVerdict:
        """The verdict: *how* says what was compared; a regression measured while other processes
        kept more than *max_contention* cores busy is withheld as inconclusive."""
        worst = self.worst
        withheld = (worst == Outcome.REGRESSION and max_contention is not None and current.others_cores is not None
                    and current.others_cores > max_contention)
        if withheld:  # no table may call a withheld figure a regression
            worst = Outcome.INCONCLUSIVE
            for key, judged in list(self.judgements.items()):
                if judged.outcome == Outcome.REGRESSION:
                    self.judgements[key] = replace(judged, outcome=Outcome.INCONCLUSIVE)
                    self.figures[key]["withheld"] = "CPU contention"
            for figures in self.figures.values():
                if figures.get("outcome") == str(Outcome.REGRESSION):
                    figures.update(outcome=str(Outcome.INCONCLUSIVE), withheld="CPU contention")
        grown = [words for key, words in (*METRICS, ("compile_ms", "compile"))
                 if self.outcome(key) == Outcome.REGRESSION]
        text = f"{_HEAD[worst]} {label}" + (f" ({' and '.join(grown)})" if grown else "") + ": " + "; ".join(self.parts)
        if withheld:
            text += (f"; not failed: other processes kept {current.others_cores:.2f} cores busy while it was measured"
                     f" (CPU contention, limit {max_contention:g})")
        text += f"; {how}, threshold {self.threshold:.0%}, level {self.level:.2g} per figure"
        if current.compiles:
            text += f"; these figures include {current.compiles}"
        return ColdStartVerdict(worst, text, self.threshold, self.level, self.figures, self.judgements, **fields)


def cold_start_verdict(current: ColdStart, history: Sequence[ColdStart], label: str, *,
                       threshold: float = DEFAULT_COLD_START_THRESHOLD, alpha: float = COLD_START_ALPHA,
                       run_noise: float = COLD_RUN_NOISE, prior_df: float = COLD_PRIOR_DF,
                       slack_ms: float = COLD_START_SLACK_MS, max_contention: float | None = None) -> ColdStartVerdict:
    """Judge *current* against the cold starts of earlier runs (*history*, oldest first).

    Per metric of :data:`METRICS`: :func:`pytest_aaco.verdict.stats.prediction_interval_test` of
    ln(min of this run's samples) against ln(min) of each earlier run, the history's variance
    moderated towards the prior ``(ln(1 + run_noise))²`` with *prior_df* df; then
    :func:`pytest_aaco.verdict.outcome.outcome_of` at level ``alpha / 2`` and *threshold* (fractions); a
    regression that adds less than *slack_ms* (ms) is no regression. The
    item's outcome is the worst of the two (regression > inconclusive > improvement >
    no-regression). *label* names the item in the message (``resnet50[cpu]``). With
    *max_contention* (cores), a regression measured while other processes kept more cores busy
    (``current.others_cores``) is withheld as inconclusive, as
    :func:`pytest_aaco.verdict.finish.under_contention` does for latency. Never raises: a metric without
    samples is inconclusive.
    """
    level = alpha / len(METRICS)
    if not history:
        return ColdStartVerdict(Outcome.NO_BASELINE, f"cold start {label}: no cold-start history yet; it is"
                                                     " recorded with --aaco-save-baseline", threshold, level)
    prior = VariancePrior(math.log1p(run_noise) ** 2, prior_df, 0)
    judgement = _Judging(threshold, level, slack_ms)
    for key, words in METRICS:
        now = current.minimum(key)
        try:
            comp = prediction_interval_test([math.log(now)], [math.log(run.minimum(key)) for run in history], prior)
        except ValueError as exc:
            judgement.failed(key, words, exc)
            continue
        judgement.judge(key, words, comp, now, float(now / comp.ratio))
    past = {key: [min(getattr(run, key)) for run in history if getattr(run, key)] for key, _ in PHASES}
    judgement.split(current, {key: statistics.median(v) for key, v in past.items() if v})
    how = f"fastest of {len(current.session_create_ms)} fresh sessions vs {len(history)} earlier run(s)"
    return judgement.verdict(label, current, max_contention, how, baseline_runs=len(history))


def side_by_side_verdict(baseline: ColdStart, candidate: ColdStart, label: str, ref: str, *,
                         threshold: float = DEFAULT_COLD_START_THRESHOLD, alpha: float = COLD_START_ALPHA,
                         slack_ms: float = COLD_START_SLACK_MS) -> ColdStartVerdict:
    """Judge *candidate* against *baseline*, fresh sessions measured alternately
    (:func:`measure_side_by_side`: the i-th sample of each side from the same cycle).

    Per metric of :data:`METRICS`: the one-sided paired t-test on the cycles'
    ``ln(candidate ms) - ln(baseline ms)`` (:func:`pytest_aaco.verdict.paired.paired_t`; Student 1908),
    then :func:`pytest_aaco.verdict.outcome.outcome_of` at level ``alpha / 2`` and *threshold* (fractions).
    Two guards keep an unchanged pair from failing on a loaded machine: a regression must add at
    least *slack_ms* (ms, between the sides' fastest sessions), and the sides' fastest sessions must
    also differ by at least the threshold (contention only adds time, so the fastest session is
    what a neighbour disturbs least: Chen & Revels, HPEC 2016); otherwise no regression or
    inconclusive. A regression is never withheld for CPU contention (``--aaco-max-contention``): both
    sides ran alternately under the same load, which the paired ratio cancels; on a 2-core runner
    with 1.63 cores of other load, session creation at 62 vs 729 ms (p=6e-7) was withheld before.
    *ref* names the baseline side in the message.
    With a compile cache, the fresh sessions are "warm cache" figures, and the sides' "with compile"
    figures (:attr:`ColdStart.compile_ms`) are judged on their own (:data:`COMPILE_THRESHOLD`).
    Never raises: fewer than 2 cycles make the metric inconclusive.
    """
    level = alpha / len(METRICS)
    judgement = _Judging(threshold, level, slack_ms)
    for key, words in METRICS:
        base, cand = baseline.values(key), candidate.values(key)
        try:
            if len(base) != len(cand):
                raise ValueError(f"{len(cand)} candidate vs {len(base)} baseline sessions: not paired by cycle")
            d = [math.log(c) - math.log(b) for b, c in zip(base, cand, strict=True)]
            comp = paired_t([d])
        except ValueError as exc:
            judgement.failed(key, words, exc)
            continue
        fastest_b, fastest_c = baseline.minimum(key), candidate.minimum(key)
        geomeans = (math.exp(statistics.fmean(math.log(c) for c in cand)),
                    math.exp(statistics.fmean(math.log(b) for b in base)))
        judgement.judge(key, words, comp, fastest_c, fastest_b, f" at {ref}", fastest_c / fastest_b, geomeans)
    if baseline.compile_ms and candidate.compile_ms:
        judgement.compile(candidate.compile_ms, baseline.compile_ms, f" at {ref}")
    judgement.split(candidate, {key: min(getattr(baseline, key)) for key, _ in PHASES if getattr(baseline, key)})
    reused = (f" ({candidate.reused_sessions} from the side-by-side measurement)" if candidate.reused_sessions
              else "")
    how = (f"each side's geometric mean and fastest of {len(candidate.session_create_ms)} alternating fresh"
           f" sessions{reused} shown,"
           " ratio paired by cycle")
    return judgement.verdict(label, candidate, None, how, method=SIDE_BY_SIDE, ref=ref,
                             cycles=len(candidate.session_create_ms))


@dataclass
class SideBySideColdStart:
    """Cold start compared side by side: both sides' samples of the deciding measurement, its
    verdict, and the first look's verdict when a regression was measured again (confirmation)."""

    baseline: ColdStart
    candidate: ColdStart
    verdict: ColdStartVerdict
    first: ColdStartVerdict | None = None

    def record(self) -> JSONDict:
        """The item record's ``cold_start``: the candidate's ``ColdStart.to_dict()`` with ``verdict``,
        ``baseline_side`` (the baseline side's samples) and ``first_look`` after a confirmation."""
        data = {**self.candidate.to_dict(), "verdict": self.verdict.to_dict(), "baseline_side": self.baseline.to_dict()}
        if self.first is not None:
            data["first_look"] = self.first.to_dict()
        return data


def compare_cold_start(baseline: FreshSessions, candidate: FreshSessions, label: str, ref: str, *,
                       cycles: int = COLD_SESSIONS, confirm: bool = True, seed: int = 0, compiles: str | None = None,
                       discard: int = SIDE_BY_SIDE_DISCARD, threshold: float = DEFAULT_COLD_START_THRESHOLD,
                       alpha: float = COLD_START_ALPHA, slack_ms: float = COLD_START_SLACK_MS,
                       reused: tuple[Sequence[FreshSample], Sequence[FreshSample]] = ((), ()),
                       fill: tuple[FreshSessions, FreshSessions] | None = None) -> SideBySideColdStart:
    """Measure both sides' cold start alternately (:func:`measure_side_by_side`, *cycles* fresh
    sessions each after *discard* unmeasured ones) and judge it (:func:`side_by_side_verdict`).
    With *confirm*, a regression is measured again on fresh cycles (seed + 1) and fails only when
    the second look is a regression too (intersection-union, as the latency gate confirms);
    otherwise it is inconclusive. Raises what the sides raise.

    *reused*: ``(baseline, candidate)`` creation and first-run samples of the fresh sessions the
    side-by-side latency measurement already opened in this process, paired by session pair. They
    are the first look's first cycles, and the first look builds only the cycles still missing,
    with no discard (the item's own sessions were built earlier in the process), on *fill*
    (``(baseline, candidate)`` sides that build sessions the way the reused ones were built; default
    *baseline* and *candidate*). On the GPU a fresh session costs its creation plus cuDNN's
    algorithm search on the first run (0.3 to 1.1 s on an H100), so this saves most of the pass. A
    confirmation look builds all its *cycles* anew on *baseline* and *candidate*.
    """
    def look(seed_: int, sides: tuple[FreshSessions, FreshSessions], discard_: int,
             reused_: tuple[Sequence[FreshSample], Sequence[FreshSample]]
             ) -> tuple[ColdStart, ColdStart, ColdStartVerdict]:
        base, cand = measure_side_by_side(sides[0], sides[1], cycles=cycles, seed=seed_, compiles=compiles,
                                          discard=discard_, reused=reused_)
        return base, cand, side_by_side_verdict(base, cand, label, ref, threshold=threshold, alpha=alpha,
                                                slack_ms=slack_ms)

    if reused[0] and reused[1]:
        base, cand, verdict = look(seed, fill or (baseline, candidate), 0, reused)
    else:
        base, cand, verdict = look(seed, (baseline, candidate), discard, ((), ()))
    if not (verdict.fails and confirm):
        return SideBySideColdStart(base, cand, verdict)
    first = verdict
    base, cand, verdict = look(seed + 1, (baseline, candidate), discard, ((), ()))
    verdict.confirmed = verdict.fails
    if not verdict.fails:
        verdict.message = (f"{_HEAD[Outcome.INCONCLUSIVE]} {label}: a first look was a regression, fresh sessions"
                           f" did not confirm it; {verdict.message}")
        verdict.outcome = Outcome.INCONCLUSIVE
    return SideBySideColdStart(base, cand, verdict, first)
