"""The checks a baseline file passes when it is read (:func:`pytest_aaco.history.store.load_baseline`): its
keys and types, and every number of every history run finite and in range (latencies in ms up to
:data:`MAX_MS`, counts up to :data:`MAX_COUNT`, amounts never negative). A file that fails is an
:class:`~pytest_aaco.jsonio.AacoFileError` naming the file, the JSON path and the fix."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pytest_aaco.jsonio import AacoFileError, JSONDict


def _require(path: Path, data: object, key: str, kind: type) -> Any:
    if not isinstance(data, dict) or not isinstance(data.get(key), kind):
        raise AacoFileError(f"{path}: baseline key {key!r} missing or not a {kind.__name__};"
                            " re-record it with --aaco-save-baseline --aaco-baseline-reset")
    return data[key]


def _check_reference(path: Path, run: JSONDict, rounds: int) -> None:
    """A run's ``reference`` record, when present, has an ``id`` and one log-mean and one normalized
    value per round; AacoFileError naming the file otherwise."""
    ref = run.get("reference")
    if ref is None:
        return
    ok = isinstance(ref, dict) and isinstance(ref.get("id"), str) and all(  # the numbers: _check_numbers
        isinstance(ref.get(key), list) and len(ref[key]) == rounds for key in ("log_means", "normalized"))
    if not ok:
        raise AacoFileError(f"{path}: a history run's 'reference' needs 'id' and one 'log_means' and"
                            " 'normalized' value per round; re-record it with --aaco-save-baseline"
                            " --aaco-baseline-reset")


#: largest latency (ms) a baseline may hold: about 11.6 days; anything above is a damaged file
MAX_MS = 1e9
#: largest |log-mean| (mean ln ms; ln(MAX_MS) is 20.7) and |normalized| log difference
MAX_LOG = 50.0
#: largest count (iterations, rounds) and largest free-form number (telemetry, cold start, profile)
MAX_COUNT = 10**12
MAX_NUMBER = 1e15
#: keys whose values (or whose sub-values) are amounts that cannot be negative
_RE_RECORD = " re-record it with --aaco-save-baseline --aaco-baseline-reset (the save moves the file aside)"


def _bad(path: Path, where: str, value: object, what: str) -> AacoFileError:
    return AacoFileError(f"{path}: {where} is {value!r}, {what};{_RE_RECORD}")


def _number(path: Path, where: str, value: object, low: float = -MAX_NUMBER, high: float = MAX_NUMBER,
            integer: bool = False) -> None:
    """*value* (at JSON path *where*) is an int or float (never a bool), finite and in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise _bad(path, where, value, "expected an integer" if integer else "expected a number")
    if isinstance(value, int) and abs(value) > MAX_COUNT * MAX_NUMBER:  # 10**400: no float, math.isfinite overflows
        raise _bad(path, where, f"an integer of {len(str(abs(value)))} digits", f"expected at most {high:g}")
    if not math.isfinite(value):
        raise _bad(path, where, value, "expected a finite number")
    if value < low:
        raise _bad(path, where, value, "expected a non-negative number" if low == 0 else f"expected at least {low:g}")
    if value > high:
        raise _bad(path, where, value, f"expected at most {high:g}")


#: keys with these suffixes hold amounts (ms, MB, s, bytes, per cent), never negative ...
_UNIT_SUFFIXES = ("_ms", "_mb", "_s", "_bytes", "_pct", "_percent")
#: ... unless they are changes: a growth or a delta is negative when the amount shrank (``rss_growth_mb``)
_SIGNED_WORDS = ("growth", "delta", "change", "drift", "offset")


def _free_numbers(path: Path, where: str, value: object, unit: bool = False) -> None:
    """Walk a free-form section (telemetry, cold start, profile): every number finite and at most
    :data:`MAX_NUMBER` in size; non-negative under a key with a unit suffix (``rss_mb``: {``max``: ...}),
    except a growth or a delta (``rss_growth_mb``: {``max``: -0.09} when memory shrank)."""
    if isinstance(value, dict):
        for key, sub in value.items():
            name = str(key)
            signed = any(word in name for word in _SIGNED_WORDS)
            _free_numbers(path, f"{where}.{key}", sub, not signed and (unit or name.endswith(_UNIT_SUFFIXES)))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            _free_numbers(path, f"{where}[{index}]", sub, unit)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _number(path, where, value, 0 if unit else -MAX_NUMBER)


#: the numbers of a round summary and of a run summary: (low, high, integer)
_ROUND_FIELDS = {"log_mean": (-MAX_LOG, MAX_LOG, False), "mean_ms": (0, MAX_MS, False), "p50_ms": (0, MAX_MS, False),
                 "p99_ms": (0, MAX_MS, False), "min_ms": (0, MAX_MS, False), "n": (0, MAX_COUNT, True)}
_SUMMARY_COUNTS = ("warmup_iterations", "measure_iterations", "rounds")


def _check_numbers(path: Path, where: str, run: dict[str, Any]) -> None:
    """Every number of one history run (at JSON path *where*): type, finite, in range."""
    for index, rnd in enumerate(run["rounds"]):
        if "log_mean" not in rnd:
            raise AacoFileError(f"{path}: a history run has no round summaries with 'log_mean'"
                                f" ({where}.rounds[{index}]);{_RE_RECORD}")
        for key, (low, high, integer) in _ROUND_FIELDS.items():
            if key in rnd:
                _number(path, f"{where}.rounds[{index}].{key}", rnd.get(key), low, high, integer)
    if "mean_ms" not in run["summary"]:  # the verdict reports the baseline mean
        raise AacoFileError(f"{path}: a history run has no summary 'mean_ms' ({where}.summary);{_RE_RECORD}")
    for key, value in run["summary"].items():
        at = f"{where}.summary.{key}"
        if key in _SUMMARY_COUNTS:
            _number(path, at, value, 0, MAX_COUNT, integer=True)
        elif key.endswith("_ms") or key == "throughput":
            _number(path, at, value, 0, MAX_MS if key.endswith("_ms") else MAX_NUMBER)
        else:
            _free_numbers(path, at, value)
    ref = run.get("reference")
    if isinstance(ref, dict):
        for key in ("log_means", "normalized"):
            for index, value in enumerate(ref[key]):
                _number(path, f"{where}.reference.{key}[{index}]", value, -MAX_LOG, MAX_LOG)
        for key, (low, high, integer) in {"mean_ms": (0, MAX_MS, False), "iterations": (0, MAX_COUNT, True),
                                          "share": (0, 1, False), "min_ms": (0, MAX_MS, False)}.items():
            if key in ref:
                _number(path, f"{where}.reference.{key}", ref[key], low, high, integer)
    for owner, at in ((run, where), (ref if isinstance(ref, dict) else {}, f"{where}.reference")):
        _check_device_time(path, f"{at}.device_time", owner.get("device_time"))
    for key, value in run.items():
        if key not in ("rounds", "summary", "reference"):
            _free_numbers(path, f"{where}.{key}", value)


def _check_device_time(path: Path, where: str, dev: object) -> None:
    """An optional ``device_time`` record (a run's, or its reference's): a dict whose ``log_means``
    is a list of ln ms within :data:`MAX_LOG`, its other numbers finite (non-negative under ``*_ms``/``*_s``)."""
    if dev is None:
        return
    if not isinstance(dev, dict) or not isinstance(dev.get("log_means"), list):
        raise _bad(path, where, dev, "expected a device-time record with a 'log_means' list")
    for key in ("log_means", "busy_log_means"):
        for index, value in enumerate(dev.get(key) or []):
            _number(path, f"{where}.{key}[{index}]", value, -MAX_LOG, MAX_LOG)
    _free_numbers(path, where, {k: v for k, v in dev.items() if k not in ("log_means", "busy_log_means")})


def _check_latencies(path: Path, where: str, rounds: list[list[object]]) -> None:
    for index, values in enumerate(rounds):
        for position, value in enumerate(values):
            _number(path, f"{where}[{index}][{position}]", value, 0, MAX_MS)



def _check_history(path: Path, history: list[Any], where: str = "history") -> None:
    for number, run in enumerate(history):
        rounds = _require(path, run, "rounds", list)
        if not rounds or not all(isinstance(r, dict) for r in rounds):
            raise AacoFileError(f"{path}: a history run has no round summaries with 'log_mean';"
                                " re-record it with --aaco-save-baseline --aaco-baseline-reset")
        _check_reference(path, run, len(rounds))
        _require(path, run, "summary", dict)
        _check_numbers(path, f"{where}[{number}]", run)


def _latencies(path: Path, data: JSONDict, where: str = "") -> list[list[float]]:
    raw = data.get("latest_latencies_ms") or []
    if not isinstance(raw, list) or not all(isinstance(r, list) for r in raw):
        raise AacoFileError(f"{path}: baseline key 'latest_latencies_ms' is not a list of rounds;"
                            " re-record it with --aaco-save-baseline --aaco-baseline-reset")
    _check_latencies(path, f"{where}latest_latencies_ms", raw)
    return raw


def _check_folder(path: Path) -> None:
    """Raise :class:`AacoFileError` when a file stands where a folder of *path* should be."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise AacoFileError(f"{parent} is a file, but pytest-aaco keeps baselines in a folder there;"
                                    " move the file away or point --aaco-baseline-dir elsewhere")
            return
