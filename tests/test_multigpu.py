"""Several GPUs (issues 20 and 23): --aaco-device-id lists and pytest-xdist workers, the visibility
variables, the logical-to-physical mapping through fake NVML and amdsmi modules, lock keys, what a
record keeps of its GPU, and the fingerprint's per-GPU-model comparison. No GPU needed."""

from __future__ import annotations

import os
import sys
import types
import warnings
from pathlib import Path

import pytest

from pytest_aaco import config as cfg
from pytest_aaco import options as opts
from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.measure.devicelock import device_lock_path
from pytest_aaco.samplers import gpus
from pytest_aaco.samplers.gpu_memory import _amd_read, _nvidia_read
from pytest_aaco.samplers.nvidia import NVIDIAGPUSampler
from pytest_aaco.samplers.visibility import (
    AMD,
    NVIDIA,
    DriRoots,
    GpuMappingError,
    PhysicalGpu,
    amd_handle,
    amd_physical,
    lock_file_name,
    mask_entry,
    nvidia_handle,
    nvidia_physical,
    parse_mask,
)
from pytest_aaco.warnings import AacoProviderWarning

MB = 1024 * 1024


# ---------------------------------------------------------------- fakes


class FakeNvml(types.SimpleNamespace):
    """NVML of a host with *gpus* (name, uuid, bus id, used MB each), in NVML (PCI) order; MIG
    instances map a MIG UUID to a parent's index."""

    def __init__(self, gpus_: list[tuple[str, str, str, int]], migs: dict[str, int] | None = None) -> None:
        super().__init__()
        self.gpus = gpus_
        self.migs = migs or {}
        self.inits = 0

    def nvmlInit(self):  # noqa: N802 - NVML's names
        self.inits += 1

    def nvmlShutdown(self):  # noqa: N802
        self.inits -= 1

    def nvmlDeviceGetCount(self):  # noqa: N802
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        if not 0 <= i < len(self.gpus):
            raise RuntimeError("NVMLError_InvalidArgument")
        return ("gpu", i)

    def nvmlDeviceGetHandleByUUID(self, uuid):  # noqa: N802
        if uuid in self.migs:
            return ("mig", uuid)
        for i, g in enumerate(self.gpus):
            if g[1] == uuid:
                return ("gpu", i)
        raise RuntimeError("NVMLError_NotFound")

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle):  # noqa: N802
        return ("gpu", self.migs[handle[1]])

    def nvmlDeviceGetIndex(self, handle):  # noqa: N802
        return handle[1]

    def nvmlDeviceGetUUID(self, handle):  # noqa: N802
        return self.gpus[handle[1]][1]

    def nvmlDeviceGetName(self, handle):  # noqa: N802
        return self.gpus[handle[1]][0].encode()

    def nvmlDeviceGetPciInfo(self, handle):  # noqa: N802
        return types.SimpleNamespace(busId=self.gpus[handle[1]][2].encode())

    def nvmlDeviceGetClockInfo(self, handle, kind):  # noqa: N802
        return 1980 if kind == 1 else 2619

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):  # noqa: N802
        return 1980

    def nvmlDeviceGetMemoryInfo(self, handle):  # noqa: N802
        return types.SimpleNamespace(used=self.gpus[handle[1]][3] * MB)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802
        return [types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=self.gpus[handle[1]][3] * MB // 2)]

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802
        return types.SimpleNamespace(gpu=10 * handle[1])


def h100s(n: int = 4) -> FakeNvml:
    return FakeNvml([("NVIDIA H100 80GB HBM3", f"GPU-{i}aaaaaaa-0000", f"00000000:{0x18 + i:02X}:00.0", 100 * (i + 1))
                     for i in range(n)])


def mixed() -> FakeNvml:
    return FakeNvml([("NVIDIA A100-SXM4-40GB", "GPU-a100", "00000000:18:00.0", 100),
                     ("NVIDIA H100 80GB HBM3", "GPU-h100", "00000000:3B:00.0", 200)])


class FakeAmdsmi(types.SimpleNamespace):
    """amdsmi of a host with GPUs given as dicts (bdf, render minor, hip id, uuid, name, VRAM MB);
    *enumeration*=False: ROCm < 6.4 (no ``amdsmi_get_gpu_enumeration_info``)."""

    def __init__(self, gpus_: list[dict], enumeration: bool = True) -> None:
        super().__init__()
        self.gpus = gpus_
        self.AmdSmiClkType = types.SimpleNamespace(GFX="GFX", MEM="MEM")
        if enumeration:
            self.amdsmi_get_gpu_enumeration_info = lambda h: {
                "drm_card": h["render"] - 128, "drm_render": h["render"], "hsa_id": h["hip"] + 2,
                "hip_id": h["hip"], "hip_uuid": h["uuid"]}

    def amdsmi_init(self, *args):
        pass

    def amdsmi_shut_down(self):
        pass

    def amdsmi_get_processor_handles(self):
        return list(self.gpus)

    def amdsmi_get_gpu_device_bdf(self, h):
        return h["bdf"]

    def amdsmi_get_gpu_asic_info(self, h):
        return {"market_name": h["name"]}

    def amdsmi_get_clock_info(self, h, kind):
        return {"clk": 2100, "max_clk": 2100} if kind == "GFX" else {"clk": 1300, "max_clk": 1300}

    def amdsmi_get_gpu_vram_usage(self, h):
        return {"vram_total": 196592, "vram_used": h["vram"]}

    def amdsmi_get_gpu_process_list(self, h):
        return []


def mi300x(n: int = 4, **kw) -> FakeAmdsmi:
    return FakeAmdsmi([{"bdf": f"0000:{0x0c + 0x10 * i:02x}:00.0", "render": 128 + i, "hip": i,
                        "uuid": f"GPU-{i}1b2c3d4e5f60718", "name": "AMD Instinct MI300X", "vram": 1000 * (i + 1)}
                       for i in range(n)], **kw)


def dri(tmp_path: Path, gpus_: FakeAmdsmi, opened: list[int]) -> DriRoots:
    """/dev/dri holding the render nodes *opened* (minors), and a sysfs /sys/class/drm for every GPU."""
    dev, sys_drm, pci = tmp_path / "dev", tmp_path / "drm", tmp_path / "pci"
    for folder in (dev, sys_drm, pci):
        folder.mkdir()
    for minor in opened:
        (dev / f"renderD{minor}").touch()
    for g in gpus_.gpus:
        (pci / g["bdf"]).mkdir()
        (sys_drm / f"renderD{g['render']}").mkdir()
        (sys_drm / f"renderD{g['render']}" / "device").symlink_to(pci / g["bdf"])
    return DriRoots(dev, sys_drm)


# ---------------------------------------------------------------- --aaco-device-id and workers


@pytest.mark.parametrize(("text", "expected"), [("0", (0,)), (" 0, 1,2,3 ", (0, 1, 2, 3)), ("0,0", (0, 0)),
                                                ("all", None), ("ALL", None)])
def test_device_list_values(text, expected):
    assert opts.device_list(text) == expected


@pytest.mark.parametrize("text", ["", "-1", "0,,1", "gpu0", "1.5"])
def test_device_list_refuses_bad_values(text):
    with pytest.raises(ValueError, match="comma-separated list"):
        opts.device_list(text)


@pytest.mark.parametrize(("devices", "worker", "expected"), [
    ((0, 1, 2, 3), None, 0), ((0, 1, 2, 3), 0, 0), ((0, 1, 2, 3), 3, 3), ((0, 1, 2, 3), 5, 1),
    ((2, 5), 1, 5), ((0, 0), 1, 0), ((7,), 4, 7)])
def test_worker_k_measures_on_device_k_mod_n(devices, worker, expected):
    assert opts.device_for_worker(devices, worker) == expected


@pytest.mark.parametrize(("worker_id", "expected"), [("gw0", 0), ("gw12", 12), ("master", None), (None, None)])
def test_xdist_worker_index(worker_id, expected):
    assert opts.xdist_worker_index(worker_id) == expected


def test_config_gives_each_worker_its_device(pytester):
    config = pytester.parseconfig("--aaco-device-id=0,1,2", "--aaco-provider=cuda")
    assert cfg.AacoConfig.from_pytest_config(config).device_id == 0  # no worker: the first
    for worker, device in (("gw0", 0), ("gw1", 1), ("gw2", 2), ("gw4", 1)):
        config.workerinput = {"workerid": worker}  # type: ignore[attr-defined]
        aaco = cfg.AacoConfig.from_pytest_config(config)
        assert (aaco.device_ids, aaco.device_id) == ((0, 1, 2), device)


def test_bad_device_id_is_a_usage_error(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--aaco-device-id=0,gpu1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--aaco-device-id: expected a device id, a comma-separated list*"])


def test_all_counts_the_visible_gpus(pytester, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    config = pytester.parseconfig("--aaco-device-id=all", "--aaco-provider=cuda")
    assert cfg.AacoConfig.from_pytest_config(config).device_ids == (0, 1, 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setitem(sys.modules, "pynvml", h100s(8))
    assert cfg.AacoConfig.from_pytest_config(config).device_ids == tuple(range(8))


def test_all_without_a_gpu_library_says_how_to_list_them(pytester, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    config = pytester.parseconfig("--aaco-device-id=all", "--aaco-provider=cuda")
    with pytest.raises(pytest.UsageError, match=r"--aaco-device-id all: cannot count the GPUs of cuda.*0,1"):
        cfg.AacoConfig.from_pytest_config(config)


def test_all_on_the_cpu_is_device_zero(pytester):
    config = pytester.parseconfig("--aaco-device-id=all")
    assert cfg.AacoConfig.from_pytest_config(config).device_ids == (0,)


def test_n_auto_starts_one_worker_per_listed_gpu(pytester, monkeypatch):
    assert cfg.auto_workers(pytester.parseconfig("--aaco-provider=cuda")) is None  # not set: xdist decides
    assert cfg.auto_workers(pytester.parseconfig("--aaco-device-id=0,1,2,3", "--aaco-provider=cuda")) == 4
    assert cfg.auto_workers(pytester.parseconfig("--aaco-device-id=0,1,2,3")) is None  # CPU: cores decide
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert cfg.auto_workers(pytester.parseconfig("--aaco-device-id=all", "--aaco-provider=cuda")) == 2
    pytester.makeini("[pytest]\naaco_device_id = 1,3,5\naaco_provider = cuda\n")
    assert cfg.auto_workers(pytester.parseconfig()) == 3


# ---------------------------------------------------------------- masks


def test_parse_mask_stops_at_the_first_empty_entry():
    assert parse_mask(None) is None and parse_mask("") == [] and parse_mask("2, 3,,1") == ["2", "3"]


@pytest.mark.parametrize(("env", "logical", "expected"), [
    ({}, 2, 2),
    ({"CUDA_VISIBLE_DEVICES": "2,3"}, 1, 3),
    ({"CUDA_VISIBLE_DEVICES": "GPU-8a1b,1"}, 0, "GPU-8a1b"),
    ({"CUDA_VISIBLE_DEVICES": "MIG-1234"}, 0, "MIG-1234"),
])
def test_cuda_mask_entry(env, logical, expected):
    assert mask_entry(NVIDIA, logical, env) == expected


@pytest.mark.parametrize(("env", "logical", "expected"), [
    ({"ROCR_VISIBLE_DEVICES": "4,5,6"}, 2, 6),
    ({"ROCR_VISIBLE_DEVICES": "4,5,6", "HIP_VISIBLE_DEVICES": "2"}, 0, 6),  # HIP indexes what ROCr left
    ({"HIP_VISIBLE_DEVICES": "1,3"}, 1, 3),
    ({"ROCR_VISIBLE_DEVICES": "GPU-abc,3", "HIP_VISIBLE_DEVICES": "0"}, 0, "GPU-abc"),
    ({"ROCR_VISIBLE_DEVICES": "4,5,6", "CUDA_VISIBLE_DEVICES": "1"}, 0, 5),  # HIP honours it on AMD too
    ({"GPU_DEVICE_ORDINAL": "3"}, 0, 3),
])
def test_amd_mask_entry(env, logical, expected):
    assert mask_entry(AMD, logical, env) == expected


def test_a_mask_too_short_names_the_variable_and_the_fix():
    with pytest.raises(GpuMappingError, match=r"CUDA_VISIBLE_DEVICES=2,3 makes 2 GPU\(s\) visible, so device id 2"):
        mask_entry(NVIDIA, 2, {"CUDA_VISIBLE_DEVICES": "2,3"})


# ---------------------------------------------------------------- NVIDIA mapping


def test_nvml_index_follows_cuda_visible_devices():
    nvml = h100s()
    assert nvidia_handle(nvml, 0, {}).index == 0
    assert nvidia_handle(nvml, 0, {"CUDA_VISIBLE_DEVICES": "2,3"}).index == 2
    assert nvidia_handle(nvml, 1, {"CUDA_VISIBLE_DEVICES": "2,3"}).index == 3


def test_nvml_by_uuid_prefix_and_mig():
    nvml = h100s()
    nvml.migs = {"MIG-7f00": 1}
    assert nvidia_handle(nvml, 0, {"CUDA_VISIBLE_DEVICES": "GPU-3aaa"}).index == 3
    mig = nvidia_physical(nvml, 0, {"CUDA_VISIBLE_DEVICES": "MIG-7f00"})
    assert (mig.index, mig.uuid, mig.mapped_by) == (1, "MIG-7f00", "mig")
    with pytest.raises(GpuMappingError, match="matches 0 of the 4"):
        nvidia_handle(nvml, 0, {"CUDA_VISIBLE_DEVICES": "GPU-nope"})


def test_nvml_index_is_ambiguous_for_mixed_models_unless_pci_order():
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in (nvidia_handle(mixed(), 1, {}).ambiguous or "")
    assert nvidia_handle(mixed(), 1, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).ambiguous is None
    assert nvidia_handle(h100s(), 1, {}).ambiguous is None  # one model: CUDA breaks ties in PCI order


def test_nvml_in_a_one_gpu_container():
    only = h100s(1)
    gpu = nvidia_physical(only, 0, {})
    assert (gpu.index, gpu.mapped_by, gpu.ambiguous) == (0, "index", None)
    odd = nvidia_handle(only, 0, {"CUDA_VISIBLE_DEVICES": "3"})  # the host's index leaked into the container
    assert odd.index == 0 and odd.mapped_by == "only-gpu" and "NVML sees one GPU" in (odd.ambiguous or "")


def test_nvidia_physical_records_uuid_bus_name_and_clocks():
    gpu = nvidia_physical(h100s(), 0, {"CUDA_VISIBLE_DEVICES": "2"})
    assert gpu.uuid == "GPU-2aaaaaaa-0000" and gpu.pci_bus_id == "00000000:1a:00.0"
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.logical_id == 0 and gpu.index == 2
    assert gpu.clocks == {"gfx_clock_mhz": 1980.0, "mem_clock_mhz": 2619.0, "max_gfx_clock_mhz": 1980.0}
    assert PhysicalGpu(**{**gpu.to_dict(), "clocks": gpu.clocks}) == gpu  # the JSON holds every fact


def test_telemetry_and_memory_read_the_mapped_nvidia_gpu(monkeypatch):
    nvml = h100s()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert _nvidia_read(0, os.getpid()) == (200.0, 400.0)  # GPU 3 of the host: 400 MB used, half ours
    sampler = NVIDIAGPUSampler(device_id=0, interval_s=60.0)
    sampler.start()
    sampler.stop()
    assert sampler.error is None and sampler.samples()[-1]["gpu_util_percent"] == 30.0


# ---------------------------------------------------------------- AMD mapping


def test_amdsmi_by_enumeration_under_rocr_and_hip_masks(tmp_path):
    smi = mi300x()
    roots = dri(tmp_path, smi, [128, 129, 130, 131])
    env = {"ROCR_VISIBLE_DEVICES": "1,2,3", "HIP_VISIBLE_DEVICES": "2"}
    mapping = amd_handle(smi, 0, env, roots)
    assert (mapping.index, mapping.mapped_by, mapping.ambiguous) == (3, "enumeration", None)
    assert amd_handle(smi, 0, {"ROCR_VISIBLE_DEVICES": "GPU-21b2c3d4e5f60718"}, roots).index == 2


def test_amdsmi_in_a_one_gpu_container_is_not_handle_zero(tmp_path):
    """amdsmi reads sysfs and lists the host's four GPUs; the container was given renderD130 only."""
    smi = mi300x()
    roots = dri(tmp_path, smi, [130])
    gpu = amd_physical(smi, 0, {}, roots)
    assert gpu.index == 2 and gpu.pci_bus_id == "0000:2c:00.0" and gpu.uuid == "GPU-21b2c3d4e5f60718"
    assert gpu.clocks == {"gfx_clock_mhz": 2100.0, "mem_clock_mhz": 1300.0, "max_gfx_clock_mhz": 2100.0}
    with pytest.raises(GpuMappingError, match="amdsmi sees 1 usable GPU"):
        amd_handle(smi, 1, {}, roots)


def test_amdsmi_without_enumeration_maps_a_container_through_sysfs(tmp_path):
    smi = mi300x(enumeration=False)
    roots = dri(tmp_path, smi, [131])
    mapping = amd_handle(smi, 0, {}, roots)
    assert (mapping.index, mapping.mapped_by, mapping.ambiguous) == (3, "pci-order", None)


def test_amdsmi_without_enumeration_on_several_gpus_is_ambiguous(tmp_path):
    smi = mi300x(enumeration=False)
    mapping = amd_handle(smi, 1, {"ROCR_VISIBLE_DEVICES": "2,3"}, dri(tmp_path, smi, [128, 129, 130, 131]))
    assert mapping.index == 3 and "no enumeration info" in (mapping.ambiguous or "")
    with pytest.raises(GpuMappingError, match="cannot match UUIDs"):
        amd_handle(smi, 0, {"ROCR_VISIBLE_DEVICES": "GPU-x"}, DriRoots(tmp_path / "none", tmp_path / "none"))


def test_amd_memory_reads_the_mapped_gpu(monkeypatch, tmp_path):
    smi = mi300x()
    monkeypatch.setitem(sys.modules, "amdsmi", smi)
    monkeypatch.setattr("pytest_aaco.samplers.visibility.DriRoots", lambda: dri(tmp_path, smi, [128, 129, 130, 131]))
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "2")
    assert _amd_read(0, os.getpid()) == (None, 3000.0)


# ---------------------------------------------------------------- locks and records


def test_lock_names_come_from_the_physical_gpu():
    nvml = h100s()
    # two processes, other masks, the same GPU: one lock file
    masked = nvidia_physical(nvml, 0, {"CUDA_VISIBLE_DEVICES": "2"})
    plain = nvidia_physical(nvml, 2, {})
    assert lock_file_name(masked, 0) == lock_file_name(plain, 2) == "gpu-GPU-2aaaaaaa-0000.lock"
    assert lock_file_name(nvidia_physical(nvml, 1, {}), 1) != lock_file_name(plain, 2)  # parallel GPUs
    assert lock_file_name(PhysicalGpu(AMD, 0, pci_bus_id="0000:2c:00.0"), 0) == "gpu-0000_2c_00.0.lock"
    assert lock_file_name(None, 3) == "gpu3.lock"  # unknown: the name before physical ids


def test_device_lock_path_uses_the_physical_name(tmp_path, monkeypatch):
    monkeypatch.setattr("pytest_aaco.measure.devicelock.LOCK_ROOT", tmp_path)
    assert device_lock_path(True, 0, "gpu-GPU-2aaa.lock") == tmp_path / "gpu-GPU-2aaa.lock"
    assert device_lock_path(True, 1) == tmp_path / "gpu1.lock"
    assert device_lock_path(False, 1, "ignored") == tmp_path / "host.lock"


def test_physical_gpu_warns_once_when_ambiguous(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", mixed())
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpus, "_WARNED", set())
    with pytest.warns(AacoProviderWarning, match="mapping is ambiguous.*PCI_BUS_ID"):
        gpu = gpus.physical_gpu("cuda", 1)
    assert gpu is not None and gpu.uuid == "GPU-h100"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gpus.physical_gpu("cuda", 1) is not None  # said once per GPU
    assert gpus.physical_gpu("cpu", 0) is None


# ---------------------------------------------------------------- baselines: one history per GPU model


def _fingerprint(**changes) -> Fingerprint:
    fields = {"model_sha256": "m", "provider": "CUDAExecutionProvider", "gpu_name": "NVIDIA H100 80GB HBM3",
              "provider_options": {"device_id": "0"}, "env": {"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "4"},
              "env_scheme": 2, "ort_version": "1.22.0"}
    return Fingerprint({**fields, **changes})


def test_identical_gpus_share_one_history():
    stored = _fingerprint().fields
    other_gpu = _fingerprint(provider_options={"device_id": "1"},
                             env={"CUDA_VISIBLE_DEVICES": "1", "OMP_NUM_THREADS": "4"})
    assert other_gpu.matches(stored) and other_gpu.id == _fingerprint().id


def test_other_gpu_models_are_never_compared():
    stored = _fingerprint().fields
    a100 = _fingerprint(gpu_name="NVIDIA A100-SXM4-40GB")
    assert not a100.matches(stored) and a100.diff(stored) == ["gpu_name"] and not a100.version_only(stored)
    assert a100.machine_key != _fingerprint().machine_key  # and their histories live in other folders


def test_other_timing_variables_still_count():
    stored = _fingerprint().fields
    assert _fingerprint(env={"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "8"}).diff(stored) == ["env"]
    assert _fingerprint(provider_options={"device_id": "0", "cudnn_conv_algo_search": "HEURISTIC"}).diff(stored) \
        == ["provider_options"]


# ---------------------------------------------------------------- reports merge the workers' items


def _record(name: str, gpu: dict | None):
    from pytest_aaco.records.item import ItemRecord

    return ItemRecord(f"test_perf.py::test_latency[{name}-cuda]", name, "cuda", f"{name}[cuda]",
                      result={"summary": {"mean_ms": 1.5, "p50_ms": 1.4, "p99_ms": 2.0, "throughput": 600.0}}, gpu=gpu)


def _gpu(logical: int, uuid: str) -> dict:
    return PhysicalGpu(NVIDIA, logical, logical, uuid, f"00000000:{logical:02x}:00.0", "NVIDIA H100 80GB HBM3",
                       "index").to_dict()


def test_terminal_table_has_a_gpu_column_only_for_several_gpus():
    from pytest_aaco.reports.terminal import format_table

    one = [_record("resnet50", _gpu(0, "GPU-0aaa")), _record("squeezenet", _gpu(0, "GPU-0aaa"))]
    assert "gpu" not in format_table(one)[0].split()
    two = [_record("resnet50", _gpu(0, "GPU-0aaa")), _record("squeezenet", _gpu(1, "GPU-1bbb"))]
    lines = format_table(two)
    assert lines[0].split()[:3] == ["model", "provider", "gpu"]
    assert lines[2].split()[:3] == ["resnet50", "cuda", "0:GPU-0aaa"]
    assert lines[3].split()[:3] == ["squeezenet", "cuda", "1:GPU-1bbb"]


def test_junit_html_and_transport_keep_the_gpu():
    import json

    from pytest_aaco.records.item import ItemRecord
    from pytest_aaco.reports.html import overview_table
    from pytest_aaco.reports.junit import properties

    two = [_record("resnet50", _gpu(0, "GPU-0aaa")), _record("squeezenet", _gpu(1, "GPU-1bbb"))]
    assert ("aaco_gpu", "GPU-1bbb") in properties(two[1])
    assert ("aaco_gpu_name", "NVIDIA H100 80GB HBM3") in properties(two[1])
    html = overview_table(two)
    assert "<th>GPU</th>" in html and "<code>1:GPU-1bbb</code>" in html
    assert "<th>GPU</th>" not in overview_table(two[:1])
    back = ItemRecord.from_dict(json.loads(json.dumps(two[1].to_dict())))  # as a worker sends it
    assert back.gpu == two[1].gpu and back.gpu_key == "GPU-1bbb"
    cpu = _record("tiny", None)
    assert "gpu" not in cpu.to_dict() and not any(k == "aaco_gpu" for k, _ in properties(cpu))


# ---------------------------------------------------------------- a real -n 2 run, on the CPU

DEVICE_TESTS = """
import os, json
from pytest_aaco.session import get_session


def test_latency(benchmark_model, request):
    assert benchmark_model().measure_iterations > 0
    worker = os.environ["PYTEST_XDIST_WORKER"]
    device = get_session(request.config).config.device_id
    with open(f"device-{worker}-{request.node.name}.json", "w") as handle:
        json.dump(device, handle)


def test_latency_again(benchmark_model, request):
    test_latency(benchmark_model, request)
"""


@pytest.mark.slow
def test_two_workers_take_devices_from_the_list_on_the_cpu(aaco_project):
    pytest.importorskip("xdist")
    import json

    aaco_project.registry("models:\n  a:\n    path: tiny.onnx\n  b:\n    path: tiny.onnx\n")
    aaco_project.tests(DEVICE_TESTS)
    result = aaco_project.pytester.runpytest_subprocess(
        "-n", "2", "-p", "no:cacheprovider", "--aaco-models=models.yaml", "--aaco-warmup=2", "--aaco-rounds=3",
        "--aaco-iterations=5", "--aaco-max-contention=off", "--aaco-reference=none", "--aaco-provider=cpu",
        "--aaco-device-id=5,7", "--aaco-session-dir=sessions", timeout=300)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4)
    seen = {p.name: json.loads(p.read_text()) for p in aaco_project.pytester.path.glob("device-*.json")}
    assert len(seen) == 4
    for name, device in seen.items():
        worker = int(name.split("-")[1][2:])
        assert device == (5, 7)[worker % 2], seen
    table = [line for line in result.outlines if line.startswith(("a ", "b "))]
    header = next(line for line in result.outlines if line.startswith("model "))
    assert len(table) == 4 and "gpu" not in header.split()  # the CPU: no GPU column
    bundle = next((aaco_project.pytester.path / "sessions").iterdir())
    assert len(list((bundle / "items").glob("*.json"))) == 4
    assert json.loads((bundle / "session_meta.json").read_text())["device_ids"] == [5, 7]


def test_a_gpu_session_is_built_under_the_device_lock(tmp_path, monkeypatch):
    """With --aaco-device-id 0,0 one worker's session build must not overlap the other's rounds."""
    import filelock

    from pytest_aaco import benchmark
    from pytest_aaco.measure.providers import parse_provider

    monkeypatch.setattr("pytest_aaco.measure.devicelock.LOCK_ROOT", tmp_path)
    # the GPU lock's name is derived in one place (measure/gpulocks.py asks samplers.gpus for it)
    monkeypatch.setattr("pytest_aaco.samplers.gpus.gpu_lock_name",
                        lambda short, device: f"gpu-fake-{short}-{device}.lock")
    held = {}

    def build(model_path, provider, device_id, threads):
        for name in ("gpu-fake-cuda-1.lock", "host.lock"):
            try:
                filelock.FileLock(str(tmp_path / name)).acquire(timeout=0).lock.release()
                held[(provider.short, name)] = False
            except filelock.Timeout:
                held[(provider.short, name)] = True
        return types.SimpleNamespace()

    monkeypatch.setattr(benchmark, "build_session", build)
    benchmark.build_tracked(Path("m.onnx"), parse_provider("cuda"), 1, 0)
    benchmark.build_tracked(Path("m.onnx"), parse_provider("cpu"), 1, 0)
    assert held == {("cuda", "gpu-fake-cuda-1.lock"): True, ("cuda", "host.lock"): False,
                    ("cpu", "gpu-fake-cuda-1.lock"): False, ("cpu", "host.lock"): False}


def test_a_history_run_keeps_its_gpu_and_identical_gpus_append_to_one_history(tmp_path, result_factory):
    from pytest_aaco.history.store import load_baseline, save_run

    path = tmp_path / "item.json"
    for device in (0, 1, 0):
        fp = _fingerprint(provider_options={"device_id": str(device)},
                          env={"CUDA_VISIBLE_DEVICES": str(device), "OMP_NUM_THREADS": "4"})
        outcome = save_run(path, "t::x", fp, result_factory([10.0] * 3),
                           extra={"gpu": {"uuid": f"GPU-{device}", "pci_bus_id": None, "name": "NVIDIA H100"}})
        assert not outcome.warnings  # nothing archived: one history for the GPU model
    baseline = load_baseline(path, "t::x")
    assert baseline is not None and baseline.runs == 3
    assert [run["gpu"]["uuid"] for run in baseline.history] == ["GPU-0", "GPU-1", "GPU-0"]


def test_n_auto_really_starts_one_worker_per_listed_gpu(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile("import pytest\n\n@pytest.mark.parametrize('i', range(6))\ndef test_a(i): pass\n")
    result = pytester.runpytest_subprocess("-n", "auto", "--aaco-device-id=0,1,2", "--aaco-provider=cuda",
                                           "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["created: 3/3 workers"])


def test_aaco_info_lists_each_device_and_its_gpu(monkeypatch, capsys):
    from pytest_aaco import cli

    monkeypatch.setitem(sys.modules, "pynvml", h100s(4))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    devices = cli.device_map("cuda")
    assert [(d["logical_id"], d["uuid"]) for d in devices] == [(0, "GPU-2aaaaaaa-0000"), (1, "GPU-3aaaaaaa-0000")]
    assert cli.main(["info", "--provider", "cuda"]) == 0
    out = capsys.readouterr().out
    assert "--aaco-provider=cuda device 1: GPU-3aaaaaaa-0000 NVIDIA H100 80GB HBM3 (PCI 00000000:1b:00.0" in out
