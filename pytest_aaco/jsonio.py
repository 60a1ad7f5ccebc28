"""Atomic, diff-friendly JSON files: every artifact pytest-aaco writes goes through here."""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
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

    Only a regular file (or nothing) is ever replaced: a symlink is followed and the file it points
    to replaced, the link kept; a character device (``/dev/null``, a terminal) or a FIFO is written
    to directly, and anything else (a folder, a socket, a block device) is refused
    (:func:`write_special`). A crash or Ctrl-C leaves either the old file or the new one, never half of one. Parent
    folders are created. The file is readable by all (0644), or keeps the mode of the file it
    replaces (artifacts are for sharing, unlike mkstemp's private 0600). Raises OSError when the
    folder or file cannot be written. Returns the path written.
    """
    target = Path(path)
    fd_number = _names_descriptor(target)
    if fd_number is not None:  # /dev/stdout with stdout redirected to a log: add to the log, never replace it
        write_descriptor(fd_number, text)
        return target
    if target.is_symlink():  # replace the file the link points to, and keep the link
        target = Path(os.path.realpath(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        info = target.stat()
    except OSError:
        mode = 0o644
    else:
        if not stat.S_ISREG(info.st_mode):
            write_special(target, text, info.st_mode)
            return target
        mode = info.st_mode & 0o777
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


_DESCRIPTOR_PATHS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def _names_descriptor(path: Path) -> int | None:
    """The file descriptor that *path* names (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``,
    ``/proc/self/fd/N``), when it is open in this process; else None."""
    text = os.path.normpath(str(path))
    number = _DESCRIPTOR_PATHS.get(text)
    for prefix in ("/dev/fd/", "/proc/self/fd/", f"/proc/{os.getpid()}/fd/"):
        if number is None and text.startswith(prefix) and text[len(prefix):].isdigit():
            number = int(text[len(prefix):])
    if number is None:
        return None
    try:
        os.fstat(number)
    except OSError:
        return None
    return number


def write_descriptor(number: int, text: str) -> None:
    """Write *text* (UTF-8) through open file descriptor *number*, sharing the offset the shell gave it:
    a redirected stdout's log file gets the text where the process's own output stands, nothing of it
    truncated or replaced. Python's buffered ``sys.stdout``/``sys.stderr`` are flushed first so the
    order holds. Raises OSError when the descriptor cannot be written."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and stream.fileno() == number:
                stream.flush()
        except (OSError, ValueError, AttributeError):  # a replaced stream without a descriptor
            pass
    fd = os.dup(number)
    try:
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def write_special(target: Path, text: str, mode: int, append: bool = False) -> None:
    """Write *text* (UTF-8) to *target*, which exists and is not a regular file (*mode*: its ``st_mode``).

    A character device (``/dev/null``, a terminal) is written to directly; a FIFO too, opened with
    ``O_NONBLOCK`` so that a FIFO no process reads fails at once (``ENXIO``) instead of blocking the
    session. A folder, socket, block device or other special file is refused. Never replaces or
    removes *target*. Raises OSError whose ``strerror`` says what *target* is and the fix.
    """
    kind = _special_kind(mode)
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        raise OSError(errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL,
                      f"{target} is {kind}, not a file; give the path of a file")
    flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0) | (os.O_APPEND if append else 0)
    if stat.S_ISFIFO(mode):
        flags |= getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, f"{target} is a FIFO that no process is reading; start the reader first,"
                                       " or give the path of a file") from None
        raise
    try:
        if stat.S_ISFIFO(mode):
            os.set_blocking(fd, True)  # the reader is there: wait for it to take the text
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def append_text(path: str | os.PathLike[str], text: str) -> None:
    """Append *text* (UTF-8) to *path* (a file created when missing, as ``open(path, "a")``); a
    character device or FIFO is written to as :func:`write_special` does, a folder or other special
    file refused. Raises OSError."""
    target = Path(path)
    try:
        info = target.stat()
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        write_special(target, text, info.st_mode, append=True)
        return
    with target.open("a", encoding="utf-8") as handle:
        handle.write(text)


def atomic_write_json(path: str | os.PathLike[str], data: object, strict: bool = False) -> Path:
    """Write *data* as JSON (:func:`dumps`, *strict* there) to *path* atomically (:func:`atomic_write_text`)."""
    return atomic_write_text(path, dumps(data, strict))


class _StrictJSONError(ValueError):
    """What :func:`loads_bounded` refuses beyond :func:`json.loads`: a key given twice in one object
    (``json.loads`` keeps the last)."""


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _StrictJSONError(f"key {key!r} given twice in one object")
        data[key] = value
    return data


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file; a missing or malformed file raises :class:`AacoFileError` naming it: not JSON,
    not UTF-8, a key given twice, beyond the limits of :func:`loads_bounded` (size, nesting, numbers), or
    not a regular file (:func:`read_regular_text`)."""
    target = Path(path)
    try:
        return loads_bounded(read_regular_text(target), target)
    except FileNotFoundError as exc:
        raise AacoFileError(f"{target}: file not found") from exc
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise AacoFileError(
            f"{target}: not valid JSON ({exc}); delete it or restore it from git, then re-run"
        ) from exc


# ---------------------------------------------------------------- limits on what is read

#: the largest JSON file pytest-aaco reads (a baseline of a few thousand runs is a few MiB)
MAX_JSON_BYTES = 64 << 20
#: the deepest nesting of arrays and objects in a JSON file pytest-aaco reads (its own files nest < 10)
MAX_JSON_DEPTH = 64
#: the most digits of an integer in a JSON file (int64 has 19; 10^400 has 401)
MAX_INT_DIGITS = 20
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def read_regular_text(path: Path, limit: int = MAX_JSON_BYTES) -> str:
    """The UTF-8 text of *path*, opened only when it is a regular file of at most *limit* bytes.

    A FIFO, device, socket or folder is never read (a FIFO would block: it is opened with
    ``O_NONBLOCK`` and refused by its ``fstat``). Raises FileNotFoundError when missing,
    :class:`AacoFileError` naming the file for the other cases, UnicodeDecodeError for text that is
    not UTF-8.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise AacoFileError(f"{path}: a folder, not a JSON file; remove it or restore the file from git") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise AacoFileError(f"{path}: not a regular file ({_special_kind(info.st_mode)}), so it is not read;"
                            " remove it or restore the file from git")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > limit:
            raise AacoFileError(f"{path}: {info.st_size:,} bytes, larger than the {limit >> 20} MiB a JSON file of"
                                " pytest-aaco may have; delete it or restore it from git, then re-run")
        data = handle.read(limit + 1)
    if len(data) > limit:  # grew while read
        raise AacoFileError(f"{path}: larger than {limit >> 20} MiB; delete it or restore it from git, then re-run")
    return data.decode("utf-8")


def _special_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "a special file"


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _bounded_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:30]} is out of the range of a double")
    return value


def loads_bounded(text: str, path: str | os.PathLike[str] = "<text>") -> Any:
    """Parse JSON *text* (read from *path*, named in every message) within limits: at most
    :data:`MAX_JSON_BYTES` characters, arrays and objects nested at most :data:`MAX_JSON_DEPTH`
    deep (checked before parsing, so a deep file never reaches the recursive parser), integers of
    at most :data:`MAX_INT_DIGITS` digits and finite floats (``1e400`` is refused, not read as
    infinity). Raises :class:`AacoFileError` for a file beyond them, ``json.JSONDecodeError`` for
    text that is not JSON.
    """
    fix = "delete it or restore it from git, then re-run"
    if len(text) > MAX_JSON_BYTES:
        raise AacoFileError(f"{path}: larger than {MAX_JSON_BYTES >> 20} MiB; {fix}")
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            raise AacoFileError(f"{path}: not valid JSON for pytest-aaco (arrays and objects nested deeper than"
                                f" {MAX_JSON_DEPTH} levels); {fix}")
    try:
        return json.loads(text, parse_int=_bounded_int, parse_float=_bounded_float, object_pairs_hook=_unique_object)
    except RecursionError:
        raise AacoFileError(f"{path}: not valid JSON for pytest-aaco (nested too deeply); {fix}") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # from the number hooks, or Python's own int digit limit
        raise AacoFileError(f"{path}: not valid JSON for pytest-aaco ({exc}); {fix}") from None
