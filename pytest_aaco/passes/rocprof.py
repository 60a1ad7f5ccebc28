"""``--aaco-rocprof``: the item's profile pass under AMD's ``rocprofv3``, and its kernel-trace CSV.

The pass runs in a child process (``python -m pytest_aaco.passes.rocprof SPEC.json``) that rocprofv3
launches: it builds an InferenceSession with the item's EP and options, runs a few warmup runs,
pauses :data:`GAP_S`, then times *runs* runs. The kernels after that pause are the runs' own
(:func:`pytest_aaco.passes.kernels.after_last_gap`), whatever clock rocprofv3 stamps them with, and the
wall time comes from the child's ``perf_counter_ns``. The benchmark process never runs under the
profiler, so the measured rounds carry none of its overhead.

The pass's settings, provider options included, go to the child in a JSON file in a private
temporary directory, never on a command line that ``ps`` or a profiler's metadata would show.

The trace is read by :mod:`pytest_aaco.measure.rocprof_trace` (one parser for this pass and for
device time): rocprofv3's rocpd SQLite database (its default output since ROCm 7.0) or its
kernel-trace CSV, and the CSV layouts of rocprof v2 and v1. :func:`default_output_format` asks
rocprofv3 for rocpd on ROCm >= 7.0 and for CSV before.

The time limit grows with the item's compile time (:func:`pass_timeout_s`): MIGraphX compiles the
model at session creation, in minutes for large models, and the child compiles it again.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_aaco.history.environment import rocm_version
from pytest_aaco.measure.inference import build_session
from pytest_aaco.measure.providers import ProviderSpec, parse_provider
from pytest_aaco.measure.rocprof_child import RocprofError, run_under_rocprof
from pytest_aaco.measure.rocprof_trace import TraceError, default_output_format, find_trace, read_trace
from pytest_aaco.measure.rocprof_trace import read_kernel_csv as read_spans
from pytest_aaco.passes.kernels import KernelMetrics, KernelRecord, after_last_gap, kernel_metrics

if TYPE_CHECKING:
    import numpy as np

ROCPROFV3 = "rocprofv3"
#: pause (s) between the warmup and the traced runs; kernels after a pause of half of it are the runs'
GAP_S = 0.3
WARMUP_RUNS, TRACED_RUNS = 3, 10
#: the profiled child's limit (s) before compiling; each compile may take COMPILE_FACTOR x the measured one
TIMEOUT_S = 600.0
COMPILE_FACTOR = 2.0
INSTALL_HINT = ("install ROCm's rocprofiler-sdk (it ships /opt/rocm/bin/rocprofv3) and put it on PATH,"
                " or run without --aaco-rocprof")




def read_kernel_csv(path: str | Path) -> tuple[str, list[KernelRecord]]:
    """``(layout, records)`` of a kernel-trace CSV
    (:func:`pytest_aaco.measure.rocprof_trace.read_kernel_csv`). Raises :class:`RocprofError` naming
    the file for an unreadable file, a header of no known layout, or non-integer timestamps."""
    try:
        layout, spans = read_spans(path)
    except TraceError as exc:
        raise RocprofError(str(exc)) from None
    return layout, [KernelRecord(s.name, s.start_ns, s.end_ns, s.device, s.stream) for s in spans]


def read_records(out_dir: str | Path) -> tuple[str, list[KernelRecord]]:
    """``(layout, records)`` of the trace under *out_dir*, rocpd or CSV
    (:func:`pytest_aaco.measure.rocprof_trace.read_trace`). Raises :class:`RocprofError`."""
    try:
        trace = read_trace(out_dir)
    except TraceError as exc:
        raise RocprofError(str(exc)) from None
    return trace.layout, [KernelRecord(s.name, s.start_ns, s.end_ns, s.device, s.stream) for s in trace.kernels]


def pass_timeout_s(compile_s: float = 0.0) -> float:
    """The profiled child's limit (s): :data:`TIMEOUT_S` plus :data:`COMPILE_FACTOR` times the
    item's compile (session creation) time *compile_s* (s)."""
    return TIMEOUT_S + COMPILE_FACTOR * max(compile_s, 0.0)


def rocprof_command(exe: str, out_dir: str | Path, spec_path: str | Path, output_format: str = "csv") -> list[str]:
    """The rocprofv3 command line: kernel trace in *output_format* (``csv`` or ``rocpd``), into
    *out_dir*, around this module's pass."""
    return [exe, "--kernel-trace", "--output-format", output_format, "-d", str(out_dir), "-o", "aaco",
            "--", sys.executable, "-m", "pytest_aaco.passes.rocprof", str(spec_path)]


def trace_with_rocprof(model_path: str | Path, provider: ProviderSpec, feeds: Mapping[str, np.ndarray], *,
                       device_id: int = 0,
                       node_count: int | None = None, warmup: int = WARMUP_RUNS, runs: int = TRACED_RUNS,
                       exe: str = ROCPROFV3, timeout_s: float | None = None, compile_s: float = 0.0,
                       output_format: str | None = None) -> KernelMetrics:
    """Run the profile pass of *model_path* on *provider* (a ProviderSpec) under rocprofv3 and
    return the kernel metrics of its *runs* traced runs (``source="rocprofv3"``, or the layout read).

    *feeds*: the item's inputs (name -> numpy array), handed to the child in an ``.npz``.
    *timeout_s* defaults to :func:`pass_timeout_s` of *compile_s* (the item's session creation, s);
    *output_format* to :func:`~pytest_aaco.measure.rocprof_trace.default_output_format` of the
    installed ROCm. Raises :class:`RocprofError` when *exe* is not on PATH, exits non-zero (its last output lines
    are quoted), times out after *timeout_s*, or leaves no kernel trace or no pass result.
    """
    import numpy as np

    found = shutil.which(exe)
    if found is None:
        raise RocprofError(f"{exe} is not on PATH: {INSTALL_HINT}")
    limit = pass_timeout_s(compile_s) if timeout_s is None else timeout_s
    fmt = output_format or default_output_format(rocm_version())
    with tempfile.TemporaryDirectory(prefix="aaco-rocprof-") as tmp:
        folder = Path(tmp)
        arrays: dict[str, Any] = {name: np.asarray(value) for name, value in feeds.items()}
        np.savez(folder / "feeds.npz", **arrays)
        spec = {"model": str(model_path), "provider": provider.short, "options": dict(provider.options),
                "device_id": device_id, "feeds": str(folder / "feeds.npz"), "warmup": warmup, "runs": runs,
                "gap_s": GAP_S, "result": str(folder / "pass.json")}
        name = Path(model_path).name
        out = folder / "out"
        result, tail = run_under_rocprof(exe, folder, spec, lambda path: rocprof_command(found, out, path, fmt),
                                         limit, doing=f"profiling {name}", unfinished=f"the profile pass of {name}",
                                         child="the profile pass",
                                         no_result_hint=" (did it run the command after '--'?)")
        if find_trace(folder / "out") is None:
            raise RocprofError(f"{exe} wrote no kernel trace (a rocpd *.db or *kernel_trace.csv) for"
                               f" {Path(model_path).name}:\n{tail}")
        layout, records = read_records(folder / "out")
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
