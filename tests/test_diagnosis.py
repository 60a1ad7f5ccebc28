"""Derived metrics and the rule-based bottleneck classifier, on synthetic inputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pytest_aaco.verdict.diagnosis import (
    RECOMMENDATIONS,
    THRESHOLD,
    Diagnosis,
    classify_bottleneck,
    ramp,
    recommendation,
    score_all,
)
from pytest_aaco.verdict.metrics import derived_metrics

S = 1_000_000_000  # ns per second


# -- derived metrics ------------------------------------------------------------------------------
def test_derived_metrics_on_known_values():
    lat = np.array([10.0, 11.0, 9.0, 10.0, 10.0, 12.0, 8.0, 10.0, 10.0, 10.0])
    d = derived_metrics(lat, np.array([30.0, 12.0, 10.5, 10.5]), first_run_ms=50.0, batch_size=4)
    assert d["n"] == 10 and d["batch_size"] == 4
    assert d["mean_ms"] == pytest.approx(10.0)
    assert d["std_ms"] == pytest.approx(float(np.std(lat, ddof=1)))
    assert d["cov"] == pytest.approx(d["std_ms"] / 10.0)
    assert d["p50_ms"] == 10.0 and d["min_ms"] == 8.0 and d["max_ms"] == 12.0
    assert d["iqr_ms"] == pytest.approx(0.0)
    assert d["mad_ms"] == 0.0
    assert d["throughput"] == pytest.approx(400.0)  # 4 samples per 10 ms
    assert d["warmup_ratio"] == pytest.approx(5.0)
    assert d["warmup_tail_ratio"] == pytest.approx(1.05)  # last quarter of 4 = the last one
    assert math.isnan(d["drift_ratio"])  # fewer than 5 iterations per tenth
    assert d["outlier_fraction"] == 0.0
    json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()})


def test_derived_metrics_drift_autocorrelation_and_outliers():
    lat = np.linspace(10.0, 11.0, 100)  # a slow 10% upward trend
    d = derived_metrics(lat, np.array([]), first_run_ms=10.0)
    assert d["drift_ratio"] == pytest.approx(np.median(lat[-10:]) / np.median(lat[:10]) - 1)
    assert d["lag1_autocorr"] > 0.9
    assert math.isnan(d["warmup_tail_ratio"])
    spikes = 10.0 + 0.1 * np.sin(np.arange(100))
    spikes[5] = 100.0
    assert derived_metrics(spikes, np.array([]), 10.0)["outlier_fraction"] == pytest.approx(0.01)
    quantized = np.full(100, 10.0)  # MAD = 0: the sd is the scale instead
    quantized[7] = 30.0
    assert derived_metrics(quantized, np.array([]), 10.0)["outlier_fraction"] == pytest.approx(0.01)


def test_derived_metrics_empty_and_single():
    empty = derived_metrics(np.array([]), np.array([]), first_run_ms=5.0)
    assert empty["n"] == 0 and math.isnan(empty["mean_ms"]) and math.isnan(empty["cov"])
    one = derived_metrics(np.array([4.0]), np.array([]), first_run_ms=8.0)
    assert one["mean_ms"] == 4.0 and math.isnan(one["std_ms"]) and one["warmup_ratio"] == 2.0


# -- helpers for synthetic telemetry --------------------------------------------------------------
def telemetry(samplers: dict[str, list[dict]], duration_s: float = 10.0, clock_state: dict | None = None) -> dict:
    """A TelemetrySession.to_dict()-shaped record; samples spread evenly over the phase."""
    records = {}
    for name, rows in samplers.items():
        n = len(rows)
        samples = [{"t_ns": int(i * duration_s * S / max(1, n - 1)), **row} for i, row in enumerate(rows)]
        records[name] = {"name": name, "interval_s": 0.1, "samples": samples, "summary": {}, "error": None}
    return {
        "interval_s": 0.1,
        "start_ns": 0,
        "end_ns": int(duration_s * S),
        "samplers": records,
        "summary": {},
        "errors": {},
        "clock_state": clock_state or {"cpu_governor": "performance"},
    }


def quiet_system(n: int = 20, **overrides) -> list[dict]:
    rows = []
    for i in range(n):
        row = {
            "process_cpu_percent": 195.0,
            "system_cpu_percent": 99.0,
            "rss_mb": 400.0,
            "ctx_switches_voluntary": 1000 + i,
            "ctx_switches_involuntary": 50 + i,  # ~2/s
            "page_faults_minor": 10_000,
            "page_faults_major": 0,
            "load_avg_1m": 1.9,
        }
        row.update({k: (v(i) if callable(v) else v) for k, v in overrides.items()})
        rows.append(row)
    return rows


STEADY = {
    "cov": 0.02,
    "drift_ratio": 0.0,
    "warmup_tail_ratio": 1.01,
    "warmup_ratio": 2.0,
    "mean_ms": 40.0,
    "std_ms": 0.8,
}


# -- classify_bottleneck ---------------------------------------------------------------------------------------
def test_quiet_run_has_no_diagnosis():
    t = telemetry({"system": quiet_system(), "clocks": [{"cpu_freq_mhz": 3000.0}] * 20})
    assert classify_bottleneck(t, STEADY, cpu_count=2) is None
    assert classify_bottleneck({}, {}, cpu_count=2) is None  # missing everything: no opinion, no exception


def test_cpu_contention():
    rows = quiet_system(
        load_avg_1m=3.6,
        ctx_switches_involuntary=lambda i: 100 + 300 * i,
        system_cpu_percent=100.0,
        process_cpu_percent=110.0,
    )
    diagnosis = classify_bottleneck(telemetry({"system": rows}, duration_s=10.0), STEADY, cpu_count=2)
    assert diagnosis is not None and diagnosis.category == "cpu_contention"
    assert diagnosis.score == 1.0
    text = " | ".join(diagnosis.evidence)
    assert "load average reached 3.60 on 2 logical cores (180% of capacity)" in text
    assert "involuntary context switches climbed by 5700 in 10.0 s (570/s)" in text
    assert "other processes used 0.9 cores" in text
    assert diagnosis.recommendation == RECOMMENDATIONS["cpu_contention"]


def test_frequency_scaling_needs_an_observed_effect_not_just_a_setting():
    clocks_flat = [{"cpu_freq_mhz": 2000.0}] * 20
    t = telemetry({"system": quiet_system(), "clocks": clocks_flat}, clock_state={"cpu_governor": "powersave"})
    assert classify_bottleneck(t, STEADY, cpu_count=2) is None
    assert score_all(t, STEADY, 2)["frequency_scaling"][0] == pytest.approx(0.25)

    clocks_moving = [{"cpu_freq_mhz": 1500.0 + 100.0 * (i % 10)} for i in range(20)]
    t = telemetry({"system": quiet_system(), "clocks": clocks_moving}, clock_state={"cpu_governor": "powersave"})
    diagnosis = classify_bottleneck(t, STEADY, cpu_count=2)
    assert diagnosis.category == "frequency_scaling"
    assert "CPU frequency governor is 'powersave'" in diagnosis.evidence[-1]
    assert any("CPU clock varied between 1500 and 2400 MHz" in e for e in diagnosis.evidence)
    assert "cpupower frequency-set -g performance" in diagnosis.recommendation


def test_frequency_scaling_from_gpu_power_cap():
    gpu = [
        {
            "gpu_util_percent": 99.0,
            "gfx_clock_mhz": 1980.0 if i % 2 else 1500.0,
            "temp_edge_c": 60.0,
            "clock_event_reasons": ["sw_power_cap"] if i % 2 == 0 else [],
        }
        for i in range(20)
    ]
    diagnosis = classify_bottleneck(telemetry({"nvidia_gpu": gpu}), STEADY, cpu_count=8)
    assert diagnosis.category == "frequency_scaling"
    assert any("power clock-event reasons (sw_power_cap) in 50% of 20 samples" in e for e in diagnosis.evidence)
    assert any("GPU clock under load varied between 1500 and 1980 MHz" in e for e in diagnosis.evidence)


def test_idle_gpu_clock_changes_do_not_count():
    gpu = [{"gpu_util_percent": 0.0 if i % 2 else 99.0, "gfx_clock_mhz": 300.0 if i % 2 else 2100.0} for i in range(20)]
    assert "frequency_scaling" not in score_all(telemetry({"amd_gpu": gpu}), STEADY, 8)


def test_thermal_throttling():
    gpu = [
        {
            "gpu_util_percent": 100.0,
            "temp_junction_c": 80.0 + i,
            "gfx_clock_mhz": 2100.0 - 20.0 * i,
            "clock_event_reasons": ["hw_thermal_slowdown"] if i >= 10 else [],
        }
        for i in range(21)
    ]
    diagnosis = classify_bottleneck(telemetry({"amd_gpu": gpu}), STEADY, cpu_count=8)
    assert diagnosis.category == "thermal_throttling" and diagnosis.score == 1.0
    text = " | ".join(diagnosis.evidence)
    assert "thermal clock-event reasons (hw_thermal_slowdown) in 52% of 21 samples" in text
    assert "GPU temperature reached junction 100 °C" in text
    assert "GPU clock under load fell" in text and "while the temperature rose" in text


def test_warmup_instability():
    derived = {
        "cov": 0.25,
        "drift_ratio": -0.12,
        "warmup_tail_ratio": 1.4,
        "warmup_ratio": 80.0,
        "mean_ms": 12.0,
        "std_ms": 3.0,
    }
    diagnosis = classify_bottleneck(telemetry({"system": quiet_system()}), derived, cpu_count=2)
    assert diagnosis.category == "warmup_instability" and diagnosis.score == 1.0
    text = " | ".join(diagnosis.evidence)
    assert "last warmup iterations were 1.40x the measured median" in text
    assert "latency drifted -12.0%" in text
    assert "coefficient of variation 25.0% (std 3.00 ms over mean 12.00 ms)" in text
    assert "first run took 80.0x" in text


def test_memory_growth_rss_and_vram():
    rows = quiet_system(rss_mb=lambda i: 400.0 + 20.0 * i, page_faults_major=lambda i: i)
    gpu = [{"vram_used_mb": 2000.0 + 50.0 * i} for i in range(20)]
    diagnosis = classify_bottleneck(telemetry({"system": rows, "nvidia_gpu": gpu}), STEADY, cpu_count=2)
    assert diagnosis.category == "memory_growth"
    text = " | ".join(diagnosis.evidence)
    assert "process RSS grew from 430 MB to 750 MB (+320 MB, +74%) over 10.0 s" in text
    assert "GPU memory in use grew from 2075 MB to 2875 MB (+800 MB, +39%)" in text
    assert "19 major page faults" in text


def test_small_rss_wobble_is_not_growth():
    rows = quiet_system(rss_mb=lambda i: 400.0 + (i % 3))
    assert "memory_growth" not in score_all(telemetry({"system": rows}), STEADY, 2)


def test_launch_and_compute_bound_only_with_kernel_data():
    t = telemetry({"nvidia_gpu": [{"gpu_util_percent": 97.0}] * 10})
    assert classify_bottleneck(t, STEADY, 8) is None
    launch = classify_bottleneck(t, STEADY, 8,
                                 kernel_data={"kernel_time_ms": 3.0, "wall_ms": 10.0, "kernel_count": 600})
    assert launch.category == "launch_bound"
    assert "kernels kept the GPU busy 30% of the wall time (3.00 of 10.00 ms)" in launch.evidence[0]
    assert "600 kernels averaging 5.0 µs each" in launch.evidence[1]
    compute = classify_bottleneck(t, STEADY, 8,
                                  kernel_data={"kernel_time_ms": 9.8, "wall_ms": 10.0, "kernel_count": 40})
    assert compute.category == "compute_bound"
    assert any("GPU utilisation averaged 97%" in e for e in compute.evidence)
    busy_75 = {"kernel_time_ms": 7.5, "wall_ms": 10.0, "kernel_count": 40}
    assert classify_bottleneck(t, STEADY, 8, kernel_data=busy_75) is None
    assert classify_bottleneck(t, STEADY, 8, kernel_data={"wall_ms": 10.0}) is None  # incomplete: ignored


def test_best_category_wins_and_scores_are_reported():
    rows = quiet_system(load_avg_1m=3.6, rss_mb=lambda i: 400.0 + 2.0 * i)
    diagnosis = classify_bottleneck(telemetry({"system": rows}), STEADY, cpu_count=2)
    assert diagnosis.category == "cpu_contention"
    assert set(diagnosis.scores) == {"cpu_contention", "memory_growth"}
    assert diagnosis.scores["memory_growth"] < THRESHOLD
    record = diagnosis.to_dict()
    assert set(record) == {"category", "score", "evidence", "recommendation", "scores"}
    json.dumps(record)


def test_diagnosis_dataclass_and_ramp():
    d = Diagnosis("cpu_contention", 0.75, ["x"], "y")
    assert d.to_dict() == {
        "category": "cpu_contention",
        "score": 0.75,
        "evidence": ["x"],
        "recommendation": "y",
        "scores": {},
    }
    assert ramp(0.5, 1.0, 2.0) == 0.0 and ramp(1.5, 1.0, 2.0) == 0.5 and ramp(3.0, 1.0, 2.0) == 1.0
    assert ramp(float("nan"), 0.0, 1.0) == 0.0 and ramp(1.0, 1.0, 1.0) == 1.0


def test_classify_uses_real_session_output():
    from pytest_aaco.samplers import TelemetrySession, build_samplers

    session = TelemetrySession(build_samplers("cpu", 0, 60.0))
    session.start()
    session.stop()
    derived = derived_metrics(np.full(50, 10.0), np.full(5, 10.0), 12.0)
    scores = score_all(session.to_dict(), derived, 1024)
    assert "warmup_instability" not in scores and "memory_growth" not in scores


def test_other_processes_cores_from_the_system_sampler_summary():
    from pytest_aaco.verdict.metrics import other_processes_cores

    busy = {"summary": {"system_cpu_percent": {"mean": 90.0}, "process_cpu_percent": {"mean": 100.0}}}
    assert other_processes_cores(busy, 2) == pytest.approx(0.8)  # 1.8 cores busy, 1.0 of them ours
    quiet = {"summary": {"system_cpu_percent": {"mean": 50.0}, "process_cpu_percent": {"mean": 101.0}}}
    assert other_processes_cores(quiet, 2) == 0.0  # sampling jitter never goes negative
    assert other_processes_cores({}, 2) is None and other_processes_cores(None, 2) is None


def test_drift_is_a_ratio_that_cannot_fall_below_minus_100_percent():
    # the case: a slow first tenth, 3.2x the rest, once read "latency drifted -222.4%"
    lat = np.r_[np.full(10, 32.24), np.full(90, 10.0)]
    d = derived_metrics(lat, np.array([40.0]), first_run_ms=500.0)
    assert d["drift_ratio"] == pytest.approx(10.0 / 32.24 - 1)
    assert -1.0 < d["drift_ratio"] < 0
    text = " | ".join(classify_bottleneck({}, d, cpu_count=2).evidence)
    assert "latency drifted -69.0%" in text
    worst = np.r_[np.full(10, 1e6), np.full(90, 1e-3)]
    assert derived_metrics(worst, np.array([]), 1.0)["drift_ratio"] > -1.0
    assert derived_metrics(lat[::-1], np.array([]), 1.0)["drift_ratio"] == pytest.approx(2.224)


@pytest.mark.parametrize(
    ("provider", "named", "absent"),
    [
        ("cpu", ["--aaco-warmup"], ["TensorRT", "MIGraphX", "CUDA", "nvidia", "AMD", "optimized_model_filepath"]),
        ("CPUExecutionProvider", ["--aaco-warmup"], ["TensorRT", "MIGraphX"]),
        ("tensorrt", ["--aaco-compile-cache", "trt_timing_cache_enable=1"], ["MIGraphX"]),
        ("migraphx", ["migraphx_model_cache_dir", "--aaco-compile-cache"],
         ["TensorRT", "migraphx_save_compiled_model"]),
        ("cuda", ["--aaco-warmup"], ["TensorRT", "MIGraphX"]),
        ("openvino", ["--aaco-warmup"], ["TensorRT", "MIGraphX"]),
    ],
)
def test_advice_names_only_the_items_execution_provider(provider, named, absent):
    derived = {"cov": 0.25, "drift_ratio": -0.12, "warmup_tail_ratio": 1.4, "warmup_ratio": 80.0}
    diagnosis = classify_bottleneck({}, derived, cpu_count=2, provider=provider)
    assert diagnosis.category == "warmup_instability"
    for word in named:
        assert word in diagnosis.recommendation
    for word in absent:
        assert word not in diagnosis.recommendation
    assert classify_bottleneck({}, derived, cpu_count=2).recommendation == RECOMMENDATIONS["warmup_instability"]


@pytest.mark.parametrize("category", sorted(RECOMMENDATIONS))
def test_cpu_advice_never_names_a_gpu_provider(category):
    text = recommendation(category, "cpu")
    for word in ("TensorRT", "MIGraphX", "CUDA", "HIP", "nvidia", "AMD"):
        assert word not in text, (category, text)
    assert "nvidia-smi" in recommendation("frequency_scaling", "cuda")
    assert "AMD" not in recommendation("frequency_scaling", "cuda")
    assert "nvidia" not in recommendation("frequency_scaling", "migraphx")


# ---------------------------------------------------------------- advice names only what the plugin accepts


def _every_advice() -> list[tuple[str, str]]:
    from pytest_aaco import eps

    found = [(category, text) for category, text in RECOMMENDATIONS.items()]
    for ep in eps.ALL:
        for category in RECOMMENDATIONS:
            found.append((f"{category} on {ep.short}", recommendation(category, ep.short)))
    return found


def test_advice_names_only_options_the_plugin_accepts():
    """Before: ``set intra_op_num_threads below the number of idle cores`` (a session option the plugin
    refuses as a provider option), ``graph_optimization_level``, ``SessionOptions.optimized_model_filepath``,
    ``enable_cuda_graph`` (the plugin sets it through --aaco-graph). After: plugin options only, and EP
    option keys only as ``--aaco-provider-option KEY=VALUE`` (or the key a plugin option sets, in brackets)."""
    import re

    from pytest_aaco.measure.providers import CPU_OPTION_HINTS
    from pytest_aaco.options import OPTIONS

    names = {f"--aaco-{o.name}" for o in OPTIONS}
    refused = {*CPU_OPTION_HINTS, "graph_optimization_level", "optimized_model_filepath", "enable_cuda_graph"}
    for where, text in _every_advice():
        for option in re.findall(r"--aaco-[a-z-]+[a-z]", text):
            assert option in names, (where, option)
        for word in refused:
            assert not re.search(rf"(?<![\w=-]){word}\b", text), (where, word, text)
        for key in re.findall(r"\b([a-z]+(?:_[a-z0-9]+)+)=", text):
            assert re.search(rf"--aaco-provider-option ([a-z0-9_]+=\w+, )*{key}=", text), (where, key, text)
