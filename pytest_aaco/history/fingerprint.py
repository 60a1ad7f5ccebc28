"""The fingerprint: what must be equal for a baseline to be comparable, read from this machine.

It covers the work (model content hash, input shapes and dtypes), how it runs (EP, provider
options, IO binding, threads, ORT version, timing-relevant environment variables) and the
machine (CPU model and cores, GPU and driver, CPU governor / GPU performance level). Other
plugins add fields through the ``pytest_aaco_fingerprint`` hook. The comparison rules and
:class:`Fingerprint` live in :mod:`pytest_aaco.verdict.comparable` (re-exported here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.environment import cpu_model, gpu_identity, migraphx_version, rocm_version
from pytest_aaco.redact import fingerprint_options, looks_secret
from pytest_aaco.samplers.clocks import fingerprint_fields, read_clock_state
from pytest_aaco.verdict.comparable import (
    ENV_SCHEME,
    LATER_VERSION_FIELDS,
    MACHINE_FIELDS,
    NOT_COMPARED,
    PLACEMENT_ENV,
    PLACEMENT_OPTIONS,
    REFERENCE_FIELDS,
    SCHEME_FIELDS,
    SUBJECT_FIELDS,
    TIMING_ENV,
    TIMING_ENV_V1,
    VERSION_FIELDS,
    Fingerprint,
)

#: the rules (:mod:`pytest_aaco.verdict.comparable`) are re-exported with the collectors
__all__ = ["ENV_SCHEME", "LATER_VERSION_FIELDS", "MACHINE_FIELDS", "NOT_COMPARED", "PLACEMENT_ENV",
           "PLACEMENT_OPTIONS", "REFERENCE_FIELDS", "SCHEME_FIELDS", "SUBJECT_FIELDS", "TIMING_ENV", "TIMING_ENV_V1",
           "VERSION_FIELDS", "Fingerprint", "amd_stack_fields", "build_fingerprint", "machine_fields", "timing_env"]


def timing_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Timing-relevant environment variables, minus anything that looks like a secret."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in sorted(source.items()) if TIMING_ENV.match(k) and not looks_secret(k, v)}


def amd_stack_fields(provider_short: str, rocm_version_file: str | None = None) -> JSONDict:
    """``rocm_version`` and ``migraphx_version`` for the AMD EPs (``migraphx``, ``rocm``), each only when
    known: other EPs do not run on ROCm, and a field left out keeps the fingerprint id of a machine
    without ROCm what it was before these fields existed."""
    if eps.get(provider_short).telemetry != eps.AMD:
        return {}
    found = {"rocm_version": rocm_version(rocm_version_file), "migraphx_version": migraphx_version()}
    return {k: v for k, v in found.items() if v is not None}


@lru_cache(maxsize=8)
def machine_fields(provider_short: str, device_id: int = 0) -> JSONDict:
    """CPU model and cores, the name and driver of the GPU that EP device *device_id* maps to
    (:func:`pytest_aaco.measure.environment.gpu_identity`, honouring the visibility variables), the ROCm
    and MIGraphX versions on AMD EPs (:func:`amd_stack_fields`), and the clock settings (read once per
    provider and device)."""
    gpu = gpu_identity(provider_short, device_id) or {}
    return {
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count() or 0,
        "gpu_name": gpu.get("name"),
        "gpu_driver": gpu.get("driver"),
        **amd_stack_fields(provider_short),
        **{f"clock_{k}": v for k, v in fingerprint_fields(read_clock_state()).items()},
    }


def build_fingerprint(*, model_sha256: str, input_shapes: dict[str, list[int]], input_dtypes: dict[str, str],
                      provider: str, ep_name: str, provider_options: JSONDict, iobinding: str,
                      intra_op_threads: int, extra: JSONDict | None = None,
                      reference: str | None = None, graph: str | None = None, device_id: int = 0) -> Fingerprint:
    """Assemble the fingerprint of one item. *extra* holds fields added by hook implementations;
    *reference* is the reference workload's id (:func:`pytest_aaco.measure.reference_workload.reference_id`), None
    when it is off. *graph* is the item's graph-replay state (:mod:`pytest_aaco.measure.graph`); it is
    recorded only when ``on``, so fingerprints without graph replay are those of earlier versions and a
    graph-on baseline never judges a graph-off run (graph replay changes the measured quantity).
    *device_id* is the EP's device, whose physical GPU gives ``gpu_name`` and ``gpu_driver``.

    Provider option values that look like credentials are kept as a salted hash
    (:func:`pytest_aaco.redact.fingerprint_options`): a change is still detected, the value is never stored.
    """
    import onnxruntime as ort

    fields: JSONDict = {
        "model_sha256": model_sha256,
        "input_shapes": input_shapes,
        "input_dtypes": input_dtypes,
        "provider": ep_name,
        "provider_options": fingerprint_options(provider_options),
        "iobinding": iobinding,
        "intra_op_threads": intra_op_threads,
        "ort_version": ort.__version__,
        "env": timing_env(),
        "env_scheme": ENV_SCHEME,
        **machine_fields(provider, device_id),
    }
    if reference is not None:
        fields["reference"] = reference
    if graph == "on":
        fields["graph"] = graph
    fields.update(extra or {})
    return Fingerprint(fields)
