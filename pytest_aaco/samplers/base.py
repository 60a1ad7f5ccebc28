"""The sampler contract: a daemon thread that reads a few numbers every ``interval_s`` seconds.

Each sample is ``{"t_ns": <time.perf_counter_ns()>, **reading}``. ``perf_counter_ns`` is the
clock the latency loop uses (see :class:`pytest_aaco.measure.results.RoundResult`), so a telemetry sample
can be placed against the iterations that ran at the same moment.

A sampler never fails the test item: any exception in :meth:`Sampler.setup` or
:meth:`Sampler._read` is caught and kept as a string in :attr:`Sampler.error`.
"""

from __future__ import annotations

import abc
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat, TypeGuard

#: consecutive failed reads after which a sampler gives up for the rest of the phase
MAX_CONSECUTIVE_FAILURES = 3


class SamplerUnavailable(RuntimeError):
    """Raised by :meth:`Sampler.setup` when the data source is missing; its message becomes
    :attr:`Sampler.error` as it is (other exceptions are prefixed with their type name)."""


def describe_exception(exc: BaseException) -> str:
    """``"TypeName: message"`` for *exc*, or just the type name when the message is empty."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def is_number(value: Any) -> TypeGuard[SupportsFloat]:
    """True for finite ints and floats (numpy scalars included); False for bools, None, NaN, strings."""
    if isinstance(value, bool) or value is None:
        return False
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and not isinstance(value, (str, bytes))


def summarize_samples(samples: Sequence[Mapping[str, object]]) -> dict[str, dict[str, float]]:
    """Per numeric field: ``{"mean", "max", "min", "first", "last", "n"}`` over *samples*.

    ``t_ns`` is skipped; strings, lists, bools and ``None`` readings are skipped (a field whose
    every reading is ``None`` does not appear). ``first``/``last`` are the first and last numeric
    readings in time order, which lets a reader see a trend (memory growth, clock drop) without
    the raw samples.
    """
    columns: dict[str, list[float]] = {}
    for sample in samples:
        for key, value in sample.items():
            if key == "t_ns" or not is_number(value):
                continue
            columns.setdefault(key, []).append(float(value))
    return {
        key: {
            "mean": math.fsum(values) / len(values),
            "max": max(values),
            "min": min(values),
            "first": values[0],
            "last": values[-1],
            "n": float(len(values)),
        }
        for key, values in sorted(columns.items())
    }


class Sampler(abc.ABC):
    """Abstract periodic sampler.

    Subclasses set :attr:`name`, implement :meth:`_read` (one reading, a flat dict of fields)
    and may override :meth:`setup` (open handles; raise when the source is unavailable) and
    :meth:`teardown` (close them).

    Lifecycle: :meth:`start` runs ``setup``, takes one reading at once, then starts a daemon
    thread that reads every ``interval_s`` seconds (``threading.Event.wait`` as the timer, so
    :meth:`stop` wakes it at once); :meth:`stop` stops and joins the thread, takes one last
    reading and runs ``teardown``. A phase shorter than the interval therefore still has two
    samples. ``start`` after ``stop`` starts a new phase and keeps the old samples; call
    :meth:`reset` to drop them.

    Errors never propagate: a failing ``setup`` leaves the sampler idle with :attr:`error` set
    (e.g. ``"no AMD GPU telemetry (amdsmi not installed; rocm-smi not found)"``); a failing read
    is recorded in :attr:`error` and, after :data:`MAX_CONSECUTIVE_FAILURES` failures in a row,
    the thread stops reading.
    """

    name: str = "sampler"

    def __init__(self, interval_s: float = 0.1) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0 seconds, got {interval_s!r}")
        self.interval_s = float(interval_s)
        self.error: str | None = None
        self._samples: list[dict[str, object]] = []
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready = False
        self._failures = 0

    # -- for subclasses -------------------------------------------------------------------
    def setup(self) -> None:
        """Open the data source. Raise (any exception) when it is unavailable."""
        return None

    def teardown(self) -> None:
        """Close the data source. Exceptions are caught by :meth:`stop`."""
        return None

    @abc.abstractmethod
    def _read(self) -> Mapping[str, object]:
        """One reading: a flat dict of field -> number, string, list or None."""

    # -- public API ------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Set up, take one reading, and start the background thread. Never raises."""
        if self.running:
            return
        self._stop_event.clear()
        self._failures = 0
        try:
            self.setup()
        except Exception as exc:  # noqa: BLE001 - a sampler must never fail the test item
            self._ready = False
            if self.error is None:
                self.error = str(exc) if isinstance(exc, SamplerUnavailable) else describe_exception(exc)
            return
        self._ready = True
        self._take()
        self._thread = threading.Thread(target=self._loop, name=f"aaco-sampler-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop and join the thread, take a last reading, tear down. Never raises."""
        thread = self._thread
        self._stop_event.set()
        if thread is not None:
            thread.join(timeout=max(2.0, 10 * self.interval_s))
            self._thread = None
        if not self._ready:
            return
        if self._failures < MAX_CONSECUTIVE_FAILURES:
            self._take()
        self._ready = False
        try:
            self.teardown()
        except Exception as exc:  # noqa: BLE001
            if self.error is None:
                self.error = f"teardown failed: {describe_exception(exc)}"

    def reset(self) -> None:
        """Drop the samples and the error (not while running)."""
        with self._lock:
            self._samples = []
        self.error = None

    def samples(self) -> list[dict[str, object]]:
        """A copy of the samples so far, in time order: ``[{"t_ns": int, field: value, ...}]``."""
        with self._lock:
            return [dict(s) for s in self._samples]

    def summary(self) -> dict[str, dict[str, float]]:
        """``{field: {"mean", "max", "min", "first", "last", "n"}}`` over the numeric fields."""
        return summarize_samples(self.samples())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record: ``{"name", "interval_s", "samples", "summary", "error"}``."""
        samples = self.samples()
        return {
            "name": self.name,
            "interval_s": self.interval_s,
            "samples": samples,
            "summary": summarize_samples(samples),
            "error": self.error,
        }

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- internals -------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop_event.wait(self.interval_s):
            if not self._take():
                if self._failures >= MAX_CONSECUTIVE_FAILURES:
                    return

    def _take(self) -> bool:
        """Read once and append; the timestamp is the midpoint of the read. False on failure."""
        t0 = time.perf_counter_ns()
        try:
            reading = self._read()
        except Exception as exc:  # noqa: BLE001
            self._failures += 1
            message = f"read failed: {describe_exception(exc)}"
            if self._failures >= MAX_CONSECUTIVE_FAILURES:
                message += f" ({self._failures} times in a row; sampling stopped)"
            self.error = message
            return False
        t1 = time.perf_counter_ns()
        self._failures = 0
        sample: dict[str, object] = {"t_ns": (t0 + t1) // 2, **reading}
        with self._lock:
            self._samples.append(sample)
        return True
