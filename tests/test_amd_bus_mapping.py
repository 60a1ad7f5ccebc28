"""The AMD paths without amdsmi: the rocm-smi fallback and the perf level read the runner's GPU,
found through its PCI bus id, under ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES.

The fake sysfs tree has the KFD topology's layout (``class/kfd/kfd/topology/nodes/<n>/properties`` with
``<name> <decimal>`` lines and ``gpu_id``; the amdkfd driver's ``kfd_topology.c``, ``node_show``) and
``class/drm/card<N>/device`` links to PCI devices with ``power_dpm_force_performance_level`` (amdgpu).
The fake ``rocm-smi`` prints the JSON ``rocm_smi.py`` prints (https://github.com/ROCm/rocm_smi_lib,
``python_smi_tools/rocm_smi.py`` at a1295714: ``showBus`` -> ``"PCI Bus"`` as ``'{:04X}:{:02X}:{:02X}.{:0X}'``,
one ``"card<index>"`` object per ``-d`` index); the metric keys are those of a recorded
``rocm-smi --json`` output of rocm-smi-lib 6.2.4 (Radeon 780M, quoted in
https://github.com/sebhildebrandt/systeminformation/pull/960: ``"PCI Bus": "0000:C4:00.0"``,
``"GPU use (%)"``, ``"Current Socket Graphics Package Power (W)"``). Values are invented.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

import pytest_aaco.samplers.amd as amd_mod
from pytest_aaco.samplers.amd import AMDGPUSampler, rocm_smi_bus_ids, rocm_smi_device
from pytest_aaco.samplers.clocks import clock_warnings, read_clock_state
from pytest_aaco.samplers.visibility import GpuMappingError, amd_bus_id, kfd_gpus

#: (KFD node, PCI bus, unique_id, render minor, DRM card, perf level); KFD (ROCr) order is not PCI order
GPUS = [(2, 0x65, 0x4A6F1C2B3D4E5F60, 129, 1, "auto"), (3, 0x05, 0x9E8D7C6B5A493827, 128, 0, "manual"),
        (4, 0xC4, 0x1122334455667788, 130, 2, "high")]
UNMASKED = {k: v for k, v in os.environ.items()
            if k not in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")}


def make_sysfs(root: Path, kfd: bool = True) -> Path:
    nodes = root / "class" / "kfd" / "kfd" / "topology" / "nodes"
    if kfd:
        (nodes / "0").mkdir(parents=True)  # the CPU node
        (nodes / "0" / "properties").write_text("cpu_cores_count 64\nsimd_count 0\nlocation_id 0\ndomain 0\n")
        (nodes / "0" / "gpu_id").write_text("0\n")
    for node, bus, unique, minor, card, level in GPUS:
        bdf = f"0000:{bus:02x}:00.0"
        device = root / "devices" / "pci0000:00" / bdf
        device.mkdir(parents=True)
        (device / "power_dpm_force_performance_level").write_text(level + "\n")
        (root / "class" / "drm" / f"card{card}").mkdir(parents=True)
        os.symlink(device, root / "class" / "drm" / f"card{card}" / "device")
        if kfd:
            (nodes / str(node)).mkdir()
            (nodes / str(node) / "properties").write_text(
                f"cpu_cores_count 0\nsimd_count 1216\nlocation_id {bus << 8}\ndomain 0\n"
                f"drm_render_minor {minor}\nunique_id {unique}\n")
            (nodes / str(node) / "gpu_id").write_text(f"{1000 + node}\n")
    return root


FAKE_ROCM_SMI = r'''#!PYTHON
import json, sys
args = sys.argv[1:]
with open(LOG, "a") as log:
    log.write(" ".join(args) + "\n")
buses = BUSES
if "--showbus" in args:
    print(json.dumps({f"card{i}": {"PCI Bus": bus} for i, bus in enumerate(buses)}))
    sys.exit(0)
index = int(args[args.index("-d") + 1])
print("WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status")
print(json.dumps({f"card{index}": {"GPU use (%)": str(10 + index), "Current Socket Graphics Package Power (W)":
                  f"{100 + index}.0", "PCI Bus": buses[index], "Card Series": f"card {index}"},
                  "system": {"Driver version": "6.10.5"}}))
'''


@pytest.fixture
def rocm_smi(tmp_path: Path) -> tuple[str, Path]:
    """A rocm-smi that lists the GPUs in PCI order (its index is not ROCr's) and logs its arguments."""
    log = tmp_path / "rocm-smi.log"
    buses = [f"0000:{bus:02X}:00.0" for bus in sorted(g[1] for g in GPUS)]
    path = tmp_path / "bin" / "rocm-smi"
    path.parent.mkdir()
    path.write_text(FAKE_ROCM_SMI.replace("PYTHON", sys.executable).replace("LOG", repr(str(log)))
                    .replace("BUSES", repr(buses)))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path), log


def test_kfd_topology_gives_rocr_order_bus_ids_and_uuids(tmp_path):
    gpus = kfd_gpus(make_sysfs(tmp_path))
    assert [(g.node, g.pci_bus_id, g.uuid, g.render_minor) for g in gpus] == [
        (2, "0000:65:00.0", "GPU-4a6f1c2b3d4e5f60", 129), (3, "0000:05:00.0", "GPU-9e8d7c6b5a493827", 128),
        (4, "0000:c4:00.0", "GPU-1122334455667788", 130)]
    assert kfd_gpus(tmp_path / "nothing") is None


@pytest.mark.parametrize(("env", "bus"), [
    ({}, "0000:65:00.0"),
    ({"ROCR_VISIBLE_DEVICES": "2"}, "0000:c4:00.0"),
    ({"ROCR_VISIBLE_DEVICES": "2,1", "HIP_VISIBLE_DEVICES": "1"}, "0000:05:00.0"),
    ({"ROCR_VISIBLE_DEVICES": "GPU-9e8d7c6b5a493827"}, "0000:05:00.0"),
])
def test_bus_id_of_the_logical_device_under_masks(tmp_path, env, bus):
    assert amd_bus_id(0, env, make_sysfs(tmp_path)) == bus


def test_bus_id_beyond_the_mask_names_the_variable(tmp_path):
    with pytest.raises(GpuMappingError, match=r"ROCR_VISIBLE_DEVICES=1 makes 1 GPU\(s\) visible"):
        amd_bus_id(1, {"ROCR_VISIBLE_DEVICES": "1"}, make_sysfs(tmp_path))


def test_rocm_smi_showbus_parsing():
    text = 'WARNING: x\n{"card0": {"PCI Bus": "0000:C4:00.0"}, "card1": {"PCI Bus": "00000000:05:00.0"}}\n'
    assert rocm_smi_bus_ids(text) == {0: "0000:c4:00.0", 1: "0000:05:00.0"}


def test_rocm_smi_sampler_reads_the_pinned_gpu_not_the_logical_index(tmp_path, rocm_smi, monkeypatch):
    """ROCR_VISIBLE_DEVICES=2 is KFD node 4 (PCI c4), rocm-smi's card 2 in PCI order; device 0 of the
    old code would have read rocm-smi's card 0 (PCI 05)."""
    path, log = rocm_smi
    monkeypatch.setattr(amd_mod, "SYSFS_ROOT", str(make_sysfs(tmp_path / "sys")))
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr(amd_mod.shutil, "which", lambda name: path)
    monkeypatch.setattr(amd_mod, "rocm_major", lambda *a, **k: 6)
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "2")
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    sampler = AMDGPUSampler(device_id=0)
    sampler.start()
    sampler.stop()
    assert sampler.error is None and sampler.backend == "rocm-smi"
    sample = sampler.samples()[-1]
    assert (sample["gpu_util_percent"], sample["power_w"]) == (12.0, 102.0)
    calls = log.read_text().splitlines()
    assert calls[0] == "--showbus --json" and all(c.startswith("-d 2 ") for c in calls[1:])
    identity = amd_mod.amd_gpu_identity(0)
    assert identity["name"] == "card 2" and identity["driver"] == "6.10.5"


def test_rocm_smi_without_kfd_under_a_mask_refuses_with_the_variable(tmp_path, rocm_smi, monkeypatch):
    path, log = rocm_smi
    env = {**UNMASKED, "HIP_VISIBLE_DEVICES": "1"}
    with pytest.raises(RuntimeError, match=r"^rocm-smi ignores HIP_VISIBLE_DEVICES=1 and the KFD topology"):
        rocm_smi_device(path, 0, env, str(make_sysfs(tmp_path / "sys", kfd=False)))
    monkeypatch.setattr(amd_mod, "SYSFS_ROOT", str(tmp_path / "sys"))
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr(amd_mod.shutil, "which", lambda name: path)
    monkeypatch.setattr(amd_mod, "rocm_major", lambda *a, **k: 6)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    monkeypatch.delenv("ROCR_VISIBLE_DEVICES", raising=False)
    sampler = AMDGPUSampler(device_id=0)
    sampler.start()
    sampler.stop()
    assert sampler.backend is None and sampler.samples() == []
    assert "rocm-smi failed: RuntimeError: rocm-smi ignores HIP_VISIBLE_DEVICES=1" in sampler.error
    assert not log.exists()  # rocm-smi never ran: no other GPU was read


def test_rocm_smi_without_kfd_or_mask_keeps_the_index(tmp_path, rocm_smi):
    path, _ = rocm_smi
    assert rocm_smi_device(path, 1, UNMASKED, str(tmp_path)) == 1


def test_perf_level_is_the_runner_gpu_not_card0(tmp_path):
    """ROCR_VISIBLE_DEVICES=2 -> KFD node 4 -> PCI c4 -> card2 ("high"); card0 (PCI 05) is "manual",
    card1 "auto": the warning about "auto" is not raised for another runner's GPU."""
    root = make_sysfs(tmp_path)
    state = read_clock_state(root, query_nvml=False, environ={"ROCR_VISIBLE_DEVICES": "2"})
    assert (state["gpu_perf_card"], state["gpu_perf_level"]) == ("card2", "high")
    assert state["gpu_perf_levels"] == {"card0": "manual", "card1": "auto", "card2": "high"}
    assert not any("performance level" in m for m in clock_warnings(state))
    unmasked = read_clock_state(root, query_nvml=False, environ={})
    assert (unmasked["gpu_perf_card"], unmasked["gpu_perf_level"]) == ("card1", "auto")  # KFD's first GPU
    assert any("'auto' on card1" in m for m in clock_warnings(unmasked))


def test_perf_level_without_kfd_falls_back_to_the_first_card(tmp_path):
    state = read_clock_state(make_sysfs(tmp_path, kfd=False), query_nvml=False, environ={})
    assert state["gpu_perf_card"] is None and state["gpu_perf_level"] == "manual"
