"""Samplers: the base contract, the host samplers, the GPU parsers and backends (with fake modules)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from pytest_aaco.samplers import (
    AMDGPUSampler,
    ClockMonitor,
    NVIDIAGPUSampler,
    Sampler,
    SystemSampler,
    TelemetrySession,
    build_samplers,
    rocm_install,
)
from pytest_aaco.samplers import amd as amd_mod
from pytest_aaco.samplers import nvidia as nvidia_mod
from pytest_aaco.samplers.base import summarize_samples
from pytest_aaco.samplers.clocks import clock_warnings, fingerprint_fields, read_clock_state

DATA = Path(__file__).parent / "data" / "amd"


# -- base contract ----------------------------------------------------------------------------
class CountingSampler(Sampler):
    name = "counting"

    def __init__(self, interval_s: float = 0.01, fail_setup: bool = False, fail_reads: int = 0) -> None:
        super().__init__(interval_s)
        self.calls = 0
        self.fail_setup = fail_setup
        self.fail_reads = fail_reads
        self.torn_down = False
        self.enough = threading.Event()

    def setup(self) -> None:
        if self.fail_setup:
            raise RuntimeError("no such device")

    def teardown(self) -> None:
        self.torn_down = True

    def _read(self) -> dict:
        self.calls += 1
        if self.calls <= self.fail_reads:
            raise OSError("sensor busy")
        if self.calls >= 4:
            self.enough.set()
        return {"value": float(self.calls), "label": "x", "flag": True, "missing": None}


def test_sampler_reads_at_start_and_stop_even_for_a_short_phase():
    sampler = CountingSampler(interval_s=60.0)
    sampler.start()
    sampler.stop()
    samples = sampler.samples()
    assert [s["value"] for s in samples] == [1.0, 2.0]
    assert samples[0]["t_ns"] <= samples[1]["t_ns"]
    assert sampler.torn_down and sampler.error is None and not sampler.running


def test_sampler_thread_reads_periodically_on_perf_counter_clock():
    before = time.perf_counter_ns()
    sampler = CountingSampler(interval_s=0.005)
    sampler.start()
    assert sampler.running
    assert sampler.enough.wait(5.0)
    sampler.stop()
    after = time.perf_counter_ns()
    times = [s["t_ns"] for s in sampler.samples()]
    assert len(times) >= 4
    assert times == sorted(times)
    assert before <= times[0] and times[-1] <= after


def test_summary_covers_numeric_fields_only():
    samples = [
        {"t_ns": 1, "a": 1.0, "b": "P0", "c": ["gpu_idle"], "d": None, "e": True},
        {"t_ns": 2, "a": 3.0, "d": 5},
        {"t_ns": 3, "a": 2.0},
    ]
    summary = summarize_samples(samples)
    assert set(summary) == {"a", "d"}
    assert summary["a"] == {"mean": 2.0, "max": 3.0, "min": 1.0, "first": 1.0, "last": 2.0, "n": 3.0}
    assert summary["d"]["mean"] == 5.0


def test_setup_failure_is_recorded_and_never_raised():
    sampler = CountingSampler(fail_setup=True)
    sampler.start()
    sampler.stop()
    assert sampler.error == "RuntimeError: no such device"
    assert sampler.samples() == [] and sampler.calls == 0
    record = sampler.to_dict()
    assert record == {"name": "counting", "interval_s": 0.01, "samples": [], "summary": {}, "error": record["error"]}


def test_repeated_read_failures_stop_sampling_without_raising():
    sampler = CountingSampler(interval_s=0.001, fail_reads=10**6)
    sampler.start()
    deadline = time.monotonic() + 5
    while sampler.running and time.monotonic() < deadline:
        time.sleep(0.005)
    sampler.stop()
    assert not sampler.running
    assert sampler.calls == 3  # start + 2 loop reads, then it gives up; stop() does not read again
    assert "read failed: OSError: sensor busy" in sampler.error and "sampling stopped" in sampler.error


def test_one_failed_read_is_recorded_and_sampling_continues():
    sampler = CountingSampler(interval_s=60.0, fail_reads=1)
    sampler.start()
    sampler.stop()
    assert sampler.error == "read failed: OSError: sensor busy"
    assert [s["value"] for s in sampler.samples()] == [2.0]


def test_interval_must_be_positive():
    with pytest.raises(ValueError, match="interval_s"):
        CountingSampler(interval_s=0)


# -- system sampler ---------------------------------------------------------------------------
def test_system_sampler_fields_and_types():
    sampler = SystemSampler(interval_s=60.0)
    sampler.start()
    sum(i * i for i in range(200_000))  # some CPU work between the two readings
    sampler.stop()
    assert sampler.error is None
    first, last = sampler.samples()
    for key in ("process_cpu_percent", "system_cpu_percent", "rss_mb", "load_avg_1m"):
        assert isinstance(last[key], float) and last[key] >= 0
    for key in ("ctx_switches_voluntary", "ctx_switches_involuntary", "page_faults_minor", "page_faults_major"):
        assert isinstance(last[key], int)
        assert last[key] >= first[key]  # cumulative counters
    assert last["rss_mb"] > 1


# -- clocks -----------------------------------------------------------------------------------
def make_sysfs(
    root: Path, governors: list[str], cur_khz: list[int] | None = None, amd_level: str | None = None
) -> Path:
    cpufreq = root / "devices" / "system" / "cpu" / "cpufreq"
    for i, governor in enumerate(governors):
        policy = cpufreq / f"policy{i}"
        policy.mkdir(parents=True)
        (policy / "scaling_governor").write_text(governor + "\n")
        (policy / "scaling_driver").write_text("acpi-cpufreq\n")
        (policy / "scaling_min_freq").write_text("1500000\n")
        (policy / "scaling_max_freq").write_text("3500000\n")
        if cur_khz is not None:
            (policy / "scaling_cur_freq").write_text(f"{cur_khz[i]}\n")
    (cpufreq / "boost").write_text("1\n") if governors else None
    if amd_level is not None:
        device = root / "class" / "drm" / "card0" / "device"
        device.mkdir(parents=True)
        (device / "power_dpm_force_performance_level").write_text(amd_level + "\n")
        (root / "class" / "drm" / "card0-DP-1").mkdir()
    return root


def test_read_clock_state_from_fake_sysfs(tmp_path):
    root = make_sysfs(tmp_path, ["powersave", "powersave"], cur_khz=[2000000, 3000000], amd_level="auto")
    state = read_clock_state(root, query_nvml=False)
    assert state["cpu_governors"] == {"policy0": "powersave", "policy1": "powersave"}
    assert state["cpu_governor"] == "powersave"
    assert state["cpu_driver"] == "acpi-cpufreq"
    assert state["cpu_boost"] is True
    assert state["cpu_cur_mhz"] == 2500.0
    assert state["cpu_min_mhz"] == 1500.0 and state["cpu_max_mhz"] == 3500.0
    assert state["gpu_perf_levels"] == {"card0": "auto"} and state["gpu_perf_level"] == "auto"
    assert state["nvidia_perf_state"] is None


def test_read_clock_state_with_missing_files_gives_none_fields(tmp_path):
    state = read_clock_state(tmp_path, query_nvml=False)
    assert state["cpu_governor"] is None and state["cpu_cur_mhz"] is None and state["cpu_max_mhz"] is None
    assert state["gpu_perf_level"] is None and state["cpu_governors"] == {}
    assert clock_warnings(state) == []


def test_mixed_governors_and_warnings(tmp_path):
    root = make_sysfs(tmp_path, ["performance", "schedutil"], amd_level="auto")
    state = read_clock_state(root, query_nvml=False)
    assert state["cpu_governor"] == "mixed"
    assert state["cpu_cur_mhz"] is None  # no scaling_cur_freq files
    warnings = clock_warnings(state)
    assert len(warnings) == 2
    assert "'schedutil' on 1 of 2 cpufreq policies (policy1)" in warnings[0]
    assert "sudo cpupower frequency-set -g performance" in warnings[0]
    assert "'auto' on card0" in warnings[1] and "--setperfdeterminism" in warnings[1]
    assert "amd-smi set --perf-determinism" in warnings[1]


def test_no_warning_when_clocks_are_pinned(tmp_path):
    state = read_clock_state(make_sysfs(tmp_path, ["performance"] * 4, amd_level="perf_determinism"), query_nvml=False)
    assert clock_warnings(state) == []


def test_fingerprint_fields_keep_settings_not_frequencies(tmp_path):
    state = read_clock_state(
        make_sysfs(tmp_path, ["performance"], cur_khz=[3100000], amd_level="high"), query_nvml=False
    )
    fields = fingerprint_fields(state)
    assert fields == {
        "cpu_governor": "performance",
        "cpu_driver": "acpi-cpufreq",
        "cpu_boost": True,
        "gpu_perf_level": "high",
    }
    state["cpu_cur_mhz"] = 1234.0
    state["nvidia_perf_state"] = "P8"
    assert fingerprint_fields(state) == fields


def test_clock_monitor_reads_fake_sysfs(tmp_path):
    root = make_sysfs(tmp_path, ["performance"] * 2, cur_khz=[2000000, 2400000])
    monitor = ClockMonitor(interval_s=60.0, sysfs_root=root)
    monitor.start()
    (root / "devices/system/cpu/cpufreq/policy0/scaling_cur_freq").write_text("1000000\n")
    monitor.stop()
    first, last = monitor.samples()
    assert first["cpu_freq_mhz"] == 2200.0 and first["cpu_freq_lowest_mhz"] == 2000.0
    assert last["cpu_freq_mhz"] == 1700.0 and last["cpu_freq_highest_mhz"] == 2400.0
    assert monitor.error is None


def test_clock_monitor_without_source_records_error(tmp_path):
    monitor = ClockMonitor(interval_s=60.0, sysfs_root=tmp_path)
    monitor.start()
    monitor.stop()
    assert monitor.samples() == []
    assert "no CPU frequency source" in monitor.error


# -- AMD: parsers against recorded documented shapes -------------------------------------------
def test_parse_rocm_smi_json_mi210_picks_the_device():
    text = (DATA / "rocm_smi_mi210.json").read_text()
    card0 = amd_mod.parse_rocm_smi_json(text, 0)
    assert card0 == {
        "gpu_util_percent": 97.0,
        "power_w": 88.0,
        "temp_edge_c": 41.0,
        "temp_junction_c": 47.0,
        "gfx_clock_mhz": 1700.0,
        "mem_clock_mhz": 1600.0,
        "vram_used_mb": pytest.approx(4123000832 / 2**20),
        "perf_level": "auto",
        "vram_used_percent": 6.0,
    }
    card1 = amd_mod.parse_rocm_smi_json(text, 1)
    assert card1["gpu_util_percent"] == 0.0 and card1["gfx_clock_mhz"] == 800.0 and card1["power_w"] == 41.0
    with pytest.raises(ValueError, match="no card for device 5"):
        amd_mod.parse_rocm_smi_json(text, 5)


def test_parse_rocm_smi_json_mi300x_current_power_and_missing_edge():
    fields = amd_mod.parse_rocm_smi_json((DATA / "rocm_smi_mi300x.json").read_text(), 3)  # `-d 3`: one card
    assert fields["power_w"] == 612.0
    assert fields["temp_edge_c"] is None and fields["temp_junction_c"] == 58.0
    assert fields["gfx_clock_mhz"] == 2100.0 and fields["perf_level"] == "determinism"


def test_parse_rocm_smi_json_skips_warning_lines_and_rejects_garbage():
    fields = amd_mod.parse_rocm_smi_json((DATA / "rocm_smi_with_warning.txt").read_text(), 0)
    assert fields["gpu_util_percent"] == 12.0 and fields["mem_clock_mhz"] == 1258.0 and fields["perf_level"] == "manual"
    with pytest.raises(ValueError, match="no JSON"):
        amd_mod.parse_rocm_smi_json("command not found", 0)
    with pytest.raises(ValueError, match="cardN"):
        amd_mod.parse_rocm_smi_json('{"system": {"Driver version": "6.8"}}', 0)


def test_parse_amdsmi_readings_current_and_old_shapes():
    mi300 = amd_mod.parse_amdsmi_readings(json.loads((DATA / "amdsmi_mi300x.json").read_text()))
    assert mi300 == {
        "gpu_util_percent": 87.0,
        "power_w": 612.0,
        "temp_edge_c": None,
        "temp_junction_c": 61.0,
        "gfx_clock_mhz": 2100.0,
        "mem_clock_mhz": 1300.0,
        "vram_used_mb": 18240.0,
        "perf_level": "auto",
    }
    mi210 = amd_mod.parse_amdsmi_readings(json.loads((DATA / "amdsmi_mi210_rocm5.json").read_text()))
    assert mi210["power_w"] == 88.0 and mi210["gfx_clock_mhz"] == 1700.0
    assert mi210["temp_edge_c"] == 45.0 and mi210["temp_junction_c"] == 52.0  # millidegrees -> °C
    assert mi210["perf_level"] == "high"
    assert amd_mod.parse_amdsmi_readings({}) == dict.fromkeys(amd_mod.FIELDS)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("AMDSMI_DEV_PERF_LEVEL_STABLE_PEAK", "stable_peak"),
        (0, "auto"),
        (8, "determinism"),
        ("auto", "auto"),
        ("N/A", None),
        (None, None),
        (256, "unknown"),
    ],
)
def test_normalize_perf_level(value, expected):
    assert amd_mod.normalize_perf_level(value) == expected


def test_unsupported_amdsmi_markers_are_none():
    fields = amd_mod.parse_amdsmi_readings({"power_info": {"socket_power": 0xFFFFFFFF, "average_socket_power": 77}})
    assert fields["power_w"] == 77.0


# -- AMD: backends with a fake amdsmi module -------------------------------------------------
class FakeAmdSmiError(Exception):
    pass


def fake_amdsmi(record: dict) -> types.SimpleNamespace:
    """An object with the amdsmi API surface the sampler uses, answering with *record*'s shapes."""
    calls = {"init": 0, "shutdown": 0}
    temps = types.SimpleNamespace(EDGE="EDGE", HOTSPOT="HOTSPOT")

    def temp(handle, sensor, metric):
        value = record["temp_edge"] if sensor == "EDGE" else record["temp_hotspot"]
        if value is None:
            raise FakeAmdSmiError("AMDSMI_STATUS_NOT_SUPPORTED")
        return value

    def init(*args):
        calls["init"] += 1

    def shut_down():
        calls["shutdown"] += 1

    return types.SimpleNamespace(
        calls=calls,
        AmdSmiTemperatureType=temps,
        AmdSmiTemperatureMetric=types.SimpleNamespace(CURRENT="CURRENT"),
        AmdSmiClkType=types.SimpleNamespace(GFX="GFX", MEM="MEM"),
        amdsmi_init=init,
        amdsmi_shut_down=shut_down,
        amdsmi_get_processor_handles=lambda: ["gpu0", "gpu1"],
        amdsmi_get_gpu_activity=lambda h: record["activity"],
        amdsmi_get_power_info=lambda h: record["power_info"],
        amdsmi_get_temp_metric=temp,
        amdsmi_get_clock_info=lambda h, clk: record["clock_gfx"] if clk == "GFX" else record["clock_mem"],
        amdsmi_get_gpu_vram_usage=lambda h: record["vram_usage"],
        amdsmi_get_gpu_perf_level=lambda h: record["perf_level"],
        amdsmi_get_gpu_asic_info=lambda h: {"market_name": "AMD Instinct MI300X", "family": 0x8C},
        amdsmi_get_gpu_driver_info=lambda h: {"driver_name": "amdgpu", "driver_version": "6.8.5"},
    )


def test_amd_sampler_uses_amdsmi_when_importable(monkeypatch):
    fake = fake_amdsmi(json.loads((DATA / "amdsmi_mi300x.json").read_text()))
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    sampler = AMDGPUSampler(device_id=1, interval_s=60.0)
    sampler.start()
    sampler.stop()
    assert sampler.error is None and sampler.backend == "amdsmi"
    sample = sampler.samples()[-1]
    assert sample["gpu_util_percent"] == 87.0 and sample["power_w"] == 612.0
    assert sample["temp_edge_c"] is None and sample["temp_junction_c"] == 61.0
    assert sample["vram_used_mb"] == 18240.0 and sample["perf_level"] == "auto"
    assert fake.calls == {"init": 1, "shutdown": 1}


def test_amd_sampler_device_out_of_range_reports_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(json.loads((DATA / "amdsmi_mi300x.json").read_text())))
    monkeypatch.setattr(amd_mod.shutil, "which", lambda name: None)
    sampler = AMDGPUSampler(device_id=7)
    sampler.start()
    sampler.stop()
    assert "device id 7 is GPU 7 of the runtime's, but amdsmi sees 2 usable GPU(s)" in sampler.error


class _RaisingFinder:
    """A meta-path finder that makes `import amdsmi` raise like amdsmi does without ROCm."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def find_spec(self, name, path=None, target=None):
        if name == "amdsmi":
            raise self.exc
        return None


@pytest.mark.parametrize("exc", [KeyError("ROCM_PATH"), OSError("librocm_smi64.so: cannot open shared object file")])
def test_amdsmi_import_errors_that_are_not_importerror_fall_back(monkeypatch, exc):
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_RaisingFinder(exc), *sys.meta_path])
    monkeypatch.setattr(amd_mod.shutil, "which", lambda name: None)
    sampler = AMDGPUSampler()
    sampler.start()
    sampler.stop()
    assert sampler.error.startswith("no AMD GPU telemetry (amdsmi unusable (")
    assert type(exc).__name__ in sampler.error
    assert sampler.error.endswith("; rocm-smi not found on PATH)")


def test_amd_sampler_without_amdsmi_or_rocm_smi(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # import raises ModuleNotFoundError
    monkeypatch.setattr(amd_mod.shutil, "which", lambda name: None)
    sampler = AMDGPUSampler()
    sampler.start()
    sampler.stop()
    assert sampler.error == "no AMD GPU telemetry (amdsmi not installed; rocm-smi not found on PATH)"
    assert sampler.samples() == [] and sampler.to_dict()["summary"] == {}


def test_amd_sampler_falls_back_to_rocm_smi(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr(amd_mod.shutil, "which", lambda name: "/opt/rocm/bin/rocm-smi")
    text = (DATA / "rocm_smi_mi300x.json").read_text()
    commands = []

    def fake_run(cmd, **kwargs):
        commands.append(cmd)
        assert kwargs["timeout"] == amd_mod.ROCM_SMI_TIMEOUT_S
        return subprocess.CompletedProcess(cmd, 0, stdout=text, stderr="")

    monkeypatch.setattr(amd_mod.subprocess, "run", fake_run)
    sampler = AMDGPUSampler(device_id=0, interval_s=0.1)
    sampler.start()
    sampler.stop()
    assert sampler.error is None and sampler.backend == "rocm-smi"
    assert sampler.interval_s == amd_mod.ROCM_SMI_MIN_INTERVAL_S
    assert commands[0][:3] == ["/opt/rocm/bin/rocm-smi", "-d", "0"] and "--json" in commands[0]
    assert {"--showuse", "--showpower", "--showtemp", "--showclocks", "--showmemuse", "--showperflevel"} <= set(
        commands[0]
    )
    assert sampler.samples()[-1]["power_w"] == 612.0


def test_rocm_smi_failure_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr(amd_mod.shutil, "which", lambda name: "/usr/bin/rocm-smi")

    def fake_run(cmd, **kwargs):
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

    monkeypatch.setattr(amd_mod.subprocess, "run", fake_run)
    sampler = AMDGPUSampler()
    sampler.start()
    assert sampler.error.startswith("no AMD GPU telemetry (amdsmi not installed; rocm-smi failed: TimeoutExpired")


def test_amd_gpu_identity_with_fake_amdsmi(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(json.loads((DATA / "amdsmi_mi300x.json").read_text())))
    identity = amd_mod.amd_gpu_identity(0)
    assert identity["name"] == "AMD Instinct MI300X" and identity["driver"] == "6.8.5"


# -- NVIDIA with a fake pynvml ------------------------------------------------------------------
class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's naming
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    pass


def fake_pynvml(events: int | None = 0x4 | 0x40, throttle: int = 0x1, init_error: Exception | None = None):
    calls = {"init": 0, "shutdown": 0, "temp": 0}

    def init():
        calls["init"] += 1
        if init_error is not None:
            raise init_error

    def shutdown():
        calls["shutdown"] += 1

    def temperature(handle, sensor):
        calls["temp"] += 1
        raise NVMLError_NotSupported("Not Supported")

    def event_reasons(handle):
        if events is None:
            raise NVMLError_NotSupported("Not Supported")
        return events

    return types.SimpleNamespace(
        calls=calls,
        nvmlInit=init,
        nvmlShutdown=shutdown,
        nvmlDeviceGetHandleByIndex=lambda i: f"handle{i}",
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=93, memory=40),
        nvmlDeviceGetPowerUsage=lambda h: 412345,  # mW
        nvmlDeviceGetTemperature=temperature,
        nvmlDeviceGetClockInfo=lambda h, clock: {1: 1980, 2: 2619}[clock],
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=3 * 2**30, total=80 * 2**30),
        nvmlDeviceGetPerformanceState=lambda h: 0,
        nvmlDeviceGetCurrentClocksEventReasons=event_reasons,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: throttle,
        nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlSystemGetDriverVersion=lambda: "550.54.15",
        nvmlSystemGetCudaDriverVersion=lambda: 12040,
    )


def test_nvidia_sampler_with_fake_pynvml(monkeypatch):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    sampler = NVIDIAGPUSampler(device_id=0, interval_s=60.0)
    sampler.start()
    sampler.stop()
    assert sampler.error is None
    first, last = sampler.samples()
    assert last == {
        "t_ns": last["t_ns"],
        "gpu_util_percent": 93.0,
        "power_w": 412.345,
        "temp_edge_c": None,
        "temp_junction_c": None,
        "gfx_clock_mhz": 1980.0,
        "mem_clock_mhz": 2619.0,
        "vram_used_mb": 3072.0,
        "perf_level": "P0",
        "clock_event_reasons": ["sw_power_cap", "hw_thermal_slowdown"],
    }
    assert fake.calls["temp"] == 1  # NotSupported is not asked again
    assert fake.calls["init"] == fake.calls["shutdown"] == 1
    assert sampler.summary()["power_w"]["max"] == 412.345


def test_nvidia_clock_reasons_fall_back_to_throttle_reasons(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(events=None, throttle=0x1 | 0x10))
    sampler = NVIDIAGPUSampler(interval_s=60.0)
    sampler.start()
    sampler.stop()
    assert sampler.samples()[0]["clock_event_reasons"] == ["gpu_idle", "sync_boost"]


def test_decode_clock_event_reasons_all_bits():
    assert nvidia_mod.decode_clock_event_reasons(0) == []
    assert nvidia_mod.decode_clock_event_reasons(0x1FF) == list(nvidia_mod.CLOCK_EVENT_REASONS.values())
    assert nvidia_mod.decode_clock_event_reasons(0x8 | 0x80 | 0x800) == [
        "hw_slowdown",
        "hw_power_brake_slowdown",
        "bit_0x800",
    ]


def test_nvidia_sampler_without_pynvml_or_driver(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    sampler = NVIDIAGPUSampler()
    sampler.start()
    assert sampler.error == "no NVIDIA GPU telemetry (nvidia-ml-py not installed: pip install nvidia-ml-py)"
    monkeypatch.setitem(
        sys.modules, "pynvml", fake_pynvml(init_error=NVMLError_LibraryNotFound("NVML Shared Library Not Found"))
    )
    sampler = NVIDIAGPUSampler()
    sampler.start()
    sampler.stop()
    assert sampler.error == (
        "no NVIDIA GPU telemetry (NVML init failed: NVMLError_LibraryNotFound: NVML Shared Library Not Found)"
    )
    assert sampler.samples() == []


def test_nvidia_identity_helpers(monkeypatch):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert nvidia_mod.nvidia_gpu_identity(0) == {
        "name": "NVIDIA H100 80GB HBM3",
        "driver": "550.54.15",
        "runtime": "CUDA 12.4",
    }
    assert fake.calls["init"] == fake.calls["shutdown"] == 1
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert nvidia_mod.nvidia_gpu_identity() == {"name": None, "driver": None, "runtime": None}


# -- build_samplers and TelemetrySession -------------------------------------------------------
@pytest.mark.parametrize(
    ("provider", "names"),
    [
        ("cpu", ["system", "clocks"]),
        ("openvino", ["system", "clocks"]),
        ("dml", ["system", "clocks"]),
        ("cuda", ["system", "clocks", "nvidia_gpu"]),
        ("tensorrt", ["system", "clocks", "nvidia_gpu"]),
        ("migraphx", ["system", "clocks", "amd_gpu"]),
        ("ROCm", ["system", "clocks", "amd_gpu"]),
        ("something-else", ["system", "clocks"]),
    ],
)
def test_build_samplers(provider, names):
    samplers = build_samplers(provider, device_id=2, interval_s=0.25)
    assert [s.name for s in samplers] == names
    assert all(s.interval_s == 0.25 for s in samplers)
    assert all(getattr(s, "device_id", 2) == 2 for s in samplers)


class BrokenSampler(CountingSampler):
    name = "broken"

    def start(self) -> None:  # a subclass that breaks the never-raise contract
        raise RuntimeError("boom")


def test_telemetry_session_merges_records_and_never_raises(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    samplers = [CountingSampler(interval_s=60.0), NVIDIAGPUSampler(interval_s=60.0), BrokenSampler(interval_s=60.0)]
    session = TelemetrySession(samplers)
    with session:
        pass
    record = session.to_dict()
    assert set(record) == {"interval_s", "start_ns", "end_ns", "samplers", "summary", "errors", "clock_state"}
    assert record["interval_s"] == 60.0
    assert record["start_ns"] <= record["end_ns"]
    assert set(record["samplers"]) == {"counting", "nvidia_gpu", "broken"}
    assert record["summary"]["value"]["max"] == 2.0
    assert record["errors"]["nvidia_gpu"].startswith("no NVIDIA GPU telemetry")
    assert record["errors"]["broken"] == "RuntimeError: boom"
    assert "counting" not in record["errors"]
    json.dumps(record)  # JSON-ready


def test_telemetry_session_prefixes_clashing_fields():
    session = TelemetrySession([CountingSampler(interval_s=60.0), BrokenSampler(interval_s=60.0)])
    session.samplers[1].start = types.MethodType(Sampler.start, session.samplers[1])  # make it work
    session.start()
    session.stop()
    summary = session.to_dict()["summary"]
    assert "value" in summary and "broken.value" in summary


def test_real_cpu_samplers_run_together():
    session = TelemetrySession(build_samplers("cpu", 0, 0.01))
    session.start()
    time.sleep(0.05)
    session.stop()
    record = session.to_dict()
    assert len(record["samplers"]["system"]["samples"]) >= 2
    assert "rss_mb" in record["summary"]


def test_rocm_10_never_calls_rocm_smi(monkeypatch, tmp_path):
    # TheRock builds (ROCm >= 10) ship amd-smi only: an old rocm-smi left on PATH is not run there
    version = tmp_path / "version"
    version.write_text("10.1.0-20251103\n")
    monkeypatch.delenv("ROCM_PATH", raising=False)
    monkeypatch.setattr(rocm_install, "ROCM_VERSION_FILE", str(version))
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr(amd_mod.shutil, "which", lambda name: "/usr/bin/rocm-smi")
    commands = []
    monkeypatch.setattr(amd_mod.subprocess, "run", lambda cmd, **kw: commands.append(cmd))
    sampler = AMDGPUSampler()
    sampler.start()
    sampler.stop()
    assert commands == [] and sampler.backend is None
    assert sampler.error == ("no AMD GPU telemetry (amdsmi not installed; rocm-smi not used on ROCm 10"
                             " (TheRock builds ship amd-smi only: install amdsmi))")
    assert amd_mod.amd_gpu_identity(0)["runtime"] is None or commands == []
    assert commands == []
    # ROCm 7 still falls back to rocm-smi; ROCM_PATH's version file is read first
    (tmp_path / "r7" / ".info").mkdir(parents=True)
    (tmp_path / "r7" / ".info" / "version").write_text("7.2.1-81\n")
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "r7"))
    assert amd_mod.rocm_major() == 7 and amd_mod.rocm_smi_path() == ("/usr/bin/rocm-smi", "")


def test_a_failed_amdsmi_import_is_tried_once_per_process(monkeypatch):
    """``import amdsmi`` loads libamd_smi.so and binds its symbols at every try: after one failure
    the same ImportError comes back at once, until reset_amdsmi_import."""
    tries = []
    real_import = __import__

    def failing_import(name, *args, **kwargs):
        if name == "amdsmi":
            tries.append(name)
            raise KeyError("libamd_smi.so")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    monkeypatch.setattr("builtins.__import__", failing_import)
    with pytest.raises(ImportError, match="amdsmi unusable") as first:
        amd_mod.import_amdsmi()
    with pytest.raises(ImportError) as second:
        amd_mod.import_amdsmi()
    assert second.value is first.value and tries == ["amdsmi"]
    amd_mod.reset_amdsmi_import()
    with pytest.raises(ImportError, match="amdsmi unusable"):
        amd_mod.import_amdsmi()
    assert tries == ["amdsmi", "amdsmi"]


def test_one_rocm_version_reader_honours_rocm_path(monkeypatch, tmp_path):
    from pytest_aaco.measure import environment
    from pytest_aaco.samplers import rocm_install as rocm_stack

    assert rocm_stack.rocm_version is amd_mod.rocm_version is environment.rocm_version is rocm_install.rocm_version
    (tmp_path / "rocm" / ".info").mkdir(parents=True)
    (tmp_path / "rocm" / ".info" / "version").write_text("6.4.1-120\n")
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    monkeypatch.setattr(rocm_install, "ROCM_VERSION_FILE", str(tmp_path / "absent"))
    assert amd_mod.rocm_version() == "6.4.1-120"
    assert amd_mod.rocm_version_text() == "6.4.1" and amd_mod.rocm_major() == 6
    assert amd_mod.rocm_version(environ={}) is None  # no ROCM_PATH, no /opt/rocm file here
    assert amd_mod.rocm_version(str(tmp_path / "rocm" / ".info" / "version"), environ={}) == "6.4.1-120"
