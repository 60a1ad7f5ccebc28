"""Atomic, diff-friendly JSON files: every artifact pytest-aaco writes goes through here."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

JSONValue: TypeAlias = "None | bool | int | float | str | Sequence[JSONValue] | Mapping[str, JSONValue]"
"""A value that is JSON: what :func:`json.loads` returns, and what :func:`dumps` writes."""
JSONDict: TypeAlias = dict[str, JSONValue]
"""A JSON object: what every record, fingerprint and report section pytest-aaco writes is."""


class AacoFileError(Exception):
    """A JSON file handed to pytest-aaco cannot be read; the message names the file and the fix."""


def _clean(value: object, strict: bool = False) -> object:
    """Make *value* strict JSON: numpy scalars become Python numbers; NaN/inf become None, or with
    *strict* raise ValueError (a file whose numbers matter must never hold a null in their place)."""
    if isinstance(value, dict):
        return {str(k): _clean(v, strict) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v, strict) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _clean(value.tolist(), strict)
    if isinstance(value, float) and not math.isfinite(value):
        if strict:
            raise ValueError(f"{value} is not a finite number")
        return None
    return value


def dumps(data: object, strict: bool = False) -> str:
    """Serialise *data* with sorted keys and two-space indent, so diffs in pull requests stay small.

    NaN and infinities become ``null``; with *strict* (baseline files) they raise ValueError instead."""
    return json.dumps(_clean(data, strict), indent=2, sort_keys=True, allow_nan=False) + "\n"


def loads_records(text: str) -> list[JSONDict]:
    """Parse a JSON list of objects (records sent between pytest-xdist processes)."""
    data = json.loads(text)
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise AacoFileError("expected a JSON list of objects")
    return data


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write *text* (UTF-8) to *path* atomically: a temporary file in the same folder, fsync, ``os.replace``.

    A crash or Ctrl-C leaves either the old file or the new one, never half of one. Parent
    folders are created. The file is readable by all (0644), or keeps the mode of the file it
    replaces (artifacts are for sharing, unlike mkstemp's private 0600). Raises OSError when the
    folder or file cannot be written. Returns the path written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o777
    except OSError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def atomic_write_json(path: str | os.PathLike[str], data: object, strict: bool = False) -> Path:
    """Write *data* as JSON (:func:`dumps`, *strict* there) to *path* atomically (:func:`atomic_write_text`)."""
    return atomic_write_text(path, dumps(data, strict))


class _StrictJSONError(ValueError):
    """What :func:`strict_loads` refuses beyond :func:`json.loads`: a duplicate key, nesting too deep."""


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _StrictJSONError(f"key {key!r} given twice in one object")
        data[key] = value
    return data


def strict_loads(text: str) -> Any:
    """Parse JSON text as :func:`json.loads` does, but a key given twice in one object (``json.loads``
    keeps the last) and nesting deeper than Python's recursion limit raise ValueError, as does an
    integer of more than 4300 digits (Python's limit). ``NaN`` and ``1e400`` (infinity) are parsed:
    each reader checks its numbers and names the JSON path (:mod:`pytest_aaco.history.store`)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_object)
    except RecursionError:
        raise _StrictJSONError("nested too deeply") from None


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file (:func:`strict_loads`); a missing or malformed file raises :class:`AacoFileError` naming it:
    not JSON, not UTF-8, a key given twice, nesting too deep, an integer too long to convert."""
    target = Path(path)
    try:
        return strict_loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise AacoFileError(f"{target}: file not found") from exc
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise AacoFileError(
            f"{target}: not valid JSON ({exc}); delete it or restore it from git, then re-run"
        ) from exc
