"""AMD kernel tracing with ``rocprofv3``, around one child process.

rocprofv3 traces a whole process from its start (there is no in-process activity API to switch on
and off, as CUPTI has), so the benchmark process never runs under it: :func:`launch` runs **one**
child under it::

    rocprofv3 --kernel-trace --marker-trace --output-format csv|rocpd -d DIR -o aaco -- \\
        python -m pytest_aaco.measure.traced_child SPEC.json

(options from https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/how-to/using-rocprofv3.html)
and reads what it left (:mod:`pytest_aaco.tracers.rocprof_trace`). The child
(:mod:`pytest_aaco.measure.traced_child`) is the same for device-time blocks and for the kernel
pass. Its settings, provider options included, go in a JSON file (mode 0600) in a private
temporary directory, never on a command line that ``ps`` or a profiler's metadata would show.

The time limit (:func:`timeout_s`) grows with the item's compile time: MIGraphX compiles the model
at session creation, in minutes for large models, and the child may compile it again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_aaco import eps
from pytest_aaco.tracers.base import TracerError, TracerMissing
from pytest_aaco.tracers.rocprof_trace import Trace, find_trace, read_trace

ROCPROFV3 = "rocprofv3"
INSTALL_HINT = "install ROCm's rocprofiler-sdk (it ships /opt/rocm/bin/rocprofv3) and put it on PATH"
#: the child's time limit (s) before any compile: warmup, the traced runs, writing the trace
BASE_TIMEOUT_S = 300.0
#: each session the child builds may take this many times the compile time measured in the plugin's
#: process (rocprofv3's own start-up and the profiled compile are slower than an unprofiled one)
COMPILE_FACTOR = 2.0
#: the module the child runs (``python -m``); a name, not an import: the child is another process
CHILD_MODULE = "pytest_aaco.measure.traced_child"
#: the ``-o`` prefix of the child's output files
OUTPUT_PREFIX = "aaco"
#: the file each output format leaves, after ``<out_dir>/<prefix>_``: rocprofv3 names every output
#: ``<output path>/<output file>_<name>.<ext>`` (``get_output_filename``; ``-d`` sets the path, default
#: the working directory, ``-o`` the file, default ``%hostname%/%pid%``), the same in rocprofiler-sdk's
#: own repository (ROCm 6.2-6.4, source/lib/rocprofiler-sdk-tool/output_file.cpp) and in
#: ROCm/rocm-systems (ROCm 7, projects/rocprofiler-sdk/source/lib/output/output_stream.cpp)
OUTPUT_FILES = {"rocpd": "results.db", "csv": "kernel_trace.csv"}


def timeout_s(compile_s: float = 0.0, sessions: int = 1) -> float:
    """The traced child's time limit (s): :data:`BASE_TIMEOUT_S` plus :data:`COMPILE_FACTOR` times
    the compile time *compile_s* (s; the item's session creation, which for MIGraphX is the
    compile and can take minutes) for each of *sessions* sessions the child builds."""
    return BASE_TIMEOUT_S + COMPILE_FACTOR * max(compile_s, 0.0) * max(sessions, 1)


def expected_output(out_dir: str | Path, output_format: str, prefix: str = OUTPUT_PREFIX) -> Path:
    """The kernel trace that ``rocprofv3 -d OUT_DIR -o PREFIX --output-format FORMAT`` writes:
    ``OUT_DIR/PREFIX_results.db`` (rocpd) or ``OUT_DIR/PREFIX_kernel_trace.csv`` (csv; the marker trace
    beside it is ``PREFIX_marker_api_trace.csv``). Raises ValueError for another format."""
    if output_format not in OUTPUT_FILES:
        raise ValueError(f"output format {output_format!r}: expected one of {', '.join(OUTPUT_FILES)}")
    return Path(out_dir) / f"{prefix}_{OUTPUT_FILES[output_format]}"


def rocprof_command(exe: str, out_dir: str | Path, spec_path: str | Path, output_format: str = "csv") -> list[str]:
    """The rocprofv3 command line: kernel and marker trace in *output_format* into *out_dir* (files
    named by :func:`expected_output`), around the child. ``rocpd`` needs rocprofv3 of ROCm >= 7.0
    (its ``--output-format`` choices before were csv, json, pftrace, otf2), where it is also the
    default (``source/bin/rocprofv3.py``); :func:`~pytest_aaco.tracers.rocprof_trace.default_output_format`
    picks by the installed ROCm."""
    return [exe, "--kernel-trace", "--marker-trace", "--output-format", output_format, "-d", str(out_dir), "-o",
            OUTPUT_PREFIX, "--", sys.executable, "-m", CHILD_MODULE, str(spec_path)]


def launch(folder: Path, spec: dict[str, Any], *, exe: str = ROCPROFV3, output_format: str = "csv",
           limit_s: float = BASE_TIMEOUT_S, doing: str = "running the traced blocks") -> tuple[dict[str, Any], Trace]:
    """The one launcher: write *spec* to ``folder/spec.json`` (mode 0600), run the child under *exe*
    (:func:`rocprof_command`, output into ``folder/out``) within *limit_s* (s, :func:`timeout_s`),
    and return ``(the child's JSON result, the trace read)``. *doing* names the work in errors.

    Raises :class:`~pytest_aaco.tracers.base.TracerMissing` when *exe* is not on PATH (with
    :data:`INSTALL_HINT`), and :class:`~pytest_aaco.tracers.base.TracerError` for a time-out, a
    command that cannot start, a non-zero exit (its last 8 output lines quoted), no readable result,
    or no readable kernel trace."""
    found = shutil.which(exe)
    if found is None:
        raise TracerMissing(f"{exe} is not on PATH: {INSTALL_HINT}")
    spec_path = folder / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    os.chmod(spec_path, 0o600)
    out = folder / "out"
    cmd = rocprof_command(found, out, spec_path, output_format)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s, check=False)
    except subprocess.TimeoutExpired:
        raise TracerError(f"{exe} did not finish {doing} in {limit_s:.0f} s (the limit grows with the compile"
                          " time; a compile cache shortens it)") from None
    except OSError as exc:
        raise TracerError(f"cannot start {cmd[0]}: {exc}") from exc
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
    if done.returncode != 0:
        raise TracerError(f"{exe} exited with status {done.returncode} {doing}:\n{tail}")
    try:
        result = json.loads(Path(spec["result"]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise TracerError(f"the traced child under {exe} left no result (did it run the command after '--'?):"
                          f"\n{tail}") from None
    expected = expected_output(out, output_format)
    if not expected.is_file() and find_trace(out) is None:
        raise TracerError(f"{exe} wrote no {output_format} kernel trace: {expected.name} is missing from its"
                          f" output folder (-d, -o {OUTPUT_PREFIX}):\n{tail}")
    return result, read_trace(out, prefer=expected)


class RocprofTracer:
    """The :class:`~pytest_aaco.tracers.base.Tracer` of AMD GPUs: not in process; *exe* is run by
    :func:`launch` around the child."""

    kind = eps.ROCPROFV3
    source = "rocprofv3"
    install_hint = INSTALL_HINT
    in_process = False

    def __init__(self, exe: str = ROCPROFV3) -> None:
        self.exe = exe

    def launch(self, folder: Path, spec: dict[str, Any], *, output_format: str = "csv",
               limit_s: float = BASE_TIMEOUT_S,
               doing: str = "running the traced blocks") -> tuple[dict[str, Any], Trace]:
        """:func:`launch` with this tracer's executable."""
        return launch(folder, spec, exe=self.exe, output_format=output_format, limit_s=limit_s, doing=doing)
