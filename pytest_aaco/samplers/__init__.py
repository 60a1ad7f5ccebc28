"""Telemetry samplers that run beside the measured rounds, and the session that drives them.

``build_samplers(provider, device_id, interval_s)`` picks the samplers for an execution provider;
:class:`TelemetrySession` starts and stops them together and merges their records. Importing this
package imports no GPU library: ``pynvml`` and ``amdsmi`` are imported when a sampler starts.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.samplers.amd import AMDGPUSampler
from pytest_aaco.samplers.base import (
    Sampler,
    SamplerUnavailable,
    describe_exception,
    summarize_samples,
)
from pytest_aaco.samplers.clocks import ClockMonitor, read_clock_state
from pytest_aaco.samplers.nvidia import NVIDIAGPUSampler
from pytest_aaco.samplers.system import SystemSampler

#: providers whose device is an AMD GPU / an NVIDIA GPU


def build_samplers(provider: str, device_id: int = 0, interval_s: float = 0.1) -> list[Sampler]:
    """Samplers for one execution provider (short name: ``cpu``, ``cuda``, ``tensorrt``, ``migraphx``,
    ``rocm``, ``openvino``, ``dml``).

    Always :class:`SystemSampler` and :class:`ClockMonitor`; plus :class:`AMDGPUSampler` for the EPs whose
    telemetry amdsmi reports (``migraphx``/``rocm``) and :class:`NVIDIAGPUSampler` for NVML's
    (``cuda``/``tensorrt``: :attr:`pytest_aaco.eps.Ep.telemetry`), on GPU
    *device_id*. *interval_s* is the sampling period in seconds. Unknown providers get the two
    host samplers. Never raises for an unknown name.
    """
    short = (provider or "").strip().lower()
    samplers: list[Sampler] = [SystemSampler(interval_s), ClockMonitor(interval_s)]
    telemetry = eps.get(short).telemetry  # the library that reports the EP's device (pytest_aaco.eps)
    if telemetry == eps.AMD:
        samplers.append(AMDGPUSampler(device_id=device_id, interval_s=interval_s))
    elif telemetry == eps.NVIDIA:
        samplers.append(NVIDIAGPUSampler(device_id=device_id, interval_s=interval_s))
    return samplers


class TelemetrySession:
    """Starts, stops and reports a group of samplers as one. Never raises.

    :meth:`start` also snapshots :func:`~pytest_aaco.samplers.clocks.read_clock_state` (sysfs
    only, no NVML) so a diagnosis can see the governor that was in force, and records the
    ``perf_counter_ns`` bounds of the phase.

    :meth:`to_dict` returns::

        {"interval_s": float,
         "start_ns": int | None, "end_ns": int | None,       # perf_counter_ns bounds of the phase
         "samplers": {name: sampler.to_dict()},
         "summary": {field: {"mean", "max", "min", "first", "last", "n"}},  # merged over samplers
         "errors": {name: error},                            # only samplers that failed
         "clock_state": read_clock_state() at start}

    Field names of different samplers do not overlap; if they ever do, the later one is
    reported as ``"<sampler>.<field>"``.
    """

    def __init__(self, samplers: Iterable[Sampler], interval_s: float | None = None) -> None:
        self.samplers = list(samplers)
        if interval_s is None:
            interval_s = self.samplers[0].interval_s if self.samplers else 0.1
        self.interval_s = float(interval_s)
        self.start_ns: int | None = None
        self.end_ns: int | None = None
        self.clock_state: JSONDict = {}
        self._errors: dict[str, str] = {}

    def start(self) -> None:
        """Start every sampler (each takes a first reading at once)."""
        try:
            self.clock_state = read_clock_state(query_nvml=False)
        except Exception as exc:  # noqa: BLE001
            self._errors["clock_state"] = describe_exception(exc)
        for sampler in self.samplers:
            try:
                sampler.start()
            except Exception as exc:  # noqa: BLE001 - Sampler.start never raises; a subclass might
                self._errors[sampler.name] = describe_exception(exc)
        self.start_ns = time.perf_counter_ns()
        self.end_ns = None

    def stop(self) -> None:
        """Stop every sampler, in reverse order (each takes a last reading)."""
        self.end_ns = time.perf_counter_ns()
        for sampler in reversed(self.samplers):
            try:
                sampler.stop()
            except Exception as exc:  # noqa: BLE001
                self._errors[sampler.name] = describe_exception(exc)

    def __enter__(self) -> TelemetrySession:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def to_dict(self) -> JSONDict:
        """The JSON-ready record described in the class docstring."""
        records: JSONDict = {}
        summary: dict[str, dict[str, float]] = {}
        errors = dict(self._errors)
        for sampler in self.samplers:
            try:
                record = sampler.to_dict()
            except Exception as exc:  # noqa: BLE001
                errors[sampler.name] = describe_exception(exc)
                continue
            records[sampler.name] = record
            if record.get("error"):
                errors.setdefault(sampler.name, record["error"])
            for field, stats in record.get("summary", {}).items():
                key = field if field not in summary else f"{sampler.name}.{field}"
                summary[key] = stats
        return {
            "interval_s": self.interval_s,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "samplers": records,
            "summary": summary,
            "errors": errors,
            "clock_state": self.clock_state,
        }


__all__ = [
    "AMDGPUSampler",
    "ClockMonitor",
    "NVIDIAGPUSampler",
    "Sampler",
    "SamplerUnavailable",
    "SystemSampler",
    "TelemetrySession",
    "build_samplers",
    "summarize_samples",
]
