"""The pytest shell: parametrization ids, the aaco marker, fixtures, the summary table, as users run it."""

from __future__ import annotations

import re

import pytest

TWO_MODELS = """
models:
  tiny:
    path: tiny.onnx
  small:
    path: tiny.onnx
    rounds: 4
    iterations: 6
"""


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and not line.startswith(("ERROR", "FAILED"))]


def collect_on_cpu_and_cuda(aaco_project) -> list[str]:
    """The node ids ``--collect-only`` lists for ``--aaco-provider=cpu,cuda`` (no GPU needed to collect)."""
    result = aaco_project.run("--collect-only", "-q", "--aaco-provider=cpu,cuda")
    assert result.ret == 0
    return collected(result)


def test_ids_are_model_and_provider(aaco_project):
    aaco_project.registry(TWO_MODELS)
    assert collect_on_cpu_and_cuda(aaco_project) == [
        "test_perf.py::test_latency[tiny-cpu]",
        "test_perf.py::test_latency[tiny-cuda]",
        "test_perf.py::test_latency[small-cpu]",
        "test_perf.py::test_latency[small-cuda]",
    ]


def test_marker_narrows_models_and_providers(aaco_project):
    aaco_project.registry(TWO_MODELS)
    aaco_project.tests("""
        import pytest

        @pytest.mark.aaco(models=["small"])
        def test_only_small(benchmark_model):
            benchmark_model()

        @pytest.mark.aaco(models="tiny", providers=["CUDAExecutionProvider"])
        def test_tiny_on_cuda(benchmark_model):
            benchmark_model()

        def test_plain():
            pass
    """)
    assert collect_on_cpu_and_cuda(aaco_project) == [
        "test_perf.py::test_only_small[small-cpu]",
        "test_perf.py::test_only_small[small-cuda]",
        "test_perf.py::test_tiny_on_cuda[tiny-cuda]",
        "test_perf.py::test_plain",
    ]


def test_unknown_model_in_marker_is_a_clear_error(aaco_project):
    aaco_project.tests("""
        import pytest

        @pytest.mark.aaco(models=["tiny", "ghost"])
        def test_latency(benchmark_model):
            benchmark_model()
    """)
    result = aaco_project.run()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert ("test_perf.py::test_latency: @pytest.mark.aaco(models=...) names ['ghost'], not in the registry (tiny)"
            in result.stdout.str())


def test_unknown_provider_in_marker_is_a_clear_error(aaco_project):
    aaco_project.tests("""
        import pytest

        @pytest.mark.aaco(providers=["gpu"])
        def test_latency(benchmark_model):
            benchmark_model()
    """)
    result = aaco_project.run()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*@pytest.mark.aaco(providers=...): unknown execution provider 'gpu'; valid: *"])


def test_unknown_marker_keyword_is_a_clear_error(aaco_project):
    aaco_project.tests("""
        import pytest

        @pytest.mark.aaco(treshold=0.1)
        def test_latency(benchmark_model):
            benchmark_model()
    """)
    result = aaco_project.run()
    assert result.ret != 0
    assert "@pytest.mark.aaco got unknown keyword(s) ['treshold']; valid: models, " in result.stdout.str()


def test_bad_registry_is_a_clear_error(aaco_project):
    aaco_project.registry("models:\n  tiny: {path: missing.onnx}\n")
    result = aaco_project.run()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*models.yaml: models.tiny.path: *missing.onnx does not exist*"])


def test_runs_print_the_table(aaco_project):
    aaco_project.registry(TWO_MODELS)
    result = aaco_project.run()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*= pytest-aaco results =*",
        "model*provider*mean ms*p50 ms*p99 ms*throughput/s*vs baseline*verdict*",
        "tiny*cpu*no-baseline*",
        "small*cpu*no-baseline*",
        "false-alarm control: LOND at FDR 0.05 over 2 benchmark items*",
    ])


MEASURED = """
import json
import pytest

@pytest.mark.aaco(rounds=3, iterations=4, threshold=0.2)
def test_marked(benchmark_model, aaco_model, aaco_provider, ort_session, request):
    first = benchmark_model()
    second = benchmark_model(rounds=2, iterations=7, warmup=1)
    assert aaco_model.name == "small" and aaco_provider.short == "cpu"
    assert ort_session.session.get_providers() == ["CPUExecutionProvider"]
    with pytest.raises(TypeError, match="unknown argument"):
        benchmark_model(round=3)
    data = {"first": [len(first.rounds), first.rounds[0].n],
            "second": [len(second.rounds), second.rounds[0].n],
            "registry": None}
    (request.config.rootpath / f"{request.node.name}.json").write_text(json.dumps(data))

@pytest.mark.aaco(models="small")
def test_registry_settings(benchmark_model, request):
    r = benchmark_model()
    (request.config.rootpath / "registry.json").write_text(json.dumps([len(r.rounds), r.rounds[0].n]))
"""


def test_settings_marker_over_registry_over_options(aaco_project):
    """Measured as marker > benchmark_model() overrides > registry > command line."""
    import json

    aaco_project.registry(TWO_MODELS)
    aaco_project.tests(MEASURED)
    result = aaco_project.run("-k", "small")
    result.assert_outcomes(passed=2)
    marked = json.loads((aaco_project.pytester.path / "test_marked[small-cpu].json").read_text())
    assert marked["first"] == [3, 4]  # the marker wins over the registry (rounds 4, iterations 6)
    assert marked["second"] == [2, 7]  # call overrides win over everything
    assert json.loads((aaco_project.pytester.path / "registry.json").read_text()) == [4, 6]
    # the last result of each item is the one judged, with the marker's threshold
    result.stdout.fnmatch_lines(["small*cpu*no-baseline*"])


def test_plain_tests_are_untouched(aaco_project):
    aaco_project.tests("def test_plain():\n    assert True\n")
    result = aaco_project.run()
    result.assert_outcomes(passed=1)
    assert "pytest-aaco results" not in result.stdout.str()


def test_plugin_can_be_disabled(aaco_project):
    aaco_project.tests("def test_plain():\n    assert True\n")
    result = aaco_project.pytester.runpytest("-p", "no:aaco")
    result.assert_outcomes(passed=1)


def test_junit_properties(aaco_project):
    import xml.etree.ElementTree as ET

    result = aaco_project.run("--junitxml=out.xml")
    result.assert_outcomes(passed=1)
    root = ET.parse(aaco_project.pytester.path / "out.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["aaco_model"] == "tiny" and props["aaco_provider"] == "cpu"
    assert props["aaco_verdict"] == "no-baseline"
    assert float(props["aaco_mean_ms"]) > 0


def test_input_error_fails_cleanly(aaco_project, make_model):
    make_model(aaco_project.pytester.path / "sym.onnx", batch="tokens")
    aaco_project.registry("models:\n  sym: {path: sym.onnx}\n")
    result = aaco_project.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*model 'sym', input 'x': dimension 0 is symbolic ('tokens');*dims: {tokens: 128}*"])
    assert not re.search(r"pytest_aaco[\\/]measure[\\/]inputs\.py", result.stdout.str())  # no traceback, any OS


def marked(value: str) -> str:
    return f"""
import pytest

@pytest.mark.aaco({value})
def test_latency(benchmark_model):
    benchmark_model()
"""


def test_marker_threshold_accepts_percent(aaco_project):
    aaco_project.tests(marked('threshold="3%"'))
    aaco_project.run().assert_outcomes(passed=1)


@pytest.mark.parametrize("value", ["threshold=5", "rounds=1", "warmup=0", 'iterations="fast"'])
def test_marker_values_are_validated(aaco_project, value):
    aaco_project.tests(marked(value))
    result = aaco_project.run()
    assert result.ret != 0
    text = result.stdout.str()
    assert f"@pytest.mark.aaco({value.split('=')[0]}=" in text
    assert "--aaco-strict-provider" not in text
