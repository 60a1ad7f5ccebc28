"""The one traced child: run under rocprofv3 (:func:`pytest_aaco.tracers.rocprof.launch`), it builds
the sessions and runs the blocks whose kernels the trace holds, for device time and for the kernel pass.

rocprofv3 traces a whole process from its start, so the benchmark process never runs under it::

    rocprofv3 --kernel-trace --marker-trace --output-format csv|rocpd -d DIR -o aaco -- \\
        python -m pytest_aaco.measure.traced_child SPEC.json

* **Device time** (:func:`trace_sides`): one session per side (baseline and candidate when side
  by side; each side loads its program from the plugin's compile cache, in its side's folder, or
  compiles once in the child when the cache is off), each warmed up, then ``cycles`` cycles: in each,
  one block of ``runs`` model runs per side, in a seeded random order per cycle (:func:`cycle_orders`;
  the wall-time cycles of :func:`pytest_aaco.measure.interleave.run_cycles` balance AB/BA instead).
* **The kernel pass** (:func:`trace_pass`, ``--aaco-rocprof``): the same child with one side and one
  block of :data:`PASS_RUNS` runs after :data:`PASS_WARMUP` warmup runs and a pause of
  :data:`PASS_GAP_S`; the kernels after that pause are the block's
  (:func:`pytest_aaco.passes.kernels.after_last_gap`), whatever clock rocprofv3 stamps them with.

Each block is preceded by a pause (``gap_s``, default
:data:`~pytest_aaco.tracers.rocprof_trace.BLOCK_GAP_S`) and bracketed by a roctx range
``aaco/<side>/<cycle>`` and by host timestamps on ``CLOCK_BOOTTIME`` and ``CLOCK_MONOTONIC``
(:mod:`pytest_aaco.tracers.rocprof_trace` says which one rocprofv3 uses, and why both are taken).

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
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.compile_cache import compile_cache_root, set_compile_cache
from pytest_aaco.measure.inference import bind_run, build_session
from pytest_aaco.measure.providers import ProviderSpec, parse_provider
from pytest_aaco.samplers.rocm_install import rocm_version
from pytest_aaco.tracers import rocprof
from pytest_aaco.tracers.base import DeviceBlock
from pytest_aaco.tracers.rocprof_trace import BLOCK_GAP_S, Trace, default_output_format, device_blocks, marker_name

#: warmup runs per side in the child
CHILD_WARMUP = 10
#: the kernel pass: warmup runs, the pause (s) before its one block, and the block's runs
PASS_WARMUP, PASS_GAP_S, PASS_RUNS = 3, 0.3, 10
#: roctx shared libraries tried by :func:`load_roctx`, newest first
ROCTX_LIBRARIES = ("librocprofiler-sdk-roctx.so", "librocprofiler-sdk-roctx.so.1", "libroctx64.so",
                   "/opt/rocm/lib/librocprofiler-sdk-roctx.so", "/opt/rocm/lib/libroctx64.so")


def host_stamps() -> tuple[int, int]:
    """``(CLOCK_BOOTTIME, CLOCK_MONOTONIC)`` now, ns (Linux; BOOTTIME falls back to MONOTONIC elsewhere)."""
    mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    boot_id = getattr(time, "CLOCK_BOOTTIME", None)
    return (time.clock_gettime_ns(boot_id) if boot_id is not None else mono), mono


@dataclass
class Roctx:
    """Range push/pop, or no-ops; ``source`` says which: ``roctx`` (Python module), ``ctypes:<lib>``, ``none``."""

    push: Callable[[str], object] | None = None
    pop: Callable[[], object] | None = None
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
        def push_text(text: str, _f: Callable[[bytes], object] = push) -> object:
            return _f(text.encode("utf-8"))

        return Roctx(push_text, pop, f"ctypes:{name}")
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


def _write_side(folder: Path, index: int, side: ChildSide) -> JSONDict:
    """The spec entry of *side*, its inputs saved to ``folder/feeds<index>.npz``."""
    feeds_path = folder / f"feeds{index}.npz"
    arrays: dict[str, Any] = {k: np.asarray(v) for k, v in side.feeds.items()}  # savez(**arrays)
    np.savez(feeds_path, **arrays)
    return {"name": side.name, "model": str(side.model), "provider": side.provider.short,
            "options": dict(side.provider.options), "feeds": str(feeds_path), "iobinding": side.iobinding,
            "cache_side": side.provider.side}


def _run(sides: Sequence[ChildSide], *, cycles: int, runs: int, device_id: int, seed: int, exe: str,
         output_format: str, timeout_s: float, gap_s: float, warmup: int,
         doing: str) -> tuple[dict[str, Any], Trace]:
    """The child for *sides* under rocprofv3 (:func:`pytest_aaco.tracers.rocprof.launch`):
    ``(its result, the trace)``. Raises :class:`~pytest_aaco.tracers.base.TracerError`."""
    with tempfile.TemporaryDirectory(prefix="aaco-traced-") as tmp:
        folder = Path(tmp)
        root = compile_cache_root()  # the child loads the programs this process compiled (one folder per side)
        spec = {"sides": [_write_side(folder, i, side) for i, side in enumerate(sides)], "device_id": device_id,
                "cycles": cycles, "runs": runs, "seed": seed, "compile_cache": str(root) if root is not None else "off",
                "gap_s": gap_s, "warmup": warmup, "result": str(folder / "child.json")}
        return rocprof.RocprofTracer(exe).launch(folder, spec, output_format=output_format, limit_s=timeout_s,
                                                 doing=doing)


def trace_sides(sides: Sequence[ChildSide], *, cycles: int, runs: int, device_id: int = 0, seed: int = 0,
                exe: str = rocprof.ROCPROFV3, output_format: str = "csv",
                timeout_s: float = rocprof.BASE_TIMEOUT_S) -> ChildTrace:
    """Device time: run the traced child for *sides* (``cycles`` cycles of one ``runs``-run block per
    side) under rocprofv3 and return the per-side device blocks.

    Raises :class:`~pytest_aaco.tracers.base.TracerMissing` when *exe* is not on PATH, and
    :class:`~pytest_aaco.tracers.base.TracerError` when it exits non-zero (its last output lines are
    quoted), times out after *timeout_s* (:func:`pytest_aaco.tracers.rocprof.timeout_s`), leaves no
    result or trace, or the trace cannot be cut into blocks.
    """
    result, trace = _run(sides, cycles=cycles, runs=runs, device_id=device_id, seed=seed, exe=exe,
                         output_format=output_format, timeout_s=timeout_s, gap_s=BLOCK_GAP_S, warmup=CHILD_WARMUP,
                         doing="running the traced blocks")
    how, blocks = device_blocks(trace, result["blocks"])
    return ChildTrace(blocks, how, trace.layout, str(result.get("markers", "none")))


def trace_pass(side: ChildSide, *, device_id: int = 0, runs: int = PASS_RUNS, exe: str = rocprof.ROCPROFV3,
               compile_s: float = 0.0, output_format: str | None = None) -> tuple[Trace, int, int]:
    """The kernel pass: the traced child with *side* alone, one block of *runs* runs after
    :data:`PASS_WARMUP` warmup runs and a pause of :data:`PASS_GAP_S`; ``(trace, runs, wall ns of the
    block)``. The limit is :func:`pytest_aaco.tracers.rocprof.timeout_s` of *compile_s* (the item's
    session creation, s); *output_format* defaults to
    :func:`~pytest_aaco.tracers.rocprof_trace.default_output_format` of the installed ROCm.
    Raises :class:`~pytest_aaco.tracers.base.TracerError` (:class:`~pytest_aaco.tracers.base.TracerMissing`
    when *exe* is not on PATH)."""
    fmt = output_format or default_output_format(rocm_version())
    result, trace = _run([side], cycles=1, runs=runs, device_id=device_id, seed=0, exe=exe, output_format=fmt,
                         timeout_s=rocprof.timeout_s(compile_s), gap_s=PASS_GAP_S, warmup=PASS_WARMUP,
                         doing=f"profiling {Path(side.model).name}")
    block = result["blocks"][0]
    start, end = block["monotonic"]
    return trace, int(block["runs"]), int(end) - int(start)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_aaco.measure.traced_child SPEC.json``: the traced child run under rocprofv3."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m pytest_aaco.measure.traced_child SPEC.json (written by pytest-aaco)", file=sys.stderr)
        return 2
    run_child(args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
