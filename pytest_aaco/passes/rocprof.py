"""``--aaco-rocprof``: the item's profile pass under AMD's ``rocprofv3``, and its kernel-trace CSV.

The pass runs in a child process (``python -m pytest_aaco.passes.rocprof SPEC.json``) that rocprofv3
launches: it builds an InferenceSession with the item's EP and options, runs a few warmup runs,
pauses :data:`GAP_S`, then times *runs* runs. The kernels after that pause are the runs' own
(:func:`pytest_aaco.passes.kernels.after_last_gap`), whatever clock rocprofv3 stamps them with, and the
wall time comes from the child's ``perf_counter_ns``. The benchmark process never runs under the
profiler, so the measured rounds carry none of its overhead.

The pass's settings, provider options included, go to the child in a JSON file in a private
temporary directory, never on a command line that ``ps`` or a profiler's metadata would show.

CSV layouts read by :func:`read_kernel_csv` (from the tools' documentation):

* rocprofv3 ``--kernel-trace --output-format csv``: ``<prefix>_kernel_trace.csv`` with
  ``Kind, Agent_Id, Queue_Id, Stream_Id, Thread_Id, Dispatch_Id, Kernel_Id, Kernel_Name,
  Correlation_Id, Start_Timestamp, End_Timestamp, ...`` (ns)
  (https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/how-to/using-rocprofv3.html);
* rocprof v2 ``--kernel-trace``: ``Dispatch_ID, GPU_ID, Queue_ID, PID, TID, Grid_Size, ...,
  Kernel_Name, Start_Timestamp, End_Timestamp, Correlation_ID``;
* rocprof v1 ``--timestamp on`` / ``--stats``: ``results.csv`` with ``Index, KernelName, gpu-id,
  queue-id, queue-index, pid, tid, grd, wgr, lds, scr, ..., DispatchNs, BeginNs, EndNs, CompleteNs``
  (https://rocm.docs.amd.com/projects/rocprofiler/en/latest/reference/rocprof-command.html).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_aaco.measure.inference import build_session
from pytest_aaco.measure.providers import ProviderSpec, parse_provider
from pytest_aaco.passes.kernels import KernelMetrics, KernelRecord, after_last_gap, kernel_metrics

if TYPE_CHECKING:
    import numpy as np

ROCPROFV3 = "rocprofv3"
#: pause (s) between the warmup and the traced runs; kernels after a pause of half of it are the runs'
GAP_S = 0.3
WARMUP_RUNS, TRACED_RUNS = 3, 10
#: the whole profiled child (session build, compile, runs) must finish within this (s)
TIMEOUT_S = 600.0
#: (layout, kernel name, start ns, end ns, device, stream) columns, tried in this order
LAYOUTS = (
    ("rocprofv3", "Kernel_Name", "Start_Timestamp", "End_Timestamp", "Agent_Id", "Queue_Id"),
    ("rocprof-v2", "Kernel_Name", "Start_Timestamp", "End_Timestamp", "GPU_ID", "Queue_ID"),
    ("rocprof-v1", "KernelName", "BeginNs", "EndNs", "gpu-id", "queue-id"),
)
INSTALL_HINT = ("install ROCm's rocprofiler-sdk (it ships /opt/rocm/bin/rocprofv3) and put it on PATH,"
                " or run without --aaco-rocprof")


class RocprofError(RuntimeError):
    """rocprofv3 is missing, failed, or wrote nothing readable; the message says which and what to do."""


def read_kernel_csv(path: str | Path) -> tuple[str, list[KernelRecord]]:
    """``(layout, records)`` of a kernel-trace CSV in one of :data:`LAYOUTS` (the first whose five
    columns are all there, else the first whose name and timestamp columns are).

    Rows of rocprofv3 whose ``Kind`` is not ``KERNEL_DISPATCH`` are skipped. Raises
    :class:`RocprofError` naming the file for an unreadable file, a header of no known layout,
    and a row whose timestamps are not integers (naming its line).
    """
    path = Path(path)
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            header = [h.strip() for h in reader.fieldnames or []]
            reader.fieldnames = header
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RocprofError(f"cannot read the kernel trace {path}: {exc}") from exc
    columns = set(header)
    matches = [c for c in LAYOUTS if set(c[1:]) <= columns] or [c for c in LAYOUTS if set(c[1:4]) <= columns]
    if not matches:
        raise RocprofError(f"{path}: not a kernel trace of rocprofv3, rocprof v2 or rocprof v1: columns"
                           f" {', '.join(header[:12]) or '(none)'}; expected Kernel_Name/Start_Timestamp/End_Timestamp"
                           " or KernelName/BeginNs/EndNs")
    layout, name, start, end, device, stream = matches[0]
    records = []
    for line, row in enumerate(rows, start=2):
        kind = (row.get("Kind") or "KERNEL_DISPATCH").strip()
        if kind != "KERNEL_DISPATCH":
            continue
        try:
            begin, finish = int(row[start]), int(row[end])
        except (TypeError, ValueError):
            raise RocprofError(f"{path}, line {line}: {start}/{end} must be integers (ns),"
                               f" got {row.get(start)!r}/{row.get(end)!r}") from None
        records.append(KernelRecord(str(row[name]).strip(), begin, finish, str(row.get(device) or "0").strip(),
                                    str(row.get(stream) or "0").strip()))
    return layout, records


def find_kernel_csv(out_dir: str | Path) -> Path | None:
    """The kernel-trace CSV rocprofv3 (or rocprof) wrote under *out_dir* (newest first), or None."""
    found = [p for pattern in ("*kernel_trace.csv", "results*.csv") for p in Path(out_dir).rglob(pattern)]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def rocprof_command(exe: str, out_dir: str | Path, spec_path: str | Path) -> list[str]:
    """The rocprofv3 command line: kernel trace, CSV, into *out_dir*, around this module's pass."""
    return [exe, "--kernel-trace", "--output-format", "csv", "-d", str(out_dir), "-o", "aaco",
            "--", sys.executable, "-m", "pytest_aaco.passes.rocprof", str(spec_path)]


def trace_with_rocprof(model_path: str | Path, provider: ProviderSpec, feeds: Mapping[str, np.ndarray], *,
                       device_id: int = 0,
                       node_count: int | None = None, warmup: int = WARMUP_RUNS, runs: int = TRACED_RUNS,
                       exe: str = ROCPROFV3, timeout_s: float = TIMEOUT_S) -> KernelMetrics:
    """Run the profile pass of *model_path* on *provider* (a ProviderSpec) under rocprofv3 and
    return the kernel metrics of its *runs* traced runs (``source="rocprofv3"``, or the layout read).

    *feeds*: the item's inputs (name -> numpy array), handed to the child in an ``.npz``.
    Raises :class:`RocprofError` when *exe* is not on PATH, exits non-zero (its last output lines
    are quoted), times out after *timeout_s*, or leaves no kernel trace or no pass result.
    """
    import numpy as np

    found = shutil.which(exe)
    if found is None:
        raise RocprofError(f"{exe} is not on PATH: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="aaco-rocprof-") as tmp:
        folder = Path(tmp)
        arrays: dict[str, Any] = {name: np.asarray(value) for name, value in feeds.items()}
        np.savez(folder / "feeds.npz", **arrays)
        spec = {"model": str(model_path), "provider": provider.short, "options": dict(provider.options),
                "device_id": device_id, "feeds": str(folder / "feeds.npz"), "warmup": warmup, "runs": runs,
                "gap_s": GAP_S, "result": str(folder / "pass.json")}
        spec_path = folder / "spec.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        os.chmod(spec_path, 0o600)
        command = rocprof_command(found, folder / "out", spec_path)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise RocprofError(f"{exe} did not finish the profile pass of {Path(model_path).name} in"
                               f" {timeout_s:.0f} s") from None
        except OSError as exc:
            raise RocprofError(f"cannot start {found}: {exc}") from exc
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        if done.returncode != 0:
            raise RocprofError(f"{exe} exited with status {done.returncode} profiling {Path(model_path).name}:"
                               f"\n{tail}")
        try:
            result = json.loads((folder / "pass.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise RocprofError(f"the profile pass under {exe} left no result (did it run the command after"
                               f" '--'?):\n{tail}") from None
        trace = find_kernel_csv(folder / "out")
        if trace is None:
            raise RocprofError(f"{exe} wrote no kernel trace CSV (*kernel_trace.csv) for"
                               f" {Path(model_path).name}:\n{tail}")
        layout, records = read_kernel_csv(trace)
    records = after_last_gap(records, int(GAP_S * 1e9 / 2))
    return kernel_metrics(records, int(result["runs"]), int(result["wall_ns"]), node_count, source=layout)


def run_pass(spec_path: str | Path) -> dict[str, int]:
    """The child's work: session, warmup, pause, timed runs; writes ``{"runs", "wall_ns"}`` to the
    spec's ``result`` path and returns it. Raises what building or running the session raises."""
    import numpy as np

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    provider = parse_provider(spec["provider"]).with_options(spec["options"])
    handle = build_session(Path(spec["model"]), provider, int(spec["device_id"]))
    with np.load(spec["feeds"], allow_pickle=False) as data:
        feeds = {name: data[name] for name in data.files}
    run = handle.session.run
    for _ in range(int(spec["warmup"])):
        run(None, feeds)
    time.sleep(float(spec["gap_s"]))
    start = time.perf_counter_ns()
    for _ in range(int(spec["runs"])):
        run(None, feeds)
    result = {"runs": int(spec["runs"]), "wall_ns": time.perf_counter_ns() - start}
    Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_aaco.passes.rocprof SPEC.json``: the profile pass run under rocprofv3."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m pytest_aaco.passes.rocprof SPEC.json (written by pytest-aaco's --aaco-rocprof)",
              file=sys.stderr)
        return 2
    run_pass(args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
