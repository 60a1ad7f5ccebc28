"""Side by side with a side in another interpreter (``--aaco-compare-python``): :class:`WorkerFactory`
opens each side in a fresh worker process (:class:`~pytest_aaco.sidebyside.worker_client.WorkerSide`);
:func:`prestart` starts a measurement's first workers at once. Its ``fresh_processes`` tells
:func:`pytest_aaco.sidebyside.cycles.measure` that its session pairs are process pairs (the paired
test's session level is then the process's)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from pytest_aaco.measure.providers import ProviderSpec
from pytest_aaco.options import setting
from pytest_aaco.sidebyside.sides import OpenedSide
from pytest_aaco.sidebyside.worker_client import PLUGIN_PYTHON_VARS, WorkerSide


@dataclass
class WorkerFactory:
    """Sides in another interpreter (``--aaco-compare-python``): each :meth:`open` starts a fresh
    worker (:class:`pytest_aaco.sidebyside.worker_client.WorkerSide`), loads *model_file* on *provider* with
    the inputs from *feeds* (a callable, e.g. the candidate's
    :meth:`~pytest_aaco.sidebyside.sides.LocalFactory.shared_feeds`: both sides run the same values), and
    warms it up. The footprint is the worker's own: its RSS growth over loading and warmup, or its GPU
    memory growth on NVIDIA GPU EPs. *env*: variables set in
    the worker's environment (:class:`~pytest_aaco.sidebyside.worker_client.WorkerSide`'s; the candidate's
    worker in the plugin's own interpreter keeps its ``PYTHONPATH``: :func:`plugin_python_env`).

    Under ``--aaco-compare-python`` both sides open through this class (the candidate in this process's
    interpreter), so both pay the same overhead and every session pair is a pair of fresh processes:
    :func:`pytest_aaco.sidebyside.cycles.measure` opens ``settings.processes`` pairs and tests with the process
    pair as the level."""

    python: str
    model_file: Path
    provider: ProviderSpec
    feeds: Callable[[], dict[str, np.ndarray]]
    warmup: int = setting("warmup")
    iobinding: str = "none"
    device_id: int = 0
    intra_op_threads: int = 0
    config_entries: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    #: every :meth:`open` starts a fresh process (:func:`in_workers`)
    fresh_processes: ClassVar[bool] = True
    #: workers started ahead by :func:`prestart`, taken by the next :meth:`open` s
    spare: list[WorkerSide] = field(default_factory=list, init=False, repr=False)

    #: the CPUs its workers pin themselves to (:func:`shared_cpus`), None: not pinned
    cpus: tuple[int, ...] | None = field(default=None, init=False)
    #: the coordinating thread's CPUs before :func:`pin_coordinator`, restored by :func:`unpin_coordinator`
    restore: set[int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.cpus = shared_cpus(self.intra_op_threads)
        if self.cpus is not None and CPUS_VAR not in self.env:
            self.env = {**self.env, CPUS_VAR: ",".join(map(str, self.cpus))}

    @staticmethod
    def start_spares(factories: list[Any], count: int) -> None:
        """:func:`pin_coordinator`, then :func:`prestart` (called by :func:`pytest_aaco.sidebyside.cycles.measure`
        on a factory with ``fresh_processes``, so that module need not import this one)."""
        pin_coordinator(factories)
        prestart(factories, count)

    @staticmethod
    def close_spares(factories: list[Any]) -> None:
        """:func:`close_spare`, then :func:`unpin_coordinator`, as :meth:`start_spares`."""
        try:
            close_spare(factories)
        finally:
            unpin_coordinator(factories)

    def open(self, name: str) -> OpenedSide:
        side = self.spare.pop(0) if self.spare else WorkerSide(self.python, name=name, env=self.env)
        side.name = name
        try:
            info = side.info if side.running and side.info is not None else side.start()
            gpu = self.provider.is_gpu
            before = side.memory()
            session = side.load(self.model_file, self.provider, self.feeds(), iobinding=self.iobinding,
                                device_id=self.device_id, intra_op_threads=self.intra_op_threads,
                                config_entries=self.config_entries)
            first_ms, warm_ms = side.warmup(self.warmup)
            session.settle_cache(first_ms)
            after = side.memory()
        except BaseException:
            side.close()
            raise
        old, new = (before.gpu_mb, after.gpu_mb) if gpu else (before.rss_mb, after.rss_mb)
        footprint = new - old if old is not None and new is not None else None
        per_iter = float(np.median(warm_ms[len(warm_ms) // 2:])) if warm_ms.size else first_ms
        details = {"ort_version": info.ort_version, "python": info.python_version, "executable": info.executable,
                   "memory_source": (after.gpu_source if gpu else "worker rss"), "model_file": self.model_file.name,
                   "cpus": list(info.cpus) if info.cpus is not None else None}
        if session.compile_cache is not None:
            details["compile_cache"] = session.compile_cache
        return OpenedSide(side, per_iter, footprint, session.create_ms, first_ms, details, side.close)


#: the worker's environment variable naming the CPUs it pins itself to (pytest_aaco/sidebyside/worker.py)
CPUS_VAR = "AACO_WORKER_CPUS"


def shared_cpus(threads: int, allowed: set[int] | None = None) -> tuple[int, ...] | None:
    """The CPUs every worker of both sides is pinned to, when the session's intra-op threads are set: the
    last *threads* of the CPUs this process may run on (*allowed*: ``os.sched_getaffinity(0)``), the same
    for both sides, so a process pair cannot differ by where the OS placed each process. ``None`` (no
    pinning) when *threads* is 0 (ORT's default count, which uses every core), when it is not below the
    number of allowed CPUs, or where the OS has no CPU affinity (macOS, Windows).

    Why: on the 2-core VM an ``--aaco-compare-python`` A/A of a 5 us model with one intra-op thread read
    ``no regression`` in 5 or 6 of 10 runs unpinned (process pairs up to 20% apart), and in 9 or 10 of 10 with
    both sides' workers and the coordinating thread (:func:`pin_coordinator`) on one CPU (docs/compare-python.md).
    pyperf pins its worker processes likewise (``--affinity``)."""
    if allowed is None:
        if not hasattr(os, "sched_getaffinity"):
            return None
        allowed = os.sched_getaffinity(0)
    if threads <= 0 or threads >= len(allowed):
        return None
    return tuple(sorted(allowed)[-threads:])


def pin_coordinator(factories: list[Any]) -> None:
    """Pin the calling thread (the one that hands the workers their blocks) to the workers' CPUs for the
    measurement: on the 2-core VM the A/A of a 5 us model read ``no regression`` in 9 or 10 of 10 runs with
    the coordinating thread on the workers' CPU, and in 6 to 9 of 10 with it elsewhere or free
    (docs/compare-python.md). Only this thread: Linux applies ``sched_setaffinity(0)`` to the calling thread, so
    the rest of the pytest process keeps its CPUs. :func:`unpin_coordinator` restores them."""
    first = next((f for f in factories if isinstance(f, WorkerFactory) and f.cpus is not None), None)
    if first is None or first.restore is not None:  # not pinned, or pinned already (a later look's spares)
        return
    try:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, set(first.cpus or ()))
    except OSError:  # a container that forbids it: measure unpinned
        return
    first.restore = before


def unpin_coordinator(factories: list[Any]) -> None:
    """Give the calling thread back the CPUs :func:`pin_coordinator` took from it (nothing when it pinned none)."""
    for factory in factories:
        if isinstance(factory, WorkerFactory) and factory.restore is not None:
            before, factory.restore = factory.restore, None
            try:
                os.sched_setaffinity(0, before)
            except OSError:
                pass


def prestart(factories: list[Any], count: int) -> None:
    """Start *count* workers of every :class:`WorkerFactory` in *factories* at once, before any cycle runs,
    for their next :meth:`WorkerFactory.open` s: an interpreter's start and its numpy and onnxruntime
    imports (about 0.4 s each on the 2-core VM) overlap instead of adding up. A worker that fails to
    start is dropped: its :meth:`~WorkerFactory.open` starts one again and raises the error there. Call
    :func:`close_spare` after the measurement."""
    started = [(f, WorkerSide(f.python, name="spare", env=f.env)) for f in factories if isinstance(f, WorkerFactory)
               for _ in range(count)]
    if len(started) < 2:
        return

    def start(side: WorkerSide) -> bool:
        try:
            side.start()
            return True
        except Exception:  # noqa: BLE001 - open() starts it again and reports the error
            side.close()
            return False

    with ThreadPoolExecutor(len(started)) as pool:
        ready = list(pool.map(start, [side for _, side in started]))
    for (factory, side), ok in zip(started, ready, strict=True):
        if ok:
            factory.spare.append(side)


def close_spare(factories: list[Any]) -> None:
    """Close the workers :func:`prestart` started that no :meth:`WorkerFactory.open` took."""
    spare = [side for f in factories if isinstance(f, WorkerFactory) for side in f.spare]
    for f in factories:
        if isinstance(f, WorkerFactory):
            f.spare.clear()
    for side in spare:
        side.close()


def plugin_python_env() -> dict[str, str]:
    """This process's ``PYTHONPATH`` and ``PYTHONHOME`` where set, for a worker in this interpreter that
    must import the same onnxruntime (a :class:`WorkerSide` leaves them out by default: they point at the
    plugin's Python, not at another environment's)."""
    return {name: os.environ[name] for name in PLUGIN_PYTHON_VARS if name in os.environ}
