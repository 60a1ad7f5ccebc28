"""Per-operator profile: aggregation of ORT profile events, comparison, and a real ORT CPU pass."""

from __future__ import annotations

import math

import pytest

from pytest_aaco.measure.ortprofile import ProfileError
from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.passes.opprofile import (
    MAX_RUNS,
    MIN_RUNS,
    OpProfile,
    compare_profiles,
    op_profile,
    profile_model,
    profile_runs,
)

CPU, CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"


def run_events(start: float, nodes: list[tuple[str, str, str, float]]) -> list[dict]:
    """One ``model_run`` starting at *start* µs with kernel events laid end to end."""
    events, t = [], start + 1
    for name, op, ep, dur in nodes:
        events.append({"cat": "Node", "name": f"{name}_kernel_time", "ts": t, "dur": dur,
                       "args": {"op_name": op, "provider": ep}})
        t += dur
    events.append({"cat": "Session", "name": "model_run", "ts": start, "dur": t - start + 1})
    return events


def profile_of(runs: list[list[tuple[str, str, str, float]]]) -> list[dict]:
    events, start = [], 0.0
    for nodes in runs:
        events += run_events(start, nodes)
        start += 10_000
    return events


def test_first_run_is_dropped_and_each_node_takes_its_median():
    cold = [("conv1", "Conv", CPU, 900), ("conv2", "Conv", CPU, 900), ("relu", "Relu", CPU, 90)]
    warm = [[("conv1", "Conv", CPU, t1), ("conv2", "Conv", CPU, 100), ("relu", "Relu", CPU, 50)]
            for t1 in (300, 310, 5000)]  # one preempted run must not move conv1
    profile = op_profile(profile_of([cold, *warm]))
    assert profile.runs == 3
    assert [(n.node, n.time_us) for n in profile.nodes] == [("conv1", 310), ("conv2", 100), ("relu", 50)]
    conv, relu = profile.ops
    assert (conv.op, conv.nodes, conv.time_us) == ("Conv", 2, 410)
    assert conv.share == pytest.approx(410 / 460)
    assert relu.share == pytest.approx(50 / 460)
    assert profile.total_us == 460
    assert profile.cpu_nodes == []  # a CPU-only session has no "fallback" nodes


def test_cpu_placed_nodes_are_listed_beside_a_device_ep():
    run = [("conv", "Conv", CUDA, 100), ("nms", "NonMaxSuppression", CPU, 400), ("shape", "Shape", CPU, 1)]
    profile = op_profile(profile_of([run, run]))
    assert profile.cpu_nodes == ["nms", "shape"]
    assert profile.ops[0].op == "NonMaxSuppression" and profile.ops[0].ep == CPU


def test_a_profile_without_run_events_counts_as_one_run():
    events = [e for e in profile_of([[("mm", "MatMul", CPU, 70)]]) if e["cat"] == "Node"]
    profile = op_profile({"traceEvents": events})
    assert profile.runs == 1 and profile.run_us == 0 and profile.total_us == 70


def test_not_a_profile_is_a_clear_error():
    with pytest.raises(ProfileError, match="list of events"):
        op_profile({"nodes": 3})


def test_round_trip_keeps_ops_and_the_top_nodes():
    runs = [[(f"n{i}", "Add" if i % 2 else "Mul", CPU, 10 + i) for i in range(30)]] * 2
    profile = op_profile(profile_of(runs))
    again = OpProfile.from_dict(profile.to_dict(top=5))
    assert [(o.op, o.nodes, o.time_us) for o in again.ops] == [(o.op, o.nodes, o.time_us) for o in profile.ops]
    assert [o.share for o in again.ops] == pytest.approx([o.share for o in profile.ops], abs=1e-5)
    assert again.nodes == profile.nodes[:5]
    with pytest.raises(ValueError, match="not an operator profile"):
        OpProfile.from_dict({"runs": 1})


def synthetic(conv: float, matmul: float, relu: float = 50.0) -> OpProfile:
    run = [("conv", "Conv", CPU, conv), ("mm", "MatMul", CPU, matmul), ("relu", "Relu", CPU, relu)]
    return op_profile(profile_of([run, run]))


def test_the_operator_that_grew_is_named_and_the_rest_called_flat():
    comparison = compare_profiles(synthetic(1000, 1000), synthetic(1310, 1020))
    assert [c.op for c in comparison.grown()] == ["Conv"]
    message = comparison.message()
    assert message.startswith("operators: Conv +31% (1.00 -> 1.31 ms per run")
    assert "everything else flat (within ±10%)" in message
    assert "94% of the growth" in message  # 310 of 330 µs


def test_other_operators_that_moved_are_listed():
    message = compare_profiles(synthetic(1000, 1000), synthetic(2000, 700)).message()
    assert "Conv +100%" in message and "others: MatMul -30%" in message


def test_nothing_grew_says_every_operator_flat():
    message = compare_profiles(synthetic(1000, 1000), synthetic(1020, 990)).message()
    assert message == "operators: every operator flat (within ±10%)"


def test_an_operator_the_baseline_did_not_run_is_new():
    base = synthetic(1000, 1000)
    run = [("conv", "Conv", CPU, 1000), ("mm", "MatMul", CPU, 1000), ("relu", "Relu", CPU, 50),
           ("ln", "LayerNormalization", CPU, 400)]
    comparison = compare_profiles(base, op_profile(profile_of([run, run])))
    assert comparison.changes[0].op == "LayerNormalization" and math.isinf(comparison.changes[0].change)
    assert "LayerNormalization new" in comparison.message()
    assert comparison.to_dict()["changes"][0]["change"] is None  # JSON has no infinity


def test_several_eps_are_named_in_the_message():
    base = op_profile(profile_of([[("c", "Conv", CUDA, 100), ("n", "NonZero", CPU, 100)]] * 2))
    cur = op_profile(profile_of([[("c", "Conv", CUDA, 100), ("n", "NonZero", CPU, 300)]] * 2))
    assert "NonZero on CPU +200%" in compare_profiles(base, cur).message()


@pytest.mark.parametrize(("p50_ms", "runs"), [(None, MIN_RUNS), (0.01, MAX_RUNS), (40.0, 20), (100.0, 10),
                                              (900.0, MIN_RUNS)])
def test_profile_runs_aim_at_a_second_within_bounds(p50_ms, runs):
    assert profile_runs(p50_ms) == runs


def test_a_real_cpu_pass_names_the_operator_made_heavier(conv_models):
    light, heavy = conv_models
    cpu = parse_provider("cpu")
    # 30 runs a side: an op's time is its mean per run, and under 4 busy processes one preempted run of 5
    # made MatMul grow more than the 9x Conv (the whole suite under load, 2026-11-29)
    base = profile_model(light, cpu, runs=30)
    cur = profile_model(heavy, cpu, runs=30)
    assert {o.op for o in base.ops} >= {"Conv", "MatMul"}
    assert base.runs == 30 and base.run_us > 0
    comparison = compare_profiles(base, cur)
    top = comparison.grown()[0]
    assert top.op == "Conv" and top.change > 2.0  # 9x the FLOPs: far beyond any noise
    matmul = next(c for c in comparison.changes if c.op == "MatMul")
    assert matmul.change < top.change / 4
    assert comparison.message().startswith("operators: Conv +")
