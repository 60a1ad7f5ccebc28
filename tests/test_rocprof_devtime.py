"""Device time on AMD GPUs from rocprofv3's output: the rocpd and CSV readers, the cut into traced
blocks (roctx ranges, or host timestamps on the right clock), per-block kernel sums and counts, and
the paired device-time test finding the regression in a recorded trace pair.

The traces are constructed in the documented layouts (tests/data/rocprof/README.md); no AMD GPU
was at hand. The rocpd databases are built from rocprofiler-sdk's own table and view definitions
(rocpd schema 3.0.0, 3.0.1, 3.0.3, reproduced in tests/data/rocprof/rocpd_schema_3.0.*.sql), with
rows inserted as rocprofv3 inserts them (tests/data/rocprof/rocpd_db.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import stat
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from finished import to_verdict

from pytest_aaco.measure import traced_child
from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.measure.traced_child import ChildSide, Roctx, cycle_orders, load_roctx, trace_sides
from pytest_aaco.sidebyside.cycles import (
    BASELINE,
    CANDIDATE,
    CompareSettings,
    OpenedSide,
    attach_child_device_time,
    child_device_look,
    child_device_time,
    compare_sides,
    device_look_of,
)
from pytest_aaco.tracers.base import KernelSpan, TracerMissing
from pytest_aaco.tracers.base import TracerError as TraceError
from pytest_aaco.tracers.rocprof import expected_output, rocprof_command, timeout_s
from pytest_aaco.tracers.rocprof_trace import (
    Marker,
    Trace,
    default_output_format,
    device_blocks,
    read_kernel_csv,
    read_marker_csv,
    read_rocpd,
    read_trace,
)
from pytest_aaco.tracers.select import tracer_for

DATA = Path(__file__).parent / "data" / "rocprof"
KERNELS = DATA / "devtime_pair_kernel_trace.csv"
MARKERS = DATA / "devtime_pair_marker_api_trace.csv"
CHILD = json.loads((DATA / "devtime_pair.child.json").read_text())["blocks"]
EXTRA = "aaco_slow_conv_branch"


def recorded_trace(markers: bool = True) -> Trace:
    _, kernels = read_kernel_csv(KERNELS)
    return Trace("rocprofv3", kernels, read_marker_csv(MARKERS) if markers else [], KERNELS)


# ---------------------------------------------------------------- readers


def test_the_recorded_csv_pair_reads_as_documented():
    layout, kernels = read_kernel_csv(KERNELS)
    assert layout == "rocprofv3"
    assert len(kernels) == 2 * 2 * 12 + 1 * 2 + 8 * 5 * (12 + 13)  # warmup runs, then 8 cycles x 5 runs per side
    assert kernels[0].name == "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32" and kernels[0].device == "2"
    markers = read_marker_csv(MARKERS)
    assert [m.name for m in markers[:2]] == ["aaco/baseline/0", "aaco/candidate/0"] and len(markers) == 16


def _load_rocpd_db():
    spec = importlib.util.spec_from_file_location("rocpd_db", DATA / "rocpd_db.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["rocpd_db"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


rocpd_db = _load_rocpd_db()


def build_rocpd(path: Path, version: str, kernels: list[KernelSpan], markers: list[Marker],
                range_api: str = "roctxThreadRangeA") -> Path:
    """A rocpd database in schema *version* (tests/data/rocprof/rocpd_schema_<version>.sql, the upstream
    definitions) holding *kernels* and the roctx ranges *markers*, inserted as rocprofv3 inserts them
    (tests/data/rocprof/rocpd_db.py): each range under the API call's name, its text in extdata."""
    spans = [rocpd_db.Kernel(k.name, k.start_ns, k.end_ns, int(k.stream)) for k in kernels]
    return rocpd_db.build(path, version, spans, [rocpd_db.Range(m.name, m.start_ns, m.end_ns) for m in markers],
                          range_api)


@pytest.mark.parametrize("version", rocpd_db.VERSIONS)
def test_rocpd_gives_the_same_kernels_and_ranges_as_the_csv(tmp_path, version):
    csv_trace = recorded_trace()
    db = build_rocpd(tmp_path / "aaco_results.db", version, csv_trace.kernels, csv_trace.markers)
    with sqlite3.connect(db) as con:  # the real views: agent by index, ranges named after the API call
        columns = {r[1] for r in con.execute("PRAGMA table_info(kernels)")}
        agent = {"3": "agent_abs_index", "4": "agent_absolute_index"}[version[0]]
        assert agent in columns and ("agent_id" in columns) == version.startswith("4")  # 4.1.0: the track's
        assert {r[0] for r in con.execute("SELECT name FROM regions")} == {"roctxThreadRangeA"}
    before = db.read_bytes()
    kernels, markers = read_rocpd(db)
    assert sorted((k.name, k.start_ns, k.end_ns) for k in kernels) == sorted(
        (k.name, k.start_ns, k.end_ns) for k in csv_trace.kernels)
    assert {k.device for k in kernels} == {str(rocpd_db.GPU_AGENT)}  # agent_abs_index
    assert {k.stream for k in kernels} == {k.stream for k in csv_trace.kernels}
    assert sorted(markers, key=lambda m: m.start_ns) == sorted(csv_trace.markers, key=lambda m: m.start_ns)
    assert db.read_bytes() == before  # opened read-only


@pytest.mark.parametrize("version", rocpd_db.VERSIONS)
@pytest.mark.parametrize("range_api", ["roctxThreadRangeA", "roctxRangePushA"])
def test_rocpd_blocks_give_per_block_kernel_sums_and_counts(tmp_path, version, range_api):
    csv_trace = recorded_trace()
    build_rocpd(tmp_path / "aaco_results.db", version, csv_trace.kernels, csv_trace.markers, range_api)
    trace = read_trace(tmp_path)
    assert trace.layout == "rocpd" and trace.path == tmp_path / "aaco_results.db"
    how, blocks = device_blocks(trace, CHILD)
    assert how == "roctx"  # the ranges were found by their message, not by the region name
    base, cand = blocks[BASELINE], blocks[CANDIDATE]
    assert [b.kernels for b in base] == [12.0] * 8 and [b.kernels for b in cand] == [13.0] * 8
    assert all(b.kernel_ms == pytest.approx(0.500, rel=0.005) for b in base)
    assert all(c.kernel_ms / b.kernel_ms == pytest.approx(1.06, abs=0.006) for b, c in zip(base, cand, strict=True))
    _, from_csv = device_blocks(csv_trace, CHILD)
    assert [b.kernel_ms for b in cand] == [b.kernel_ms for b in from_csv[CANDIDATE]]


def shifted(trace: Trace, offset_ns: int) -> tuple[list[KernelSpan], list[Marker], list[dict]]:
    """The recorded pair as another traced child would leave it: the same kernels and ranges, later."""
    kernels = [KernelSpan(k.name, k.start_ns + offset_ns, k.end_ns + offset_ns, k.device, k.stream)
               for k in trace.kernels]
    markers = [Marker(m.name, m.start_ns + offset_ns, m.end_ns + offset_ns) for m in trace.markers]
    blocks = [dict(b, boottime=[b["boottime"][0] + offset_ns, b["boottime"][1] + offset_ns]) for b in CHILD]
    return kernels, markers, blocks


@pytest.mark.parametrize("version", rocpd_db.VERSIONS)
def test_a_recorded_rocpd_pair_is_found_as_a_regression(tmp_path, version):
    """The device-time verdict from two rocpd databases (the first traced child and the one that
    confirms a regression), candidate kernels +6%: what the gate does with trace_sides' blocks."""
    csv_trace = recorded_trace()
    children = {}
    for seed in (0, 1):
        kernels, markers, blocks = shifted(csv_trace, seed * 10**12)
        build_rocpd(tmp_path / str(seed) / "aaco_results.db", version, kernels, markers)
        children[seed] = blocks

    def trace(seed: int) -> dict[str, list]:
        return device_blocks(read_trace(tmp_path / str(seed)), children[seed])[1]

    settings = CompareSettings(block_s=0.0, discard=1, budget_s=60.0, threshold=0.05)
    looks = child_device_time(trace, settings, alpha=0.05)
    assert len(looks) == 2 and [look.outcome for look in looks] == ["regression", "regression"]
    look = child_device_look(looks)
    assert look.outcome == "regression" and look.comparison.ratio == pytest.approx(1.06, abs=0.005)
    assert look.kernels == {BASELINE: 12.0, CANDIDATE: 13.0} and look.added == [(EXTRA, 1.0)]
    result = compare_sides(HostNoiseFactory(0), HostNoiseFactory(50), settings, alpha=0.05, baseline_label="HEAD",
                           device=True)
    attach_child_device_time(result, looks)
    verdict = to_verdict(result, "resnet50[migraphx]")
    assert verdict.fails and verdict.message.startswith("REGRESSION resnet50[migraphx]: device time +6.")


@pytest.mark.parametrize("version", rocpd_db.VERSIONS)
def test_the_same_rocpd_trace_on_both_sides_is_no_regression(tmp_path, version):
    csv_trace = recorded_trace()
    base_only = [k for k in csv_trace.kernels if k.name != EXTRA]
    build_rocpd(tmp_path / "aaco_results.db", version, base_only, csv_trace.markers)
    blocks = device_blocks(read_trace(tmp_path), CHILD)[1]
    look = device_look_of([(blocks[BASELINE], blocks[CANDIDATE])], CompareSettings(threshold=0.05), True, 0.05, 0.05)
    assert look is not None and look.outcome == "no-regression"


def test_a_kernels_view_without_a_known_agent_column_names_the_file_and_column(tmp_path):
    """The layout the reader used to assume (agent_id in the kernels view) is not rocpd's: a view
    without agent_abs_index/agent_log_index/agent_type_index is one clear error."""
    db = build_rocpd(tmp_path / "odd.db", "3.0.0", recorded_trace().kernels[:3], [])
    with sqlite3.connect(db) as con:
        con.executescript("DROP VIEW kernels; CREATE VIEW kernels AS SELECT K.id, S.display_name AS name,"
                          " K.agent_id, K.queue_id, K.start, K.end FROM rocpd_kernel_dispatch K"
                          " JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id;")
    with pytest.raises(TraceError, match=r"odd.db: the kernels view has no column agent_abs_index \(it has id, name,"
                                         r" agent_id, queue_id, start, end\)"):
        read_rocpd(db)
    with sqlite3.connect(db) as con:
        con.executescript("DROP VIEW regions; CREATE VIEW regions AS SELECT 1 AS name, 2 AS start, 3 AS \"end\";")
        con.executescript("DROP VIEW kernels; CREATE VIEW kernels AS SELECT 'k' AS name, 1 AS start,"
                          " 2 AS \"end\", 0 AS agent_abs_index, 0 AS queue_id;")
    with pytest.raises(TraceError, match="odd.db: the regions view has no column extdata"):
        read_rocpd(db)


@pytest.mark.parametrize("version", ["3.0.3", "4.1.0"])
def test_the_rocpd_tables_are_read_when_the_views_are_missing(tmp_path, version):
    """A rocpd database without the data views (kernels, regions, ...; the rocpd_* views over the
    per-process tables kept): kernels and ranges from rocpd_kernel_dispatch, rocpd_region,
    rocpd_string and rocpd_event (4.1.0: the agent and queue from the dispatch's rocpd_track)."""
    csv_trace = recorded_trace()
    db = build_rocpd(tmp_path / "aaco_results.db", version, csv_trace.kernels, csv_trace.markers)
    with sqlite3.connect(db) as con:
        views = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'view'"
                                           " AND name NOT LIKE 'rocpd%'")]
        con.executescript("".join(f"DROP VIEW `{v}`;" for v in views))
    kernels, markers = read_rocpd(db)
    assert len(kernels) == len(csv_trace.kernels) and {k.device for k in kernels} == {str(rocpd_db.GPU_AGENT)}
    assert {k.stream for k in kernels} == {k.stream for k in csv_trace.kernels}
    assert sorted(markers, key=lambda m: m.start_ns) == sorted(csv_trace.markers, key=lambda m: m.start_ns)


@pytest.mark.parametrize("version", ["3.0.0", "3.0.3", "4.1.0"])
def test_without_the_views_the_device_is_the_agents_index_not_its_row_id(tmp_path, version):
    """Issue 40 finding 7: rocpd_info_agent.id is an AUTOINCREMENT row id (rocpd_schema_*.sql, ROCm/rocm-systems); a
    dispatch's agent_id points at it. Renumbered rows (as another process's rows in a merged database would be) must
    still label the kernels with the agent's absolute_index, as the kernels view does."""
    csv_trace = recorded_trace()
    db = build_rocpd(tmp_path / "aaco_results.db", version, csv_trace.kernels[:20], [])
    with sqlite3.connect(db) as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        agents = next(t for t in tables if t.startswith("rocpd_info_agent"))
        con.execute(f"UPDATE `{agents}` SET id = id + 100")
        for table in tables:
            if table.startswith(("rocpd_kernel_dispatch", "rocpd_track", "rocpd_info_code_object")) and "agent_id" in {
                    r[1] for r in con.execute(f"PRAGMA table_info(`{table}`)")}:
                con.execute(f"UPDATE `{table}` SET agent_id = agent_id + 100")
        column = "agent_absolute_index" if version == "4.1.0" else "agent_abs_index"
        via_view = {str(r[0]) for r in con.execute(f"SELECT {column} FROM kernels")}
        views = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'view'"
                                           " AND name NOT LIKE 'rocpd%'")]
        con.executescript("".join(f"DROP VIEW `{v}`;" for v in views))
    kernels, _ = read_rocpd(db)
    assert via_view == {str(rocpd_db.GPU_AGENT)}
    assert {k.device for k in kernels} == {str(rocpd_db.GPU_AGENT)}  # not 102, the row id


def test_the_kernel_pass_reads_rocpd_too(tmp_path):
    from pytest_aaco.passes.kernels import kernel_metrics

    trace = recorded_trace()
    build_rocpd(tmp_path / "aaco_results.db", "3.0.3", trace.kernels, [])
    found = read_trace(tmp_path)  # the reader of device time is the kernel pass's reader
    metrics = kernel_metrics(found.kernels, 1, 10**9, source=found.layout)
    assert metrics.source == "rocpd" and metrics.kernels == len(trace.kernels)
    assert metrics.kernel_ms == pytest.approx(sum(k.end_ns - k.start_ns for k in trace.kernels) / 1e6)


def test_a_file_that_is_not_a_rocpd_database_is_named(tmp_path):
    junk = tmp_path / "x.db"
    junk.write_text("not sqlite")
    with pytest.raises(TraceError, match="x.db: not a readable rocpd database"):
        read_rocpd(junk)
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(TraceError, match="empty.db: no kernels view and no rocpd_kernel_dispatch"):
        read_rocpd(empty)
    with pytest.raises(TraceError, match="no kernel trace under"):
        read_trace(tmp_path / "nothing")


# ---------------------------------------------------------------- blocks


def test_per_block_kernel_sums_and_counts_of_the_recorded_pair():
    how, blocks = device_blocks(recorded_trace(), CHILD)
    assert how == "roctx"
    base, cand = blocks[BASELINE], blocks[CANDIDATE]
    assert len(base) == len(cand) == 8
    assert all(b.runs == 5 for b in base + cand)
    assert [b.kernels for b in base] == [12.0] * 8  # exact: warmup kernels and the other side's are left out
    assert [b.kernels for b in cand] == [13.0] * 8
    assert all(b.kernel_ms == pytest.approx(0.500, rel=0.005) for b in base)
    assert all(b.busy_ms == pytest.approx(b.kernel_ms - 0.002, abs=2e-5) for b in base)  # one 2 µs overlap
    assert all(c.kernel_ms / b.kernel_ms == pytest.approx(1.06, abs=0.006) for b, c in zip(base, cand, strict=True))
    assert cand[0].names[EXTRA] == 5 and EXTRA not in base[0].names


def test_host_timestamps_place_the_blocks_on_the_clock_that_brackets_the_kernels():
    how, blocks = device_blocks(recorded_trace(markers=False), CHILD)
    assert how == "boottime"  # rocprofiler-sdk's clock; CLOCK_MONOTONIC is an hour behind in this recording
    _, by_markers = device_blocks(recorded_trace(), CHILD)
    assert [b.kernel_ms for b in blocks[BASELINE]] == [b.kernel_ms for b in by_markers[BASELINE]]
    monotonic_only = [{k: v for k, v in b.items() if k != "boottime"} for b in CHILD]
    with pytest.raises(TraceError, match="do not bracket the traced kernels"):
        device_blocks(recorded_trace(markers=False), monotonic_only)


def test_a_block_without_kernels_is_an_error_naming_side_and_cycle():
    trace = recorded_trace()
    late = [dict(b, cycle=b["cycle"]) for b in CHILD]
    empty = Marker("aaco/baseline/9", 1, 2)
    late.append({"side": BASELINE, "cycle": 9, "runs": 5, "boottime": [1, 2]})
    with pytest.raises(TraceError, match="no kernel in the traced block of baseline, cycle 9"):
        device_blocks(Trace(trace.layout, trace.kernels, [*trace.markers, empty], trace.path), late)


# ---------------------------------------------------------------- the paired test


def recorded_blocks() -> dict[str, list]:
    return device_blocks(recorded_trace(), CHILD)[1]


def test_the_paired_device_time_test_finds_the_recorded_regression():
    settings = CompareSettings(threshold=0.05)
    looks = child_device_time(lambda seed: recorded_blocks(), settings, alpha=0.05)
    assert len(looks) == 2  # a regression is traced again with a fresh child
    look = child_device_look(looks)
    assert look.outcome == "regression"
    assert look.comparison.ratio == pytest.approx(1.06, abs=0.005)
    lo, hi = look.comparison.ci(0.95)
    assert lo > 1.05 and hi < 1.08
    assert look.kernels == {BASELINE: 12.0, CANDIDATE: 13.0}
    assert look.added == [(EXTRA, 1.0)] and look.removed == []


def test_the_same_blocks_on_both_sides_are_no_regression():
    base = recorded_blocks()[BASELINE]
    look = device_look_of([(base[:4], base[4:])], CompareSettings(threshold=0.05), True, 0.05, 0.05)
    assert look is not None and look.outcome == "no-regression"
    assert abs(look.comparison.ratio - 1) < 0.005


def test_an_unconfirmed_child_regression_is_inconclusive():
    blocks = recorded_blocks()
    same = {BASELINE: blocks[BASELINE], CANDIDATE: blocks[BASELINE]}
    looks = child_device_time(lambda seed: blocks if seed == 0 else same, CompareSettings(threshold=0.05), 0.05)
    assert [look.outcome for look in looks] == ["regression", "no-regression"]
    # as for wall time (compare_sides): a regression the confirmation does not repeat is inconclusive
    assert child_device_look(looks).outcome == "inconclusive"
    assert child_device_look(looks[1:]).outcome == "no-regression"
    with pytest.raises(ValueError, match="no device-time look"):
        child_device_look([])


# ---------------------------------------------------------------- the traced child


def test_command_traces_kernels_and_markers_around_the_child(tmp_path):
    command = rocprof_command("/opt/rocm/bin/rocprofv3", tmp_path / "out", tmp_path / "spec.json", "rocpd")
    assert command[:5] == ["/opt/rocm/bin/rocprofv3", "--kernel-trace", "--marker-trace", "--output-format", "rocpd"]
    assert command[command.index("--") + 1:] == [sys.executable, "-m", "pytest_aaco.measure.traced_child",
                                                 str(tmp_path / "spec.json")]


def test_device_time_and_the_kernel_pass_run_the_one_child_through_the_one_launcher(monkeypatch, tiny_model_path):
    from pytest_aaco.tracers import rocprof

    seen: list[tuple[dict, dict]] = []

    def fake_launch(folder, spec, **kw):
        seen.append((spec, kw))
        raise TraceError("stopped before rocprofv3")

    monkeypatch.setattr(rocprof, "launch", fake_launch)
    side = ChildSide("item", Path(tiny_model_path), parse_provider("cpu"), {"x": np.ones((1, 64), np.float32)})
    with pytest.raises(TraceError, match="stopped"):
        trace_sides([side], cycles=3, runs=2, timeout_s=timeout_s(1.0, 1))
    with pytest.raises(TraceError, match="stopped"):
        traced_child.trace_pass(side, compile_s=1.0, output_format="csv")
    (blocks, blocks_kw), (kernel_pass, pass_kw) = seen
    assert sorted(blocks) == sorted(kernel_pass)  # one spec, one child entry
    assert kernel_pass["cycles"] == 1 and kernel_pass["runs"] == traced_child.PASS_RUNS
    assert kernel_pass["gap_s"] == traced_child.PASS_GAP_S and kernel_pass["warmup"] == traced_child.PASS_WARMUP
    assert blocks_kw["limit_s"] == pass_kw["limit_s"] == timeout_s(1.0)  # one formula
    assert pass_kw["doing"] == f"profiling {Path(tiny_model_path).name}"


def test_every_tracer_kind_an_ep_names_has_one_tracer():
    from pytest_aaco import eps
    from pytest_aaco.tracers.select import TRACERS

    named = {ep.tracer for ep in eps.ALL} - {eps.NO_TRACER}
    assert named == set(TRACERS) == {eps.CUPTI, eps.ROCPROFV3}
    for kind, tracer in TRACERS.items():
        assert tracer.kind == kind and tracer.install_hint and tracer.in_process == (kind == eps.CUPTI)


def test_output_format_and_time_limits():
    assert default_output_format("7.0.1-42") == "rocpd" and default_output_format("6.4.1") == "csv"
    assert default_output_format(None) == "csv" and default_output_format("garbage") == "csv"
    # one formula for the traced child, whether it runs device-time blocks or the kernel pass
    assert timeout_s(90.0, 2) == pytest.approx(300 + 2 * 90 * 2)  # MIGraphX compiles of 90 s, two sides
    assert timeout_s(0.0, 2) == 300 == timeout_s()
    assert timeout_s(120.0) == pytest.approx(300 + 2 * 120)  # the kernel pass: one session


def test_roctx_falls_back_to_no_markers_and_orders_are_seeded():
    marks = load_roctx(libraries=("libdoes-not-exist-roctx.so",))
    assert marks.source in ("none", "roctx")
    marks.range_push("aaco/x/0")  # no-op without roctx
    marks.range_pop()
    orders = cycle_orders(["baseline", "candidate"], 40, seed=3)
    assert orders == cycle_orders(["baseline", "candidate"], 40, seed=3)
    firsts = [o[0] for o in orders]
    assert 10 < firsts.count("baseline") < 30  # neither side always runs first


def test_tracer_for_amd_needs_rocprofv3_on_path():
    assert tracer_for("migraphx", "auto", which=lambda name: "/opt/rocm/bin/rocprofv3") == (None, None)
    tracer, why = tracer_for("migraphx", "auto", which=lambda name: None)
    assert tracer is None and "needs rocprofv3" in (why or "") and "gated on wall time" in (why or "")
    with pytest.raises(Exception, match="--aaco-device-time=on: device time on migraphx needs rocprofv3"):
        tracer_for("migraphx", "on", which=lambda name: None)


def fake_rocprof(folder: Path, extra_kernel_us: int, version: str = "3.0.3") -> str:
    """A ``rocprofv3`` on a private PATH that runs the child for real (CPU sessions), then writes, under
    the names rocprofv3 gives them (``<-d>/<-o>_kernel_trace.csv``, ``<-d>/<-o>_results.db``), a
    kernel-trace CSV or a rocpd database of schema *version* (with one roctx range per block, stored
    as rocprofv3 stores them): 3 kernels of 100 µs per run inside each block's CLOCK_BOOTTIME window,
    plus one of *extra_kernel_us* per candidate run."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "rocprofv3"
    body = f'''
    import json, os, subprocess, sys
    args = sys.argv[1:]
    out = args[args.index("-d") + 1]
    rc = subprocess.call(args[args.index("--") + 1:])
    if rc:
        sys.exit(rc)
    spec = json.load(open(args[-1]))
    blocks = json.load(open(spec["result"]))["blocks"]
    prefix = args[args.index("-o") + 1]
    fmt = args[args.index("--output-format") + 1]
    os.makedirs(out, exist_ok=True)
    if fmt == "rocpd":  # as rocprofv3 of ROCm >= 7 writes it: <-d>/<-o>_results.db
        sys.path.insert(0, {str(DATA)!r})
        import rocpd_db
        kernels, ranges = [], []
        for b in blocks:
            t = b["boottime"][0] + 1000
            ranges.append(rocpd_db.Range("aaco/" + b["side"] + "/" + str(b["cycle"]), b["boottime"][0] + 10,
                                         b["boottime"][1] - 10))
            for run in range(b["runs"]):
                for name, us in [("gemm", 100), ("conv", 100), ("relu", 100)] + (
                        [("extra", {extra_kernel_us})] if b["side"] == "candidate" else []):
                    kernels.append(rocpd_db.Kernel(name, t, t + us * 1000))
                    t += us * 1000 + 500
        rocpd_db.build(os.path.join(out, prefix + "_results.db"), {version!r}, kernels, ranges)
        sys.exit(0)
    rows = ["Kind,Agent_Id,Queue_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp"]
    for b in blocks:
        t = b["boottime"][0] + 1000
        for run in range(b["runs"]):
            for name, us in [("gemm", 100), ("conv", 100), ("relu", 100)] + (
                    [("extra", {extra_kernel_us})] if b["side"] == "candidate" else []):
                rows.append(f"KERNEL_DISPATCH,1,0,{{name}},0,{{t}},{{t + us * 1000}}")
                t += us * 1000 + 500
    open(os.path.join(out, prefix + "_kernel_trace.csv"), "w").write("\\n".join(rows) + "\\n")
    '''
    exe.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(folder)


def test_the_real_child_runs_both_sides_under_a_stand_in_rocprof(monkeypatch, tiny_model_path, tmp_path):
    path = fake_rocprof(tmp_path / "bin", extra_kernel_us=18)
    monkeypatch.setenv("PATH", path + os.pathsep + os.environ["PATH"])
    feeds = {"x": np.ones((1, 64), np.float32)}
    cpu = parse_provider("cpu")
    sides = [ChildSide(BASELINE, Path(tiny_model_path), cpu, feeds), ChildSide(CANDIDATE, Path(tiny_model_path), cpu,
                                                                               feeds)]
    traced = trace_sides(sides, cycles=4, runs=3, seed=1, exe="rocprofv3", output_format="csv", timeout_s=120)
    assert traced.layout == "rocprofv3" and traced.how in ("boottime", "roctx")
    assert [b.kernels for b in traced.blocks[BASELINE]] == [3.0] * 4
    assert [b.kernels for b in traced.blocks[CANDIDATE]] == [4.0] * 4
    assert traced.blocks[CANDIDATE][0].kernel_ms / traced.blocks[BASELINE][0].kernel_ms == pytest.approx(1.06)


@pytest.mark.parametrize("version", rocpd_db.VERSIONS)
def test_the_real_child_under_a_stand_in_rocprof_writing_rocpd(monkeypatch, tiny_model_path, tmp_path, version):
    path = fake_rocprof(tmp_path / "bin", extra_kernel_us=18, version=version)
    monkeypatch.setenv("PATH", path + os.pathsep + os.environ["PATH"])
    feeds = {"x": np.ones((1, 64), np.float32)}
    cpu = parse_provider("cpu")
    sides = [ChildSide(BASELINE, Path(tiny_model_path), cpu, feeds), ChildSide(CANDIDATE, Path(tiny_model_path), cpu,
                                                                               feeds)]
    traced = trace_sides(sides, cycles=4, runs=3, seed=1, exe="rocprofv3", output_format="rocpd", timeout_s=120)
    assert traced.layout == "rocpd" and traced.how == "roctx"
    assert [b.kernels for b in traced.blocks[BASELINE]] == [3.0] * 4
    assert [b.kernels for b in traced.blocks[CANDIDATE]] == [4.0] * 4
    assert traced.blocks[CANDIDATE][0].kernel_ms / traced.blocks[BASELINE][0].kernel_ms == pytest.approx(1.06)


def test_output_files_are_named_as_rocprofv3_names_them(tmp_path):
    assert expected_output(tmp_path, "rocpd") == tmp_path / "aaco_results.db"
    assert expected_output(tmp_path, "csv") == tmp_path / "aaco_kernel_trace.csv"
    command = rocprof_command("rocprofv3", tmp_path, tmp_path / "spec.json", "rocpd")
    assert command[command.index("-d") + 1] == str(tmp_path) and command[command.index("-o") + 1] == "aaco"
    with pytest.raises(ValueError, match="output format 'json'"):
        expected_output(tmp_path, "json")
    # the file asked for wins over other traces left in the folder (a newer one of another process too)
    csv_trace = recorded_trace()
    build_rocpd(tmp_path / "aaco_results.db", "3.0.0", csv_trace.kernels, csv_trace.markers)
    other = build_rocpd(tmp_path / "host" / "999_results.db", "3.0.0", csv_trace.kernels[:1], [])
    os.utime(other, (2**31, 2**31))
    assert read_trace(tmp_path).path == other
    assert read_trace(tmp_path, prefer=expected_output(tmp_path, "rocpd")).path == tmp_path / "aaco_results.db"


def test_a_rocprof_that_writes_no_trace_names_the_file_it_should_have_written(monkeypatch, tmp_path):
    bad = tmp_path / "bin"
    bad.mkdir()
    exe = bad / "rocprofv3"
    exe.write_text(f"#!{sys.executable}\nimport json, subprocess, sys\nargs = sys.argv[1:]\n"
                   "spec = json.load(open(args[-1]))\njson.dump({'blocks': []}, open(spec['result'], 'w'))\n"
                   "print('rocprofv3: no output written')\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bad))
    with pytest.raises(TraceError, match="wrote no rocpd kernel trace: aaco_results.db is missing from its output"
                                           " folder .*\nrocprofv3: no output written"):
        trace_sides([], cycles=1, runs=1, output_format="rocpd")


def test_a_missing_or_failing_rocprof_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TraceError, match="rocprofv3 is not on PATH: install ROCm's rocprofiler-sdk"):
        trace_sides([], cycles=1, runs=1)
    bad = tmp_path / "bin"
    bad.mkdir()
    exe = bad / "rocprofv3"
    exe.write_text(f"#!{sys.executable}\nimport sys\nprint('no GPU agents', file=sys.stderr)\nsys.exit(4)\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bad))
    with pytest.raises(TraceError, match="exited with status 4 running the traced blocks:\nno GPU agents"):
        trace_sides([], cycles=1, runs=1)


def test_run_child_brackets_every_block_with_ranges_and_both_clocks(tiny_model_path, tmp_path):
    calls: list[tuple[str, str]] = []
    marks = Roctx(lambda text: calls.append(("push", text)), lambda: calls.append(("pop", "")), "test")
    np.savez(tmp_path / "feeds.npz", x=np.ones((1, 64), np.float32))
    spec = {"sides": [{"name": n, "model": str(tiny_model_path), "provider": "cpu", "options": {},
                       "feeds": str(tmp_path / "feeds.npz")} for n in (BASELINE, CANDIDATE)],
            "device_id": 0, "cycles": 3, "runs": 2, "seed": 0, "gap_s": 0.001, "warmup": 1,
            "result": str(tmp_path / "child.json")}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    result = traced_child.run_child(tmp_path / "spec.json", marks)
    assert result["markers"] == "test" and len(result["blocks"]) == 6
    assert calls[0] == ("push", f"aaco/{result['blocks'][0]['side']}/0") and calls[1] == ("pop", "")
    for block in result["blocks"]:
        for clock in ("boottime", "monotonic"):
            assert block[clock][0] < block[clock][1]
    assert json.loads((tmp_path / "child.json").read_text()) == result


class HostNoiseSide:
    """A launch-bound side: wall time is host noise only (ms per iteration ~ 1.5, sd 15%)."""

    def __init__(self, name: str, seed: int) -> None:
        self.name, self.rng = name, np.random.default_rng(seed)

    def block(self, iterations: int) -> np.ndarray:
        return (1.5 * np.exp(self.rng.normal(0, 0.15, iterations)) * 1e6).astype(np.int64)


class HostNoiseFactory:
    def __init__(self, seed: int) -> None:
        self.seed, self.opened = seed, 0

    def open(self, name: str) -> OpenedSide:
        self.opened += 1
        return OpenedSide(HostNoiseSide(name, self.seed + self.opened), 1.5, 100.0, 5.0, 2.0, {"ort_version": "x"})


def test_the_child_device_time_fails_the_item_and_leads_the_message():
    """What the gate does on MIGraphX: wall time from the usual cycles, device time from the traced
    child (here the recorded pair), one verdict that leads with the metric that failed."""
    settings = CompareSettings(block_s=0.0, discard=1, budget_s=60.0, threshold=0.05)
    result = compare_sides(HostNoiseFactory(0), HostNoiseFactory(50), settings, alpha=0.05, baseline_label="HEAD",
                           device=True)
    assert result.measurement.device is None
    attach_child_device_time(result, child_device_time(lambda seed: recorded_blocks(), settings, 0.05))
    verdict = to_verdict(result, "resnet50[migraphx]")
    assert result.device_outcome == "regression" and verdict.failed_metrics[0] == "device time"
    assert verdict.fails
    assert verdict.message.startswith("REGRESSION resnet50[migraphx]: device time +6.")
    assert "kernels per run 12 -> 13" in verdict.message and f"added {EXTRA} x1" in verdict.message
    assert verdict.side_by_side is not None and verdict.side_by_side.device_time is not None
    assert verdict.side_by_side.to_dict()["device_time"]["kernels"] == {BASELINE: 12.0, CANDIDATE: 13.0}


def test_the_gate_puts_the_childs_device_time_into_the_result(monkeypatch, tiny_model_path):
    """SideBySideGate's AMD path with trace_sides replaced by the recorded pair: the looks land in
    the result; a trace that cannot be cut becomes a note (auto) or an error (on)."""
    from types import SimpleNamespace

    from pytest_aaco.measure.inference import SessionError
    from pytest_aaco.measure.traced_child import ChildTrace
    from pytest_aaco.sidebyside import gate as sidegate
    from pytest_aaco.sidebyside.cycles import LocalFactory
    from pytest_aaco.sidebyside.gate import ItemMeasure, SideBySideGate
    from pytest_aaco.warnings import AacoDeviceTimeWarning

    seen: list[dict] = []

    def fake_trace(sides, **kw):
        seen.append({"sides": [s.name for s in sides], **kw})
        return ChildTrace(recorded_blocks(), "roctx", "rocpd", "ctypes:test")

    monkeypatch.setattr(sidegate, "trace_sides", fake_trace)
    spec = SimpleNamespace(name="tiny", dims={}, inputs={})
    migraphx = parse_provider("migraphx")
    factory = LocalFactory(Path(tiny_model_path), spec, parse_provider("cpu"))
    settings = CompareSettings(block_s=0.0, discard=1, budget_s=60.0, threshold=0.05)
    result = compare_sides(HostNoiseFactory(0), HostNoiseFactory(50), settings, 0.05, "HEAD", device=True)
    gate = SideBySideGate(ref=None, python=None)
    note = gate._child_device_time(result, factory, factory, migraphx, migraphx, ItemMeasure(device_time="auto"),
                                   settings, 0.05, True, None)
    assert note is None and result.device_outcome == "regression"
    assert seen[0]["sides"] == [BASELINE, CANDIDATE] and seen[0]["cycles"] == settings.first_cycles
    assert seen[0]["timeout_s"] >= 300 and len(seen) == 2  # the regression was traced again

    def broken(sides, **kw):
        raise TraceError("the traced blocks' host timestamps do not bracket the traced kernels")

    monkeypatch.setattr(sidegate, "trace_sides", broken)
    fresh = compare_sides(HostNoiseFactory(0), HostNoiseFactory(50), settings, 0.05, "HEAD", device=True)
    with pytest.warns(AacoDeviceTimeWarning) as caught:  # the terminal says it, not only the verdict note
        note = gate._child_device_time(fresh, factory, factory, migraphx, migraphx, ItemMeasure(device_time="auto"),
                                       settings, 0.05, True, None, label="tiny[migraphx]")
    assert note is not None and note.startswith("device time: the traced blocks") and "gated on wall time" in note
    assert fresh.measurement.device is None
    [warned] = caught  # one line, naming the item, the reason and the options that change it
    assert str(warned.message) == ("tiny[migraphx]: device time could not be measured, gated on wall time only:"
                                   " the traced blocks' host timestamps do not bracket the traced kernels"
                                   " (--aaco-device-time=on makes this an error, =off skips device time)")
    assert warned.filename == __file__  # attributed to the caller of the gate, not to gate.py

    monkeypatch.setattr(sidegate, "trace_sides", lambda sides, **kw: ChildTrace({}, "roctx", "rocpd", "ctypes:test"))
    with pytest.warns(AacoDeviceTimeWarning, match=r"^tiny\[migraphx\]: .* fewer than 2 cycles per side"):
        note = gate._child_device_time(fresh, factory, factory, migraphx, migraphx, ItemMeasure(device_time="auto"),
                                       settings, 0.05, True, None, label="tiny[migraphx]")
    assert note == "device time: the traced child gave fewer than 2 cycles per side; gated on wall time only"

    def missing(sides, **kw):
        raise TracerMissing("rocprofv3 is not on PATH: install ROCm's rocprofiler-sdk")

    monkeypatch.setattr(sidegate, "trace_sides", missing)
    with warnings.catch_warnings():  # not installed: a note only, as a missing CUPTI is on NVIDIA
        warnings.simplefilter("error")
        note = gate._child_device_time(fresh, factory, factory, migraphx, migraphx, ItemMeasure(device_time="auto"),
                                       settings, 0.05, True, None, label="tiny[migraphx]")
    assert note == "device time: rocprofv3 is not on PATH: install ROCm's rocprofiler-sdk; gated on wall time only"
    monkeypatch.setattr(sidegate, "trace_sides", broken)
    with pytest.raises(SessionError, match="--aaco-device-time=on: the traced blocks"):
        gate._child_device_time(fresh, factory, factory, migraphx, migraphx, ItemMeasure(device_time="on"),
                                settings, 0.05, True, None)


def test_the_wall_time_fallback_is_a_warning_line_in_the_terminal(pytester):
    """Under pytest (with the plugin loaded) the fallback warning reaches the terminal's warnings
    summary as one line naming the item and the reason; the verdict note is the same reason."""
    pytester.makepyfile(test_fallback='''
        from pytest_aaco.sidebyside.gate import wall_time_only

        def test_item():
            note = wall_time_only("resnet50[migraphx]", "no rocpd database at /tmp/x/aaco_results.db")
            assert note == "device time: no rocpd database at /tmp/x/aaco_results.db; gated on wall time only"
    ''')
    result = pytester.runpytest("-W", "default")  # a project without filterwarnings = error
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*AacoDeviceTimeWarning: resnet50[[]migraphx[]]: device time could not be measured,"
                                 " gated on wall time only: no rocpd database at /tmp/x/aaco_results.db*"])
