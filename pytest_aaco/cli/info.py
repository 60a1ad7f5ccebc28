"""``aaco info``: the ONNX Runtime build and its execution providers, the GPUs, the CPU clock
settings and the machine fingerprint, without running pytest."""

from __future__ import annotations

import argparse
import platform
import sys
from typing import Any

from pytest_aaco import __version__, eps, flavors
from pytest_aaco.cli.common import OK, CliError, _out
from pytest_aaco.history.environment import collect_environment
from pytest_aaco.history.fingerprint import Fingerprint, machine_fields
from pytest_aaco.jsonio import dumps
from pytest_aaco.measure.providers import ProviderError, parse_provider_list
from pytest_aaco.reports.terminal import num
from pytest_aaco.samplers.clocks import clock_warnings
from pytest_aaco.samplers.gpus import physical_gpu, vendor_of, visible_gpus


def machine_info(providers: list[str] | None = None) -> dict[str, Any]:
    """What ``aaco info`` shows, as a JSON-ready dict: package, Python, ORT, CPU, clocks, GPU (from
    :func:`pytest_aaco.history.environment.collect_environment`), the clock warnings, and the machine
    fingerprint fields (with the baseline folder name) per provider short name."""
    env = collect_environment()
    found, clocks = env.get("errors"), env.get("clocks")
    errors = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
    clocks = clocks if isinstance(clocks, dict) else {}
    info: dict[str, Any] = {
        "pytest_aaco": __version__, "python": f"{platform.python_version()} ({sys.executable})",
        "onnxruntime": env.get("onnxruntime"), "cpu": env.get("cpu"), "clocks": clocks,
        "clock_warnings": clock_warnings(clocks) if clocks else [], "gpu": env.get("gpu"),
    }
    # the distributions that install the onnxruntime package, and what is wrong with them (pytest_aaco.flavors)
    builds = flavors.ort_distributions()
    info["onnxruntime_distributions"] = [d.pinned for d in builds]
    info["onnxruntime_problem"] = flavors.missing_problem() or flavors.overlap_problem(builds)
    if providers is None:
        available = (info["onnxruntime"] or {}).get("available_providers") or []
        known = [found.short for found in (eps.lookup(name) for name in available) if found is not None]
        providers = ["cpu"] + [short for short in known if short != "cpu"]
    fingerprints = {}
    for short in providers:
        try:
            fields = machine_fields(short)
        except Exception as exc:  # noqa: BLE001 - report what can be read
            errors[f"fingerprint[{short}]"] = f"{type(exc).__name__}: {exc}"
            continue
        fingerprints[short] = {"fields": fields, "machine_key": Fingerprint(fields).machine_key}
    info["fingerprint"] = fingerprints
    info["devices"] = {short: device_map(short) for short in providers if vendor_of(short) is not None}
    info["errors"] = errors
    return info


def device_map(short: str) -> list[dict[str, Any]]:
    """EP *short*'s device ids and the physical GPU each maps to (``PhysicalGpu.to_dict()``), as
    ``--aaco-device-id all`` would use them (:func:`pytest_aaco.samplers.gpus.visible_gpus`); [] when
    no GPU can be counted."""
    found = []
    for device in range(visible_gpus(short) or 0):
        gpu = physical_gpu(short, device)
        found.append(gpu.to_dict() if gpu is not None else {"logical_id": device, "uuid": None})
    return found


def cmd_info(args: argparse.Namespace) -> int:
    providers = None
    if args.provider:
        try:
            providers = [p.short for p in parse_provider_list(args.provider)]
        except ProviderError as exc:
            raise CliError(f"--provider: {exc}") from None
    info = machine_info(providers)
    if args.json:
        sys.stdout.write(dumps(info))
        return OK
    ort = info["onnxruntime"] or {}
    cpu = info["cpu"] or {}
    clocks = info["clocks"] or {}
    gpu = info["gpu"] or {}
    _out(f"pytest-aaco {info['pytest_aaco']}, Python {info['python']}")
    _out(f"ONNX Runtime {ort.get('version', 'not importable')} (device {ort.get('device', '-')})")
    _out(f"  execution providers: {', '.join(ort.get('available_providers') or []) or '-'}")
    _out(f"  installed as: {', '.join(info['onnxruntime_distributions']) or 'no ONNX Runtime distribution'}")
    if info["onnxruntime_problem"]:
        _out(f"warning: {info['onnxruntime_problem']}")
    _out(f"CPU: {cpu.get('model', '-')}, {cpu.get('logical_cores', '-')} logical / {cpu.get('physical_cores', '-')}"
         f" physical cores, {num(cpu.get('memory_total_mb'), '.0f')} MB memory")
    governor = clocks.get("cpu_governor") or "unknown (no cpufreq in sysfs: container or VM?)"
    boost = "-" if clocks.get("cpu_boost") is None else ("on" if clocks["cpu_boost"] else "off")
    _out(f"  governor: {governor}, driver: {clocks.get('cpu_driver') or '-'}, boost: {boost}")
    if gpu.get("name"):
        _out(f"GPU: {gpu.get('name')} ({gpu.get('vendor')}), driver {gpu.get('driver') or '-'},"
             f" runtime {gpu.get('runtime') or '-'}, perf level {clocks.get('gpu_perf_level') or '-'}")
    else:
        _out("GPU: none found (NVML and amdsmi/rocm-smi did not report a device)")
    for short, devices in (info.get("devices") or {}).items():
        for gpu_info in devices:
            key = gpu_info.get("uuid") or gpu_info.get("pci_bus_id") or "unknown"
            _out(f"  --aaco-provider={short} device {gpu_info.get('logical_id')}: {key} {gpu_info.get('name') or ''}"
                 f" (PCI {gpu_info.get('pci_bus_id') or '-'}, mapped by {gpu_info.get('mapped_by') or '-'})"
                 + (f"; ambiguous: {gpu_info['ambiguous']}" if gpu_info.get("ambiguous") else ""))
    for warning in info["clock_warnings"]:
        _out(f"warning: {warning}")
    for short, data in info["fingerprint"].items():
        _out(f"machine fingerprint for --aaco-provider={short} (baseline folder {data['machine_key']}):")
        for key, value in data["fields"].items():
            _out(f"  {key}: {value}")
    for name, error in info["errors"].items():
        _out(f"note: {name} could not be read: {error}")
    return OK


