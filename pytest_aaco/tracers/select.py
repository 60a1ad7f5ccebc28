"""Which tracer an EP has, asked of its record (:attr:`pytest_aaco.eps.Ep.tracer`), and what to say
when it is missing."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from pytest_aaco import eps
from pytest_aaco.tracers import cupti, rocprof
from pytest_aaco.tracers.base import InProcessTracer, Tracer, TracerError, TracerMissing

#: the tracer of each kind an EP record names (:attr:`pytest_aaco.eps.Ep.tracer`)
TRACERS: dict[str, type[Tracer]] = {eps.CUPTI: cupti.CuptiTracer, eps.ROCPROFV3: rocprof.RocprofTracer}


def tracer_for(provider: str, mode: str,
               which: Callable[[str], str | None] = shutil.which) -> tuple[InProcessTracer | None, str | None]:
    """The in-process tracer for the EP *provider* (short name) under ``--aaco-device-time`` *mode*
    (``auto``/``on``/``off``): ``(tracer, None)``, or ``(None, why not)``.

    The reason is None where device time does not apply (a host EP, or ``off``) and for the EPs of
    rocprofv3 when rocprofv3 is on PATH (*which*: ``shutil.which``): their device time comes from one
    traced child process (:func:`pytest_aaco.measure.traced_child.trace_sides`) instead. With ``on``,
    a missing tracer is an error: raises :class:`~pytest_aaco.tracers.base.TracerMissing` (or
    :class:`~pytest_aaco.tracers.base.TracerError` where the EP has no tracer)."""
    if mode == "off":
        return None, None
    ep = eps.get(provider)
    if ep.tracer == eps.ROCPROFV3:
        if which(rocprof.ROCPROFV3) is not None:
            return None, None
        if mode == "on":
            raise TracerMissing(f"--aaco-device-time=on: device time on {provider} needs rocprofv3:"
                                f" {rocprof.INSTALL_HINT}")
        return None, f"device time on {provider} needs rocprofv3: {rocprof.INSTALL_HINT}; gated on wall time only"
    if ep.tracer != eps.CUPTI:
        if mode == "on" and not ep.host_only:
            raise TracerError(f"--aaco-device-time=on: no in-process kernel tracer for the {provider} EP;"
                              " gated on wall time")
        return None, (f"device time: no in-process kernel tracer for {provider}" if not ep.host_only else None)
    try:
        return cupti.CuptiTracer(), None
    except TracerError as exc:
        if mode == "on":
            raise
        return None, f"device time on {provider}: {exc}; gated on wall time only"
