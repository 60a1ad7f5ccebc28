"""pytest-aaco's own benchmark suite: every registry model on every requested execution provider.

    pytest tests/perf --aaco-provider=cpu                       # measure and gate
    pytest tests/perf --aaco-provider=cpu --aaco-save-baseline  # record baselines
"""


def test_latency(benchmark_model):
    result = benchmark_model()
    assert result.measure_iterations > 0
    assert result.p50_ms <= result.p99_ms
