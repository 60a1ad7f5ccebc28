"""HTML blocks and plots for operators, GPU kernels and cold start (reports/breakdown.py)."""

from __future__ import annotations

import html

from pytest_aaco.passes.coldstart import ColdStart, cold_start_verdict
from pytest_aaco.passes.kernels import kernel_metrics
from pytest_aaco.passes.opprofile import NodeTime, OpProfile, OpTime, compare_profiles
from pytest_aaco.records.device import ColdStartRecord, KernelsRecord, ProfileRecord
from pytest_aaco.reports import breakdown
from pytest_aaco.tracers.base import KernelSpan

CPU = "CPUExecutionProvider"


def profile(conv_us: float, evil: str = "x") -> OpProfile:
    total = conv_us + 500 + 100
    ops = [OpTime("Conv", CPU, 3, conv_us, conv_us / total), OpTime("MatMul", CPU, 1, 500, 500 / total),
           OpTime(evil, CPU, 1, 100, 100 / total)]
    return OpProfile(5, total + 20, sorted(ops, key=lambda o: -o.time_us),
                     [NodeTime("conv_0", "Conv", CPU, conv_us / 3)], [])


def test_operator_chart_draws_both_sides():
    svg = breakdown.plot_operators(ProfileRecord.from_dict(profile(1300).to_dict()),
                                   ProfileRecord.from_dict(profile(1000).to_dict()))
    assert svg is not None and svg.startswith("<svg") and "Conv" in svg and "baseline" in svg
    assert breakdown.plot_operators(ProfileRecord.from_dict({"ops": []})) is None


def test_profile_block_shows_the_comparison_and_escapes_names():
    evil = "<script>alert(1)</script>"
    base, cur = profile(1000, evil), profile(1310, evil)
    block = breakdown.profile_block(
        ProfileRecord.from_dict({**cur.to_dict(), "comparison": compare_profiles(base, cur).to_dict()}),
        ProfileRecord.from_dict(base.to_dict()))
    assert "operators: Conv +31%" in block and "<svg" in block
    assert evil not in block and html.escape(evil) in block
    assert "<td class=\"num\">+31%</td>" in block
    assert breakdown.profile_block(None) == ""


def test_kernels_block_lists_the_figures():
    records = [KernelSpan("volta_sgemm_128x64_nn", 0, 50_000), KernelSpan("elementwise", 60_000, 63_000)]
    block = breakdown.kernels_block(
        KernelsRecord.from_dict(kernel_metrics(records, 1, 100_000, node_count=2, source="cupti").to_dict()))
    assert "KAR (kernels per ONNX node)" in block and "1.00" in block
    assert "volta_sgemm_128x64_nn" in block and "53.0%" in block
    assert breakdown.kernels_block(None) == ""


def test_cold_start_block_plots_history_and_verdict():
    history = [ColdStart([100.0, 102.0, 98.0, 101.0, 99.0], [20.0, 21.0, 19.0, 20.0, 20.0]) for _ in range(3)]
    current = ColdStart([210.0, 205.0, 200.0, 204.0, 206.0], [20.0, 21.0, 19.0, 20.0, 20.0])
    verdict = cold_start_verdict(current, history, "m[cpu]")
    block = breakdown.cold_start_block(ColdStartRecord.from_dict({**current.to_dict(), "verdict": verdict.to_dict()}),
                                       [ColdStartRecord.from_dict(h.to_dict()) for h in history])
    assert "COLD START REGRESSION m[cpu]" in block and 'class="message bad"' in block
    assert block.count("<svg") == 1 and "session creation, per fresh session" in block
    assert "200.0 ms" in block and "this run (fastest session)" in block
    assert breakdown.cold_start_block(None) == ""


def test_cold_start_block_side_by_side_shows_the_baseline_side_and_the_split():
    from pytest_aaco.passes.coldstart import side_by_side_verdict

    base = ColdStart([100.0, 102.0, 98.0, 101.0, 99.0], [20.0] * 5, load_ms=[5.0] * 5, init_ms=[80.0] * 5)
    cand = ColdStart([210.0, 205.0, 200.0, 204.0, 206.0], [20.0] * 5, load_ms=[5.0] * 5, init_ms=[180.0] * 5)
    verdict = side_by_side_verdict(base, cand, "m[cpu]", "origin/main")
    block = breakdown.cold_start_block(ColdStartRecord.from_dict(
        {**cand.to_dict(), "baseline_side": base.to_dict(), "verdict": verdict.to_dict()}))
    assert "baseline side (fastest session)" in block and "change (paired)" in block
    assert "earlier runs" not in block
    assert "of it: session initialization (ORT profiler)" in block and "180.0 ms" in block and "+125.0%" in block
    assert block.count("<svg") == 1 and ">origin/main<" in block  # the baseline side, labelled by its name


def test_junit_properties_carry_cold_start_and_operators():
    from pytest_aaco.records.item import ItemRecord
    from pytest_aaco.reports.junit import properties

    history = [ColdStart([100.0, 101.0, 99.0], [20.0, 21.0, 19.0]) for _ in range(3)]
    current = ColdStart([210.0, 205.0, 200.0], [20.0, 21.0, 19.0])
    verdict = cold_start_verdict(current, history, "m[cpu]")
    base, cur = profile(1000), profile(1310)
    record = ItemRecord("t.py::x[m-cpu]", "m", "cpu", "m[cpu]",
                        cold_start={**current.to_dict(), "verdict": verdict.to_dict()},
                        profile={**cur.to_dict(), "comparison": compare_profiles(base, cur).to_dict()})
    props = dict(properties(record))
    assert props["aaco_cold_start_verdict"] == str(verdict.outcome)
    assert props["aaco_cold_start_method"] == "history"
    assert props["aaco_cold_start_session_create_ms"] == "200.0000"
    assert props["aaco_operators"].startswith("operators: Conv +31%")
