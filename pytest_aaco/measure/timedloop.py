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

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

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


def warmup(run: Callable[[], object], iterations: int, min_s: float = MIN_WARMUP_S) -> tuple[float, np.ndarray]:
    """First run (ms) and the warmup latencies (ms): *iterations*, extended to *min_s* seconds
    (default :data:`MIN_WARMUP_S`; 0: no extension) for fast models so caches, allocators and
    clocks settle."""
    first_ms = float(time_iterations(run, 1)[0]) / 1e6
    lat = time_iterations(run, iterations)
    spent = lat.sum() / 1e9
    if spent < min_s and lat.size:
        per_iter = max(spent / lat.size, 1e-6)
        extra = int(min(MAX_EXTRA_WARMUP, (min_s - spent) / per_iter))
        if extra > 0:
            lat = np.concatenate([lat, time_iterations(run, extra)])
    return first_ms, lat / 1e6


def bound_runner(session: ort.InferenceSession, feeds: dict[str, np.ndarray], mode: str, device: str,
                 device_id: int) -> Callable[[], object]:
    """A zero-argument callable that runs *session* once on *feeds*, built outside the timed loop.

    ``none``: ``session.run(None, feeds)`` with host arrays (host↔device copies are timed).
    ``inputs``: inputs copied to the ORT device *device* (``cuda``, ``dml``, ``cpu``) once as
    OrtValues; outputs come back to the host. ``all``: inputs and outputs stay on the device. ORT
    allocates the outputs on the first run; from then on the binding reuses those buffers, so
    every later run reads and writes fixed device addresses, as CUDA graphs need and as a deployed
    server does. With a binding, the callable's ``binding`` attribute is the IOBinding (outputs via
    ``binding.copy_outputs_to_cpu()``). Uses ``session.io_binding()`` and ``run_with_iobinding``
    (https://onnxruntime.ai/docs/api/python/api_summary.html#iobinding).
    """
    if mode == "none":
        run = session.run
        return lambda: run(None, feeds)
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
        run_bound(binding)
        if not fixed:  # ``all``, first run only: pin the outputs ORT just allocated
            values = binding.get_outputs()
            for index, name in enumerate(names):  # no zip(strict=): Python 3.8 in the worker
                binding.bind_ortvalue_output(name, values[index])
            fixed = True

    run_with_binding.binding = binding  # type: ignore[attr-defined]  # for reading outputs back
    return run_with_binding
