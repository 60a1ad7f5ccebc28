"""The device-time threshold per item: ``@pytest.mark.aaco(device_threshold=...)`` > the registry's
``device_threshold:`` > ``--aaco-device-threshold``, as the wall-time threshold; measured through pytest.

CI has no GPU, so device time is not traced here: the project's conftest records the gate settings each
item is judged with (:meth:`pytest_aaco.benchmark.BenchmarkRun.gate_settings`, which both the stored gate
and the side-by-side gate take their ``device_threshold`` from), restoring the method when pytest ends.
"""

from __future__ import annotations

import json

import pytest

SPY = """
import json
import pytest_aaco.benchmark as benchmark

_seen, _original = {}, benchmark.BenchmarkRun.gate_settings


def _spy(self):
    settings = _original(self)
    _seen[f"{self.model.name}[{self.provider.short}]"] = settings.device_threshold
    return settings


def pytest_configure(config):
    benchmark.BenchmarkRun.gate_settings = _spy


def pytest_unconfigure(config):
    benchmark.BenchmarkRun.gate_settings = _original
    (config.rootpath / "seen.json").write_text(json.dumps(_seen))
"""

REGISTRY = """
models:
  plain:
    path: tiny.onnx
  listed:
    path: tiny.onnx
    device_threshold: 3%
  marked:
    path: tiny.onnx
    device_threshold: 3%
"""

TESTS = """
import pytest

@pytest.mark.aaco(models=["plain", "listed"])
def test_latency(benchmark_model):
    benchmark_model()

@pytest.mark.aaco(models="marked", device_threshold="7%")
def test_marked(benchmark_model):
    benchmark_model()
"""


def test_device_threshold_marker_over_registry_over_option(aaco_project):
    aaco_project.registry(REGISTRY)
    aaco_project.tests(TESTS)
    aaco_project.pytester.makeconftest(SPY)
    result = aaco_project.run("--aaco-device-threshold=4%")
    result.assert_outcomes(passed=3)
    seen = json.loads((aaco_project.pytester.path / "seen.json").read_text())
    assert seen == {"plain[cpu]": pytest.approx(0.04), "listed[cpu]": pytest.approx(0.03),
                    "marked[cpu]": pytest.approx(0.07)}


def test_a_bad_marker_device_threshold_is_a_usage_error_naming_the_key(aaco_project):
    aaco_project.tests("import pytest\n\n@pytest.mark.aaco(device_threshold=5)\n"
                       "def test_latency(benchmark_model):\n    benchmark_model()\n")
    result = aaco_project.run()
    assert result.ret != 0
    assert "@pytest.mark.aaco(device_threshold=" in result.stdout.str() + result.stderr.str()


def test_a_bad_registry_device_threshold_names_the_key(aaco_project):
    aaco_project.registry("models:\n  tiny:\n    path: tiny.onnx\n    device_threshold: lots\n")
    result = aaco_project.run()
    assert result.ret != 0
    assert "tiny.device_threshold" in result.stdout.str() + result.stderr.str()
