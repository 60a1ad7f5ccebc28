"""The plugin's AMD telemetry and GPU mapping against the real ``amdsmi`` Python package from PyPI,
over a stand-in ``libamd_smi.so`` (``tests/amdsmi_standin.py``): AMD's own ctypes bindings and
``amdsmi_interface.py`` run, including their ``"N/A"`` conversions, and an older ROCm's library that
lacks symbols the package binds at import.

Each scenario runs in a child process (the package binds its library at import, once per process).
Skips with the reason when the wheel cannot be downloaded or gcc is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.amdsmi_standin import NA16, NA32, Gpu, Unavailable, bound_symbols, build_library, child_env, fetch_package

NEWEST, OLDER = "7.0.2", ("6.2.4", "6.1.2")

#: amdsmi handle 0: an MI300X under load, HIP device 1 (ROCr numbers the GPUs in another order than amdsmi)
BUSY = Gpu(bdf=(0, 0x65, 0, 0), hip_id=1, hsa_id=3, drm_card=2, drm_render=129, hip_uuid="GPU-4a6f1c2b3d4e5f60",
           uuid="a1ff74a1-0000-1000-8065-5c3af2b5a3b3",
           processes=[("python3", None, 512 << 20), ("other", 4242, 1 << 30)])
#: amdsmi handle 1, HIP device 0: every reading the plugin samples unsupported except the GFX clock,
#: the junction temperature and VRAM
SPARSE = Gpu(bdf=(0, 0x05, 0, 0), hip_id=0, hsa_id=2, drm_card=1, drm_render=128, hip_uuid="GPU-9e8d7c6b5a493827",
             uuid="b2ff74a1-0000-1000-8005-5c3af2b5a3b3", activity=(NA16, NA16, NA16), power=(NA16, NA16, NA16),
             temps_c={0: None, 1: 41}, clocks={"GFX": (132, 500, 2100), "MEM": (NA32, NA32, NA32)},
             vram_mb=(196592, 284), perf_level=None)
HOST = [BUSY, SPARSE]

CHILD = r"""
import json, os, warnings
warnings.simplefilter("ignore")
from pytest_aaco.samplers.amd import AMDGPUSampler, amd_gpu_identity, amd_physical_gpu, import_amdsmi
from pytest_aaco.samplers.gpu_memory import _amd_read
from pytest_aaco.samplers.gpus import visible_gpus
out = {}
try:
    import_amdsmi()
    out["import"] = None
except ImportError as exc:
    out["import"] = str(exc)
sampler = AMDGPUSampler(device_id=0, interval_s=0.05)
sampler.start()
sampler.stop()
out["sampler"] = {"backend": sampler.backend, **sampler.to_dict()}
if out["import"] is None:
    out["gpu"] = amd_physical_gpu(0).to_dict()
    out["identity"] = amd_gpu_identity(0)
    out["own_vram_mb"], out["device_vram_mb"] = _amd_read(0, os.getpid())
    out["visible"] = visible_gpus("migraphx")
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("amdsmi")


def _package(version: str, cache: Path) -> Path:
    try:
        return fetch_package(version, cache)
    except Unavailable as exc:
        pytest.skip(str(exc))
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"pip download amdsmi=={version} failed: {exc}")


def _library(package: Path, root: Path, **kwargs: object) -> Path:
    try:
        return build_library(package, HOST, root, **kwargs)  # type: ignore[arg-type]
    except Unavailable as exc:
        pytest.skip(str(exc))


def _run(package: Path, rocm_root: Path, **env: str) -> tuple[dict, str]:
    """The child's result and everything else it printed to stdout."""
    done = subprocess.run([sys.executable, "-c", CHILD], env=child_env(package, rocm_root, **env),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    result = [line for line in lines if line.startswith("RESULT ")]
    assert len(result) == 1, done.stdout
    return json.loads(result[0][7:]), "\n".join(line for line in lines if not line.startswith("RESULT "))


@pytest.fixture(scope="module")
def newest(cache: Path) -> tuple[Path, Path]:
    package = _package(NEWEST, cache)
    return package, _library(package, cache / f"rocm-{NEWEST}", rocm_version=NEWEST)


def _fields(result: dict) -> dict:
    samples = result["sampler"]["samples"]
    assert len(samples) >= 2 and result["sampler"]["error"] is None, result["sampler"]
    first = dict(samples[0])
    first.pop("t_ns")
    assert all({k: v for k, v in s.items() if k != "t_ns"} == first for s in samples)
    return first


def test_newest_package_reads_the_runner_gpu_in_units(newest):
    """ROCR_VISIBLE_DEVICES by ROCr UUID: HIP device 0 is amdsmi's handle 0 (hip_id 1), read in %, W,
    °C, MHz and MB, with its own VRAM from the process list."""
    package, root = newest
    result, printed = _run(package, root, ROCR_VISIBLE_DEVICES=BUSY.hip_uuid)
    assert printed == ""
    assert result["sampler"]["backend"] == "amdsmi"
    assert _fields(result) == {"gpu_util_percent": 37.0, "power_w": 412.0, "temp_edge_c": None,
                               "temp_junction_c": 52.0, "gfx_clock_mhz": 2100.0, "mem_clock_mhz": 1300.0,
                               "vram_used_mb": 10240.0, "perf_level": "manual"}
    gpu = result["gpu"]
    assert (gpu["pci_bus_id"], gpu["uuid"], gpu["index"], gpu["mapped_by"]) == (
        "0000:65:00.0", BUSY.hip_uuid, 0, "uuid")
    assert gpu["name"] == "AMD Instinct MI300X" and "ambiguous" not in gpu
    assert gpu["clocks"] == {"gfx_clock_mhz": 2100.0, "mem_clock_mhz": 1300.0, "max_gfx_clock_mhz": 2100.0}
    assert result["identity"]["name"] == "AMD Instinct MI300X" and result["identity"]["driver"] == "6.10.5"
    assert result["identity"]["runtime"] is None or result["identity"]["runtime"].startswith("ROCm ")
    assert result["own_vram_mb"] == 512.0 and result["device_vram_mb"] == 10240.0
    assert result["visible"] == 1


def test_newest_package_hip_index_follows_hip_id_not_amdsmi_order(newest):
    package, root = newest
    result, _ = _run(package, root, HIP_VISIBLE_DEVICES="1")
    assert result["gpu"]["pci_bus_id"] == "0000:65:00.0" and result["gpu"]["mapped_by"] == "enumeration"
    assert _fields(result)["power_w"] == 412.0


def test_newest_package_na_values_are_recorded_as_missing(newest):
    """HIP device 0 without a mask is amdsmi's handle 1, whose activity and power are 0xFFFF and memory
    clock UINT32_MAX (amdsmi_interface.py gives "N/A"), edge temperature and performance level
    unsupported (AmdSmiLibraryException): those fields are None in every sample and absent from the
    summary; the rest are read."""
    package, root = newest
    result, printed = _run(package, root)
    assert printed == ""
    assert _fields(result) == {"gpu_util_percent": None, "power_w": None, "temp_edge_c": None,
                               "temp_junction_c": 41.0, "gfx_clock_mhz": 132.0, "mem_clock_mhz": None,
                               "vram_used_mb": 284.0, "perf_level": None}
    assert set(result["sampler"]["summary"]) == {"temp_junction_c", "gfx_clock_mhz", "vram_used_mb"}
    assert result["gpu"]["pci_bus_id"] == "0000:05:00.0"
    assert result["gpu"]["clocks"] == {"gfx_clock_mhz": 132.0, "max_gfx_clock_mhz": 2100.0}
    assert result["own_vram_mb"] is None and result["device_vram_mb"] == 284.0  # this process not listed
    assert result["visible"] == 2


@pytest.mark.parametrize("version", OLDER)
def test_older_package_over_its_own_library(cache, version):
    """ROCm 6.1/6.2 amdsmi: no enumeration info (mapping in PCI order, marked ambiguous), ``cur_clk``
    in 6.1, no ``socket_power``: the same readings in the same units."""
    package = _package(version, cache)
    root = _library(package, cache / f"rocm-{version}", rocm_version=version)
    result, printed = _run(package, root, ROCR_VISIBLE_DEVICES="1")
    assert printed == "" and result["import"] is None
    assert _fields(result) == {"gpu_util_percent": 37.0, "power_w": 412.0, "temp_edge_c": None,
                               "temp_junction_c": 52.0, "gfx_clock_mhz": 2100.0, "mem_clock_mhz": 1300.0,
                               "vram_used_mb": 10240.0, "perf_level": "manual"}
    assert result["gpu"]["pci_bus_id"] == "0000:65:00.0" and result["gpu"]["mapped_by"] == "pci-order"
    assert "ROCm < 6.4" in result["gpu"]["ambiguous"]
    assert result["own_vram_mb"] == 512.0


def test_newest_package_over_an_older_rocm_library_names_the_mismatch(cache):
    """amdsmi 7.0.2 over a ROCm 6.2 library (exporting only what amdsmi 6.2.4 binds): the package raises
    AttributeError at import; the plugin says which versions clash and how to fix it, in one line."""
    package = _package(NEWEST, cache)
    older = _package("6.2.4", cache)
    missing = [s for s in bound_symbols(package) if s not in set(bound_symbols(older))]
    assert missing, "7.0.2 binds nothing 6.2.4 lacks: the scenario is void"
    root = _library(package, cache / "rocm-6.2-lib", symbols=bound_symbols(older), rocm_version="6.2.4")
    result, printed = _run(package, root)
    assert printed == ""
    message = result["import"]
    assert "\n" not in message
    assert message.startswith(f"amdsmi {NEWEST} does not match the installed ROCm 6.2.4: ")
    assert f"lacks {missing[0]}, which it binds at import" in message
    assert message.endswith("pip install /opt/rocm/share/amd_smi (or pip install 'amdsmi==6.2.*')")
    error = result["sampler"]["error"]
    assert error.startswith(f"no AMD GPU telemetry (amdsmi {NEWEST} does not match")
    assert result["sampler"]["samples"] == []


def test_missing_library_is_one_line_and_keeps_stdout_clean(cache, tmp_path):
    """No libamd_smi.so anywhere: the wrapper prints its complaint and raises KeyError; the plugin keeps
    the print off stdout and puts it in the reason."""
    package = _package(NEWEST, cache)
    (tmp_path / "lib").mkdir()
    result, printed = _run(package, tmp_path)
    assert printed == ""
    assert result["import"].startswith("amdsmi unusable (KeyError: 'libamd_smi.so': ")
    assert "libamd_smi.so" in result["import"] and "\n" not in result["import"]
