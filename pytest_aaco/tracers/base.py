"""What every kernel tracer shares: the span it yields, the block figures made of spans
(:class:`DeviceBlock`) and the series of blocks one measurement holds (:class:`DeviceSeries`, which
results and baselines store), its one error type, and the protocol (:class:`Tracer`).

Units: timestamps in ns on the tracer's own clock; block figures in ms per model run.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol


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


#: kernel names kept per stored run (the most launched), enough to name what a change added or removed
MAX_STORED_NAMES = 100


@dataclass(frozen=True)
class DeviceSeries:
    """Device time of one measurement: its traced blocks (one after each wall-time block that was
    traced: :class:`pytest_aaco.measure.device_time.TraceBudget` may leave some out, ``skipped``), oldest first.

    ``traced_s``: seconds spent in traced blocks; ``measure_s``: seconds of the whole measuring
    phase, traced blocks included (0 where not known), so ``traced_s / measure_s`` is the tracing
    overhead. Per-run figures are over all traced runs: ``kernel_ms`` (kernel-time sum per run,
    ms), ``busy_ms`` (union of kernel intervals per run, ms), ``kernels`` (per run).
    :attr:`log_means` (ln of each block's kernel time per run, shape ``(blocks,)``) is what the
    history test runs on.
    """

    source: str
    blocks: tuple[DeviceBlock, ...]
    traced_s: float = 0.0
    measure_s: float = 0.0
    #: wall-time blocks left without a traced block (:class:`pytest_aaco.measure.device_time.TraceBudget`)
    skipped: int = 0

    @property
    def runs(self) -> int:
        return sum(b.runs for b in self.blocks)

    def _per_run(self, key: str) -> float:
        return float(sum(getattr(b, key) * b.runs for b in self.blocks) / max(self.runs, 1))

    @property
    def kernel_ms(self) -> float:
        return self._per_run("kernel_ms")

    @property
    def busy_ms(self) -> float:
        return self._per_run("busy_ms")

    @property
    def kernels(self) -> float:
        return self._per_run("kernels")

    @property
    def log_means(self) -> list[float]:
        return [math.log(max(b.kernel_ms, 1e-12)) for b in self.blocks]

    def names_per_run(self) -> dict[str, float]:
        """Kernel name -> launches per run, the :data:`MAX_STORED_NAMES` most launched."""
        total: Counter[str] = Counter()
        for b in self.blocks:
            total.update(b.names)
        runs = max(self.runs, 1)
        return {name: round(count / runs, 3) for name, count in total.most_common(MAX_STORED_NAMES)}

    def to_dict(self) -> dict[str, Any]:
        """As stored in baselines and bundles: ``source``, ``blocks``, ``runs`` (the first block's runs;
        later blocks may have fewer, :data:`pytest_aaco.measure.device_time.RECORDS_PER_BLOCK`),
        ``kernel_ms``, ``busy_ms``, ``kernels`` (per run), ``log_means`` (per block),
        ``busy_log_means`` (ln busy ms per run, per block), ``kernel_names`` (launches per run),
        ``traced_s`` and ``measure_s``; ``skipped`` (wall-time blocks left untraced) only when > 0, so
        records without skipped blocks read as before."""
        data = {"source": self.source, "blocks": len(self.blocks), "runs": self.blocks[0].runs if self.blocks else 0,
                "kernel_ms": self.kernel_ms, "busy_ms": self.busy_ms, "kernels": self.kernels,
                "log_means": self.log_means,
                "busy_log_means": [math.log(max(b.busy_ms, 1e-12)) for b in self.blocks],
                "kernel_names": self.names_per_run(), "traced_s": self.traced_s, "measure_s": self.measure_s}
        if self.skipped:
            data["skipped"] = self.skipped
        return data


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
