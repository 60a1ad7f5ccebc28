"""The environment lockbox: everything about this machine and software that can change a timing.

:func:`collect_environment` is written once per session into the bundle's ``environment.json``;
:func:`cpu_model` and :func:`gpu_identity` feed the baseline fingerprint.

Environment variables are filtered twice: only the families that tune ONNX Runtime and its
GPU stacks are kept (:func:`performance_env`), and of those any that looks like a secret is
dropped (:func:`pytest_aaco.redact.looks_secret`, the one rule for every channel). A session
bundle is uploaded as a CI artifact, so the lockbox must never carry a token.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
from collections.abc import Callable, Mapping

import pytest_aaco.samplers.amd as amd
import pytest_aaco.samplers.nvidia as nvidia
from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict, JSONValue

# the one secret rule lives in pytest_aaco.redact; re-exported for callers of the lockbox
from pytest_aaco.redact import looks_secret as looks_secret
from pytest_aaco.redact import shannon_entropy as shannon_entropy
from pytest_aaco.samplers.clocks import read_clock_state
from pytest_aaco.samplers.rocm_install import migraphx_runtime_version
from pytest_aaco.samplers.rocm_install import rocm_version as rocm_version  # re-exported

#: environment variable families kept by :func:`performance_env`
ENV_PREFIXES = ("ORT_", "MIGRAPHX_", "HIP_", "ROCR_", "HSA_", "CUDA_", "OMP_")
ENV_SUFFIXES = ("_NUM_THREADS",)


def is_performance_variable(name: str) -> bool:
    """True for the variable families that change ORT timings (:data:`ENV_PREFIXES`, ``*_NUM_THREADS``)."""
    upper = name.upper()
    return upper.startswith(ENV_PREFIXES) or upper.endswith(ENV_SUFFIXES)


def performance_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The timing-relevant, non-secret variables of *environ*, sorted by name.

    Keeps ``ORT_*``, ``MIGRAPHX_*``, ``HIP_*``, ``ROCR_*``, ``HSA_*``, ``CUDA_*``, ``OMP_*`` and
    ``*_NUM_THREADS``; drops every one for which :func:`looks_secret` is true.
    """
    return {
        name: value
        for name, value in sorted(environ.items())
        if is_performance_variable(name) and not looks_secret(name, value)
    }


def redacted_env_names(environ: Mapping[str, str]) -> list[str]:
    """Names (never values) of timing-relevant variables that :func:`performance_env` dropped as secrets."""
    return sorted(n for n, v in environ.items() if is_performance_variable(n) and looks_secret(n, v))


def cpu_model(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """The CPU model name, e.g. ``"AMD EPYC 7763 64-Core Processor"``.

    Linux: the first ``model name`` line of ``/proc/cpuinfo`` (``Hardware``/``Model`` on some Arm
    boards); elsewhere ``platform.processor()``, then ``platform.machine()``; ``"unknown"`` last.
    """
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as handle:
            fallback = None
            for line in handle:
                key, sep, value = line.partition(":")
                if not sep:
                    continue
                key = key.strip().lower()
                if key == "model name" and value.strip():
                    return value.strip()
                if key in ("hardware", "model", "cpu model") and value.strip() and fallback is None:
                    fallback = value.strip()
            if fallback:
                return fallback
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def migraphx_version() -> str | None:
    """The installed MIGraphX runtime's version (:func:`pytest_aaco.samplers.rocm_install.migraphx_runtime_version`:
    its CMake package file, the dpkg database or the library's file name), or None. Not
    ``migraphx.__version__``, which MIGraphX's own build reports as ``"dev"``. Never raises."""
    return migraphx_runtime_version()


def gpu_identity(provider: str | None, device_id: int = 0) -> JSONDict:
    """GPU facts for the fingerprint: ``{"vendor", "name", "driver", "runtime"}``.

    ``provider`` is the short EP name. ``cuda``/``tensorrt`` ask NVML (runtime ``"CUDA 12.4"``),
    ``migraphx``/``rocm`` ask amdsmi or rocm-smi (runtime ``"ROCm 6.2.0"``). Other providers
    (``cpu``, ``openvino``, ``dml``) get all-None values without querying anything, so a CPU
    baseline does not depend on the GPU driver. ``provider=None`` tries NVIDIA, then AMD (for the
    lockbox). Values the driver does not report are None. Never raises.
    """
    empty: JSONDict = {"vendor": None, "name": None, "driver": None, "runtime": None}
    short = provider.strip().lower() if provider else None
    try:
        telemetry = eps.get(short).telemetry if short else None
        if telemetry == eps.NVIDIA or short is None:
            found = nvidia.nvidia_gpu_identity(device_id)
            if found.get("name") or short is not None:
                return {**empty, "vendor": "nvidia", **found}
        if telemetry == eps.AMD or short is None:
            found = amd.amd_gpu_identity(device_id)
            if found.get("name") or short is not None:
                return {**empty, "vendor": "amd", **found}
    except Exception:  # noqa: BLE001
        pass
    return empty


def installed_distributions() -> dict[str, str]:
    """``{distribution name: version}`` of everything installed in this interpreter, sorted by
    lower-case name (``importlib.metadata``)."""
    from importlib import metadata

    found: dict[str, str] = {}
    for dist in metadata.distributions():
        names = dist.metadata.get_all("Name") if dist.metadata else None
        name = names[0] if names else None
        if name and name not in found:
            found[name] = dist.version
    return dict(sorted(found.items(), key=lambda item: item[0].lower()))


def onnxruntime_info() -> JSONDict:
    """ONNX Runtime version, build info, default device and available EPs (imports onnxruntime)."""
    import onnxruntime as ort

    info: JSONDict = {
        "version": getattr(ort, "__version__", None),
        "device": ort.get_device(),
        "available_providers": list(ort.get_available_providers()),
        "build_info": None,
    }
    get_build_info = getattr(ort, "get_build_info", None)
    if callable(get_build_info):
        info["build_info"] = str(get_build_info())
    return info


def platform_info() -> JSONDict:
    """OS, kernel, architecture, libc and the distribution's PRETTY_NAME when readable."""
    info: JSONDict = {
        "system": platform.system(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "libc": " ".join(platform.libc_ver()).strip() or None,
        "os_release": None,
    }
    try:
        info["os_release"] = platform.freedesktop_os_release().get("PRETTY_NAME")
    except (OSError, AttributeError):
        pass
    return info


def cpu_info() -> JSONDict:
    """CPU model, logical and physical core counts, total memory in MB (MiB)."""
    import psutil

    return {
        "model": cpu_model(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_total_mb": psutil.virtual_memory().total / (1024 * 1024),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }


def collect_environment(
    provider: str | None = None,
    environ: Mapping[str, str] | None = None,
    device_id: int = 0,
) -> JSONDict:
    """The lockbox: a JSON-ready record of this machine and software. Never raises.

    Sections: ``collected_at`` (UTC ISO 8601), ``python``, ``platform`` (OS, kernel), ``cpu``
    (model, core counts, memory), ``onnxruntime`` (version, build info, ``get_device()``,
    available EPs), ``gpu`` (:func:`gpu_identity`), ``amd_stack`` (:func:`rocm_version`,
    :func:`migraphx_version`), ``clocks`` (``read_clock_state``), ``env``
    (:func:`performance_env` of *environ*, default ``os.environ``), ``env_redacted`` (names of
    dropped secret-looking variables), ``packages`` (installed distributions and versions).
    A section that fails holds None and its error is in ``errors``.
    """
    environ = os.environ if environ is None else environ
    errors: dict[str, str] = {}

    def section(name: str, build: Callable[[], JSONValue]) -> JSONValue:
        try:
            return build()
        except Exception as exc:  # noqa: BLE001 - the lockbox never fails the session
            errors[name] = f"{type(exc).__name__}: {exc}"
            return None

    record: JSONDict = {
        "collected_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": section(
            "python",
            lambda: {
                "version": platform.python_version(),
                "implementation": platform.python_implementation(),
                "compiler": platform.python_compiler(),
                "bits": 64 if sys.maxsize > 2**32 else 32,
            },
        ),
        "platform": section("platform", platform_info),
        "cpu": section("cpu", cpu_info),
        "onnxruntime": section("onnxruntime", onnxruntime_info),
        "gpu": section("gpu", lambda: gpu_identity(provider, device_id)),
        "amd_stack": section("amd_stack", lambda: {"rocm": rocm_version(), "migraphx": migraphx_version()}),
        "clocks": section("clocks", read_clock_state),
        "env": section("env", lambda: performance_env(environ)),
        "env_redacted": section("env_redacted", lambda: redacted_env_names(environ)),
        "packages": section("packages", installed_distributions),
    }
    record["errors"] = errors
    return record
