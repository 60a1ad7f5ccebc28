"""The warmup and measured rounds of one item on a built InferenceSession (:func:`run_benchmark`), with the
adaptive iterations per round, telemetry, the paired reference workload and the traced device-time blocks.

The timed loop itself (:mod:`pytest_aaco.measure.timedloop`) does nothing but ``perf_counter_ns(); run();
perf_counter_ns()`` into a preallocated int64 array: the bound ``run`` callable
(:func:`pytest_aaco.measure.inference.bind_run`) is built before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.device_time import DeviceRecorder, TraceBudget
from pytest_aaco.measure.inference import MeasureSettings, SessionError, SessionHandle, bind_run, check_placement
from pytest_aaco.measure.results import BenchmarkResult, RoundResult
from pytest_aaco.measure.timedloop import time_iterations, warmup
from pytest_aaco.tracers.base import InProcessTracer

#: adaptive iterations: aim at this much time per round, within these bounds
TARGET_ROUND_S = 0.35
MIN_ITERATIONS, MAX_ITERATIONS = 5, 1000


def adaptive_iterations(warmup_ms: np.ndarray) -> int:
    """Iterations per round so a round takes about :data:`TARGET_ROUND_S` at the warmup median."""
    tail = warmup_ms[len(warmup_ms) // 2:] if warmup_ms.size else np.array([1.0])
    per_iter_s = float(np.median(tail)) / 1000
    return int(np.clip(round(TARGET_ROUND_S / max(per_iter_s, 1e-6)), MIN_ITERATIONS, MAX_ITERATIONS))


def measure_rounds(run: Callable[[], object], rounds: int, iterations: int,
                   after: Callable[[], None] | None = None) -> list[RoundResult]:
    """*rounds* blocks of *iterations* timed runs each (``perf_counter_ns``), as RoundResults in ms.
    *after*, when given, runs after each round, outside its timed window (a traced block)."""
    results = []
    for index in range(rounds):
        start = time.perf_counter_ns()
        lat = time_iterations(run, iterations)
        results.append(RoundResult(index, lat / 1e6, start, time.perf_counter_ns()))
        if after is not None:
            after()
    return results


class PhaseTelemetry(Protocol):
    """What :func:`run_benchmark` runs during the measured rounds (a
    :class:`pytest_aaco.samplers.TelemetrySession`): started, stopped, then its readings as JSON."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def to_dict(self) -> JSONDict: ...


def run_benchmark(handle: SessionHandle, feeds: dict[str, np.ndarray], settings: MeasureSettings,
                  model: str, batch: int, telemetry: PhaseTelemetry | None = None, reference: Any = None,
                  tracer: InProcessTracer | None = None,
                  on_first_run: Callable[[float], None] | None = None) -> BenchmarkResult:
    """Warm up, then measure ``settings.rounds`` rounds on *handle*.

    *telemetry* is an object with ``start()``, ``stop()`` and ``to_dict()`` (a
    TelemetrySession), run during the measured rounds only. With *reference* (a
    :class:`pytest_aaco.measure.reference_workload.Reference`), every round is paired with a reference block
    (:meth:`~pytest_aaco.measure.reference_workload.Reference.measure_alongside`) and the result's ``reference``
    holds that series. With *tracer* (:mod:`pytest_aaco.measure.device_time`), every round (and
    every reference block) is followed by one traced block of :data:`~pytest_aaco.measure.device_time.
    DEVICE_RUNS` runs (fewer for many kernels), outside the timed rounds, while its share of the measuring
    time stays within :data:`~pytest_aaco.measure.device_time.TRACED_SHARE` (:class:`~pytest_aaco.measure.
    device_time.TraceBudget`): the result's ``device`` (and its reference's) hold
    them; a tracer that fails leaves ``device`` None and says why in ``device_note``. The session's
    providers are checked before and after measuring; a fallback raises :class:`SessionError`. The
    compile-cache folder's lock (:attr:`SessionHandle.compile_hold`) is given back after the warmup, whose
    first run compiles a model with symbolic dimensions, and before the measured rounds. *on_first_run* is
    called with the first run's ms as soon as it has finished (the item timeout scales with it).
    """
    try:
        check_placement(handle)
        run = bind_run(handle, feeds, settings.iobinding, settings.device_id)
    except BaseException:
        handle.release_compile_lock()
        raise
    series = None
    recorder: DeviceRecorder | None = None
    try:
        try:  # the compile-cache lock is held until the first run has finished, never in the measured rounds
            first_ms, warm_ms = warmup(run, settings.warmup, on_first=on_first_run)
            handle.settle_cache(first_ms)
        finally:
            handle.release_compile_lock()
        iterations = settings.iterations or adaptive_iterations(warm_ms)
        if telemetry is not None:
            telemetry.start()
        try:
            if reference is None:
                recorder = DeviceRecorder(tracer, run, budget=TraceBudget()) if tracer is not None else None
                start = time.perf_counter_ns()
                rounds = measure_rounds(run, settings.rounds, iterations,
                                        after=recorder.trace if recorder is not None else None)
                if recorder is not None:
                    recorder.measure_ns = time.perf_counter_ns() - start
            else:
                round_s = iterations * float(np.median(warm_ms[len(warm_ms) // 2:])) / 1000 if warm_ms.size else 0.1
                rounds, series, recorder = reference.measure_alongside(run, settings.rounds, iterations, round_s,
                                                                       tracer)
        finally:
            if telemetry is not None:
                telemetry.stop()
    except SessionError:
        raise
    except Exception as exc:
        raise SessionError(f"{model} on {handle.provider.ep_name}: session.run failed: {exc}") from exc
    check_placement(handle)
    return BenchmarkResult(
        model=model,
        provider=handle.provider.short,
        rounds=rounds,
        warmup_iterations=int(warm_ms.size),
        warmup_latencies_ms=warm_ms,
        session_create_ms=handle.create_ms,
        first_run_ms=first_ms,
        providers_used=list(handle.session.get_providers()),
        batch_size=batch,
        iobinding=settings.iobinding,
        telemetry=telemetry.to_dict() if telemetry is not None else {},
        reference=series,
        compile_cache=handle.compile_cache,
        device=recorder.series() if recorder is not None else None,
        device_note=recorder.failed if recorder is not None else None,
    )
