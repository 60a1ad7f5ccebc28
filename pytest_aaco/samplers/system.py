"""Process and host CPU/memory telemetry from psutil and ``getrusage``.

One reading costs about 0.1 ms of CPU (psutil reads a few ``/proc`` files), so at the default
100 ms interval the sampler uses ~0.1% of one core.
"""

from __future__ import annotations

import os
import time
from typing import Any

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.samplers.base import Sampler

try:  # POSIX only; Windows has no getrusage
    import resource as _resource
except ImportError:  # pragma: no cover - exercised on Windows only
    _resource = None  # type: ignore[assignment]

#: bytes per MB as pytest-aaco reports memory: MiB, 2**20 bytes (what ``free -m`` and NVML tools show)
BYTES_PER_MB = 1024 * 1024


class SystemSampler(Sampler):
    """CPU load, memory and scheduler counters of this process and this host.

    Fields of each sample:

    - ``process_cpu_percent``: CPU time of this process over the last interval, in percent of
      one core (200 = two cores busy); None for the reading :meth:`start` takes, which has no
      interval behind it.
    - ``system_cpu_percent``: host-wide CPU use over the last interval, 0..100 over all cores;
      None for the first reading, like ``process_cpu_percent``.
    - ``process_cpu_s`` / ``system_busy_cpu_s`` / ``monotonic_s``: the cumulative counters both
      percentages come from: this process's CPU time (user + system, s), the host's busy CPU time
      (all cores, not idle or iowait, s; ``psutil.cpu_times``) and ``time.monotonic()`` (s). Their
      first and last readings give the CPU other processes used over the whole measured phase
      (:func:`pytest_aaco.verdict.metrics.other_processes_cores`), however few readings there are.
    - ``rss_mb``: resident set size of this process in MB (MiB).
    - ``ctx_switches_voluntary`` / ``ctx_switches_involuntary``: cumulative context switches of
      **all threads** of this process (``getrusage(RUSAGE_SELF)`` ``ru_nvcsw``/``ru_nivcsw``).
      psutil's ``num_ctx_switches`` reads ``/proc/<pid>/status``, which on Linux counts only the
      main thread, and ONNX Runtime computes on its worker threads; psutil is the fallback
      where ``resource`` is missing.
    - ``page_faults_minor`` / ``page_faults_major``: cumulative page faults of this process
      (``ru_minflt``/``ru_majflt``); None where ``resource`` is missing.
    - ``load_avg_1m``: 1-minute load average of the host (``psutil.getloadavg``; runnable and
      uninterruptible tasks, to compare with the logical core count).

    The percentages are computed here from the counters of this sampler's previous reading,
    not with ``psutil.cpu_percent(None)``: psutil keeps that function's previous reading per
    *thread* (psutil 5.9.6 and later), so its first call in the sampler's thread returned 0.0
    although :meth:`setup` had primed it in another; with the first reading's 0.0, the two
    zeros halved the host's load in the mean of a phase measured in three readings (issue 22).
    """

    name = "system"

    def __init__(self, interval_s: float = 0.1) -> None:
        super().__init__(interval_s)
        self._process: Any = None
        self._psutil: Any = None
        self._last: tuple[float, float, float, float] | None = None

    def setup(self) -> None:
        """Import psutil and open this process. Raises ImportError without psutil."""
        import psutil

        self._psutil = psutil
        self._process = psutil.Process(os.getpid())
        self._last = None

    def _host_cpu_s(self) -> tuple[float, float]:
        """(busy, total) CPU seconds of the host since boot, all cores: what ``psutil.cpu_percent``
        divides (guest time is already counted in user time on Linux, so it is left out of the total)."""
        times = self._psutil.cpu_times()
        total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
        return total - times.idle - getattr(times, "iowait", 0.0), total

    def _read(self) -> JSONDict:
        psutil = self._psutil
        process = self._process
        now = time.monotonic()
        busy, total = self._host_cpu_s()
        with process.oneshot():
            cpu = process.cpu_times()
            rss = process.memory_info().rss
            if _resource is None:  # pragma: no cover - Windows
                switches = process.num_ctx_switches()
                voluntary, involuntary = switches.voluntary, switches.involuntary
                minor = major = None
        if _resource is not None:
            usage = _resource.getrusage(_resource.RUSAGE_SELF)
            voluntary, involuntary = usage.ru_nvcsw, usage.ru_nivcsw
            minor, major = usage.ru_minflt, usage.ru_majflt
        process_s = float(cpu.user + cpu.system)
        process_cpu = system_cpu = None
        if self._last is not None:
            last_now, last_busy, last_total, last_process = self._last
            if now > last_now:
                process_cpu = max(process_s - last_process, 0.0) / (now - last_now) * 100.0
            if total > last_total:
                system_cpu = min(max((busy - last_busy) / (total - last_total), 0.0), 1.0) * 100.0
        self._last = (now, busy, total, process_s)
        return {
            "process_cpu_percent": process_cpu,
            "system_cpu_percent": system_cpu,
            "process_cpu_s": process_s,
            "system_busy_cpu_s": float(busy),
            "monotonic_s": now,
            "rss_mb": rss / BYTES_PER_MB,
            "ctx_switches_voluntary": int(voluntary),
            "ctx_switches_involuntary": int(involuntary),
            "page_faults_minor": None if minor is None else int(minor),
            "page_faults_major": None if major is None else int(major),
            "load_avg_1m": float(psutil.getloadavg()[0]),
        }
