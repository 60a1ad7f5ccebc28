"""The timed loop, the warmup and the IO binding: the part of a measurement that runs next to ORT.

This module is self-contained on purpose. It imports only the standard library and numpy (and
onnxruntime lazily), never the rest of pytest-aaco, because it runs in two places:

* in the plugin's process, through :mod:`pytest_aaco.measure.inference` and :mod:`pytest_aaco.measure.interleave`;
* in another interpreter, such as a virtualenv holding an older onnxruntime: the side worker
  (``sideworker.py``, launched as a script by :mod:`pytest_aaco.sidebyside.worker_client`) loads this file by
  its path, in an environment where pytest-aaco, pytest and scipy are not installed.

So both sides of a side-by-side comparison time their iterations with the same code. Keep it
runnable on Python 3.8 (older onnxruntime wheels exist only for older Pythons): no ``match``,
no ``zip(strict=...)``, no ``X | Y`` outside annotations.

Units: latencies in ``time.perf_counter_ns`` nanoseconds (int64) or ms (float64) as named.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnxruntime as ort

#: warmup runs at least this long (s), with at most this many extra iterations
MIN_WARMUP_S, MAX_EXTRA_WARMUP = 0.25, 500


def time_iterations(run: Callable[[], object], count: int) -> np.ndarray:
    """Time *count* calls of *run*: int64 nanoseconds, shape ``(count,)``.

    The loop does nothing but ``perf_counter_ns(); run(); perf_counter_ns()`` into a
    preallocated array.
    """
    lat = np.empty(count, dtype=np.int64)
    clock = time.perf_counter_ns
    for i in range(count):
        t0 = clock()
        run()
        lat[i] = clock() - t0
    return lat


def warmup(run: Callable[[], object], iterations: int, min_s: float = MIN_WARMUP_S,
           on_first: Callable[[float], None] | None = None) -> tuple[float, np.ndarray]:
    """First run (ms) and the warmup latencies (ms): *iterations*, extended to *min_s* seconds
    (default :data:`MIN_WARMUP_S`; 0: no extension) for fast models so caches, allocators and
    clocks settle. *on_first*, when given, is called with the first run's ms as soon as it has
    finished (the item timeout scales with it: :class:`Deadline`)."""
    first_ms = float(time_iterations(run, 1)[0]) / 1e6
    if on_first is not None:
        on_first(first_ms)
    lat = time_iterations(run, iterations)
    spent = lat.sum() / 1e9
    if spent < min_s and lat.size:
        per_iter = max(spent / lat.size, 1e-6)
        extra = int(min(MAX_EXTRA_WARMUP, (min_s - spent) / per_iter))
        if extra > 0:
            lat = np.concatenate([lat, time_iterations(run, extra)])
    return first_ms, lat / 1e6


def bound_runner(session: ort.InferenceSession, feeds: dict[str, np.ndarray], mode: str, device: str,
                 device_id: int, run_options: Any = None) -> Callable[[], object]:
    """A zero-argument callable that runs *session* once on *feeds*, built outside the timed loop.

    ``none``: ``session.run(None, feeds)`` with host arrays (host↔device copies are timed).
    ``inputs``: inputs copied to the ORT device *device* (``cuda``, ``dml``, ``cpu``) once as
    OrtValues; outputs come back to the host. ``all``: inputs and outputs stay on the device. ORT
    allocates the outputs on the first run; from then on the binding reuses those buffers, so
    every later run reads and writes fixed device addresses, as CUDA graphs need and as a deployed
    server does. With a binding, the callable's ``binding`` attribute is the IOBinding (outputs via
    ``binding.copy_outputs_to_cpu()``). Uses ``session.io_binding()`` and ``run_with_iobinding``
    (https://onnxruntime.ai/docs/api/python/api_summary.html#iobinding).

    *run_options* (an ``ort.RunOptions``, e.g. :attr:`RunStop.run_options`) goes with every run, so
    another thread can stop it (:meth:`RunStop.stop`). None: a fresh ``ort.RunOptions()`` made here,
    once. Every run gets a RunOptions object, never None: given None, ORT's Python binding builds a
    default RunOptions inside each run, about 0.9 us per run (onnxruntime 1.32.0, CPU; a 5 us model
    then runs 15-20% slower), so two sides of a comparison must not differ in this (studies/sbs_overhead.py).
    """
    if run_options is None:
        import onnxruntime as ort

        run_options = ort.RunOptions()
    if mode == "none":
        run = session.run
        return lambda: run(None, feeds, run_options)
    import onnxruntime as ort

    binding = session.io_binding()
    for name, array in feeds.items():  # copied to the device once: fixed input addresses
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(array, device, device_id))
    names = [output.name for output in session.get_outputs()]
    for name in names:
        if mode == "all":
            binding.bind_output(name, device, device_id)
        else:
            binding.bind_output(name)
    run_bound = session.run_with_iobinding
    fixed = mode != "all"

    def run_with_binding() -> None:
        nonlocal fixed
        run_bound(binding, run_options)
        if not fixed:  # ``all``, first run only: pin the outputs ORT just allocated
            values = binding.get_outputs()
            for index, name in enumerate(names):  # no zip(strict=): Python 3.8 in the worker
                binding.bind_ortvalue_output(name, values[index])
            fixed = True

    run_with_binding.binding = binding  # type: ignore[attr-defined]  # for reading outputs back
    return run_with_binding


# ------------------------------------------------------------------ stopping a run from another thread

#: the message ORT's executors fail a run with once ``RunOptions.terminate`` is set (onnxruntime
#: core/framework/sequential_executor.cc and utils.cc, checked before each kernel, in subgraphs too)
TERMINATED_TEXT = "Exiting due to terminate flag being set to true"


class RunStop:
    """The ``ort.RunOptions`` every run of one InferenceSession is given, so that another thread can stop
    the run in flight: :meth:`stop` sets ``RunOptions.terminate``, which ONNX Runtime checks before each
    kernel (inside Loop, If and Scan bodies too) and then fails the run with :data:`TERMINATED_TEXT`.

    ``session.run`` releases the GIL while it runs, so a watchdog thread (:class:`Deadline`) or a signal
    watcher can do this while the main thread waits inside ORT. A kernel that is already running is not
    interrupted: a single huge MatMul finishes (measured with onnxruntime 1.32.0 on the CPU: a 6000x6000
    MatMul stopped 0.2 s in still ran its 6 s and returned its output), and the next run then fails before
    its first kernel. *quiet* sets the run's log severity to fatal, so ORT does not also print the stop
    as an error line (the plugin reports it). ``reason`` says why it was stopped (None: not stopped).
    """

    def __init__(self, quiet: bool = True) -> None:
        self.quiet = quiet
        self.reason: str | None = None
        self._options: Any = None
        _register(self)

    @property
    def run_options(self) -> Any:
        """The ``ort.RunOptions`` (made at first use)."""
        if self._options is None:
            import onnxruntime as ort

            options = ort.RunOptions()
            if self.quiet:
                options.log_severity_level = 4
            self._options = options
        return self._options

    def stop(self, reason: str) -> None:
        """Stop the run in flight and every later one until :meth:`reset`; the first *reason* is kept."""
        if self.reason is None:
            self.reason = reason
        self.run_options.terminate = True

    def reset(self) -> None:
        """Let runs go again (before a new measurement on the same session)."""
        self.reason = None
        if self._options is not None:
            self._options.terminate = False


#: every RunStop of this process (weakly held): one item is measured at a time, so a stop (a signal, an
#: item timeout) stops whichever of them is running, its side-by-side sessions included
_ALL: weakref.WeakSet[RunStop] = weakref.WeakSet()
_ALL_LOCK = threading.Lock()


def _register(stop: RunStop) -> None:
    with _ALL_LOCK:
        _ALL.add(stop)


def stop_all(reason: str) -> int:
    """Stop the runs of every :class:`RunStop` of this process now (from any thread); returns how many.
    Each measurement resets its own (:meth:`RunStop.reset`) before it starts."""
    with _ALL_LOCK:
        stops = list(_ALL)
    for stop in stops:
        stop.stop(reason)
    return len(stops)


class Deadline:
    """A watchdog thread that stops the runs (*stop*'s, or with None every :class:`RunStop`'s: :func:`stop_all`)
    once *limit_s* seconds have passed since the block began (``with Deadline(60, "...") as deadline:``); None:
    no limit yet. :meth:`set_limit` moves it (from the same start), e.g. once the first run says how slow the
    model is. ``expired`` says whether it fired. The thread is a daemon and ends with the block."""

    def __init__(self, limit_s: float | None, reason: str, stop: RunStop | None = None) -> None:
        self.stop = stop
        self.limit_s = limit_s
        self.reason = reason
        self.expired = False
        self.started = 0.0
        self._done = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def set_limit(self, limit_s: float | None) -> None:
        with self._cond:
            self.limit_s = limit_s
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while not self._done:
                if self.limit_s is None:
                    self._cond.wait()
                    continue
                remaining = self.started + self.limit_s - time.monotonic()
                if remaining <= 0:
                    self.expired = True
                    if self.stop is not None:
                        self.stop.stop(self.reason)
                    else:
                        stop_all(self.reason)
                    return
                self._cond.wait(remaining)

    def __enter__(self) -> Deadline:
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._watch, name="aaco-item-timeout", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._done = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
