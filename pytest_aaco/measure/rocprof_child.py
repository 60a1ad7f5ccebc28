"""Device time on AMD GPUs: one child process under rocprofv3 runs the item's traced blocks.

rocprofv3 traces a whole process from its start (there is no in-process activity API to switch on
and off, as CUPTI has), so the benchmark process never runs under it. Instead
:func:`trace_sides` starts **one** traced child per item::

    rocprofv3 --kernel-trace --marker-trace --output-format csv|rocpd -d DIR -o aaco -- \\
        python -m pytest_aaco.measure.rocprof_child SPEC.json

(options from https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/how-to/using-rocprofv3.html).
The child builds one InferenceSession per side (baseline and candidate when side by side; each
side loads its program from the plugin's compile cache, in its side's folder, or compiles once in the
child when the cache is off), warms each up, then runs ``cycles`` cycles: in each, one block of
``runs`` model runs per side, in a seeded random order per cycle (:func:`cycle_orders`; the
wall-time cycles of :func:`pytest_aaco.measure.interleave.run_cycles` balance AB/BA instead), each
block preceded by a pause of
:data:`~pytest_aaco.measure.rocprof_trace.BLOCK_GAP_S` and bracketed by a roctx range
``aaco/<side>/<cycle>`` and by host timestamps on ``CLOCK_BOOTTIME`` and ``CLOCK_MONOTONIC``
(:mod:`pytest_aaco.measure.rocprof_trace` says which one rocprofv3 uses, and why both are taken).

roctx is loaded as ROCm's ``roctx`` Python module when it imports (``rangePush``/``rangePop``), else
through :mod:`ctypes` from ``librocprofiler-sdk-roctx.so`` (ROCm >= 6.2) or the older
``libroctx64.so``, calling the documented C functions ``roctxRangePushA(const char*)`` and
``roctxRangePop()`` (https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/how-to/using-rocprofiler-sdk-roctx.html);
without either, the host timestamps alone place the blocks.

The settings go to the child in a JSON file in a private temporary directory (never on a command
line), with each side's inputs in an ``.npz``. The child writes ``{"blocks": [{"side", "cycle",
"runs", "boottime": [start, end], "monotonic": [start, end]}], "markers": how}`` (ns) to the
spec's ``result`` path.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_aaco.measure.compile_cache import compile_cache_root, set_compile_cache
from pytest_aaco.measure.device_time import DeviceBlock
from pytest_aaco.measure.inference import bind_run, build_session
from pytest_aaco.measure.providers import ProviderSpec, parse_provider
from pytest_aaco.measure.rocprof_trace import (
    BLOCK_GAP_S,
    TraceError,
    device_blocks,
    find_trace,
    marker_name,
    read_trace,
)

ROCPROFV3 = "rocprofv3"
INSTALL_HINT = ("install ROCm's rocprofiler-sdk (it ships /opt/rocm/bin/rocprofv3) and put it on PATH,"
                " or pass --aaco-device-time=off")
#: the child's own time limit (s) before any compile: warmup, the traced cycles, writing the trace
BASE_TIMEOUT_S = 300.0
#: each session the child builds may take this many times the compile time measured in the plugin's
#: process (rocprofv3's own start-up and the profiled compile are slower than an unprofiled one)
COMPILE_FACTOR = 2.0
#: warmup runs per side in the child
CHILD_WARMUP = 10
#: roctx shared libraries tried by :func:`load_roctx`, newest first
ROCTX_LIBRARIES = ("librocprofiler-sdk-roctx.so", "librocprofiler-sdk-roctx.so.1", "libroctx64.so",
                   "/opt/rocm/lib/librocprofiler-sdk-roctx.so", "/opt/rocm/lib/libroctx64.so")


class RocprofError(TraceError):
    """rocprofv3 is missing, failed, timed out, or wrote nothing readable; the message says which and what to do."""


class RocprofMissing(RocprofError):
    """rocprofv3 is not installed (not on PATH): the message says what to install. Under
    ``--aaco-device-time=auto`` that is a note, as a missing CUPTI is on NVIDIA, not a warning."""


def child_timeout_s(compile_s: float, sessions: int) -> float:
    """The traced child's time limit (s): :data:`BASE_TIMEOUT_S` plus :data:`COMPILE_FACTOR` times
    the compile time *compile_s* (s; the item's session creation, which for MIGraphX is the
    compile and can take minutes) for each of *sessions* sessions the child builds."""
    return BASE_TIMEOUT_S + COMPILE_FACTOR * max(compile_s, 0.0) * max(sessions, 1)


def host_stamps() -> tuple[int, int]:
    """``(CLOCK_BOOTTIME, CLOCK_MONOTONIC)`` now, ns (Linux; BOOTTIME falls back to MONOTONIC elsewhere)."""
    mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    boot_id = getattr(time, "CLOCK_BOOTTIME", None)
    return (time.clock_gettime_ns(boot_id) if boot_id is not None else mono), mono


@dataclass
class Roctx:
    """Range push/pop, or no-ops; ``source`` says which: ``roctx`` (Python module), ``ctypes:<lib>``, ``none``."""

    push: Any = None
    pop: Any = None
    source: str = "none"

    def range_push(self, name: str) -> None:
        if self.push is not None:
            self.push(name)

    def range_pop(self) -> None:
        if self.pop is not None:
            self.pop()


def load_roctx(libraries: Sequence[str] = ROCTX_LIBRARIES) -> Roctx:
    """roctx as the module docstring says (Python module, else ctypes), else a no-op :class:`Roctx`.
    Never raises."""
    try:
        import roctx  # type: ignore[import-not-found]

        if callable(getattr(roctx, "rangePush", None)) and callable(getattr(roctx, "rangePop", None)):
            return Roctx(roctx.rangePush, roctx.rangePop, "roctx")
    except Exception:  # noqa: BLE001 - absent or broken: try the C library
        pass
    for name in libraries:
        try:
            lib = ctypes.CDLL(name)
            push, pop = lib.roctxRangePushA, lib.roctxRangePop
        except (OSError, AttributeError):
            continue
        push.argtypes, push.restype = [ctypes.c_char_p], ctypes.c_int
        pop.argtypes, pop.restype = [], ctypes.c_int
        return Roctx(lambda text, _f=push: _f(text.encode("utf-8")), pop, f"ctypes:{name}")
    return Roctx()


def cycle_orders(sides: Sequence[str], cycles: int, seed: int) -> list[list[str]]:
    """The side order of each cycle: a seeded random permutation, so no side always runs first."""
    rng = np.random.default_rng(seed)
    return [[sides[i] for i in rng.permutation(len(sides))] for _ in range(cycles)]


def run_child(spec_path: str | Path, roctx: Roctx | None = None) -> dict[str, Any]:
    """The child's work (see the module docstring); returns and writes the result. Raises what
    building or running a session raises."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    marks = roctx if roctx is not None else load_roctx()
    device_id = int(spec["device_id"])
    runners = {}
    for side in spec["sides"]:
        provider = parse_provider(side["provider"]).with_options(side["options"]).for_side(
            str(side.get("cache_side", "candidate")))
        old = set_compile_cache(spec.get("compile_cache", "off"))  # the plugin's folder, resolved there
        try:
            handle = build_session(Path(side["model"]), provider, device_id)
        finally:
            set_compile_cache(old)
        with np.load(side["feeds"], allow_pickle=False) as data:
            feeds = {name: data[name] for name in data.files}
        run = bind_run(handle, feeds, side.get("iobinding", "none"), device_id)
        for _ in range(int(spec.get("warmup", CHILD_WARMUP))):
            run()
        runners[side["name"]] = (handle, run)
    runs, gap = int(spec["runs"]), float(spec.get("gap_s", BLOCK_GAP_S))
    blocks = []
    for cycle, order in enumerate(cycle_orders(list(runners), int(spec["cycles"]), int(spec.get("seed", 0)))):
        for name in order:
            run = runners[name][1]
            time.sleep(gap)
            boot0, mono0 = host_stamps()
            marks.range_push(marker_name(name, cycle))
            for _ in range(runs):
                run()
            marks.range_pop()
            boot1, mono1 = host_stamps()
            blocks.append({"side": name, "cycle": cycle, "runs": runs, "boottime": [boot0, boot1],
                           "monotonic": [mono0, mono1]})
    result = {"blocks": blocks, "markers": marks.source}
    Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
    return result


@dataclass(frozen=True)
class ChildSide:
    """One side for the traced child: its name, model file, EP (with options), inputs, IO binding."""

    name: str
    model: Path
    provider: ProviderSpec
    feeds: Mapping[str, np.ndarray]
    iobinding: str = "none"


@dataclass
class ChildTrace:
    """The traced child's result: ``blocks`` per side (one :class:`DeviceBlock` per cycle, in cycle
    order), how block boundaries were found (``roctx`` or the host clock), the trace layout read,
    and the child's roctx source."""

    blocks: dict[str, list[DeviceBlock]]
    how: str
    layout: str
    markers: str
    notes: list[str] = field(default_factory=list)


#: the ``-o`` prefix of the traced child's output files
OUTPUT_PREFIX = "aaco"
#: the file each output format leaves, after ``<out_dir>/<prefix>_``: rocprofv3 names every output
#: ``<output path>/<output file>_<name>.<ext>`` (``get_output_filename``; ``-d`` sets the path, default
#: the working directory, ``-o`` the file, default ``%hostname%/%pid%``), the same in rocprofiler-sdk's
#: own repository (ROCm 6.2-6.4, source/lib/rocprofiler-sdk-tool/output_file.cpp) and in
#: ROCm/rocm-systems (ROCm 7, projects/rocprofiler-sdk/source/lib/output/output_stream.cpp)
OUTPUT_FILES = {"rocpd": "results.db", "csv": "kernel_trace.csv"}


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
    default (``source/bin/rocprofv3.py``); :func:`~pytest_aaco.measure.rocprof_trace.default_output_format`
    picks by the installed ROCm."""
    return [exe, "--kernel-trace", "--marker-trace", "--output-format", output_format, "-d", str(out_dir), "-o",
            OUTPUT_PREFIX, "--", sys.executable, "-m", "pytest_aaco.measure.rocprof_child", str(spec_path)]


def trace_sides(sides: Sequence[ChildSide], *, cycles: int, runs: int, device_id: int = 0, seed: int = 0,
                exe: str = ROCPROFV3, output_format: str = "csv", timeout_s: float = BASE_TIMEOUT_S) -> ChildTrace:
    """Run the traced child for *sides* (``cycles`` cycles of one ``runs``-run block per side) under
    rocprofv3 and return the per-side device blocks.

    Raises :class:`RocprofMissing` when *exe* is not on PATH, :class:`RocprofError` when it exits
    non-zero (its last output lines are quoted), times out after *timeout_s* (:func:`child_timeout_s`),
    or leaves no result, and
    :class:`~pytest_aaco.measure.rocprof_trace.TraceError` when the trace cannot be cut into blocks.
    """
    found = shutil.which(exe)
    if found is None:
        raise RocprofMissing(f"{exe} is not on PATH: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="aaco-devtime-") as tmp:
        folder = Path(tmp)
        entries = []
        for i, side in enumerate(sides):
            feeds_path = folder / f"feeds{i}.npz"
            arrays: dict[str, Any] = {k: np.asarray(v) for k, v in side.feeds.items()}
            np.savez(feeds_path, **arrays)
            entries.append({"name": side.name, "model": str(side.model), "provider": side.provider.short,
                            "options": dict(side.provider.options), "feeds": str(feeds_path),
                            "iobinding": side.iobinding, "cache_side": side.provider.side})
        root = compile_cache_root()  # the child loads the programs this process compiled (one folder per side)
        spec = {"sides": entries, "device_id": device_id, "cycles": cycles, "runs": runs, "seed": seed,
                "compile_cache": str(root) if root is not None else "off",
                "gap_s": BLOCK_GAP_S, "warmup": CHILD_WARMUP, "result": str(folder / "child.json")}
        result, tail = run_under_rocprof(exe, folder, spec, lambda path: rocprof_command(found, folder / "out", path,
                                                                                      output_format),
                                      timeout_s, doing="running the traced blocks", unfinished="the traced blocks",
                                      unfinished_hint=" (the limit grows with the compile time; a compile cache"
                                                      " shortens it)", child="the traced child")
        expected = expected_output(folder / "out", output_format)
        if not expected.is_file() and find_trace(folder / "out") is None:
            raise RocprofError(f"{exe} wrote no {output_format} kernel trace: {expected.name} is missing from its"
                               f" output folder (-d, -o {OUTPUT_PREFIX}):\n{tail}")
        trace = read_trace(folder / "out", prefer=expected)
        how, blocks = device_blocks(trace, result["blocks"])
    return ChildTrace(blocks, how, trace.layout, str(result.get("markers", "none")))


def run_under_rocprof(exe: str, folder: Path, spec: dict[str, Any], command: Callable[[Path], list[str]],
                      timeout_s: float, *, doing: str, unfinished: str, child: str, unfinished_hint: str = "",
                      no_result_hint: str = "") -> tuple[dict[str, Any], str]:
    """Write *spec* to ``folder/spec.json`` (mode 0600), run ``command(spec_path)`` (a rocprofv3
    command line around a child that writes ``spec["result"]``) within *timeout_s* (s), and return
    (the child's JSON result, the last 8 output lines). The words name what ran in the errors:
    *doing* (exit status), *unfinished* and *unfinished_hint* (time limit), *child* and
    *no_result_hint* (no result). Raises :class:`RocprofError` for a time-out, a command that cannot
    start, a non-zero exit (its last lines quoted) or no readable result."""
    spec_path = folder / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    os.chmod(spec_path, 0o600)
    cmd = command(spec_path)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise RocprofError(f"{exe} did not finish {unfinished} in {timeout_s:.0f} s{unfinished_hint}") from None
    except OSError as exc:
        raise RocprofError(f"cannot start {cmd[0]}: {exc}") from exc
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
    if done.returncode != 0:
        raise RocprofError(f"{exe} exited with status {done.returncode} {doing}:\n{tail}")
    try:
        return json.loads(Path(spec["result"]).read_text(encoding="utf-8")), tail
    except (OSError, ValueError):
        raise RocprofError(f"{child} under {exe} left no result{no_result_hint}:\n{tail}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_aaco.measure.rocprof_child SPEC.json``: the traced child run under rocprofv3."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m pytest_aaco.measure.rocprof_child SPEC.json (written by pytest-aaco)", file=sys.stderr)
        return 2
    run_child(args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
