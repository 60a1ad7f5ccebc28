"""The item's own device memory (issue 11): process-list parsers on recorded shapes, the probe's
choice of figure, and the telemetry record; no GPU needed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_aaco.samplers.gpu_memory import (
    BYTES_PER_MB,
    DEVICE_DIFFERENCE,
    PROCESS,
    DeviceMemoryProbe,
    amd_process_mb,
    nvml_process_mb,
    record_own_vram,
)

DATA = Path(__file__).parent / "data"


def nvml_processes():
    raw = json.loads((DATA / "nvidia" / "nvml_compute_processes.json").read_text())["processes"]
    return [SimpleNamespace(**p) for p in raw]


def amd_processes():
    return json.loads((DATA / "amd" / "amdsmi_process_list_mi300x.json").read_text())["processes"]


@pytest.mark.parametrize(("pid", "expected"), [(4242, 1024.0), (5151, 500.0), (6060, None), (1, None)])
def test_nvml_process_mb(pid, expected):
    assert nvml_process_mb(nvml_processes(), pid) == expected


def test_nvml_process_mb_sums_entries_of_one_pid():
    """MIG or several contexts list one pid more than once."""
    entries = nvml_processes() + [SimpleNamespace(pid=4242, usedGpuMemory=BYTES_PER_MB * 24)]
    assert nvml_process_mb(entries, 4242) == 1048.0


@pytest.mark.parametrize(("pid", "expected"), [(4242, 1536.0), (5151, 700.0), (7, None)])
def test_amd_process_mb(pid, expected):
    assert amd_process_mb(amd_processes(), pid) == expected


def test_amd_process_mb_older_shape_uses_mem():
    assert amd_process_mb([{"pid": 3, "mem": 64 * BYTES_PER_MB}], 3) == 64.0


def reader_of(readings):
    it = iter(readings)
    return lambda device_id, pid: next(it)


@pytest.mark.parametrize(("before", "after", "expected"), [
    ((500.0, 8000.0), (740.0, 9000.0), (240.0, PROCESS)),           # this process is listed: its own growth
    ((None, 8000.0), (740.0, 9000.0), (740.0, PROCESS)),            # first CUDA context of the process
    ((None, 8000.0), (None, 8300.0), (300.0, DEVICE_DIFFERENCE)),   # container: host pids only
    ((None, None), (None, None), (None, None)),                     # no figures at all
    ((600.0, 8000.0), (500.0, 7000.0), (0.0, PROCESS)),             # shrank: floored at 0
])
def test_probe_prefers_the_process_figure(before, after, expected):
    probe = DeviceMemoryProbe("cuda", reader=reader_of([before, after]))
    probe.start()
    assert probe.stop() == expected


def test_probe_on_cpu_and_failing_readers_gives_no_figure():
    cpu = DeviceMemoryProbe("cpu")
    cpu.start()
    assert cpu.stop() == (None, None)

    def broken(device_id, pid):
        raise RuntimeError("NVML Shared Library Not Found")

    probe = DeviceMemoryProbe("cuda", reader=broken)
    probe.start()
    assert probe.stop() == (None, None)
    assert DeviceMemoryProbe("cuda").stop() == (None, None)  # never started


def test_record_own_vram():
    summary: dict = {}
    record_own_vram(summary, None, None)
    assert summary == {}
    record_own_vram(summary, 240.0, PROCESS)
    assert summary["vram_own_mb"] == {"max": 240.0, "mean": 240.0, "n": 1, "method": "process"}
