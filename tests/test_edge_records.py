"""The typed records at the edge (pytest_aaco/records/device.py): what the session writes
reads back into them, unchanged by a round trip, from files written before they existed too; and the
HTML writer takes baselines from its caller, never from a file.

Producers are the real ones (ColdStart, cold_start_verdict, kernel_metrics, OpProfile, LondFdr,
BenchmarkResult, history.judge.device_check's keys through a stored verdict); old files are the
recorded bundles under tests/data/records/ (see its README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_aaco.history.store import report_baselines, save_run
from pytest_aaco.passes.coldstart import ColdStart, cold_start_verdict, side_by_side_verdict
from pytest_aaco.passes.kernels import kernel_metrics
from pytest_aaco.passes.opprofile import NodeTime, OpProfile, OpTime, compare_profiles
from pytest_aaco.records.device import (
    BaselineRecord,
    ColdStartRecord,
    DiagnosisRecord,
    Figures,
    GpuRecord,
    HistoryRun,
    KernelsRecord,
    ProfileRecord,
    ResultRecord,
    TelemetryRecord,
)
from pytest_aaco.records.item import BaselineSide, FdrRecord, ItemRecord, SessionMeta, SessionSummary
from pytest_aaco.records.verdict import DeviceTimeRecord, Pair
from pytest_aaco.reports import html
from pytest_aaco.tracers.base import KernelSpan
from pytest_aaco.verdict.multiplicity import LondFdr
from tests.conftest import make_result

DATA = Path(__file__).parent / "data" / "records"
ITEMS = sorted(p for p in DATA.glob("*.json") if not p.name.startswith("baseline-"))
CPU = "CPUExecutionProvider"


def test_a_cold_start_and_its_verdict_read_as_the_pass_wrote_them():
    history = [ColdStart([100.0, 102.0, 98.0], [20.0, 21.0, 19.0]) for _ in range(3)]
    current = ColdStart([210.0, 205.0, 200.0], [20.0, 21.0, 19.0], load_ms=[5.0] * 3, init_ms=[180.0] * 3)
    verdict = cold_start_verdict(current, history, "m[cpu]")
    cold = ColdStartRecord.from_dict({**current.to_dict(), "verdict": verdict.to_dict()})
    assert cold.minimum("session_create_ms") == current.minimum("session_create_ms") == 200.0
    assert cold.values("first_run_ms") == (20.0, 21.0, 19.0) and cold.minimum("init_ms") == 180.0
    assert cold.verdict is not None and cold.verdict.outcome == str(verdict.outcome) and cold.verdict.fails
    assert cold.verdict.message == verdict.message and cold.verdict.method != "side-by-side"
    figures = cold.verdict.figures("session_create_ms")
    assert figures.outcome == "regression" and figures.ratio == pytest.approx(2.0, rel=0.05)
    assert ColdStartRecord.from_dict(cold.to_dict()) == cold


def test_a_paired_cold_start_names_its_side_and_geometric_means():
    base = ColdStart([100.0, 102.0, 98.0, 101.0, 99.0], [20.0] * 5, load_ms=[5.0] * 5, init_ms=[80.0] * 5)
    cand = ColdStart([210.0, 205.0, 200.0, 204.0, 206.0], [20.0] * 5, load_ms=[5.0] * 5, init_ms=[180.0] * 5)
    verdict = side_by_side_verdict(base, cand, "m[cpu]", "origin/main")
    cold = ColdStartRecord.from_dict({**cand.to_dict(), "baseline_side": base.to_dict(), "verdict": verdict.to_dict()})
    assert cold.baseline_side is not None and cold.baseline_side.minimum("session_create_ms") == 98.0
    assert cold.verdict is not None and cold.verdict.method == "side-by-side" and cold.verdict.ref == "origin/main"
    assert cold.verdict.figures("session_create_ms").geomean_current_ms is not None
    assert cold.verdict.figures("session_create_ms").phases["init_ms"] == 80.0
    assert ColdStartRecord.from_dict(cold.to_dict()) == cold


def test_kernel_figures_read_as_the_kernel_pass_wrote_them():
    spans = [KernelSpan("volta_sgemm_128x64_nn", 0, 50_000), KernelSpan("elementwise", 60_000, 63_000)]
    metrics = kernel_metrics(spans, 1, 100_000, node_count=2, source="cupti")
    kernels = KernelsRecord.from_dict(metrics.to_dict())
    assert (kernels.source, kernels.runs, kernels.kar) == ("cupti", 1, pytest.approx(metrics.kar))
    assert kernels.kernels_per_run == metrics.kernels_per_run and kernels.kernel_ms == pytest.approx(0.053)
    assert [t.name for t in kernels.top][0] == "volta_sgemm_128x64_nn" and kernels.top[0].count == 1
    assert KernelsRecord.from_dict(kernels.to_dict()) == kernels


def test_an_operator_profile_reads_with_its_comparison():
    def profile(conv_us: float) -> OpProfile:
        ops = [OpTime("Conv", CPU, 3, conv_us, 0.7), OpTime("MatMul", CPU, 1, 500, 0.3)]
        return OpProfile(5, conv_us + 520, ops, [NodeTime("conv_0", "Conv", CPU, conv_us / 3)], ["Shape_1"])

    base, cur = profile(1000), profile(1310)
    found = ProfileRecord.from_dict({**cur.to_dict(), "comparison": compare_profiles(base, cur).to_dict()})
    assert [o.key for o in found.ops] == [("Conv", CPU), ("MatMul", CPU)] and found.ops[0].time_us == 1310
    assert found.nodes[0].node == "conv_0" and found.cpu_nodes == ("Shape_1",) and found.runs == 5
    assert found.comparison_message is not None and found.comparison_message.startswith("operators: Conv +31%")
    assert ProfileRecord.from_dict(found.to_dict()) == found


def test_the_result_lond_state_and_summary_read_as_written():
    result = make_result([2.0, 2.1, 2.05], iterations=10, telemetry={"start_ns": 5, "samplers": {
        "system": {"samples": [{"t_ns": 6, "rss_mb": 100.0}, {"t_ns": 7, "rss_mb": 101.0, "name": "x"}]},
        "nvml": {"samples": [], "error": "no NVIDIA GPU"}}, "summary": {"rss_mb": {"mean": 100.5, "max": 101.0}}})
    record = ResultRecord.from_dict(result.to_dict(raw=True))
    assert [r.log_mean for r in record.rounds] == pytest.approx([r.log_mean for r in result.rounds])
    assert record.latencies_ms[1] == pytest.approx(tuple(result.rounds[1].latencies_ms))
    assert record.summary.of("mean_ms") == pytest.approx(result.mean_ms) and record.summary.of("nothing") is None
    assert record.telemetry.samplers[0].samples[1] == {"t_ns": 7, "rss_mb": 101.0}  # the text field left out
    assert record.telemetry.samplers[1].error == "no NVIDIA GPU"
    assert record.telemetry.summary["rss_mb"].max == 101.0 and record.confirmation is None
    assert ResultRecord.from_dict(record.to_dict()) == record
    lond = LondFdr(0.05, 3)
    lond.record(True)
    fdr = SessionSummary(1, {"regression": 1}, lond.to_dict()).fdr
    assert fdr == FdrRecord("LOND", 0.05, 3, 1, 1) and FdrRecord.from_dict(fdr.to_dict()) == fdr


def test_device_time_reads_from_a_stored_verdict_and_a_side_by_side_look():
    stored = {"outcome": "regression", "wall_outcome": "inconclusive", "threshold": 0.05, "ratio": 1.064,
              "ci_low": 1.059, "ci_high": 1.069, "lower_bound": 1.06, "upper_bound": 1.068, "p_slower": 1e-6,
              "mde": 0.004, "series": "raw", "kernel_ms": {"baseline": 2.0, "candidate": 2.128},
              "busy_ms": {"baseline": 1.9, "candidate": 2.0}, "kernels": {"baseline": 219.0, "candidate": 227.0}}
    record = ItemRecord.from_dict({"nodeid": "t::x", "verdict": {"outcome": "regression", "label": "x",
                                                                 "threshold": 0.05, "ratio": 1.01,
                                                                 "device_time": stored}})
    dev = record.device_record
    assert dev is not None and dev.ratio == 1.064 and dev.kernels == Pair(219.0, 227.0)
    assert dev.judgement is not None and record.verdict is not None
    assert (dev.judgement.lower_bound, dev.threshold, dev.series, dev.outcome) == (1.06, 0.05, "raw", "regression")
    assert record.verdict.judgements["device time"] == dev.judgement
    assert record.verdict.wall_outcome == "inconclusive"  # wall time's own outcome, from the stored record
    assert DeviceTimeRecord.from_dict(dev.to_dict()) == dev
    failed = DeviceTimeRecord.from_dict({"outcome": "inconclusive", "reason": "too few runs"})
    assert failed is not None and failed.judgement is None and failed.reason == "too few runs"
    assert ItemRecord.from_dict({"nodeid": "t::x", "verdict": {"outcome": "inconclusive", "label": "x",
                                 "threshold": 0.05, "device_time": failed.to_dict()}}).device_record is None


def test_the_gpu_and_the_diagnosis_read_as_written():
    gpu = GpuRecord.from_dict({"vendor": "nvidia", "logical_id": 1, "index": 3, "uuid": "GPU-1bbb", "name": "H100",
                               "pci_bus_id": "00000000:1b:00.0", "mapped_by": "uuid", "clocks": {"sm": 1980}})
    record = ItemRecord("t::x", "m", "cuda", "m[cuda]", gpu={"index": 3, "uuid": "GPU-1bbb", "logical_id": 1})
    assert gpu.key == record.gpu_key == "GPU-1bbb" and GpuRecord.from_dict({"index": 2}).key == "index2"
    assert GpuRecord.from_dict(gpu.to_dict()) == gpu
    diagnosis = DiagnosisRecord.from_dict({"category": "cpu_contention", "score": 0.8, "scores": {"x": 0.1},
                                           "evidence": ["busy"], "recommendation": "quiet runner"})
    assert diagnosis is not None and diagnosis.evidence == ("busy",) and DiagnosisRecord.from_dict({}) is None
    assert DiagnosisRecord.from_dict(diagnosis.to_dict()) == diagnosis


@pytest.mark.parametrize("path", ITEMS, ids=lambda p: p.name)
def test_bundles_written_before_the_records_read_into_them(path: Path):
    data = json.loads(path.read_text(encoding="utf-8"))
    record = ItemRecord.from_dict(data)
    result = record.result_record
    assert result is not None and len(result.rounds) == len(data["result"]["rounds"])
    assert result.summary.of("mean_ms") == data["result"]["summary"]["mean_ms"]
    assert ResultRecord.from_dict(result.to_dict()) == result
    if "cold_start" in data:
        cold = record.cold_start_record
        assert cold is not None and cold.minimum("session_create_ms") == data["cold_start"]["min_session_create_ms"]
        assert cold.verdict is not None and cold.verdict.outcome == data["cold_start"]["verdict"]["outcome"]
        assert ColdStartRecord.from_dict(cold.to_dict()) == cold
    side = record.baseline_side
    if side is not None:
        assert BaselineSide.from_dict(side.to_dict()) == side  # recorded before baseline_side: empty
    if data.get("diagnosis"):
        assert record.diagnosis_record is not None and record.diagnosis_record.category == data["diagnosis"]["category"]


def test_a_baseline_file_reads_into_history_runs(tmp_path: Path):
    from pytest_aaco.history.fingerprint import Fingerprint

    path = tmp_path / "b.json"
    for seed in range(2):
        save_run(path, "t::x", Fingerprint({"model_sha256": "a"}), make_result([2.0, 2.1], seed=seed),
                 extra={"cold_start": ColdStart([100.0], [20.0]).to_dict()})
    raw = json.loads(path.read_text(encoding="utf-8"))
    found = BaselineRecord.from_dict(raw)
    assert len(found.history) == 2 and found.history[-1].timestamp == raw["history"][-1]["timestamp"]
    assert found.history[0].cold_start is not None and found.history[0].cold_start.minimum("first_run_ms") == 20.0
    assert len(found.latest_latencies_ms) == 2 and BaselineRecord.from_dict(found.to_dict()) == found
    assert HistoryRun.from_dict({"commit_info": {"id": "abcdef0123"}}).commit == "abcdef0123"


def test_the_html_writer_reads_baselines_from_its_caller_only(tmp_path: Path):
    from pytest_aaco.history.fingerprint import Fingerprint

    path = tmp_path / "b.json"
    stored = make_result([2.0, 2.1], seed=1, noise=0.05)
    save_run(path, "t::x", Fingerprint({"model_sha256": "a"}), stored)
    result = make_result([2.0, 2.1], seed=2)
    record = ItemRecord("t::x", "m", "cpu", "m[cpu]", result=result.to_dict(raw=True),
                        verdict=ItemRecord.from_dict({"nodeid": "t::x", "verdict": {
                            "outcome": "no-regression", "label": "m[cpu]", "threshold": 0.05,
                            "baseline_path": str(path), "baseline_runs": 1}}).verdict)
    summary = SessionSummary.of([record])
    alone = html.render_html([record], summary, None)  # the file exists, but nobody handed it over
    assert f"baseline file {path} not found here" in alone
    mean = f"{stored.summary()['mean_ms']:.3f} ms"  # the stats table's baseline column
    assert mean not in alone
    baselines = report_baselines([record])
    assert set(baselines) == {"t::x"} and len(baselines["t::x"].history) == 1
    given = html.render_html([record], summary, None, baselines=baselines)
    assert "not found here" not in given and mean in given


def test_session_meta_reads_old_and_unfinished_bundles():
    old = SessionMeta.from_dict({"bundle_started_at": "2026-11-01T00:00:00+00:00", "providers": ["cpu"],
                                 "items_written": 2})
    assert old.started_at == "2026-11-01T00:00:00+00:00" and not old.finished and not old.has_commit
    assert old.summary is None and old.items_written == 2 and SessionMeta.from_dict(old.to_dict()) == old
    done = SessionMeta.from_dict({"started_at": "x", "commit_info": None, "bundle_finished_at": "y",
                                  "summary": {"items": 1, "verdicts": {"no-regression": 1}}})
    assert done.has_commit and done.finished and done.summary == SessionSummary(1, {"no-regression": 1})


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner,
                                                                                  max_size=4), max_leaves=12)
KEYS = st.sampled_from(["ratio", "rounds", "summary", "samples", "min_first_run_ms", "verdict", "metrics", "ops",
                        "top", "history", "windows", "category", "samplers", "start_ns", "latencies_ms", "uuid"])
OBJECTS = st.dictionaries(KEYS, JSON, max_size=6)


@settings(max_examples=150, deadline=None)
@given(OBJECTS)
def test_no_record_raises_on_json_it_does_not_expect(data: dict):
    for cls in (Figures, ResultRecord, TelemetryRecord, DeviceTimeRecord, ColdStartRecord, KernelsRecord,
                ProfileRecord, DiagnosisRecord, GpuRecord, BaselineSide, HistoryRun, BaselineRecord, FdrRecord,
                SessionMeta):
        cls.from_dict(data)
        cls.from_dict([data])


def test_the_result_record_is_read_once_per_result(monkeypatch):
    """Every writer asks for ``ItemRecord.result_record``, and a result holds every latency: it is parsed
    once per result dict, and again only when another dict is assigned."""
    import pytest_aaco.records.device as records_module

    calls = []
    real = records_module.ResultRecord.from_dict
    monkeypatch.setattr(records_module.ResultRecord, "from_dict",
                        classmethod(lambda cls, data: calls.append(data) or real(data)))
    record = ItemRecord.from_dict({"nodeid": "t::x", "result": {"summary": {"mean_ms": 1.0}}})
    first = record.result_record
    assert first is not None and record.result_record is first and len(calls) == 1
    record.result = {"summary": {"mean_ms": 2.0}}
    assert record.result_record is not None and record.result_record.summary.of("mean_ms") == 2.0
    assert len(calls) == 2
    assert ItemRecord.from_dict(record.to_dict()) == record  # the kept parse is not part of the record
