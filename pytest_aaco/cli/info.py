"""``aaco info``: the ONNX Runtime build and its execution providers, the GPUs, the CPU clock
settings and the machine fingerprint, without running pytest."""

from __future__ import annotations

import argparse
import platform
import sys
from dataclasses import dataclass
from typing import cast

from pytest_aaco import __version__, eps, flavors
from pytest_aaco.cli.common import OK, CliError, _out
from pytest_aaco.history.fingerprint import Fingerprint, machine_fields
from pytest_aaco.jsonio import JSONDict, dumps
from pytest_aaco.measure.environment import collect_environment
from pytest_aaco.measure.providers import ProviderError, parse_provider_list
from pytest_aaco.records import GpuRecord
from pytest_aaco.reports.terminal import num
from pytest_aaco.samplers.amd import amdsmi_problem
from pytest_aaco.samplers.clocks import clock_warnings
from pytest_aaco.samplers.gpus import physical_gpu, vendor_of, visible_gpus
from pytest_aaco.samplers.visibility import AMD


def _section(data: JSONDict, key: str) -> JSONDict:
    found = data.get(key)
    return found if isinstance(found, dict) else {}


def _text(value: object, empty: str = "-") -> str:
    return empty if value is None or value == "" else str(value)


@dataclass(frozen=True)
class MachineInfo:
    """What ``aaco info`` shows: the package and Python, ONNX Runtime (``version``, ``device``,
    ``available_providers``), the CPU, the clock settings and the GPU as the environment record has
    them (:func:`pytest_aaco.measure.environment.collect_environment`), the clock warnings, the
    onnxruntime distributions installed and what is wrong with them, the machine fingerprint fields
    (with the baseline folder name) per provider short name, each GPU EP's device ids and the
    physical GPU each maps to, and what could not be read."""

    pytest_aaco: str
    python: str
    onnxruntime: JSONDict
    cpu: JSONDict
    clocks: JSONDict
    gpu: JSONDict
    clock_warnings: list[str]
    distributions: list[str]
    problem: str | None
    fingerprint: dict[str, tuple[JSONDict, str]]
    devices: dict[str, list[dict[str, object]]]
    errors: dict[str, str]

    @property
    def providers(self) -> list[str]:
        """The execution providers this onnxruntime build lists."""
        found = self.onnxruntime.get("available_providers")
        return [str(name) for name in found] if isinstance(found, list) else []

    def to_dict(self) -> JSONDict:
        """``aaco info --json``."""
        return {"pytest_aaco": self.pytest_aaco, "python": self.python, "onnxruntime": self.onnxruntime or None,
                "cpu": self.cpu or None, "clocks": self.clocks, "clock_warnings": list(self.clock_warnings),
                "gpu": self.gpu or None, "onnxruntime_distributions": list(self.distributions),
                "onnxruntime_problem": self.problem,
                "fingerprint": {short: {"fields": fields, "machine_key": key}
                                for short, (fields, key) in self.fingerprint.items()},
                # PhysicalGpu.to_dict() is JSON (strings, numbers, a dict of clocks) typed as objects
                "devices": {short: [cast(JSONDict, d) for d in found] for short, found in self.devices.items()},
                "errors": dict(self.errors)}


def machine_info(providers: list[str] | None = None) -> MachineInfo:
    """What ``aaco info`` shows (:class:`MachineInfo`), read now; a fingerprint that cannot be read
    is an entry of ``errors``, never an exception."""
    env = collect_environment()
    errors = {str(k): str(v) for k, v in _section(env, "errors").items()}
    clocks = _section(env, "clocks")
    builds = flavors.ort_distributions()  # what installs the onnxruntime package (pytest_aaco.flavors)
    root = flavors.imported_root()
    shadowed = flavors.shadowed_builds(builds, root)  # in another folder than the one Python imports from
    ort = _section(env, "onnxruntime")
    if providers is None:
        listed = ort.get("available_providers")
        available = [str(name) for name in listed] if isinstance(listed, list) else []
        known = [found.short for found in (eps.lookup(name) for name in available) if found is not None]
        providers = ["cpu"] + [short for short in known if short != "cpu"]
    fingerprints = {}
    for short in providers:
        try:
            fields = machine_fields(short)
        except Exception as exc:  # noqa: BLE001 - report what can be read
            errors[f"fingerprint[{short}]"] = f"{type(exc).__name__}: {exc}"
            continue
        fingerprints[short] = (fields, Fingerprint(fields).machine_key)
    if any(vendor_of(short) == AMD for short in providers):
        problem = amdsmi_problem()  # otherwise the GPU line says only that none was found
        if problem:
            errors["amdsmi"] = problem
    return MachineInfo(__version__, f"{platform.python_version()} ({sys.executable})", ort, _section(env, "cpu"),
                       clocks, _section(env, "gpu"), clock_warnings(clocks) if clocks else [],
                       [f"{d.pinned} (shadowed, not imported: {d.metadata.parent})" if d in shadowed else d.pinned
                        for d in builds],
                       flavors.missing_problem() or flavors.overlap_problem(builds, root),
                       fingerprints, {short: device_map(short) for short in providers if vendor_of(short) is not None},
                       errors)


def device_map(short: str) -> list[dict[str, object]]:
    """EP *short*'s device ids and the physical GPU each maps to (``PhysicalGpu.to_dict()``), as
    ``--aaco-device-id all`` would use them (:func:`pytest_aaco.samplers.gpus.visible_gpus`); [] when
    no GPU can be counted."""
    found: list[dict[str, object]] = []
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
        sys.stdout.write(dumps(info.to_dict()))
        return OK
    ort, cpu, clocks, gpu = info.onnxruntime, info.cpu, info.clocks, info.gpu
    _out(f"pytest-aaco {info.pytest_aaco}, Python {info.python}")
    _out(f"ONNX Runtime {_text(ort.get('version'), 'not importable')} (device {_text(ort.get('device'))})")
    _out(f"  execution providers: {', '.join(info.providers) or '-'}")
    _out(f"  installed as: {', '.join(info.distributions) or 'no ONNX Runtime distribution'}")
    if info.problem:
        _out(f"warning: {info.problem}")
    _out(f"CPU: {_text(cpu.get('model'))}, {_text(cpu.get('logical_cores'))} logical /"
         f" {_text(cpu.get('physical_cores'))} physical cores, {num(cpu.get('memory_total_mb'), '.0f')} MB memory")
    governor = clocks.get("cpu_governor") or "unknown (no cpufreq in sysfs: container or VM?)"
    boost = "-" if clocks.get("cpu_boost") is None else ("on" if clocks["cpu_boost"] else "off")
    _out(f"  governor: {governor}, driver: {clocks.get('cpu_driver') or '-'}, boost: {boost}")
    if gpu.get("name"):
        _out(f"GPU: {gpu.get('name')} ({gpu.get('vendor')}), driver {gpu.get('driver') or '-'},"
             f" runtime {gpu.get('runtime') or '-'}, perf level {clocks.get('gpu_perf_level') or '-'}")
    else:
        _out("GPU: none found (NVML and amdsmi/rocm-smi did not report a device)")
    for short, devices in info.devices.items():
        for device in map(GpuRecord.from_dict, devices):
            key = device.uuid or device.pci_bus_id or "unknown"
            _out(f"  --aaco-provider={short} device {device.logical_id}: {key} {device.name or ''}"
                 f" (PCI {device.pci_bus_id or '-'}, mapped by {device.mapped_by or '-'})"
                 + (f"; ambiguous: {device.ambiguous}" if device.ambiguous else ""))
    for warning in info.clock_warnings:
        _out(f"warning: {warning}")
    for short, (fields, machine_key) in info.fingerprint.items():
        _out(f"machine fingerprint for --aaco-provider={short} (baseline folder {machine_key}):")
        for key, value in fields.items():
            _out(f"  {key}: {value}")
    for name, error in info.errors.items():
        _out(f"note: {name} could not be read: {error}")
    return OK
