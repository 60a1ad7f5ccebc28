"""Process and host CPU/memory telemetry from psutil and ``getrusage``.

One reading costs about 0.1 ms of CPU (psutil reads a few ``/proc`` files), so at the default
100 ms interval the sampler uses ~0.1% of one core.
"""

from __future__ import annotations

import os
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
      one core (``psutil.Process.cpu_percent``; 200 = two cores busy).
    - ``system_cpu_percent``: host-wide CPU use over the last interval, 0..100 over all cores
      (``psutil.cpu_percent``).
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

    ``cpu_percent`` returns 0.0 on its first call, so :meth:`setup` primes both counters.
    """

    name = "system"

    def __init__(self, interval_s: float = 0.1) -> None:
        super().__init__(interval_s)
        self._process: Any = None
        self._psutil: Any = None

    def setup(self) -> None:
        """Import psutil, open this process, prime ``cpu_percent``. Raises ImportError without psutil."""
        import psutil

        self._psutil = psutil
        self._process = psutil.Process(os.getpid())
        self._process.cpu_percent(None)
        psutil.cpu_percent(None)

    def _read(self) -> JSONDict:
        psutil = self._psutil
        process = self._process
        with process.oneshot():
            process_cpu = process.cpu_percent(None)
            rss = process.memory_info().rss
            if _resource is None:  # pragma: no cover - Windows
                switches = process.num_ctx_switches()
                voluntary, involuntary = switches.voluntary, switches.involuntary
                minor = major = None
        if _resource is not None:
            usage = _resource.getrusage(_resource.RUSAGE_SELF)
            voluntary, involuntary = usage.ru_nvcsw, usage.ru_nivcsw
            minor, major = usage.ru_minflt, usage.ru_majflt
        return {
            "process_cpu_percent": float(process_cpu),
            "system_cpu_percent": float(psutil.cpu_percent(None)),
            "rss_mb": rss / BYTES_PER_MB,
            "ctx_switches_voluntary": int(voluntary),
            "ctx_switches_involuntary": int(involuntary),
            "page_faults_minor": None if minor is None else int(minor),
            "page_faults_major": None if major is None else int(major),
            "load_avg_1m": float(psutil.getloadavg()[0]),
        }
