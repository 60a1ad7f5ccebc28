"""The environment lockbox: what it records, and that it never records a secret."""

from __future__ import annotations

import json
import sys

import pytest

from pytest_aaco.measure import environment as env_mod
from pytest_aaco.measure.environment import (
    collect_environment,
    cpu_model,
    gpu_identity,
    looks_secret,
    performance_env,
    redacted_env_names,
    shannon_entropy,
)

GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
RANDOM_TOKEN = "q8Zr3LmX0vT7nB2kW9yH4cJ6pD1sF5gA"  # 32 random-looking characters, no known prefix


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ORT_API_TOKEN", "x"),
        ("HIP_PASSWORD", "x"),
        ("CUDA_PASSWD", "x"),
        ("MIGRAPHX_SECRET_SAUCE", "1"),
        ("ORT_KEY", "1"),
        ("OMP_CREDENTIALS", "1"),
        ("HSA_AUTH", "1"),
        ("ORT_COOKIE_JAR", "1"),
        ("ORT_SESSION_ID", "1"),
        ("ORT_FOO", GHP),
        ("ORT_FOO", "gho_abc"),
        ("ORT_FOO", "github_pat_11ABCDEFG"),
        ("ORT_FOO", "xoxb-1234-5678"),
        ("ORT_FOO", "xoxp-1234-5678"),
        ("ORT_FOO", "AKIAIOSFODNN7EXAMPLE"),
        ("ORT_FOO", "sk-proj-abc"),
        ("ORT_FOO", JWT),
        ("ORT_FOO", RANDOM_TOKEN),
        ("ORT_FOO", "0123456789abcdef0123456789abcdef01234567"),
        ("ORT_FOO", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY1"),
        ("ORT_MODEL_URL", "https://user:hunter2@models.example.com/m.onnx"),
        ("ORT_FOO", "-----BEGIN PRIVATE KEY-----"),
    ],
)
def test_looks_secret_true(name, value):
    assert looks_secret(name, value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CUDA_VISIBLE_DEVICES", "0"),
        ("CUDA_VISIBLE_DEVICES", "0,1,2,3"),
        ("CUDA_VISIBLE_DEVICES", "GPU-8a7e3b1f-3c2d-4e5f-9a8b-7c6d5e4f3a2b"),
        ("CUDA_VISIBLE_DEVICES", "MIG-8a7e3b1f-3c2d-4e5f-9a8b-7c6d5e4f3a2b,MIG-1a7e3b1f-3c2d-4e5f-9a8b-7c6d5e4f3a2c"),
        ("OMP_NUM_THREADS", "8"),
        ("ORT_MIGRAPHX_FP16_ENABLE", "1"),
        ("HIP_VISIBLE_DEVICES", "1"),
        ("CUDA_HOME", "/usr/local/cuda/targets/x86_64-linux/lib"),
        ("MIGRAPHX_MODEL_CACHE", "./cache/migraphx_models_2024_resnet50_fp16"),
        ("ORT_TENSORRT_CACHE_PATH", "/var/cache/trt/engines/resnet50_fp16_bs1_sm90"),
        ("HSA_OVERRIDE_GFX_VERSION", "11.0.0"),
        ("ORT_LONG_OPTION", "MIGRAPHX_ENABLE_NHWC_AND_SOME_LONG_OPTION_1234567"),
    ],
)
def test_looks_secret_false(name, value):
    assert not looks_secret(name, value)


def test_shannon_entropy():
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == pytest.approx(2.0)


def test_performance_env_keeps_families_and_drops_secrets():
    environ = {
        "ORT_API_TOKEN": GHP,
        "CUDA_VISIBLE_DEVICES": "0",
        "HIP_PASSWORD": "x",
        "ORT_FOO": JWT,
        "ORT_ENABLE_X": "1",
        "MIGRAPHX_DISABLE_FAST_GELU": "1",
        "HIP_VISIBLE_DEVICES": "0",
        "ROCR_VISIBLE_DEVICES": "0",
        "HSA_XNACK": "0",
        "OMP_WAIT_POLICY": "PASSIVE",
        "MKL_NUM_THREADS": "4",
        "OPENBLAS_NUM_THREADS": "1",
        "PATH": "/usr/bin",
        "HOME": "/root",
        "GITHUB_TOKEN": GHP,
        "LD_LIBRARY_PATH": "/opt/rocm/lib",
    }
    kept = performance_env(environ)
    assert kept == {
        "CUDA_VISIBLE_DEVICES": "0",
        "HIP_VISIBLE_DEVICES": "0",
        "HSA_XNACK": "0",
        "MIGRAPHX_DISABLE_FAST_GELU": "1",
        "MKL_NUM_THREADS": "4",
        "OMP_WAIT_POLICY": "PASSIVE",
        "OPENBLAS_NUM_THREADS": "1",
        "ORT_ENABLE_X": "1",
        "ROCR_VISIBLE_DEVICES": "0",
    }
    assert list(kept) == sorted(kept)
    assert redacted_env_names(environ) == ["HIP_PASSWORD", "ORT_API_TOKEN", "ORT_FOO"]


def test_planted_secrets_never_reach_the_lockbox(monkeypatch):
    monkeypatch.setenv("ORT_API_TOKEN", GHP)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("HIP_PASSWORD", "x-very-private-password")
    monkeypatch.setenv("ORT_FOO", JWT)
    monkeypatch.setenv("MIGRAPHX_OPT", RANDOM_TOKEN)
    monkeypatch.setenv("GITHUB_TOKEN", GHP)
    record = collect_environment()
    text = json.dumps(record)
    for secret in (GHP, "x-very-private-password", JWT, RANDOM_TOKEN, "eyJhbGciOi", "ghp_"):
        assert secret not in text
    assert record["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert {"ORT_API_TOKEN", "HIP_PASSWORD", "ORT_FOO", "MIGRAPHX_OPT"} <= set(record["env_redacted"])
    assert "GITHUB_TOKEN" not in text  # not a timing variable at all


def test_collect_environment_sections():
    record = collect_environment(provider="cpu", environ={"OMP_NUM_THREADS": "2"})
    assert record["errors"] == {}
    assert record["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert record["platform"]["kernel"] and record["platform"]["system"]
    assert record["cpu"]["logical_cores"] >= 1 and record["cpu"]["model"] == cpu_model()
    ort = record["onnxruntime"]
    import onnxruntime

    assert ort["version"] == onnxruntime.__version__
    assert "CPUExecutionProvider" in ort["available_providers"] and ort["device"]
    assert record["packages"]["onnxruntime"] == onnxruntime.__version__
    assert "numpy" in {name.lower() for name in record["packages"]}
    assert record["gpu"] == {"vendor": None, "name": None, "driver": None, "runtime": None}
    assert "cpu_governor" in record["clocks"]
    assert record["env"] == {"OMP_NUM_THREADS": "2"}
    assert set(record["amd_stack"]) == {"rocm", "migraphx"}
    json.dumps(record)


def test_rocm_version_reads_the_info_file(tmp_path):
    from pytest_aaco.measure.environment import rocm_version

    path = tmp_path / "version"
    path.write_text("7.0.0-38\nignored\n")
    assert rocm_version(str(path)) == "7.0.0-38"
    path.write_text("  \n")
    assert rocm_version(str(path)) is None
    assert rocm_version(str(tmp_path / "absent")) is None


def test_migraphx_version_never_comes_from_the_module(monkeypatch, tmp_path):
    """MIGraphX's own build reports ``migraphx.__version__ == "dev"``: the fingerprint reads the installed
    runtime instead (pytest_aaco.samplers.rocm_install), here a ROCm prefix with MIGraphX's CMake version file."""
    import types

    from pytest_aaco.measure import environment
    from pytest_aaco.samplers import rocm_install as rocm_stack

    monkeypatch.setitem(sys.modules, "migraphx", types.SimpleNamespace(__version__="dev"))
    cmake = tmp_path / "rocm" / rocm_stack.MIGRAPHX_CMAKE_VERSION
    cmake.parent.mkdir(parents=True)
    cmake.write_text('set(PACKAGE_VERSION "2.12.0")\n')
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    monkeypatch.setattr(rocm_stack, "DPKG_STATUS", str(tmp_path / "no-dpkg"))
    assert environment.migraphx_version() == "2.12.0"
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "absent"))
    monkeypatch.setattr(rocm_stack, "rocm_prefixes", lambda environ=None: [])
    monkeypatch.setenv("LD_LIBRARY_PATH", "")
    assert rocm_stack.migraphx_runtime_version(dpkg_status=str(tmp_path / "no-dpkg")) is None


def test_collect_environment_never_raises(monkeypatch):
    def broken():
        raise RuntimeError("no onnxruntime here")

    monkeypatch.setattr(env_mod, "onnxruntime_info", broken)
    record = collect_environment(provider="cpu", environ={})
    assert record["onnxruntime"] is None
    assert record["errors"] == {"onnxruntime": "RuntimeError: no onnxruntime here"}


def test_cpu_model_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\n")
    assert cpu_model(str(cpuinfo)) == "AMD EPYC 7763 64-Core Processor"
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\n\nHardware\t: BCM2835\n")
    assert cpu_model(str(arm)) == "BCM2835"
    assert cpu_model(str(tmp_path / "missing"))  # platform fallback, never empty


def test_gpu_identity_for_cpu_provider_asks_nothing(monkeypatch):
    def explode(*args, **kwargs):
        raise AssertionError("a CPU fingerprint must not query GPUs")

    monkeypatch.setattr("pytest_aaco.samplers.nvidia.nvidia_gpu_identity", explode)
    monkeypatch.setattr("pytest_aaco.samplers.amd.amd_gpu_identity", explode)
    assert gpu_identity("cpu") == {"vendor": None, "name": None, "driver": None, "runtime": None}


def test_gpu_identity_nvidia_and_amd(monkeypatch):
    monkeypatch.setattr(
        "pytest_aaco.samplers.nvidia.nvidia_gpu_identity",
        lambda device_id=0: {"name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "runtime": "CUDA 12.4"},
    )
    monkeypatch.setattr(
        "pytest_aaco.samplers.amd.amd_gpu_identity",
        lambda device_id=0: {"name": "AMD Instinct MI300X", "driver": "6.8.5", "runtime": "ROCm 6.2.0"},
    )
    assert gpu_identity("cuda") == {
        "vendor": "nvidia",
        "name": "NVIDIA H100 80GB HBM3",
        "driver": "550.54.15",
        "runtime": "CUDA 12.4",
    }
    assert gpu_identity("migraphx")["name"] == "AMD Instinct MI300X"
    assert gpu_identity(None)["vendor"] == "nvidia"


def test_gpu_identity_without_drivers_is_all_none_but_names_the_vendor(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr("pytest_aaco.samplers.amd.shutil.which", lambda name: None)
    assert gpu_identity("tensorrt") == {"vendor": "nvidia", "name": None, "driver": None, "runtime": None}
    assert gpu_identity(None) == {"vendor": None, "name": None, "driver": None, "runtime": None}
