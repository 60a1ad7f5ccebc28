"""Builds rocpd databases the way rocprofv3 writes them, from the reproduced schema files here.

``build(path, version, kernels, ranges)`` runs ``rocpd_schema_<version>.sql`` (the upstream
table and view definitions, see README.md) with its ``{{uuid}}``/``{{guid}}`` placeholders filled
as ``generateRocpd.cpp`` fills them (``replace_uuid``: every table name gets ``_<uuid>`` with the
uuid's dashes turned into underscores; ``guid`` is the uuid itself), then inserts the rows that
``generateRocpd.cpp`` inserts for a traced process (ROCm/rocm-systems at commit
1b1610fc2b2ab32af71e6e04e4d4a6a4ae597992, projects/rocprofiler-sdk/source/lib/output/generateRocpd.cpp):

* ``rocpd_string`` (ids are hashes of the strings, ``get_hash_id``; the empty string is one),
  ``rocpd_info_node`` (id = the machine id's hash), ``rocpd_info_process`` (id = the pid),
  ``rocpd_info_stream``/``rocpd_info_queue`` (id = the handle; 0 is the "Default Stream"/"Default Queue"),
  ``rocpd_info_agent`` (id = absolute_index = the agent's node id), ``rocpd_info_code_object``,
  ``rocpd_info_kernel_symbol``, ``rocpd_info_thread`` (id = the tid);
* per roctx range (``insert_api_data``): a ``rocpd_event`` whose ``category_id`` is the buffer
  kind's name (``MARKER_CORE_RANGE_API``) and whose ``extdata`` is ``{"message": <the range's
  text>}``, and a ``rocpd_region`` named after the API operation (``roctxThreadRangeA``, which is
  what rocprofiler-sdk's ``roctxRangePushA``/``roctxRangePop`` pair is recorded as, see
  source/lib/rocprofiler-sdk-tool/tool.cpp; ``roctxRangePushA`` for the core API);
* per kernel (``insert_kernel_dispatch_data``): a ``rocpd_event`` (category ``KERNEL_DISPATCH``) and a
  ``rocpd_kernel_dispatch`` row (id = dispatch id, agent = the agent's node id, ``region_name_id``
  the empty string's id).

Schema 4.x (``rocpd_schema_4.1.0.sql``) has no nid/pid/tid/agent/queue columns on regions and
dispatches: the builder puts one ``rocpd_track`` for the traced thread under the ranges and one
per (GPU agent, queue) under the dispatches, and the categories into ``rocpd_info_category``. That
mapping of the 3.0.x rows onto 4.1.0's columns is this builder's, not read from a 4.x writer (none
was in the reference index).

Run as a script it prints the kernels view of a small database (a check by eye).
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
#: the schema versions reproduced here (rocpd_schema_<version>.sql)
VERSIONS = ("3.0.0", "3.0.1", "3.0.3", "4.1.0")
GUID = "0197a9c4-1b2c-7d3e-8f40-5a6b7c8d9e0f"  # a uuid v7, as generate_uuid_v7 makes one
PID, PPID, TID = 4242, 4200, 4242
CPU_AGENT, GPU_AGENT = 0, 2  # node ids: one CPU, then (after another GPU) the traced GPU


@dataclass(frozen=True)
class Kernel:
    """One kernel dispatch: name, start/end (ns), queue handle."""

    name: str
    start_ns: int
    end_ns: int
    queue: int = 1


@dataclass(frozen=True)
class Range:
    """One roctx range: its message and start/end (ns)."""

    message: str
    start_ns: int
    end_ns: int


def string_id(text: str) -> int:
    """A stand-in for generateRocpd.cpp's ``get_hash_id``: ids are hashes, not insertion order."""
    return zlib.crc32(text.encode("utf-8")) + 1


def schema_sql(version: str, guid: str = GUID) -> str:
    """The schema file of *version* with its placeholders filled as generateRocpd.cpp fills them."""
    text = (HERE / f"rocpd_schema_{version}.sql").read_text(encoding="utf-8")
    return text.replace("{{uuid}}", "_" + guid.replace("-", "_")).replace("{{guid}}", guid)


def build(path: str | Path, version: str, kernels: Sequence[Kernel], ranges: Sequence[Range],
          range_api: str = "roctxThreadRangeA") -> Path:
    """A rocpd database at *path* in schema *version* holding *kernels* and *ranges* (see the module
    docstring); *range_api* is the operation name the ranges are stored under."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = "_" + GUID.replace("-", "_")
    db = sqlite3.connect(path)
    db.executescript(schema_sql(version))

    def insert(table: str, **values: object) -> None:
        cols = ", ".join(f'"{k}"' for k in values)
        db.execute(f'INSERT INTO "{table}{suffix}" ({cols}) VALUES ({", ".join("?" * len(values))})',
                   list(values.values()))

    names = {k.name for k in kernels}
    tracks = version.split(".")[0] != "3"  # 4.x: rows sit on rocpd_track, categories in rocpd_info_category
    strings = ["", range_api, *sorted(names)] + ([] if tracks else ["KERNEL_DISPATCH", "MARKER_CORE_RANGE_API"])
    for text in strings:
        insert("rocpd_string", id=string_id(text), string=text)
    category = {}
    for i, text in enumerate(("KERNEL_DISPATCH", "MARKER_CORE_RANGE_API"), start=1):
        category[text] = i if tracks else string_id(text)
        if tracks:
            insert("rocpd_info_category", id=i, name=text)
    node = string_id("machine-id") % (2**31)
    insert("rocpd_info_node", id=node, hash=node, machine_id="machine-id", system_name="Linux",
           hostname="mi300x-runner", release="6.8.0", version="#1 SMP", hardware_name="x86_64", domain_name="")
    insert("rocpd_info_process", id=PID, nid=node, ppid=PPID, pid=PID, init=1, fini=2, start=1, end=2,
           command="python -m pytest_aaco.measure.traced_child spec.json", environment="{}", extdata="{}")
    insert("rocpd_info_stream", id=0, nid=node, pid=PID, name="Default Stream")
    queues = sorted({0} | {k.queue for k in kernels})
    for handle in queues:
        insert("rocpd_info_queue", id=handle, nid=node, pid=PID,
               name="Default Queue" if handle == 0 else f"Queue {handle - 1}")
    for agent, kind, logical, type_index in ((CPU_AGENT, "CPU", 0, 0), (1, "GPU", 1, 0), (GPU_AGENT, "GPU", 2, 1)):
        names_of = {"generic_name": "gfx942"} if tracks else {"user_name": ""}
        insert("rocpd_info_agent", id=agent, nid=node, pid=PID, type=kind, absolute_index=agent,
               logical_index=logical, type_index=type_index, uuid=agent, name="gfx942" if kind == "GPU" else "cpu",
               model_name="", vendor_name="AMD", product_name="", extdata="{}", **names_of)
    insert("rocpd_info_code_object", id=1, nid=node, pid=PID, agent_id=GPU_AGENT, uri="memory://4242#offset=0",
           load_base=0, load_size=4096, load_delta=0, extdata="{}")
    symbol = {}
    for i, name in enumerate(sorted(names), start=1):
        symbol[name] = i
        insert("rocpd_info_kernel_symbol", id=i, nid=node, pid=PID, code_object_id=1, kernel_name=name + ".kd",
               display_name=name, kernel_object=i, kernarg_segment_size=64, kernarg_segment_alignment=8,
               group_segment_size=0, private_segment_size=0, sgpr_count=16, arch_vgpr_count=32, accum_vgpr_count=0,
               extdata="{}")
    insert("rocpd_info_thread", id=TID, nid=node, ppid=PPID, pid=PID, tid=TID)
    host_track, queue_track = 1, {}
    if tracks:  # one track for the host thread, one per (GPU agent, queue)
        insert("rocpd_track", id=host_track, nid=node, ppid=PPID, pid=PID, tid=TID)
        for i, handle in enumerate(queues, start=2):
            queue_track[handle] = i
            insert("rocpd_track", id=i, nid=node, ppid=PPID, pid=PID, agent_id=GPU_AGENT, queue_id=handle,
                   stream_id=0)
    event = 0
    for corr, r in enumerate(ranges, start=1):  # insert_api_data (marker_api_gen)
        event += 1
        insert("rocpd_event", id=event, category_id=category["MARKER_CORE_RANGE_API"], stack_id=corr,
               parent_stack_id=0, correlation_id=0, extdata=json.dumps({"message": r.message}, indent=4))
        where = {"track_id": host_track} if tracks else {"nid": node, "pid": PID, "tid": TID}
        insert("rocpd_region", id=corr, start=r.start_ns, end=r.end_ns, name_id=string_id(range_api),
               event_id=event, **where)
    for dispatch, k in enumerate(kernels, start=1):  # insert_kernel_dispatch_data
        event += 1
        corr = len(ranges) + dispatch
        insert("rocpd_event", id=event, category_id=category["KERNEL_DISPATCH"], stack_id=corr,
               parent_stack_id=corr, correlation_id=0)
        where = ({"track_id": queue_track[k.queue]} if tracks else
                 {"nid": node, "pid": PID, "tid": TID, "agent_id": GPU_AGENT, "queue_id": k.queue, "stream_id": 0})
        insert("rocpd_kernel_dispatch", id=dispatch, kernel_id=symbol[k.name], dispatch_id=dispatch,
               start=k.start_ns, end=k.end_ns, private_segment_size=0, group_segment_size=0, workgroup_size_x=256,
               workgroup_size_y=1, workgroup_size_z=1, grid_size_x=65536, grid_size_y=1, grid_size_z=1,
               region_name_id=string_id(""), event_id=event, **where)
    db.commit()
    db.close()
    return path


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for version in VERSIONS:
            built = build(Path(tmp) / f"{version}.db", version, [Kernel("gemm", 100, 200)],
                          [Range("aaco/x/0", 50, 250)])
            con = sqlite3.connect(built)
            print(version, con.execute("SELECT name, start, end, queue_id FROM kernels").fetchall(),
                  con.execute("SELECT name, extdata FROM regions").fetchall())
