"""What a run costs: unchanged items free under ``--aaco-compare``, the compute check, shards, the ledger.

Real ONNX Runtime, real git repositories, pytest run as users run it (``pytester``, a subprocess each).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from pytest_aaco.measure.modelgen import add_extra_work
from pytest_aaco.options import shard_or_none
from pytest_aaco.reports.cost import shard_of
from pytest_aaco.sidebyside.compute import (
    SAME_GRAPH,
    SAME_OPTIMIZED,
    NotDigestible,
    compare_compute,
    graph_digest,
)
from tests.conftest import make_tiny_model


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def reexport(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same compute written by 'another exporter': every value and node renamed, nodes listed in
    another valid order, doc strings, producer and metadata changed, weights stored as float_data."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    keep = {v.name for v in g.input} | {v.name for v in g.output}
    names: dict[str, str] = {}

    def rename(name: str) -> str:
        return name if not name or name in keep else names.setdefault(name, f"v{len(names)}_{name[::-1]}")

    for tensor in g.initializer:
        array = numpy_helper.to_array(tensor)
        tensor.CopyFrom(helper.make_tensor(rename(tensor.name), tensor.data_type, array.shape,
                                           array.flatten().tolist()))  # float_data, not raw_data
    g.initializer.reverse()
    for node in g.node:
        node.name, node.doc_string = f"exported/{node.name}", "re-exported"
        node.input[:] = [rename(n) for n in node.input]
        node.output[:] = [rename(n) for n in node.output]
    out.doc_string, out.producer_name, out.producer_version = "another exporter", "other", "9.9"
    out.metadata_props.add(key="exported_at", value="2026-11-27")
    return out


# ---------------------------------------------------------------- the compute check (unit)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return make_tiny_model(tmp_path / "a.onnx", layers=4)


def test_a_model_on_several_eps_is_checked_once(tiny, tmp_path, monkeypatch):
    """The triage of each EP's item shares the compute check of the same pair of files (two ONNX loads and
    up to three ORT sessions each), and every EP gets its finding."""
    from pytest_aaco.sidebyside import unchanged
    from pytest_aaco.sidebyside.revision import CHANGED, BaselineSide

    onnx.save(reexport(onnx.load(str(tiny))), str(tmp_path / "b.onnx"))
    calls = []
    monkeypatch.setattr(unchanged, "compare_compute", lambda a, b: calls.append((a, b)) or compare_compute(a, b))
    side = BaselineSide(CHANGED, None, tiny, ["model bytes"])
    checks: dict = {}
    found = [unchanged.triage(side, True, tmp_path / "b.onnx", checks=checks) for _ in ("cpu", "cuda", "migraphx")]
    assert len(calls) == 1 and all(t.status == unchanged.SAME_COMPUTE and t.compute == found[0].compute
                                   for t in found)
    assert unchanged.triage(side, True, tmp_path / "b.onnx").status == unchanged.SAME_COMPUTE and len(calls) == 2


def test_a_reexport_has_the_same_digest_and_a_changed_weight_another(tiny, tmp_path):
    model = onnx.load(str(tiny))
    assert graph_digest(reexport(model)) == graph_digest(model)
    onnx.save(reexport(model), str(tmp_path / "b.onnx"))
    assert tiny.read_bytes() != (tmp_path / "b.onnx").read_bytes()
    check = compare_compute(tiny, tmp_path / "b.onnx")
    assert check.proven and check.how == SAME_GRAPH, check

    nudged = onnx.load(str(tiny))
    w = numpy_helper.to_array(nudged.graph.initializer[0]).copy()
    w.flat[7] += 1e-3
    nudged.graph.initializer[0].CopyFrom(numpy_helper.from_array(w, nudged.graph.initializer[0].name))
    assert graph_digest(nudged) != graph_digest(model)


@pytest.mark.parametrize("change", ["attribute", "opset", "op", "input name", "wiring"])
def test_a_change_of_compute_changes_the_digest(tiny, change):
    model = onnx.load(str(tiny))
    before = graph_digest(model)
    g = model.graph
    if change == "attribute":
        g.node[0].attribute.append(helper.make_attribute("transB", 0))  # any attribute counts
    elif change == "opset":
        model.opset_import[0].version = 18
    elif change == "op":
        g.node[1].op_type = "Sigmoid"
    elif change == "input name":  # inputs are made by name (the registry's inputs: and dims:)
        g.input[0].name = "x2"
        g.node[0].input[0] = "x2"
    else:  # the second MatMul reads the first layer's input instead of its output
        g.node[2].input[0] = g.node[0].output[0]
    assert graph_digest(model) != before


def test_a_dead_node_and_a_subgraph_are_not_proven(tiny, tmp_path):
    model = onnx.load(str(tiny))
    model.graph.node.append(helper.make_node("Relu", ["x"], ["unused"]))
    assert graph_digest(model) != graph_digest(onnx.load(str(tiny)))

    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "b", [],
                               [helper.make_tensor_value_info("o", onnx.TensorProto.FLOAT, None)])
    looped = onnx.load(str(tiny))
    looped.graph.initializer.append(numpy_helper.from_array(np.array(True), "c"))
    looped.graph.node.append(helper.make_node("If", ["c"], ["z"], then_branch=branch, else_branch=branch))
    with pytest.raises(NotDigestible, match="subgraph"):
        graph_digest(looped)
    onnx.save(looped, str(tmp_path / "if.onnx"))
    check = compare_compute(tiny, tmp_path / "if.onnx")
    assert not check.proven and "subgraph" in check.reason


def test_a_file_onnx_runtime_refuses_is_not_proven(tiny, tmp_path):
    """Names do not count in the digest, but a re-export that gives two nodes one name (or one that
    leaves IR and opset alone yet writes a value_info ONNX Runtime rejects) must not pass unmeasured."""
    clash = reexport(onnx.load(str(tiny)))
    for node in clash.graph.node:
        node.name = "same"
    onnx.save(clash, str(tmp_path / "clash.onnx"))
    check = compare_compute(tiny, tmp_path / "clash.onnx")
    assert not check.proven and "node name 'same'" in check.reason, check
    typed = reexport(onnx.load(str(tiny)))
    hidden = typed.graph.node[0].output[0]
    typed.graph.value_info.append(helper.make_tensor_value_info(hidden, onnx.TensorProto.INT64, [1, 64]))
    onnx.save(typed, str(tmp_path / "typed.onnx"))
    check = compare_compute(tiny, tmp_path / "typed.onnx")
    assert not check.proven and "ONNX Runtime does not load typed.onnx" in check.reason, check


def test_the_same_graph_after_ort_basic_optimizations(tiny, tmp_path):
    """An Identity before the output: other graph, and ONNX Runtime's redundant-node elimination
    removes it, so the compute is proven the same at the optimized graph."""
    model = onnx.load(str(tiny))
    last = model.graph.node[-1]
    last.output[0] = "pre_y"
    model.graph.node.append(helper.make_node("Identity", ["pre_y"], ["y"], name="id"))
    onnx.save(model, str(tmp_path / "id.onnx"))
    assert graph_digest(model) != graph_digest(onnx.load(str(tiny)))
    check = compare_compute(tiny, tmp_path / "id.onnx")
    assert check.proven and check.how == SAME_OPTIMIZED, check
    slowed = tmp_path / "slow.onnx"
    onnx.save(add_extra_work(onnx.load(str(tiny)), matmuls=2, size=16), str(slowed))
    check = compare_compute(tiny, slowed)
    assert not check.proven and "also after ONNX Runtime's basic optimizations" in check.reason


# ---------------------------------------------------------------- unchanged items under --aaco-compare

MODELS = 20
LATENCY_TEST = """
def test_latency(benchmark_model):
    assert benchmark_model().measure_iterations > 0
"""


@pytest.fixture
def registry_repo(aaco_project):
    """A git repository with a registry of 20 models (each its own file, a different tiny chain),
    committed; then the pull request: model m07 slowed by extra MatMul work, m13 re-exported."""
    root = aaco_project.pytester.path
    lines = ["models:"]
    for i in range(MODELS):
        make_tiny_model(root / "models" / f"m{i:02d}.onnx", layers=3, width=32, seed=i)
        lines += [f"  m{i:02d}:", f"    path: models/m{i:02d}.onnx"]
    aaco_project.registry("\n".join(lines) + "\n")
    aaco_project.tests(LATENCY_TEST)
    for args in (("init", "-q"), ("config", "user.email", "t@example.com"), ("config", "user.name", "t"),
                 ("add", "."), ("commit", "-qm", "base")):
        git(root, *args)
    slowed = root / "models" / "m07.onnx"
    onnx.save(add_extra_work(onnx.load(str(slowed)), matmuls=40, size=256), str(slowed))
    reexported = root / "models" / "m13.onnx"
    onnx.save(reexport(onnx.load(str(reexported))), str(reexported))
    git(root, "commit", "-qam", "the pull request")
    return aaco_project


def durations(text: str) -> dict[str, float]:
    """``--durations=0`` lines summed per item: {node id: seconds}."""
    found: dict[str, float] = {}
    for seconds, nodeid in re.findall(r"^([\d.]+)s (?:setup|call|teardown)\s+(\S+)$", text, re.M):
        found[nodeid] = found.get(nodeid, 0.0) + float(seconds)
    return found


def test_unchanged_items_cost_nothing_and_the_changed_one_is_gated(registry_repo):
    root = registry_repo.pytester.path
    args = [a for a in registry_repo.args() if a != "--aaco-no-bundle"]
    result = registry_repo.pytester.runpytest_subprocess(
        *args, "--aaco-compare=HEAD~1", "--aaco-threshold=50%", "--aaco-compare-budget=20", "--aaco-cold-start=0",
        "--durations=0", "--durations-min=0", "-rs", timeout=400)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(failed=1, skipped=19)
    result.stdout.fnmatch_lines(["*REGRESSION m07[[]cpu[]]: latency*paired*",
                                 "SKIPPED*unchanged since HEAD~1*",
                                 "SKIPPED*unchanged compute since HEAD~1 (model bytes differ: same graph*"])
    spent = durations(text)
    unchanged = {k: v for k, v in spent.items() if "m07" not in k}
    assert len(unchanged) == 19, spent
    assert sum(unchanged.values()) <= 10.0, unchanged  # the bound for 19 unchanged items on 2 cores
    # the bundle's ledger: what was measured, what was not, and where the seconds went
    (bundle,) = (root / ".aaco" / "sessions").iterdir()
    meta = json.loads((bundle / "session_meta.json").read_text())
    cost = meta["cost"]
    assert cost["items"] == {"measured": 1, "unchanged": 18, "same_compute": 1, "new": 0, "other": 0}, cost
    assert cost["phases_s"]["call"] > 0 and cost["wall_s"] >= cost["phases_s"]["call"]
    items = {json.loads(p.read_text())["nodeid"]: json.loads(p.read_text()) for p in (bundle / "items").glob("*.json")}
    m13 = next(v for k, v in items.items() if "m13" in k)
    assert m13["compare_triage"]["compute"]["how"] == SAME_GRAPH
    m07 = next(v for k, v in items.items() if "m07" in k)
    assert m07["compare_triage"]["compute"]["proven"] is False
    assert any("compute not proven unchanged" in n for n in m07["verdict"]["notes"])
    report = subprocess.run([sys.executable, "-m", "pytest_aaco", "report", str(bundle)],  # this environment's aaco
                            capture_output=True, text=True, cwd=root, check=False)
    assert report.returncode == 1, report.stdout + report.stderr
    assert "where the time went:" in report.stdout and "1 measured" in report.stdout, report.stdout


def test_measure_keeps_the_old_behaviour_and_save_baseline_measures(registry_repo):
    result = registry_repo.run_subprocess("--aaco-compare=HEAD~1", "--aaco-compare-unchanged=measure",
                                          "--aaco-threshold=50%", "--aaco-compare-budget=20", "--aaco-cold-start=0",
                                          "-k", "m03 or m13", "-v", timeout=300)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["m03*cpu*unchanged", "m13*cpu*no-regression"])


def test_a_bad_mode_is_a_usage_error(aaco_project):
    result = aaco_project.run_subprocess("--aaco-compare-unchanged=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--aaco-compare-unchanged*skip, measure*"])


# ---------------------------------------------------------------- shards

SHARD_TESTS = """
import pytest

@pytest.mark.parametrize("n", range({count}))
def test_item(n):
    pass
"""


def test_shard_parser():
    assert shard_or_none("") is None and shard_or_none("2/3") == (2, 3) and shard_or_none(" 1 / 1 ") == (1, 1)
    for bad in ("0/3", "4/3", "3", "a/b", "1/0"):
        with pytest.raises(ValueError, match="K/N"):
            shard_or_none(bad)


def test_shard_of_is_stable_and_spreads():
    ids = [f"tests/test_perf.py::test_latency[m{i}-cpu]" for i in range(300)]
    counts = [sum(shard_of(i, 3) == k for i in ids) for k in (1, 2, 3)]
    assert sum(counts) == 300 and min(counts) > 70, counts
    assert shard_of(ids[0], 3) == shard_of(ids[0], 3)


def ran(result: pytest.RunResult) -> set[str]:
    return set(re.findall(r"(test_shards\.py::test_item\[\d+\]) PASSED", result.stdout.str()))


@pytest.mark.slow
def test_shards_cover_every_item_exactly_once_and_keep_them_when_items_are_added(pytester):
    pytester.makepyfile(test_shards=SHARD_TESTS.format(count=30))
    shards = []
    for k in (1, 2, 3):
        result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", "--aaco-no-bundle",
                                               f"--aaco-shard={k}/3")
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        result.stdout.fnmatch_lines([f"*{len(ran(result))} passed, {30 - len(ran(result))} deselected*"])
        shards.append(ran(result))
    assert sum(len(s) for s in shards) == 30 and set().union(*shards) == {f"test_shards.py::test_item[{n}]"
                                                                         for n in range(30)}
    pytester.makepyfile(test_shards=SHARD_TESTS.format(count=45))
    grown = [ran(pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", "--aaco-no-bundle",
                                               f"--aaco-shard={k}/3")) for k in (1, 2, 3)]
    for before, after in zip(shards, grown, strict=True):
        assert before <= after  # an item keeps its shard when others are added


@pytest.mark.slow
def test_a_shard_under_xdist_runs_the_same_items(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_shards=SHARD_TESTS.format(count=30))
    alone = ran(pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", "--aaco-no-bundle", "--aaco-shard=2/3"))
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", "--aaco-no-bundle", "--aaco-shard=2/3",
                                           "-n", "2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    spread = set(re.findall(r"PASSED (test_shards\.py::test_item\[\d+\])", result.stdout.str()))
    assert spread == alone and alone


def test_a_bad_shard_is_a_usage_error(pytester):
    pytester.makepyfile(test_shards=SHARD_TESTS.format(count=3))
    result = pytester.runpytest_subprocess("--aaco-shard=4/3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--aaco-shard*1 <= K <= N*"])


@pytest.mark.slow
def test_the_ledger_is_in_the_bundle_of_a_stored_baseline_run(aaco_project, tmp_path):
    result = aaco_project.run_subprocess("--aaco-no-bundle")  # the flag is already there: no bundle, no ledger
    assert result.ret == pytest.ExitCode.OK
    args = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(*args, "--aaco-shard=1/1")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    (bundle,) = (aaco_project.pytester.path / ".aaco" / "sessions").iterdir()
    cost = json.loads((bundle / "session_meta.json").read_text())["cost"]
    assert cost["shard"] == "1/1" and cost["items"]["measured"] == 1
    assert set(cost["phases_s"]) == {"collection", "setup", "call", "teardown", "check_at_ref", "other"}
    assert np.isclose(sum(v for k, v in cost["phases_s"].items() if k != "check_at_ref"), cost["wall_s"], atol=0.01)
    shutil.rmtree(bundle)
