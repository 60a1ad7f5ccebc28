"""Seeded input tensors for an InferenceSession, from its declared inputs and the registry's specs.

Shapes come from ``session.get_inputs()``; symbolic dimensions take their value from the
registry's ``dims`` (or 1 for a dimension named like a batch). Dtypes come from the model.
Defaults by input: ``*mask*`` → ones, ``*token_type*`` → zeros, other integers → ids in
``[0, 100)``, floats → standard normal. Every input has its own seed, so runs are repeatable.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import onnxruntime as ort

#: the input kinds a registry entry may name
INPUT_KINDS = ("normal", "uniform", "ints", "ones", "zeros", "constant")


@dataclass(frozen=True)
class InputSpec:
    """How to generate one input: ``kind`` in :data:`INPUT_KINDS`, a range, a seed, a constant."""

    kind: str | None = None
    low: float | None = None
    high: float | None = None
    seed: int = 0
    value: float | None = None


ORT_DTYPES: dict[str, type[np.generic]] = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int16)": np.int16,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}
BATCH_NAMES = ("batch", "batch_size", "n", "N", "unk__0")


class InputError(ValueError):
    """An input cannot be generated; the message names the model, the input and the fix."""


def resolve_shape(model: str, name: str, shape: Sequence[int | str | None], dims: dict[str, int]) -> tuple[int, ...]:
    """Concrete shape for one input: ints stay, symbolic names come from *dims*.

    An unnamed or unknown symbolic dimension raises :class:`InputError` telling the user which
    ``dims:`` key to add to the registry, except batch-like names, which default to 1.
    """
    resolved: list[int] = []
    for axis, dim in enumerate(shape):
        if isinstance(dim, int) and dim > 0:
            resolved.append(dim)
        elif isinstance(dim, str) and dim in dims:
            resolved.append(dims[dim])
        elif isinstance(dim, str) and (dim in BATCH_NAMES or "batch" in dim.lower()):
            resolved.append(dims.get("batch", 1))
        elif axis == 0 and not isinstance(dim, str):
            resolved.append(dims.get("batch", 1))
        else:
            raise InputError(
                f"model {model!r}, input {name!r}: dimension {axis} is symbolic ({dim!r});"
                f" set it in the registry, e.g. dims: {{{dim or 'name'}: 128}}"
            )
    return tuple(resolved)


def _default_kind(name: str, dtype: npt.DTypeLike) -> str:
    lowered = name.lower()
    if "mask" in lowered:
        return "ones"
    if "token_type" in lowered or "segment" in lowered:
        return "zeros"
    return "ints" if np.issubdtype(dtype, np.integer) else "normal"


def _check_range(name: str, kind: str, low: float, high: float) -> None:
    """A range left empty by one bound and the other's default (``low: 200`` with high's default 100)."""
    if not low < high:
        raise InputError(f"input {name!r}: {kind} range [{low}, {high}) is empty; set both low and high"
                         " in the registry's inputs")


def generate(name: str, shape: tuple[int, ...], dtype: npt.DTypeLike, spec: InputSpec | None) -> np.ndarray:
    """One input array of *shape* and *dtype* following *spec* (defaults by name and dtype).

    The seed mixes the spec's seed with the input name, so two inputs never share values.
    """
    spec = spec or InputSpec()
    kind = spec.kind or _default_kind(name, dtype)
    rng = np.random.default_rng([spec.seed, zlib.crc32(name.encode())])
    if kind == "ones":
        return np.ones(shape, dtype=dtype)
    if kind == "zeros":
        return np.zeros(shape, dtype=dtype)
    if kind == "constant":
        return np.full(shape, spec.value, dtype=dtype)
    if kind == "ints":
        low = int(spec.low if spec.low is not None else 0)
        high = int(spec.high if spec.high is not None else 100)
        _check_range(name, kind, low, high)
        return rng.integers(low, high, size=shape).astype(dtype)
    if kind == "uniform":
        lower = float(spec.low if spec.low is not None else 0.0)
        upper = float(spec.high if spec.high is not None else 1.0)
        _check_range(name, kind, lower, upper)
        return rng.uniform(lower, upper, size=shape).astype(dtype)
    return rng.standard_normal(size=shape).astype(dtype)


def make_inputs(model: str, session_inputs: Sequence[ort.NodeArg], dims: dict[str, int],
                specs: dict[str, InputSpec]) -> dict[str, np.ndarray]:
    """Feeds for ``session.run``: ``{input name: array}`` for every declared input.

    *session_inputs* is ``InferenceSession.get_inputs()`` (objects with ``name``, ``shape``,
    ``type``). Raises :class:`InputError` for an unsupported dtype, an unresolved symbolic
    dimension, or a registry ``inputs:`` key that names no input of the model.
    """
    names = [i.name for i in session_inputs]
    unknown = sorted(set(specs) - set(names))
    if unknown:
        raise InputError(f"model {model!r}: registry inputs {unknown} are not inputs of the model"
                         f" (inputs: {', '.join(names)})")
    feeds: dict[str, np.ndarray] = {}
    for info in session_inputs:
        dtype = ORT_DTYPES.get(info.type)
        if dtype is None:
            raise InputError(f"model {model!r}, input {info.name!r}: unsupported type {info.type}")
        shape = resolve_shape(model, info.name, info.shape, dims)
        feeds[info.name] = generate(info.name, shape, dtype, specs.get(info.name))
    return feeds


def batch_size(feeds: dict[str, np.ndarray]) -> int:
    """Samples per run: the leading dimension of the first input (1 for scalars)."""
    first = next(iter(feeds.values()), None)
    return int(first.shape[0]) if first is not None and first.ndim > 0 else 1
