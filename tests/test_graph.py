"""``--aaco-graph``: the option, the one decision (auto = off), the refusal reasons (dynamic shapes,
CPU nodes, no device IO binding, an EP without graph replay), the provider options it produces,
and the fingerprint field that keeps graph-on and graph-off baselines apart. All on the CPU: the
capture itself runs on a GPU (the graph_check.sh study, in git history at commit 7ecd489)."""

from __future__ import annotations

import pytest

from pytest_aaco.config import parse_option
from pytest_aaco.history.fingerprint import build_fingerprint
from pytest_aaco.measure import graph as graphmod
from pytest_aaco.measure.graph import (
    GraphChoice,
    GraphRefused,
    choose_graph,
    graph_build_problem,
    symbolic_inputs,
    with_graph,
    without_graph,
)
from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.options import default, option
from pytest_aaco.warnings import AacoProviderWarning


def never() -> list[str]:
    raise AssertionError("not asked: graph replay was not wanted")


def no_cpu_nodes() -> tuple[int, str]:
    return 0, ""


def test_the_option_parses_auto_on_off_and_refuses_the_rest():
    assert default("graph") == "auto"
    assert parse_option(option("graph"), " ON ") == "on"
    assert parse_option(option("graph"), "off") == "off"
    with pytest.raises(pytest.UsageError, match="--aaco-graph"):
        parse_option(option("graph"), "maybe")
    assert option("graph").dest == "aaco_graph"  # the ini key is aaco_graph


def test_auto_is_off_and_reads_nothing():
    choice = choose_graph("auto", "cuda", "m[cuda]", iobinding="all", symbolic=never, cpu_nodes=never)
    assert choice == GraphChoice("auto", "off") and not choice.on
    assert graphmod.auto_wants_graph("cuda") is False and graphmod.auto_wants_graph("migraphx") is False


def test_on_gives_each_eps_graph_option():
    choice = choose_graph("on", "cuda", "m[cuda]", iobinding="all", symbolic=list, cpu_nodes=no_cpu_nodes)
    assert choice.on and choice.to_dict() == {"mode": "on", "state": "on"}
    cuda = with_graph(parse_provider("cuda").with_options({"device_id": 0}), choice)
    assert cuda.options == {"device_id": 0, "enable_cuda_graph": "1"}
    assert without_graph(cuda).options == {"device_id": 0}
    assert with_graph(parse_provider("cuda"), GraphChoice("off", "off")).options == {}


def test_migraphx_graph_on_is_refused_with_the_eps_reason_unless_it_takes_the_key(monkeypatch):
    """The EP is asked (migraphx_probe); every onnxruntime-migraphx wheel refuses migraphx_hip_graph_enable
    (tests/test_migraphx_conformance.py runs this against the real parsers)."""
    from pytest_aaco.measure import migraphx_probe

    refused = migraphx_probe.OptionCheck("refused", 'Unknown provider option: "migraphx_hip_graph_enable".')
    monkeypatch.setattr(migraphx_probe, "probe", lambda options, ort=None, factory=None: {
        k: refused for k in options})
    with pytest.raises(GraphRefused, match=r"m\[migraphx\]: --aaco-graph=on refused: this onnxruntime build's"
                       r" MIGraphXExecutionProvider .*has no graph replay option: it refuses migraphx_hip_graph_enable"
                       r" \(Unknown provider option.*use --aaco-graph=off"):
        choose_graph("on", "migraphx", "m[migraphx]", iobinding="all", symbolic=list, cpu_nodes=no_cpu_nodes)
    off = choose_graph("off", "migraphx", "m[migraphx]", iobinding="all", symbolic=never, cpu_nodes=never)
    assert off.state == "off"
    accepted = migraphx_probe.OptionCheck("accepted")
    monkeypatch.setattr(migraphx_probe, "probe", lambda options, ort=None, factory=None: {
        k: accepted for k in options})
    choice = choose_graph("on", "migraphx", "m[migraphx]", iobinding="all", symbolic=list, cpu_nodes=no_cpu_nodes)
    assert with_graph(parse_provider("migraphx"), choice).options == {"migraphx_hip_graph_enable": "1"}


@pytest.mark.parametrize("mode", ["auto", "on"])
def test_the_cpu_ep_is_not_applicable_never_an_error(mode):
    choice = choose_graph(mode, "cpu", "m[cpu]", iobinding="none", symbolic=never, cpu_nodes=never)
    assert choice.state == "not applicable" and "cpu EP has no graph replay" in (choice.reason or "")
    assert choose_graph("off", "cpu", "m[cpu]", iobinding="none", symbolic=never, cpu_nodes=never).state == "off"


def test_on_refuses_without_device_io_binding():
    with pytest.raises(GraphRefused, match=r"m\[cuda\]: --aaco-graph=on refused: enable_cuda_graph needs inputs and"
                                           r" outputs bound on the device.*'inputs': use --aaco-iobinding=all"):
        choose_graph("on", "cuda", "m[cuda]", iobinding="inputs", symbolic=never, cpu_nodes=never)


def test_on_refuses_a_model_with_a_symbolic_dim(make_model, tmp_path):
    dynamic = make_model(tmp_path / "dyn.onnx", batch="batch")
    assert symbolic_inputs(dynamic) == ["x[batch]"]
    assert symbolic_inputs(dynamic, fixed={"batch": 1}) == []  # the registry's dims pin it: same shapes every run
    assert symbolic_inputs(make_model(tmp_path / "static.onnx")) == []
    with pytest.raises(GraphRefused, match=r"symbolic dimensions \(x\[batch\]\)"):
        choose_graph("on", "cuda", "m[cuda]", iobinding="all", symbolic=lambda: symbolic_inputs(dynamic),
                     cpu_nodes=never)


def test_on_refuses_a_placement_with_cpu_nodes():
    with pytest.raises(GraphRefused, match=r"2 node\(s\) run on the CPU EP \(NonMaxSuppression, TopK\)"):
        choose_graph("on", "cuda", "m[cuda]", iobinding="all", symbolic=list,
                     cpu_nodes=lambda: (2, "NonMaxSuppression, TopK"))


def test_on_refuses_the_recorded_cuda_placement_with_a_cpu_node():
    """The CUDA profile recorded on the H100 (tests/data/ort_profile_cuda.json) put Celu on the CPU EP."""
    import json
    from pathlib import Path

    from pytest_aaco.measure.placement import CPU_EP, profile_details

    events = json.loads((Path(__file__).parent / "data" / "ort_profile_cuda.json").read_text())
    placement = profile_details(events)
    with pytest.raises(GraphRefused, match=r"1 node\(s\) run on the CPU EP \(Celu\)"):
        choose_graph("on", "cuda", "m[cuda]", iobinding="all", symbolic=list,
                     cpu_nodes=lambda: (placement.cpu_nodes, ", ".join(sorted(placement.ops[CPU_EP]))))


def test_auto_that_wants_a_graph_warns_naming_the_item_and_falls_back(monkeypatch):
    monkeypatch.setattr(graphmod, "auto_wants_graph", lambda short: True)
    with pytest.warns(AacoProviderWarning, match=r"m\[cuda\]: graph replay not used \(--aaco-graph=auto\).*CPU EP"):
        choice = choose_graph("auto", "cuda", "m[cuda]", iobinding="all", symbolic=list,
                              cpu_nodes=lambda: (1, "TopK"))
    assert choice.state == "refused" and "CPU EP" in (choice.reason or "")
    assert choose_graph("auto", "cuda", "m[cuda]", iobinding="all", symbolic=list, cpu_nodes=no_cpu_nodes).on


def test_a_build_that_does_not_know_the_graph_key_is_refused_after_creation():
    asked = parse_provider("migraphx").with_options({"migraphx_hip_graph_enable": "1"})
    reported = {"MIGraphXExecutionProvider": {"device_id": "0", "migraphx_fp16_enable": "0"}}
    assert "does not know migraphx_hip_graph_enable" in (graph_build_problem(asked, reported) or "")
    assert graph_build_problem(asked, {"MIGraphXExecutionProvider": {}}) is None  # reports nothing: trusted
    assert graph_build_problem(parse_provider("migraphx"), reported) is None  # not asked
    cuda = parse_provider("cuda").with_options({"enable_cuda_graph": "1"})
    assert graph_build_problem(cuda, {"CUDAExecutionProvider": {"enable_cuda_graph": "1"}}) is None


def test_unknown_mode_is_a_value_error():
    with pytest.raises(ValueError, match="--aaco-graph must be auto, on or off"):
        choose_graph("sometimes", "cuda", "m", iobinding="all", symbolic=list, cpu_nodes=no_cpu_nodes)


def fingerprint(graph: str | None) -> dict:
    return build_fingerprint(model_sha256="0" * 64, input_shapes={"x": [1, 64]}, input_dtypes={"x": "float32"},
                             provider="cpu", ep_name="CPUExecutionProvider", provider_options={}, iobinding="none",
                             intra_op_threads=0, graph=graph).fields


def test_graph_on_is_in_the_fingerprint_and_off_leaves_it_as_before():
    on, off, unset = fingerprint("on"), fingerprint("off"), fingerprint(None)
    assert on["graph"] == "on"
    assert "graph" not in off and off == unset  # earlier baselines (no graph replay) still match


def test_the_plugin_runs_cpu_items_under_graph_on(aaco_project):
    result = aaco_project.run("--aaco-graph=on")
    result.assert_outcomes(passed=1)
    bad = aaco_project.run("--aaco-graph=maybe")
    assert bad.ret != 0
    bad.stderr.fnmatch_lines(["*--aaco-graph*maybe*"])
