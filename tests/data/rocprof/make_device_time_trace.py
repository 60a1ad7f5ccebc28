"""Writes the constructed device-time trace pair in rocprofv3's CSV layout (run from this folder).

    python make_device_time_trace.py

Files (see README.md): ``devtime_pair_kernel_trace.csv`` (``--kernel-trace``),
``devtime_pair_marker_api_trace.csv`` (``--marker-trace``: the roctx ranges ``aaco/<side>/<cycle>``)
and ``devtime_pair.child.json`` (what ``python -m pytest_aaco.measure.traced_child`` writes: each
block's side, cycle, runs and host timestamps on CLOCK_BOOTTIME and CLOCK_MONOTONIC).

What the trace holds: one traced child running 8 cycles of one 5-run block per side, in the
child's seeded order (``cycle_orders(["baseline", "candidate"], 8, seed=0)``), after 2 warmup runs
per side. A baseline run is 12 kernels of 500 µs in all (one pair overlaps by 2 µs on a second
queue); the candidate runs the same 12 plus ``aaco_slow_conv_branch`` of 30 µs: +6.0% kernel time,
13 kernels per run. Each kernel's duration carries seeded noise of sd 0.3%. Timestamps are
CLOCK_BOOTTIME, as rocprofiler-sdk stamps them; CLOCK_MONOTONIC is an hour behind (a machine that
was suspended), so only the BOOTTIME stamps bracket the kernels.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from pytest_aaco.measure.traced_child import cycle_orders

HERE = Path(__file__).parent
#: kernel name, duration (µs) of one baseline run, in launch order
BASE_RUN = [("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32", 80), ("mlir_convolution_add_relu", 20),
            ("mlir_convolution_add", 45), ("mlir_reduce_mean", 5), ("Cijk_Ailk_Bljk_HHS_BH_MT64x64x32", 60),
            ("mlir_convolution_add_relu", 30), ("Cijk_Ailk_Bljk_HHS_BH_MT256x128x64", 90),
            ("mlir_pointwise_mul_add", 15), ("mlir_convolution_add", 40), ("mlir_pooling", 25),
            ("Cijk_Ailk_Bljk_HHS_BH_MT128x64x32", 70), ("mlir_softmax", 20)]
EXTRA = ("aaco_slow_conv_branch", 30)
CYCLES, RUNS, WARMUP = 8, 5, 2
GAP_NS = 50_000_000  # the child's BLOCK_GAP_S
SUSPENDED_NS = 3_600 * 10**9  # CLOCK_BOOTTIME - CLOCK_MONOTONIC
NOISE_SD = 0.003
KERNEL_GAP_NS, RUN_GAP_NS = 3_000, 20_000


def main() -> None:
    rng = np.random.default_rng(19)
    t = 500_000 * 10**9  # BOOTTIME: about 5.8 days of uptime
    kernels: list[tuple[str, int, int, int]] = []  # name, start, end, queue
    markers: list[tuple[str, int, int]] = []
    blocks = []

    def run_once(side: str) -> None:
        nonlocal t
        program = BASE_RUN + ([EXTRA] if side == "candidate" else [])
        for i, (name, us) in enumerate(program):
            duration = int(us * 1000 * float(np.exp(rng.normal(0, NOISE_SD))))
            start = t - KERNEL_GAP_NS - 2_000 if i == 3 else t  # mlir_reduce_mean overlaps the one before by 2 µs
            queue = 2 if i == 3 else 1
            kernels.append((name, start, start + duration, queue))
            t = max(t, start + duration) + KERNEL_GAP_NS
        t += RUN_GAP_NS

    for side in ("baseline", "candidate"):
        for _ in range(WARMUP):
            run_once(side)
    for cycle, order in enumerate(cycle_orders(["baseline", "candidate"], CYCLES, 0)):
        for side in order:
            t += GAP_NS
            host_start = t
            t += 4_000  # push the range, first launch
            push = host_start + 1_000
            for _ in range(RUNS):
                run_once(side)
            host_end = t - RUN_GAP_NS - 1_000  # session.run returned before the last kernel's end was stamped
            markers.append((f"aaco/{side}/{cycle}", push, host_end))
            blocks.append({"side": side, "cycle": cycle, "runs": RUNS, "boottime": [host_start, host_end],
                           "monotonic": [host_start - SUSPENDED_NS, host_end - SUSPENDED_NS]})
            t = host_end + 2_000

    with open(HERE / "devtime_pair_kernel_trace.csv", "w", newline="", encoding="utf-8") as handle:
        handle.write("Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,"
                     "Start_Timestamp,End_Timestamp,Workgroup_Size_X,Grid_Size_X\n")
        out = csv.writer(handle, quoting=csv.QUOTE_NONNUMERIC)
        for i, (name, start, end, queue) in enumerate(kernels, start=1):
            out.writerow(["KERNEL_DISPATCH", 2, queue, 0, 4242, i, 1 + sum(map(ord, name)) % 97, name, i, start, end,
                          256, 65536])
    with open(HERE / "devtime_pair_marker_api_trace.csv", "w", newline="", encoding="utf-8") as handle:
        handle.write("Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp\n")
        out = csv.writer(handle, quoting=csv.QUOTE_NONNUMERIC)
        for i, (name, start, end) in enumerate(markers, start=1):
            out.writerow(["MARKER_CORE_API", name, 4242, 4242, 100000 + i, start, end])
    (HERE / "devtime_pair.child.json").write_text(json.dumps({"blocks": blocks, "markers": "ctypes:recorded"},
                                                             indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
