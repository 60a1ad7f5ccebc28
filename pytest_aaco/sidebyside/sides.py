"""Side by side, the comparison's settings (:class:`CompareSettings`: cycles, looks, session pairs, the
device-time prior) and step 1 of :mod:`pytest_aaco.sidebyside.cycles`: opening each side
(:class:`SideFactory`; in process here, in the side worker
:class:`pytest_aaco.sidebyside.workers.WorkerFactory`) with its own memory footprint."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pytest_aaco.measure.compile_cache import recorded_compile_ms
from pytest_aaco.measure.device_time import TracedSide
from pytest_aaco.measure.inference import (
    MIN_WARMUP_S,
    bind_run,
    build_session,
    check_placement,
    session_options,
    warmup,
)
from pytest_aaco.measure.inputs import make_inputs
from pytest_aaco.measure.interleave import (
    BLOCK_TARGET_S,
    BlockRunner,
    LocalSide,
)
from pytest_aaco.measure.process_memory import rss_mb
from pytest_aaco.measure.providers import ProviderSpec
from pytest_aaco.measure.registry import ModelSpec
from pytest_aaco.options import setting
from pytest_aaco.samplers.gpu_memory import DeviceMemoryProbe, reader_for
from pytest_aaco.tracers.base import InProcessTracer

#: cycles at the first look, cycles added per later look, and the most cycles (4 looks)
FIRST_CYCLES, STEP_CYCLES, MAX_CYCLES = 10, 10, 40
#: cycles at the first look when device time is traced: kernel time per run decides a 2% change in
#: 6 cycles on 2 session pairs (H100, studies/RESULTS.md), and 4 cycles fewer in each of the two
#: measurements of a changed item saved about 5 s of its 25
TRACED_FIRST_CYCLES = 6
#: iterations timed but not measured at the start of each block (spin bleed; studies/RESULTS.md)
DEFAULT_DISCARD = 2
#: seconds the warmup of a fresh session lasts at least when both sides' device time is traced: none
#: beyond ``--aaco-warmup`` iterations. Device time decides there, the sides alternate within each
#: cycle and every block discards its first iterations; the 0.25 s extension
#: (:data:`~pytest_aaco.measure.timedloop.MIN_WARMUP_S`) cost each fresh inception_v1 session on the
#: H100 about 0.23 s, and a changed item opens 8 (docs/gpu.md, "What a changed item's seconds buy")
TRACED_MIN_WARMUP_S = 0.0
#: fresh session pairs per side on device EPs (session-level choices differ), and on CPU EPs
DEVICE_SESSION_PAIRS, CPU_SESSION_PAIRS = 2, 1
#: the most process pairs one side-by-side measurement opens with sides in worker processes
#: (``--aaco-compare-python``): pyperf runs 20 processes by default
MAX_PROCESS_PAIRS = 20
#: prior sd (ln units) of a session pair's offset on device EPs (H100: 1.5 to 3.6% between processes)
DEVICE_SESSION_SD = 0.01
#: prior sd (ln units) of a session pair's offset in device time: CUPTI's kernel time per run of the
#: same ResNet-50 on the H100 was 0.818, 0.817 and 0.818 ms in three processes (sd 0.07%; docs/gpu.md,
#: "Device time side by side"); 0.3% leaves room for a session that picks another cuDNN algorithm
DEVICE_TIME_SESSION_SD = 0.003
#: weight of that prior, in pseudo session pairs (:func:`pytest_aaco.verdict.paired.paired_t`'s
#: ``session_df``). Between processes on the H100, kernel time per run had an sd of 0.07% for
#: resnet50 and densenet121 and 0.37% for inception_v1 (5 stored runs each, docs/gpu.md): cuDNN's
#: exhaustive search picks other algorithms in some sessions. With the prior as a floor only, two
#: inception_v1 pairs that disagreed left the between term one df, and a +7% change needed 16
#: cycles on 3 pairs; weighted as 4 pairs, the prior gives that term 5 df with 2 pairs, while a
#: model whose sessions differ far more than 0.3% still widens the interval as pairs come in
DEVICE_TIME_SESSION_DF = 4.0
#: one-sided level spent over the looks by the no-regression upper bound
#: session configuration entry that stops ORT's intra-op threads spinning after a run
NO_SPINNING = {"session.intra_op.allow_spinning": "0"}
#: the side names in cycles and records
BASELINE, CANDIDATE = "baseline", "candidate"
METHODS = ("t", "wilcoxon")


@dataclass(frozen=True)
class CompareSettings:
    """How one item is compared side by side. Fractions (0.05 = 5%), seconds, MB; the defaults that
    are options' (threshold, budget, memory) come from the option table."""

    threshold: float = setting("threshold")
    device_threshold: float = setting("device-threshold")
    first_cycles: int = FIRST_CYCLES
    traced_first_cycles: int = TRACED_FIRST_CYCLES
    step_cycles: int = STEP_CYCLES
    max_cycles: int = MAX_CYCLES
    budget_s: float = setting("compare-budget")
    block_s: float = BLOCK_TARGET_S
    discard: int = DEFAULT_DISCARD
    session_pairs: int | None = None
    #: fresh worker processes per side at the first look when a side runs in a worker
    #: (``--aaco-compare-processes``' default): a process carries an offset of its own (memory layout, CPU
    #: placement, allocator state) that cycles within one pair of processes cannot average out; a 5 us model's
    #: A/A on one pair read -5.5% `improvement` once in 10 runs on the quiet 2-core VM and 10-40% offsets
    #: under load (studies/sbs_overhead.py, studies/RESULTS.md). Three pairs leave the between-process
    #: term 2 df at the first look; two would leave it 1 (a one-sided t quantile of 6.3 at 5%)
    processes: int = setting("compare-processes")
    session_sd: float | None = None
    method: str = "t"
    confirm: bool = True
    memory_threshold: float = setting("memory-threshold")
    memory_slack_mb: float = setting("memory-slack")
    seed: int = 0
    spinning: bool = False

    def session_config(self) -> dict[str, str]:
        """Session configuration entries for both sides: :data:`NO_SPINNING` unless ``spinning``.

        Measured on the shared 2-core machine (studies/RESULTS.md, "Side by side"): with
        spinning on, the first two iterations of a block that followed the other side's block
        ran 35% slower (median over blocks; 9% after a block of the same side); with
        ``allow_spinning=0``, 4.5% (1.6%). Both sides get the same setting, so the ratio stays a
        like-for-like comparison.
        """
        return {} if self.spinning else dict(NO_SPINNING)

    def pairs_for(self, device: bool, workers: bool = False) -> int:
        """Session pairs to open at the first look: the setting, else 2 on device EPs and 1 on CPU EPs;
        with a side in worker processes (*workers*) at least ``processes``: each pair of sessions is
        then a pair of fresh processes, and the paired test's session level is the process's."""
        pairs = self.session_pairs or (DEVICE_SESSION_PAIRS if device else CPU_SESSION_PAIRS)
        return max(pairs, self.processes) if workers and not self.session_pairs else pairs

    def max_cycles_for(self, first_pairs: int, workers: bool) -> int:
        """The last look's cycles: ``max_cycles``, and with sides in fresh worker processes (*workers*)
        enough later looks of ``step_cycles`` for ``processes`` more pairs each to reach
        :data:`MAX_PROCESS_PAIRS` from *first_pairs* (3 pairs, then 6 more looks of 3: looks at 10 to 70
        cycles). A process's own offset is the larger term there (5-10% between processes of a 5 us CPU model
        or a GPU model), so the looks add processes rather than cycles while the budget allows."""
        if not workers:
            return self.max_cycles
        extra = math.ceil(max(0, MAX_PROCESS_PAIRS - first_pairs) / max(1, self.processes))
        return max(self.max_cycles, self.first_cycles + self.step_cycles * extra)

    def session_sd_for(self, device: bool) -> float:
        """The wall-time prior sd of a session pair's offset (ln units): the setting, else
        :data:`DEVICE_SESSION_SD` on device EPs and 0 on CPU EPs."""
        return self.session_sd if self.session_sd is not None else (DEVICE_SESSION_SD if device else 0.0)

    def device_time_session_sd(self) -> float:
        """The device-time prior sd of a session pair's offset (ln units): the setting, else
        :data:`DEVICE_TIME_SESSION_SD`."""
        return self.session_sd if self.session_sd is not None else DEVICE_TIME_SESSION_SD


@dataclass
class OpenedSide:
    """A side ready to measure: its runner, warmup latency (ms per iteration), own memory
    footprint (MB, None when unknown), session creation and first-run time (ms), and details
    (ORT version, where the memory figure came from)."""

    runner: BlockRunner
    per_iteration_ms: float
    footprint_mb: float | None
    create_ms: float
    first_run_ms: float
    info: dict[str, Any] = field(default_factory=dict)
    close: Callable[[], None] = lambda: None


class SideFactory(Protocol):
    """Opens fresh sessions of one side. ``open(name)`` builds the session, warms it up and returns
    an :class:`OpenedSide` whose runner is called *name*; it raises on failure
    (:class:`~pytest_aaco.measure.inference.SessionError` in process)."""

    def open(self, name: str) -> OpenedSide: ...


class OwnMemory:
    """This process's own memory added between :meth:`start` and :meth:`stop` (MB) and its source:
    on GPU EPs with a device reader (NVML, amdsmi) the :class:`~pytest_aaco.samplers.gpu_memory.
    DeviceMemoryProbe` figure, else the RSS growth (``"rss"``)."""

    def __init__(self, provider: ProviderSpec, device_id: int) -> None:
        self.probe = DeviceMemoryProbe(provider.short, device_id) if reader_for(provider.short) else None
        self.rss_before = 0.0

    def start(self) -> None:
        if self.probe is not None:
            self.probe.start()
        else:
            self.rss_before = rss_mb()

    def stop(self) -> tuple[float | None, str | None]:
        if self.probe is not None:
            return self.probe.stop()
        return rss_mb() - self.rss_before, "rss"


@dataclass
class LocalFactory:
    """Sides in this process: *model_file* on *provider* (options merged), inputs from *spec*
    (``dims``, ``inputs``; the same seeded values for both sides), ``config_entries`` as session
    configuration entries (e.g. ``{"session.intra_op.allow_spinning": "0"}``)."""

    model_file: Path
    spec: ModelSpec
    provider: ProviderSpec
    warmup: int = setting("warmup")
    iobinding: str = "none"
    device_id: int = 0
    intra_op_threads: int = 0
    config_entries: dict[str, str] = field(default_factory=dict)
    #: read the own footprint after the warmup (False: None, which saves the second RSS reading's
    #: garbage collection on CPU EPs; creation and first run are timed the same way either way)
    footprint: bool = True
    #: the warmup goes on to this many seconds (:func:`~pytest_aaco.measure.timedloop.warmup`); 0:
    #: ``warmup`` iterations only, as side by side with device time (:data:`TRACED_MIN_WARMUP_S`)
    min_warmup_s: float = MIN_WARMUP_S

    feeds: dict[str, np.ndarray] | None = field(default=None, repr=False)

    def shared_feeds(self) -> dict[str, np.ndarray]:
        """The inputs this side runs on (seeded: the same values every call), for a side in another
        interpreter that loads the same model; built from a CPU session when no side is open yet."""
        if self.feeds is None:
            import onnxruntime as ort

            so = session_options()
            session = ort.InferenceSession(str(self.model_file), sess_options=so, providers=["CPUExecutionProvider"])
            self.feeds = make_inputs(self.spec.name, session.get_inputs(), self.spec.dims, self.spec.inputs)
        return self.feeds

    def open(self, name: str) -> OpenedSide:
        import onnxruntime as ort

        own = OwnMemory(self.provider, self.device_id)
        own.start()
        handle = build_session(self.model_file, self.provider, self.device_id, self.intra_op_threads,
                               config_entries=self.config_entries)
        try:  # the compile-cache lock is held from creation until the first run (in the warmup) has finished
            check_placement(handle)
            feeds = make_inputs(self.spec.name, handle.session.get_inputs(), self.spec.dims, self.spec.inputs)
            self.feeds = feeds
            run = bind_run(handle, feeds, self.iobinding, self.device_id)
            first_ms, warm_ms = warmup(run, self.warmup, self.min_warmup_s)
            status = handle.settle_cache(first_ms)
        finally:
            handle.release_compile_lock()
        footprint, source = own.stop() if self.footprint else (None, None)
        per_iter = float(np.median(warm_ms[len(warm_ms) // 2:])) if warm_ms.size else first_ms
        info = {"ort_version": ort.__version__, "memory_source": source,
                "model_file": self.model_file.name}
        if status is not None:
            info["compile_cache"] = handle.compile_cache
            compiled = recorded_compile_ms(handle.cache.folder)
            if compiled is not None:  # the "with compile" figure, for the cold start that reuses this session
                info["compile_ms"] = compiled
        return OpenedSide(LocalSide(name, run), per_iter, footprint, handle.create_ms, first_ms, info)


def _open_pair(baseline: SideFactory, candidate: SideFactory, index: int,
               tracer: InProcessTracer | None = None) -> tuple[OpenedSide, OpenedSide]:
    """A fresh (baseline, candidate) pair; odd pairs build the candidate first, so neither side
    always gets the fresher heap. With a *tracer*, both runners are traced when both run in this
    process (a side in another interpreter has no tracer: then neither is)."""
    if index % 2:
        b = candidate.open(CANDIDATE)
        a = baseline.open(BASELINE)
    else:
        a = baseline.open(BASELINE)
        b = candidate.open(CANDIDATE)
    if tracer is not None and all(hasattr(s.runner, "run") for s in (a, b)):
        a = replace(a, runner=TracedSide(a.runner, tracer))
        b = replace(b, runner=TracedSide(b.runner, tracer))
    return a, b
