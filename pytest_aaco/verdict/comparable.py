"""The fingerprint's rules: what must be equal for a baseline to be comparable, and how two
fingerprints are compared (:class:`Fingerprint`). Pure: nothing here reads the machine; the fields
are collected by :mod:`pytest_aaco.history.fingerprint` (which re-exports these names), so the
baseline store and the gate's rules need only this module.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.redact import redact_options

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

    def against(self, other: Mapping[str, object]) -> FingerprintMatch:
        """This fingerprint compared once with *other* (a stored fingerprint's fields), as a plain value."""
        diff = self.diff(other)
        return FingerprintMatch(id=self.id, diff=diff, versions=self.version_only(other),
                                described=self.describe_diff(other) if diff else "",
                                subject_changes=self.subject_changes(other))


@dataclass(frozen=True)
class FingerprintMatch:
    """A fingerprint compared with a stored one (:meth:`Fingerprint.against`): *id* (:attr:`Fingerprint.id`
    of the current one), *diff* (:meth:`Fingerprint.diff`: the comparability fields that differ), *versions*
    (:meth:`Fingerprint.version_only`: the differing fields when all are versions), *described*
    (:meth:`Fingerprint.describe_diff`, '' when nothing differs) and *subject_changes*
    (:meth:`Fingerprint.subject_changes`: the model's own fields that changed)."""

    id: str
    diff: list[str]
    versions: list[str]
    described: str
    subject_changes: list[str]

    @property
    def gates(self) -> bool:
        """Whether the stored history gates the item: nothing differs, or only versions do (raw figures)."""
        return not self.diff or bool(self.versions)


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
