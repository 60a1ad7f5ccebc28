"""The fingerprint: what must be equal for a baseline to be comparable.

It covers the work (model content hash, input shapes and dtypes), how it runs (EP, provider
options, IO binding, threads, ORT version, timing-relevant environment variables) and the
machine (CPU model and cores, GPU and driver, CPU governor / GPU performance level). Other
plugins add fields through the ``pytest_aaco_fingerprint`` hook.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.environment import ROCM_VERSION_FILE, cpu_model, gpu_identity, migraphx_version, rocm_version
from pytest_aaco.redact import fingerprint_options, looks_secret, redact_options
from pytest_aaco.samplers.clocks import fingerprint_fields, read_clock_state

#: environment variables that change timings (names matching these are fingerprinted): the device
#: selection of each GPU stack (ROCr, HIP, CUDA, OpenCL's ``GPU_DEVICE_ORDINAL``) and the ROCr runtime's
#: ``HSA_*`` switches (``HSA_OVERRIDE_GFX_VERSION``, ``HSA_ENABLE_SDMA`` ...)
TIMING_ENV = re.compile(r"^(ORT_.*|MIGRAPHX_.*|OMP_.*|.*_NUM_THREADS|CUDA_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES"
                        r"|ROCR_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL|HSA_.*)$")
#: what :data:`TIMING_ENV` matched before ``env_scheme`` 2: a stored fingerprint without ``env_scheme`` is
#: compared on these names only, so a baseline recorded before the AMD families were added stays comparable
TIMING_ENV_V1 = re.compile(r"^(ORT_.*|MIGRAPHX_.*|OMP_.*|.*_NUM_THREADS|CUDA_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES)$")
#: the current scheme of the ``env`` field (stored as ``env_scheme``; absent means 1, :data:`TIMING_ENV_V1`)
ENV_SCHEME = 2
#: environment variables recorded in ``env`` but never compared: they say *which* GPU of a host ran the item,
#: and the GPU's model is compared through ``gpu_name``. Identical GPUs share one history (docs/gpu.md,
#: "Per-GPU baselines"), so a runner per GPU (``CUDA_VISIBLE_DEVICES=3``) and pytest-xdist workers on
#: ``--aaco-device-id 0,1`` all gate against the same history of the GPU model.
PLACEMENT_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                           "GPU_DEVICE_ORDINAL"})
#: provider options recorded but never compared, for the same reason
PLACEMENT_OPTIONS = frozenset({"device_id"})
#: fields describing the machine: they pick the baseline folder, so runners live side by side
MACHINE_FIELDS = ("cpu_model", "cpu_cores", "gpu_name")
#: fields describing the thing under test. They are recorded and a change is reported, but they
#: are not part of the comparability key: a slower model must be *compared*, not skipped as
#: "different", or the gate could never catch a regression in the model itself.
SUBJECT_FIELDS = ("model_sha256",)
#: the reference workload's identity (:mod:`pytest_aaco.measure.reference_workload`). Recorded, never part of the
#: comparability key: a changed reference invalidates only the normalized series (each history run
#: stores the id it was normalized by), the raw figures stay comparable.
REFERENCE_FIELDS = ("reference",)
#: bookkeeping of the fingerprint's own format, never compared (see :data:`ENV_SCHEME`)
SCHEME_FIELDS = ("env_scheme",)
#: fields outside the comparability key
NOT_COMPARED = SUBJECT_FIELDS + REFERENCE_FIELDS + SCHEME_FIELDS
#: fields that are software versions: a fingerprint differing only in these is still compared,
#: on raw figures, with the change named (an upgrade must not silently turn the gate off)
VERSION_FIELDS = ("ort_version", "gpu_driver", "rocm_version", "migraphx_version")
#: version fields added after baselines were first recorded: absent from a stored fingerprint means
#: "not recorded then", not "changed", so it is not a difference (the next saved baseline records it)
LATER_VERSION_FIELDS = ("rocm_version", "migraphx_version")


@dataclass(frozen=True)
class Fingerprint:
    """A flat mapping of field name → JSON value, with a stable id."""

    fields: JSONDict

    @property
    def id(self) -> str:
        """16 hex digits of SHA-256 over the canonical JSON of the comparability fields
        (every field but :data:`NOT_COMPARED`, without :data:`PLACEMENT_ENV` and :data:`PLACEMENT_OPTIONS`)."""
        key = {k: _placement_free(k, v) for k, v in self.fields.items() if k not in NOT_COMPARED}
        text = json.dumps(key, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def subject_changes(self, other: Mapping[str, object]) -> list[str]:
        """Subject fields (the model itself) that changed since *other* was recorded."""
        return [k for k in SUBJECT_FIELDS if k in other and other.get(k) != self.fields.get(k)]

    @property
    def machine_key(self) -> str:
        """Folder name for this runner's baselines: a readable CPU slug plus a short hash."""
        machine = {k: self.fields.get(k) for k in MACHINE_FIELDS}
        digest = hashlib.sha256(json.dumps(machine, sort_keys=True, default=str).encode()).hexdigest()[:8]
        slug = re.sub(r"[^a-z0-9]+", "-", str(self.fields.get("cpu_model", "cpu")).lower()).strip("-")[:40]
        gpu = self.fields.get("gpu_name")
        if gpu:
            slug += "-" + re.sub(r"[^a-z0-9]+", "-", str(gpu).lower()).strip("-")[:30]
        return f"{slug}-{self.fields.get('cpu_cores', 0)}c-{digest}"

    def diff(self, other: Mapping[str, object]) -> list[str]:
        """Comparability fields whose values differ from *other* (a stored fingerprint's fields)."""
        keys = sorted((set(self.fields) | set(other)) - set(NOT_COMPARED))
        keys = [k for k in keys if not (k in LATER_VERSION_FIELDS and k not in other)]
        return [k for k in keys if _placement_free(k, self._compared(k, other)) != _placement_free(k, other.get(k))]

    def _compared(self, key: str, other: Mapping[str, object]) -> object:
        """This fingerprint's value of *key* as *other* would have recorded it: the ``env`` of a stored
        fingerprint of an older scheme holds only the :data:`TIMING_ENV_V1` names."""
        value = self.fields.get(key)
        scheme = other.get("env_scheme", 1)
        if key == "env" and isinstance(value, Mapping) and isinstance(scheme, (int, float)) and scheme < ENV_SCHEME:
            return {k: v for k, v in value.items() if TIMING_ENV_V1.match(k)}
        return value

    def version_only(self, other: Mapping[str, object]) -> list[str]:
        """The differing fields when every one of them is in :data:`VERSION_FIELDS` (an ORT or
        driver upgrade); an empty list when nothing differs or something else does too."""
        diff = self.diff(other)
        return diff if diff and all(k in VERSION_FIELDS for k in diff) else []

    def matches(self, other: Mapping[str, object]) -> bool:
        """True when *other* (a stored fingerprint's fields) is comparable: no comparability field differs."""
        return not self.diff(other)

    def describe_diff(self, other: Mapping[str, object]) -> str:
        """Human-readable difference, e.g. ``ort_version: 1.20.0 -> 1.21.0``."""
        parts = [f"{k}: {_shown(other.get(k))!r} -> {_shown(self._compared(k, other))!r}" for k in self.diff(other)]
        return "; ".join(parts)


def _placement_free(key: str, value: object) -> object:
    """*value* of fingerprint field *key* as compared: ``env`` without :data:`PLACEMENT_ENV`,
    ``provider_options`` without :data:`PLACEMENT_OPTIONS` (which GPU of identical ones ran the item)."""
    if key == "env" and isinstance(value, Mapping):
        return {k: v for k, v in value.items() if k not in PLACEMENT_ENV}
    if key == "provider_options" and isinstance(value, Mapping):
        return {k: v for k, v in value.items() if k not in PLACEMENT_OPTIONS}
    return value


def _shown(value: object) -> object:
    """A fingerprint value for display: secret-looking entries of a mapping (provider options that
    earlier versions of pytest-aaco stored raw) become ``***``; stored hashes are shown as they are."""
    if isinstance(value, Mapping):
        return redact_options(value)
    return value


def timing_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Timing-relevant environment variables, minus anything that looks like a secret."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in sorted(source.items()) if TIMING_ENV.match(k) and not looks_secret(k, v)}


def amd_stack_fields(provider_short: str, rocm_version_file: str = ROCM_VERSION_FILE) -> JSONDict:
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
