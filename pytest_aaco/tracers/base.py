"""What every kernel tracer shares: the span it yields, the block figures made of spans, its one
error type, and the protocol (:class:`Tracer`).

Units: timestamps in ns on the tracer's own clock; block figures in ms per model run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol


class TracerError(RuntimeError):
    """A tracer could not trace, or its output could not be read or cut into blocks; the message
    names the tracer or file, what went wrong and what to do."""


class TracerMissing(TracerError):
    """The tracer is not installed here (a package or an executable); the message carries the
    tracer's install hint. Under ``--aaco-device-time=auto`` that is a note, not a warning."""


@dataclass(frozen=True)
class KernelSpan:
    """One kernel execution: its (possibly mangled) name, its start and end (ns, the tracer's
    clock), and the device and stream (agent and queue on AMD) as the tracer names them."""

    name: str
    start_ns: int
    end_ns: int
    device: str = "0"
    stream: str = "0"

    @property
    def duration_ns(self) -> int:
        """End minus start (ns); 0 for an inverted span."""
        return max(self.end_ns - self.start_ns, 0)


@dataclass(frozen=True)
class DeviceBlock:
    """What one traced block of *runs* model runs did on the device.

    ``kernel_ms``: summed kernel duration per run (ms); ``busy_ms``: union of kernel intervals per
    run (ms); ``kernels``: kernels per run; ``names``: kernel name -> launches in the whole block;
    ``cycle``: the index of the cycle (the wall-time block) it followed, None where not known (then
    blocks pair by position). Not stored: ``to_dict`` has the figures only.
    """

    runs: int
    kernel_ms: float
    busy_ms: float
    kernels: float
    names: Counter[str] = field(default_factory=Counter)
    cycle: int | None = None

    def to_dict(self) -> dict[str, float]:
        return {"runs": self.runs, "kernel_ms": self.kernel_ms, "busy_ms": self.busy_ms, "kernels": self.kernels}


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Length (ns) of the union of ``[start, end)`` intervals: the time at least one kernel ran.
    Empty and inverted intervals count nothing."""
    total, current_start, current_end = 0, None, None
    for start, end in sorted((s, e) for s, e in intervals if e > s):
        if current_end is None or start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


def block_of(spans: Iterable[KernelSpan], runs: int) -> DeviceBlock:
    """A :class:`DeviceBlock` from the kernels of *runs* runs (shape: any number of spans).
    Raises ValueError for ``runs < 1`` or no kernel at all."""
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    spans = list(spans)
    if not spans:
        raise ValueError("no kernel was recorded")
    total = sum(s.duration_ns for s in spans)
    busy = union_ns((s.start_ns, s.end_ns) for s in spans)
    return DeviceBlock(runs, total / 1e6 / runs, busy / 1e6 / runs, len(spans) / runs, Counter(s.name for s in spans))


class Tracer(Protocol):
    """A vendor's kernel tracer (codspeed's ``Instrument``, coverage.py's tracer ``Core``).

    ``kind``: the :attr:`pytest_aaco.eps.Ep.tracer` value it serves (``cupti``, ``rocprofv3``);
    ``source``: the name stored with its figures; ``install_hint``: what to install when it is
    missing (the one place each tracer says it); ``in_process``: it traces callables in this
    process (:class:`InProcessTracer`), else it traces a child process it launches
    (:func:`pytest_aaco.tracers.rocprof.launch`).
    """

    kind: str
    source: str
    install_hint: str
    in_process: bool


class InProcessTracer(Tracer, Protocol):
    """A :class:`Tracer` that switches on around calls in this process (CUPTI)."""

    def spans(self, run: Callable[[], object], runs: int) -> tuple[list[KernelSpan], int]:
        """The kernels of *runs* calls of *run* and the wall time of those calls (ns, the tracer's
        clock). Raises :class:`TracerError`."""
        ...

    def trace(self, run: Callable[[], object], runs: int) -> DeviceBlock:
        """One traced block: :func:`block_of` the :meth:`spans` of *runs* calls. Raises
        :class:`TracerError`, also when no kernel was recorded."""
        ...
