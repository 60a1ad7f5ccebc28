"""rocprofv3's kernel trace, read from either of its outputs, and cut into traced blocks.

One reader for every user of rocprofv3 in the plugin: device time on AMD GPUs
and the kernel pass (``--aaco-rocprof``), both from one traced child process
(:mod:`pytest_aaco.measure.traced_child`). A trace that cannot be read or cut into blocks raises
:class:`~pytest_aaco.tracers.base.TracerError` naming the file and what is wrong.

Outputs read (:func:`read_trace` picks whichever the output folder holds, rocpd first):

* **rocpd** (SQLite; rocprofv3's default output since ROCm 7.0, ``--output-format rocpd``,
  ``<host>/<pid>_results.db``; https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/how-to/using-rocpd-output-format.html).
  Kernels come from the ``kernels`` view (``name``, ``start``, ``end``, ``queue_id``, ns, and the
  agent as whichever of :data:`KERNEL_AGENT_COLUMNS` ``PRAGMA table_info`` shows: rocpd schema 3.0.x
  has ``agent_abs_index``, ``agent_log_index``, ``agent_type_index``, ``agent_type``, no ``agent_id``;
  schema 4.1.0 takes the agent and queue from a ``rocpd_track`` row and names them
  ``agent_absolute_index``, ``agent_logical_index``, ...; ``data_views.sql`` and
  ``versions/<v>/data_views.sql`` of projects/rocprofiler-sdk/source/share/rocprofiler-sdk-rocpd in
  ROCm/rocm-systems), else from the tables: ``rocpd_kernel_dispatch`` with ``rocpd_info_kernel_symbol``
  (agent and queue from the row, else from its ``rocpd_track``; the agent's row id mapped through
  ``rocpd_info_agent`` to its ``absolute_index``, the label the view and the CSV give) and, where the dispatch row has
  ``start_id``/``end_id`` instead of ``start``/``end``, ``rocpd_timestamp.value`` (a layout that no
  upstream schema file read so far has; kept for a later 4.x, whose ``rocpd_indexes.sql`` indexes a
  ``rocpd_timestamp`` table).
  roctx ranges come from the ``regions`` view, else ``rocpd_region`` with ``rocpd_string`` and
  ``rocpd_event``. rocprofv3 names a range after the API call (``roctxThreadRangeA``, which
  ``roctxRangePushA``/``roctxRangePop`` are recorded as, or ``roctxRangePushA``) and keeps its text in
  the event's ``extdata`` as ``{"message": ...}`` (``insert_api_data`` in
  projects/rocprofiler-sdk/source/lib/output/generateRocpd.cpp), so a range's name here is that
  message (:func:`roctx_message`), else the region name. A view without the columns read is a
  :class:`TracerError` naming the file, the view and the missing column. The file is opened
  read-only (``file:...?mode=ro`` URI, :mod:`sqlite3`), never written.
* **CSV** (``--output-format csv``, deprecated since ROCm 7.0 but still written):
  ``<prefix>_kernel_trace.csv`` with ``Kind, Agent_Id, Queue_Id, ..., Kernel_Name, Correlation_Id,
  Start_Timestamp, End_Timestamp, ...`` (ns), and with ``--marker-trace``
  ``<prefix>_marker_api_trace.csv`` with ``Domain, Function, Process_Id, Thread_Id, Correlation_Id,
  Start_Timestamp, End_Timestamp``
  (https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/how-to/using-rocprofv3.html); the older
  rocprof v2 (``Kernel_Name``/``GPU_ID``/``Queue_ID``) and v1 ``results.csv``
  (``KernelName``/``BeginNs``/``EndNs``) kernel layouts too.

**Block boundaries** (:func:`block_windows`): rocprofv3 traces the whole child process, so the
child says where each traced block starts and ends, in one of two ways:

1. roctx ranges named ``aaco/<side>/<cycle>`` pushed and popped around each block
   (``--marker-trace``), when the child could load roctx (:mod:`pytest_aaco.measure.traced_child`);
2. else host timestamps the child wrote itself, on both ``CLOCK_BOOTTIME`` and
   ``CLOCK_MONOTONIC``. rocprofiler-sdk stamps records with ``CLOCK_BOOTTIME`` ("the HSA runtime's
   os::ReadSystemClock()"; ``default_clock_id`` in ``source/lib/common/utility.hpp`` of
   ROCm/rocprofiler-sdk); its earlier releases used ``std::chrono::steady_clock``, which is
   ``CLOCK_MONOTONIC`` on Linux. The two differ by the time the machine was suspended, so the clock
   that places the kernels inside the blocks is the one used (:func:`windows_from_host`).

The child sleeps :data:`BLOCK_GAP_S` before each block, so a kernel that a block launched is
still counted to it when it ends after the block's host end (up to half the gap).

Units: timestamps ns; per-run figures ms (:class:`~pytest_aaco.tracers.base.DeviceBlock`).
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_aaco.tracers.base import DeviceBlock, KernelSpan, TracerError, block_of

#: pause (s) the traced child takes before every traced block
BLOCK_GAP_S = 0.05
#: roctx range names are ``MARKER_PREFIX + side + "/" + cycle``
MARKER_PREFIX = "aaco/"
#: host clocks the child stamps blocks with, in the order tried
HOST_CLOCKS = ("boottime", "monotonic")
#: (layout, kernel name, start ns, end ns, device, stream) columns of the kernel-trace CSVs, tried in order
CSV_LAYOUTS = (
    ("rocprofv3", "Kernel_Name", "Start_Timestamp", "End_Timestamp", "Agent_Id", "Queue_Id"),
    ("rocprof-v2", "Kernel_Name", "Start_Timestamp", "End_Timestamp", "GPU_ID", "Queue_ID"),
    ("rocprof-v1", "KernelName", "BeginNs", "EndNs", "gpu-id", "queue-id"),
)


@dataclass(frozen=True)
class Marker:
    """One roctx range (or any host range in the trace): its text and start/end (ns, the tracer's clock)."""

    name: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Trace:
    """What one rocprofv3 run left: its kernels, its roctx ranges, and the layout read
    (``rocpd``, ``rocprofv3``, ``rocprof-v2``, ``rocprof-v1``) and file."""

    layout: str
    kernels: list[KernelSpan]
    markers: list[Marker]
    path: Path


@dataclass(frozen=True)
class BlockWindow:
    """One traced block as the child ran it: side, cycle, model runs, and its start/end (ns)."""

    side: str
    cycle: int
    runs: int
    start_ns: int
    end_ns: int


def default_output_format(rocm_version: str | None) -> str:
    """``rocpd`` on ROCm >= 7.0 (its default there; CSV is deprecated), else ``csv`` (which every
    rocprofv3 writes). *rocm_version*: ``/opt/rocm/.info/version`` text (``7.0.1-42``) or None."""
    try:
        major = int(str(rocm_version or "").split(".")[0])
    except ValueError:
        return "csv"
    return "rocpd" if major >= 7 else "csv"


# ---------------------------------------------------------------- CSV


def _read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            header = [h.strip() for h in reader.fieldnames or []]
            reader.fieldnames = header
            return header, list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TracerError(f"cannot read the kernel trace {path}: {exc}") from exc


def _int(path: Path, line: int, row: dict[str, str], *columns: str) -> tuple[int, ...]:
    try:
        return tuple(int(row[c]) for c in columns)
    except (TypeError, ValueError, KeyError):
        got = "/".join(repr(row.get(c)) for c in columns)
        raise TracerError(f"{path}, line {line}: {'/'.join(columns)} must be integers (ns), got {got}") from None


def read_kernel_csv(path: str | Path) -> tuple[str, list[KernelSpan]]:
    """``(layout, kernels)`` of a kernel-trace CSV in one of :data:`CSV_LAYOUTS` (the first whose five
    columns are all there, else the first whose name and timestamp columns are).

    rocprofv3 rows whose ``Kind`` is not ``KERNEL_DISPATCH`` are skipped. Raises :class:`TracerError`
    naming the file for an unreadable file, a header of no known layout, and a row whose
    timestamps are not integers (naming its line).
    """
    path = Path(path)
    header, rows = _read_rows(path)
    columns = set(header)
    matches = ([c for c in CSV_LAYOUTS if set(c[1:]) <= columns]
               or [c for c in CSV_LAYOUTS if set(c[1:4]) <= columns])
    if not matches:
        raise TracerError(f"{path}: not a kernel trace of rocprofv3, rocprof v2 or rocprof v1: columns"
                         f" {', '.join(header[:12]) or '(none)'}; expected Kernel_Name/Start_Timestamp/End_Timestamp"
                         " or KernelName/BeginNs/EndNs")
    layout, name, start, end, device, stream = matches[0]
    kernels = []
    for line, row in enumerate(rows, start=2):
        if (row.get("Kind") or "KERNEL_DISPATCH").strip() != "KERNEL_DISPATCH":
            continue
        begin, finish = _int(path, line, row, start, end)
        kernels.append(KernelSpan(str(row[name]).strip(), begin, finish, str(row.get(device) or "0").strip(),
                                  str(row.get(stream) or "0").strip()))
    return layout, kernels


def read_marker_csv(path: str | Path) -> list[Marker]:
    """The ranges of a rocprofv3 ``*_marker_api_trace.csv``: one :class:`Marker` per row, named by
    whichever text column holds this plugin's :data:`MARKER_PREFIX` (the documented ``Function``
    column, else any other), else by ``Function``. Raises :class:`TracerError` as
    :func:`read_kernel_csv` does; a file without ``Start_Timestamp``/``End_Timestamp`` is one."""
    path = Path(path)
    header, rows = _read_rows(path)
    if not {"Start_Timestamp", "End_Timestamp"} <= set(header):
        raise TracerError(f"{path}: not a rocprofv3 marker trace: columns {', '.join(header[:12]) or '(none)'};"
                         " expected Start_Timestamp and End_Timestamp")
    markers = []
    for line, row in enumerate(rows, start=2):
        texts = [str(row.get("Function") or "")] + [str(v) for k, v in row.items() if k != "Function" and v]
        name = next((t.strip() for t in texts if t.strip().startswith(MARKER_PREFIX)), texts[0].strip())
        begin, finish = _int(path, line, row, "Start_Timestamp", "End_Timestamp")
        markers.append(Marker(name, begin, finish))
    return markers


# ---------------------------------------------------------------- rocpd


def _connect_ro(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TracerError(f"cannot open the rocpd database {path} read-only: {exc}") from exc


def _names(db: sqlite3.Connection) -> set[str]:
    return {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in db.execute(f"PRAGMA table_info(`{table}`)")}


def _time_columns(columns: set[str], alias: str, names: set[str]) -> tuple[str, str] | None:
    """(the start and end columns to select, the joins they need) for a rocpd table aliased *alias*
    with *columns*: its own ``start``/``end``, or ``start_id``/``end_id`` into ``rocpd_timestamp``
    (one of the two layouts rocpd databases have); None when it has neither."""
    if {"start", "end"} <= columns:
        return f"{alias}.start, {alias}.end", ""
    if {"start_id", "end_id"} <= columns and "rocpd_timestamp" in names:
        return "DS.value, DE.value", (f" JOIN rocpd_timestamp DS ON DS.id = {alias}.start_id"
                                      f" JOIN rocpd_timestamp DE ON DE.id = {alias}.end_id")
    return None


#: agent columns of the ``kernels`` view, tried in order: rocpd schema 3.0.x names the agent by its
#: absolute, logical and per-type index (``A.absolute_index AS agent_abs_index``, ...; ``data_views.sql``),
#: schema 4.1.0 by ``T.agent_absolute_index``, ``T.agent_logical_index``, ``T.agent_type_index`` of its
#: ``tracks`` view (``versions/4.1.0/data_views.sql``)
KERNEL_AGENT_COLUMNS = ("agent_abs_index", "agent_absolute_index", "agent_log_index", "agent_logical_index",
                        "agent_type_index")
#: the ``kernels`` view's columns this reader needs besides an agent column
KERNEL_COLUMNS = ("name", "start", "end", "queue_id")
#: the ``regions`` view's columns this reader needs (the roctx message is in ``extdata``)
REGION_COLUMNS = ("name", "start", "end", "extdata")


def _need(columns: list[str], needed: Sequence[str], what: str) -> None:
    missing = [c for c in needed if c not in columns]
    if missing:
        raise TracerError(f"{what} has no column {', '.join(missing)} (it has {', '.join(columns) or 'none'}):"
                         " not a rocpd layout pytest-aaco reads (rocprofiler-sdk's rocpd schema 3.0.x or 4.1.0)")


def _ordered_columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in db.execute(f"PRAGMA table_info(`{table}`)")]


def _rocpd_kernels(db: sqlite3.Connection, names: set[str]) -> list[tuple[Any, ...]]:
    """(name, start, end, agent, queue) per kernel dispatch: from the ``kernels`` view, its agent
    column being whichever of :data:`KERNEL_AGENT_COLUMNS` ``PRAGMA table_info`` shows, else (no view,
    or a view that its inner joins leave empty while ``rocpd_kernel_dispatch`` has rows) from the tables."""
    if "kernels" in names:
        columns = _ordered_columns(db, "kernels")
        _need(columns, KERNEL_COLUMNS, "the kernels view")
        agent = next((c for c in KERNEL_AGENT_COLUMNS if c in columns), None)
        if agent is None:
            _need(columns, KERNEL_AGENT_COLUMNS[:1], "the kernels view")
        rows = db.execute(f'SELECT name, start, "end", "{agent}", queue_id FROM kernels').fetchall()
        if rows or "rocpd_kernel_dispatch" not in names:
            return rows
    if not {"rocpd_kernel_dispatch", "rocpd_info_kernel_symbol"} <= names:
        raise TracerError("no kernels view and no rocpd_kernel_dispatch/rocpd_info_kernel_symbol tables")
    symbol = "COALESCE(S.display_name, S.kernel_name)"
    columns_set = _columns(db, "rocpd_kernel_dispatch")
    found = _time_columns(columns_set, "K", names)
    if found is None:
        raise TracerError("rocpd_kernel_dispatch has no column start/end, nor start_id/end_id with a"
                         f" rocpd_timestamp table (it has {', '.join(sorted(columns_set))})")
    times, joins = found
    agent = "K.agent_id" if "agent_id" in columns_set else "0"
    queue = "K.queue_id" if "queue_id" in columns_set else "0"
    if "agent_id" not in columns_set and "track_id" in columns_set and "rocpd_track" in names:
        agent, queue = "T.agent_id", "T.queue_id"
        joins += " LEFT JOIN rocpd_track T ON T.id = K.track_id"
    if agent != "0" and "rocpd_info_agent" in names and "absolute_index" in _columns(db, "rocpd_info_agent"):
        # agent_id is the rocpd_info_agent row's id (a database row id); the device is labelled as the kernels view
        # labels it (agent_abs_index: A.absolute_index, data_views.sql) and the CSV's Agent_Id does
        joins += f" LEFT JOIN rocpd_info_agent A ON A.id = {agent}"
        agent = f"COALESCE(A.absolute_index, {agent})"
    return db.execute(f"SELECT {symbol}, {times}, {agent}, {queue} FROM rocpd_kernel_dispatch K"
                      f" JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id{joins}").fetchall()


def roctx_message(extdata: object) -> str | None:
    """The roctx message of a rocpd event's *extdata* (``{"message": ...}``, JSON text as
    generateRocpd.cpp's ``insert_api_data`` writes it), or None when there is none or it is not JSON."""
    if isinstance(extdata, (bytes, bytearray)):
        try:
            extdata = extdata.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(extdata, str) or "message" not in extdata:
        return None
    try:
        value = json.loads(extdata)
    except ValueError:
        return None
    message = value.get("message") if isinstance(value, dict) else None
    return message if isinstance(message, str) and message else None


def _rocpd_regions(db: sqlite3.Connection, names: set[str]) -> list[tuple[Any, ...]]:
    """(name, start, end, extdata) per host range: from the ``regions`` view (its columns checked
    with ``PRAGMA table_info``), else from ``rocpd_region`` with ``rocpd_string`` and ``rocpd_event``."""
    if "regions" in names:
        columns = _ordered_columns(db, "regions")
        _need(columns, REGION_COLUMNS, "the regions view")
        rows = db.execute('SELECT name, start, "end", extdata FROM regions').fetchall()
        if rows or "rocpd_region" not in names:
            return rows
    if not {"rocpd_region", "rocpd_string"} <= names:
        return []
    region_columns = _columns(db, "rocpd_region")
    found = _time_columns(region_columns, "R", names)
    if found is None:
        return []
    times, joins = found
    extdata = "NULL"
    if "event_id" in region_columns and "rocpd_event" in names and "extdata" in _columns(db, "rocpd_event"):
        extdata, joins = "E.extdata", joins + " LEFT JOIN rocpd_event E ON E.id = R.event_id"
    return db.execute(f"SELECT N.string, {times}, {extdata} FROM rocpd_region R"
                      f" JOIN rocpd_string N ON N.id = R.name_id{joins}").fetchall()


def read_rocpd(path: str | Path) -> tuple[list[KernelSpan], list[Marker]]:
    """``(kernels, ranges)`` of a rocpd database (see the module docstring for the views and tables
    read). Raises :class:`TracerError` naming the file when it cannot be opened or queried, or holds
    no kernel table or view."""
    path = Path(path)
    if not path.is_file():
        raise TracerError(f"no rocpd database at {path}")
    db = _connect_ro(path)
    try:
        names = _names(db)
        rows = _rocpd_kernels(db, names)
        regions = _rocpd_regions(db, names)
    except sqlite3.Error as exc:
        raise TracerError(f"{path}: not a readable rocpd database: {exc}") from exc
    except TracerError as exc:
        raise TracerError(f"{path}: {exc}") from exc
    finally:
        db.close()
    try:
        kernels = [KernelSpan(str(n), int(s), int(e), str(a if a is not None else 0), str(q if q is not None else 0))
                   for n, s, e, a, q in rows]
        markers = [Marker(roctx_message(x) or str(n), int(s), int(e)) for n, s, e, x in regions]
    except (TypeError, ValueError) as exc:
        raise TracerError(f"{path}: a kernel or region row without integer start/end (ns): {exc}") from exc
    return kernels, markers


# ---------------------------------------------------------------- finding and reading the output


def find_trace(out_dir: str | Path) -> Path | None:
    """The trace rocprofv3 (or rocprof) wrote under *out_dir*: the newest ``*.db`` (rocpd), else the
    newest ``*kernel_trace.csv``, else ``results*.csv`` (rocprof v1); None when there is none."""
    folder = Path(out_dir)
    for patterns in (("*.db",), ("*kernel_trace.csv",), ("results*.csv",)):
        found = [p for pattern in patterns for p in folder.rglob(pattern)]
        if found:
            return max(found, key=lambda p: p.stat().st_mtime)
    return None


def read_trace(out_dir: str | Path, prefer: str | Path | None = None) -> Trace:
    """The :class:`Trace` under *out_dir*: the file *prefer* when given and there (the name the
    command line asked rocprofv3 for), else :func:`find_trace`'s; for CSV the marker trace beside
    the kernel trace is read too. Raises :class:`TracerError` when there is no trace or it is unreadable."""
    path = Path(prefer) if prefer is not None and Path(prefer).is_file() else find_trace(out_dir)
    if path is None:
        raise TracerError(f"no kernel trace under {out_dir} (expected a rocpd *.db or a *kernel_trace.csv)")
    if path.suffix == ".db":
        kernels, markers = read_rocpd(path)
        return Trace("rocpd", kernels, markers, path)
    layout, kernels = read_kernel_csv(path)
    own = path.with_name(path.name.replace("kernel_trace.csv", "marker_api_trace.csv"))
    marker_files = [own] if own != path and own.is_file() else sorted(path.parent.glob("*marker_api_trace.csv"))
    markers = [m for f in marker_files for m in read_marker_csv(f)]
    return Trace(layout, kernels, markers, path)


# ---------------------------------------------------------------- blocks


def marker_name(side: str, cycle: int) -> str:
    """The roctx range name of *side*'s block in *cycle*: ``aaco/<side>/<cycle>``."""
    return f"{MARKER_PREFIX}{side}/{cycle}"


def windows_from_markers(markers: Iterable[Marker], blocks: Sequence[dict[str, Any]]) -> list[BlockWindow] | None:
    """The block windows from roctx ranges named by :func:`marker_name`, for the child's *blocks*
    (``{"side", "cycle", "runs"}`` each); None unless every block has exactly one range."""
    by_name: dict[str, list[Marker]] = {}
    for m in markers:
        if m.name.startswith(MARKER_PREFIX):
            by_name.setdefault(m.name, []).append(m)
    windows = []
    for block in blocks:
        found = by_name.get(marker_name(str(block["side"]), int(block["cycle"]))) or []
        if len(found) != 1:
            return None
        windows.append(BlockWindow(str(block["side"]), int(block["cycle"]), int(block["runs"]),
                                   found[0].start_ns, found[0].end_ns))
    return windows


def assign(kernels: Sequence[KernelSpan], windows: Sequence[BlockWindow],
           slack_ns: int) -> list[list[KernelSpan]]:
    """The kernels of each window: those starting in ``[start, end + slack)``; a kernel counts to
    one window at most (the first, in time order). Shape: one list per window, in *windows*' order."""
    order = sorted(range(len(windows)), key=lambda i: windows[i].start_ns)
    spans = sorted(kernels, key=lambda k: k.start_ns)
    out: list[list[KernelSpan]] = [[] for _ in windows]
    j = 0
    for i in order:
        w = windows[i]
        while j < len(spans) and spans[j].start_ns < w.start_ns:
            j += 1
        while j < len(spans) and spans[j].start_ns < w.end_ns + slack_ns:
            out[i].append(spans[j])
            j += 1
    return out


def windows_from_host(kernels: Sequence[KernelSpan], blocks: Sequence[dict[str, Any]],
                      slack_ns: int) -> tuple[str, list[BlockWindow]]:
    """``(clock, windows)`` from the child's host timestamps: each block's ``{clock: [start, end]}``
    for the clocks in :data:`HOST_CLOCKS`; the clock that puts a kernel in every block (and the most
    kernels in all) wins. Raises :class:`TracerError` when no clock does."""
    best: tuple[int, str, list[BlockWindow]] | None = None
    for clock in HOST_CLOCKS:
        if not all(clock in b for b in blocks):
            continue
        windows = [BlockWindow(str(b["side"]), int(b["cycle"]), int(b["runs"]), int(b[clock][0]), int(b[clock][1]))
                   for b in blocks]
        groups = assign(kernels, windows, slack_ns)
        if all(groups):
            count = sum(len(g) for g in groups)
            if best is None or count > best[0]:
                best = (count, clock, windows)
    if best is None:
        raise TracerError(f"the traced blocks' host timestamps ({', '.join(HOST_CLOCKS)}) do not bracket the traced"
                         f" kernels ({len(kernels)} kernels, {len(blocks)} blocks): rocprofv3 stamps with another"
                         " clock;"
                         " install roctx (rocprofiler-sdk-roctx) so block boundaries come from markers")
    return best[1], best[2]


def block_windows(trace: Trace, blocks: Sequence[dict[str, Any]],
                  slack_ns: int = int(BLOCK_GAP_S * 1e9 / 2)) -> tuple[str, list[BlockWindow]]:
    """``(how, windows)``: from roctx ranges when the trace has one per block (``how="roctx"``), else
    from the child's host timestamps (``how`` = the clock). Raises :class:`TracerError`."""
    windows = windows_from_markers(trace.markers, blocks)
    if windows is not None:
        return "roctx", windows
    return windows_from_host(trace.kernels, blocks, slack_ns)


def device_blocks(trace: Trace, blocks: Sequence[dict[str, Any]],
                  slack_ns: int = int(BLOCK_GAP_S * 1e9 / 2)) -> tuple[str, dict[str, list[DeviceBlock]]]:
    """``(how, {side: [DeviceBlock per cycle, in cycle order]})`` of the child's *blocks* in *trace*
    (:func:`block_windows`; each block's kernels through
    :func:`~pytest_aaco.tracers.base.block_of`). Raises :class:`TracerError` for a block with no kernel."""
    how, windows = block_windows(trace, blocks, slack_ns)
    groups = assign(trace.kernels, windows, slack_ns)
    out: dict[str, list[tuple[int, DeviceBlock]]] = {}
    for window, spans in zip(windows, groups, strict=True):
        if not spans:
            raise TracerError(f"{trace.path}: no kernel in the traced block of {window.side}, cycle {window.cycle}"
                             f" ({how}): the session does not run on the GPU rocprofv3 traced")
        out.setdefault(window.side, []).append((window.cycle, block_of(spans, window.runs)))
    return how, {side: [b for _, b in sorted(items, key=lambda x: x[0])] for side, items in out.items()}
