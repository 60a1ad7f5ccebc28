"""The option table: every ``--aaco-*`` option, its help, its default and its value parser, once.

This module imports no pytest, so the plugin module registers the table with pytest
(:func:`add_options`, in the ``--help`` groups of :data:`HELP_GROUPS`) without loading anything else;
:mod:`pytest_aaco.config` parses it into :class:`~pytest_aaco.config.AacoConfig`; the gate's and the measurement's
settings (:class:`~pytest_aaco.options.GateSettings`, :class:`~pytest_aaco.measure.inference.MeasureSettings`)
and the ``aaco`` command take their defaults from :func:`default`, so a default is written once.

Value parsers raise ValueError saying what is wrong with the value; each caller adds where the
value came from (an option, a registry key, a marker, a command argument) and its own error type.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict

if TYPE_CHECKING:
    import pytest

IOBINDING_MODES = ("auto", "none", "inputs", "all")
PLACEMENT_MODES = ("check", "warn", "off")
#: ``--aaco-compare-unchanged``: skip an item unchanged at REF before its session is built, or measure it
COMPARE_UNCHANGED_MODES = ("skip", "measure")
DEVICE_TIME_MODES = ("auto", "on", "off")
GRAPH_MODES = ("auto", "on", "off")
PROFILE_MODES = ("off", "on", "failing")
#: reference workloads (:mod:`pytest_aaco.measure.reference_workload` builds them): generated ones, then model-zoo
#: architectures shipped inside the onnx package; ``none`` turns the reference off
REFERENCE_GENERATED = ("mix", "mix-small")
REFERENCE_ZOO = ("squeezenet", "inception_v1", "shufflenet", "resnet50", "densenet121")
NO_REFERENCE = "none"
#: ``--aaco-ort-log-level`` names -> ORT severities (``SessionOptions.log_severity_level``)
ORT_LOG_LEVELS = {"verbose": 0, "info": 1, "warning": 2, "error": 3, "fatal": 4}
#: the ``Parser.addini`` types the options use
IniType = Literal["string", "bool", "linelist"]


# ---------------------------------------------------------------- value parsers (ValueError)


#: upper bounds of the measurement counts (warmup iterations, measured iterations per round, rounds):
#: every measured iteration keeps its latency (8 bytes in memory, about 20 in the session bundle), so
#: ``iterations: 10**12`` asked for 7.28 TiB; adaptive iterations stop at 1000 per round
#: (:data:`pytest_aaco.measure.rounds.MAX_ITERATIONS`) and ``auto`` rounds are 10 or 30
MAX_WARMUP, MAX_ITERATIONS, MAX_ROUNDS = 100_000, 100_000, 1_000
#: the bound of each count by its key, for messages naming both
COUNT_BOUNDS = {"warmup": MAX_WARMUP, "iterations": MAX_ITERATIONS, "rounds": MAX_ROUNDS}
#: the most latencies one measurement keeps (rounds x iterations): 80 MB in memory; each bound alone
#: still allowed 10**8 (0.8 GB), and ``auto`` iterations stay below it (1000 x 1000 at most)
MAX_LATENCIES = 10_000_000


def latency_count(rounds: int, iterations: int | None) -> None:
    """ValueError when *rounds* x *iterations* (None: adaptive, at most 1000 per round) exceeds
    :data:`MAX_LATENCIES`, naming both counts and what to lower."""
    if iterations is not None and rounds * iterations > MAX_LATENCIES:
        raise ValueError(f"{rounds:,} rounds x {iterations:,} iterations keep {rounds * iterations:,} latencies,"
                         f" at most {MAX_LATENCIES:,} (8 bytes each); lower rounds or iterations (the"
                         " marker's, the registry's, --aaco-rounds or --aaco-iterations)")


def int_at_least(value: object, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer >= *minimum* (``7``, ``"7"``) and, when given, <= *maximum*; ValueError otherwise.
    Text of more than 30 digits is refused before it is converted."""
    text = str(value).strip()
    if len(text) > 30:
        raise ValueError(f"expected an integer, got {text[:30]}... ({len(text)} characters)")
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"expected an integer, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ValueError(f"must be at most {maximum:,} (each measured iteration keeps its latency), got {number:,}")
    return number


def count_setting(key: str, value: object, minimum: int = 1) -> int:
    """``warmup``, ``iterations`` or ``rounds`` (*key*) as an integer within *minimum* and its
    bound (:data:`COUNT_BOUNDS`); ValueError naming the bound otherwise."""
    return int_at_least(value, minimum, COUNT_BOUNDS[key])


#: measured rounds per item for ``--aaco-rounds auto``: on the CPU, and on device EPs, where one
#: 0.35 s round of ResNet-50 on an H100 differed from the next by 11% and 10 rounds caught a +9%
#: slowdown 1 time in 8 against a stored baseline, 30 rounds a +11% one 5 times in 5 (docs/gpu.md)
CPU_ROUNDS, DEVICE_ROUNDS = 10, 30


def auto_rounds(is_gpu: bool) -> int:
    """Rounds for ``--aaco-rounds auto``: :data:`DEVICE_ROUNDS` on device EPs, else :data:`CPU_ROUNDS`."""
    return DEVICE_ROUNDS if is_gpu else CPU_ROUNDS


def int_or_auto(value: object, minimum: int = 0, maximum: int | None = None) -> int | None:
    """``auto`` (None: the setting is chosen per item, e.g. :func:`auto_rounds`) or an integer >=
    *minimum*; ValueError otherwise."""
    if str(value).strip().lower() == "auto":
        return None
    try:
        return int_at_least(value, minimum, maximum)
    except ValueError as exc:
        raise ValueError(f"{exc} (or auto)") from None


def fraction_below(value: object, upper: float = 1.0) -> float:
    """A fraction in (0, *upper*): ``0.05`` or ``5%``; ValueError otherwise."""
    text = str(value).strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"expected a fraction like 0.05 or 5%, got {value!r}") from None
    if not 0 < number < upper:
        raise ValueError(f"must be between 0 and {upper:g} (exclusive), got {text}")
    return number


def fraction_or_zero(value: object, upper: float = 1.0) -> float:
    """``0`` (off) or a fraction in (0, *upper*)."""
    if str(value).strip().rstrip("%") in ("0", "0.0"):
        return 0.0
    return fraction_below(value, upper)


def iterations(value: object) -> int | None:
    """``auto`` (None: adapt to the model's latency) or an integer from 2 to :data:`MAX_ITERATIONS`."""
    if str(value).strip().lower() == "auto":
        return None
    return int_at_least(value, 2, MAX_ITERATIONS)


def amount(value: object, unit: str, example: str, positive: bool) -> float:
    """A number with an optional *unit* suffix (``50`` or ``50mb``): positive, or else not negative."""
    text = str(value).strip().lower().removesuffix(unit)
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"expected {example}, got {value!r}") from None
    if positive and number <= 0:
        raise ValueError(f"must be positive, got {value!r}")
    if number < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return number


#: ``--aaco-item-timeout auto``: the limit is this factor times the first run's time times the runs planned,
#: within these bounds (s); until the first run has finished, the upper bound
ITEM_TIMEOUT_FACTOR, ITEM_TIMEOUT_FLOOR_S, ITEM_TIMEOUT_CAP_S = 10.0, 300.0, 7200.0


def seconds_or_off(value: object, off: float | None, example: str) -> float | None:
    """A positive number of seconds (``600``, ``600s``), or ``off`` (also ``0``, ``0s``): then *off*, the
    caller's "no limit" (``math.inf``, None). ValueError ``expected <example>, got ...`` or ``must be
    positive, got ...`` otherwise."""
    if str(value).strip().lower() in ("off", "0", "0s"):
        return off
    return amount(value, "s", example, positive=True)


def item_timeout(value: object) -> float | None:
    """``--aaco-item-timeout``: ``auto`` (None: scaled to the model, see :data:`ITEM_TIMEOUT_FACTOR`), ``off``
    (or 0: ``math.inf``, no limit) or a positive number of seconds (``600``, ``600s``); ValueError otherwise."""
    if str(value).strip().lower() == "auto":
        return None
    return seconds_or_off(value, math.inf, "a number of seconds like 600, auto or off")


def lock_timeout(value: object) -> float | None:
    """``--aaco-lock-timeout``: ``off`` (None: wait as long as it takes) or a positive number of seconds."""
    return seconds_or_off(value, None, "a number of seconds like 3600, or off")


def find_interpreter(value: str) -> str:
    """The path of the interpreter named by ``--aaco-compare-python``: absolute, symlinks kept.

    *value* is a path (``.venv-old/bin/python``, ``~/envs/ort117/bin/python``) or a command on
    ``PATH`` (``python3.10``). Symlinks are not resolved: a virtualenv's ``bin/python`` is a link
    to the base interpreter, and only its own path selects the virtualenv's packages. Raises
    ValueError saying what is wrong (empty, not found, a folder, not executable).
    """
    text = str(value).strip()
    if not text:
        raise ValueError("expected the path of a Python interpreter, e.g. .venv-old/bin/python")
    text = os.path.expanduser(text)
    if os.sep not in text and not Path(text).exists():
        found = shutil.which(text)
        if found is None:
            raise ValueError(f"no {text!r} on PATH; give the path of a Python interpreter, e.g. .venv-old/bin/python")
        text = found
    path = os.path.abspath(text)
    if not os.path.exists(path):
        raise ValueError(f"no such file {path}; give the path of a Python interpreter, e.g. .venv-old/bin/python")
    if os.path.isdir(path):
        inside = os.path.join(path, "bin", "python")
        raise ValueError(f"{path} is a folder; give the interpreter inside it, e.g. {inside}")
    if not os.access(path, os.X_OK):
        raise ValueError(f"{path} is not executable; give the path of a Python interpreter")
    return path


def interpreter_or_none(value: object) -> str | None:
    """``--aaco-compare-python``: None when empty, else :func:`find_interpreter`."""
    return find_interpreter(str(value)) if str(value or "").strip() else None


def path_text(value: object, what: str) -> str:
    """A path setting as given, stripped; ValueError when it is empty or only whitespace.

    An empty path is never taken to mean the current folder: ``--aaco-baseline-dir "$UNSET"``
    would otherwise read no baselines and save them into the project root. *what* is the fix
    (``a folder such as baselines``).
    """
    text = "" if value is None else str(value).strip()
    if not text:
        raise ValueError(f"empty value; give {what}")
    return text


def revision_or_none(value: object) -> str | None:
    """``--aaco-compare``: a git revision (``origin/main``, a SHA, ``HEAD~1``), None when empty.
    Whether it exists is checked against the repository when the session starts."""
    text = str(value or "").strip()
    if text.startswith("-"):
        raise ValueError(f"expected a git revision such as origin/main, got {text!r}")
    return text or None


def cores(value: object) -> float | None:
    """``off`` (None) or a non-negative number of CPU cores (``0.1``)."""
    if str(value).strip().lower() == "off":
        return None
    return amount(value, "cores", "a number of cores like 0.1, or off", positive=False)


def seconds_from_ms(value: object) -> float:
    """A positive duration in ms (``100`` or ``100ms``); returned in seconds."""
    return amount(value, "ms", "milliseconds like 100", positive=True) / 1000.0


def megabytes(value: object) -> float:
    """A non-negative size in MB (``50`` or ``50MB``)."""
    return amount(value, "mb", "megabytes like 50", positive=False)


def runner_key(value: object) -> str | None:
    """``--aaco-baseline-runner``: a runner key, the name of one folder under the baseline folder (as the
    no-baseline line prints it, e.g. ``intel-xeon-platinum-8370c-cpu-2-80ghz-4c-1a2b3c4d``), None when empty.
    ValueError for a path (a separator, ``.`` or ``..``)."""
    text = str(value or "").strip()
    if not text:
        return None
    if "/" in text or "\\" in text or text in (".", ".."):
        raise ValueError(f"expected a runner key (one folder name under the baseline folder), got {text!r}")
    return text


def shard_or_none(value: object) -> tuple[int, int] | None:
    """``--aaco-shard``: ``K/N`` (this run is shard K of N, 1 <= K <= N) as ``(K, N)``, None when empty."""
    text = str(value or "").strip()
    if not text:
        return None
    match = re.fullmatch(r"(\d+)\s*/\s*(\d+)", text)
    if match is None:
        raise ValueError(f"expected K/N such as 1/3 (shard K of N), got {text!r}")
    k, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"expected K/N with 1 <= K <= N, got {text!r}")
    return k, n


def on_off(value: object) -> bool:
    """``on``/``off`` (also true/false, yes/no, 1/0)."""
    text = str(value).strip().lower()
    if text in ("on", "true", "yes", "1"):
        return True
    if text in ("off", "false", "no", "0"):
        return False
    raise ValueError(f"expected on or off, got {value!r}")


def executable(value: object, default_name: str) -> str | None:
    """``off`` (None), ``on`` (*default_name*, looked up on PATH when used) or the path of an executable."""
    text = str(value).strip()
    if text.lower() in ("off", "false", "no", "0", ""):
        return None
    if text.lower() in ("on", "true", "yes", "1"):
        return default_name
    return text


def choice(value: object, choices: tuple[str, ...]) -> str:
    """One of *choices* (case-insensitive)."""
    text = str(value).strip().lower()
    if text not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
    return text


_SCALAR = re.compile(r"^-?\d+$")


def ort_log_level(value: object) -> int:
    """An ORT severity (0 verbose .. 4 fatal) from its name in :data:`ORT_LOG_LEVELS`."""
    return ORT_LOG_LEVELS[choice(value, tuple(ORT_LOG_LEVELS))]


def reference_name(value: object) -> str | None:
    """A reference workload name (lower case), or None for ``none``; ValueError listing the valid ones."""
    name = choice(value, REFERENCE_GENERATED + REFERENCE_ZOO + (NO_REFERENCE,))
    return None if name == NO_REFERENCE else name


#: ``--aaco-device-id all``: every GPU the EP can use (counted when the options are read)
ALL_DEVICES = "all"


def device_list(value: object) -> tuple[int, ...] | None:
    """``--aaco-device-id``: one id (``0``), a list (``0,1,2,3``; an id may repeat, ``0,0`` puts two
    pytest-xdist workers on one GPU) or ``all`` (None: counted later). ValueError otherwise."""
    text = str(value).strip().lower()
    if text == ALL_DEVICES:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not text or not all(_SCALAR.match(p) and int(p) >= 0 for p in parts):
        raise ValueError(f"expected a device id, a comma-separated list of them (0,1,2,3) or all, got {value!r}")
    return tuple(int(p) for p in parts)


def xdist_worker_index(worker_id: object) -> int | None:
    """The number of a pytest-xdist worker id (``gw3`` -> 3); None for anything else (no worker)."""
    text = str(worker_id or "")
    return int(text[2:]) if re.fullmatch(r"gw\d+", text) else None


def device_for_worker(devices: tuple[int, ...], worker: int | None) -> int:
    """The device a process measures on: worker *k* of pytest-xdist takes ``devices[k mod N]``; a
    process that is no worker (*worker* None) takes the first. ValueError for an empty list."""
    if not devices:
        raise ValueError("no device id given")
    return devices[0] if worker is None else devices[worker % len(devices)]
def compile_cache_setting(value: object) -> str:
    """``--aaco-compile-cache``: ``auto``, ``off`` (lower case) or a folder (kept as given; made when used)."""
    text = str(value).strip()
    if not text:
        raise ValueError("expected auto, off or a folder")
    return text.lower() if text.lower() in ("auto", "off") else text


def ep_libraries(values: object) -> tuple[tuple[str, str], ...]:
    """``--aaco-ep-library`` values as ``(registration name, path)`` pairs: ``NAME=PATH``, or ``PATH``
    alone (the name is the file's stem, e.g. ``onnxruntime_ep_amdgpu``). ValueError for an empty part."""
    items = [values] if isinstance(values, str) else list(values or [])  # type: ignore[call-overload]
    found: list[tuple[str, str]] = []
    for item in items:
        for part in (p.strip() for p in str(item).split(",")):
            if not part:
                continue
            name, sep, path = part.partition("=")
            if not sep:
                name, path = "", part
            path = path.strip()
            if not path:
                raise ValueError(f"expected PATH or NAME=PATH of an EP library, got {part!r}")
            if not name.strip():
                stem = path.replace("\\", "/").rsplit("/", 1)[-1]
                name = stem.split(".", 1)[0].removeprefix("lib") or stem
            found.append((name.strip(), path))
    return tuple(found)


def option_value(text: str) -> int | str:
    """Provider option values keep ORT's string form; ints stay ints so ``device_id=1`` works too."""
    return int(text) if _SCALAR.match(text) else text


def key_values(values: list[str]) -> JSONDict:
    """``KEY=VALUE`` pairs (repeatable, comma-separated); ValueError for a part without ``=``."""
    result: JSONDict = {}
    for item in values:
        for part in (p for p in item.split(",") if p.strip()):
            key, sep, val = part.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"expected KEY=VALUE (e.g. cudnn_conv_algo_search=EXHAUSTIVE), got {part!r}")
            result[key.strip()] = option_value(val.strip())
    return result


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class OptionDef:
    """One ``--aaco-*`` option and its ini twin.

    *default* is the text a user would type (``"5%"``), or False for a flag; *parse* turns a
    raw value into the typed setting (ValueError when it is wrong); None keeps the raw value.
    """

    name: str  # without the leading --aaco-
    help: str
    default: str | bool
    metavar: str | None = None  # None: a flag
    ini_type: IniType = "string"
    multiple: bool = False
    parse: Callable[[object], object] | None = None
    #: for an option naming a path: what to give instead of an empty value (``a folder such as
    #: baselines``); an empty or blank value given on the command line or in the ini file is refused
    path: str | None = None

    @property
    def flag(self) -> str:
        return f"--aaco-{self.name}"

    @property
    def dest(self) -> str:
        return "aaco_" + self.name.replace("-", "_")

    def value(self, raw: object) -> Any:
        """*raw* parsed into the typed setting; ValueError when it is wrong."""
        return raw if self.parse is None else self.parse(raw)


OPTIONS: tuple[OptionDef, ...] = (
    OptionDef("provider", f"execution provider(s): {', '.join(ep.short for ep in eps.ALL[:3])}, ... or full EP names;"
              " a|b|c: the first available", "cpu", "EP", "linelist", True),
    OptionDef("models", "model registry YAML (none: the registry shipped with pytest-aaco)", "", "PATH",
              path="the path of a model registry YAML such as models.yaml"),
    OptionDef("baseline-dir", "folder of JSON baselines", "baselines", "DIR", path="a folder such as baselines"),
    OptionDef("shard", "run only shard K of N of the benchmark items (by a hash of the node id)", "", "K/N",
              parse=shard_or_none),
    OptionDef("smoke", "run each model once and check its outputs are finite: no measurement, gate or baseline",
              False, ini_type="bool"),
    OptionDef("save-baseline", "append this run to each item's baseline history", False, ini_type="bool"),
    OptionDef("baseline-reset", "with --aaco-save-baseline: start each history again", False, ini_type="bool"),
    OptionDef("history", "baseline runs kept per item", "30", "N", parse=partial(int_at_least, minimum=1)),
    OptionDef("min-history", "runs of history needed before the prediction-interval test is used", "5", "N",
              parse=partial(int_at_least, minimum=3)),
    OptionDef("run-noise", "run-to-run sd assumed while history is shorter than --aaco-min-history (0: rounds only)",
              "1%", "FRACTION", parse=partial(fraction_or_zero, upper=0.5)),
    OptionDef("warmup", "warmup iterations before measuring", "10", "N",
              parse=partial(int_at_least, minimum=1, maximum=MAX_WARMUP)),
    OptionDef("iterations", "iterations per round, or auto to adapt to the model's latency", "auto", "N",
              parse=iterations),
    OptionDef("rounds", "measured rounds per item (auto: 10 on the CPU, 30 on device EPs)", "auto", "K|auto",
              parse=partial(int_or_auto, minimum=2, maximum=MAX_ROUNDS)),
    OptionDef("item-timeout", "seconds an item's measurement may take before it is stopped and fails (auto: scaled)",
              "auto", "S|auto|off", parse=item_timeout),
    OptionDef("threshold", "practical regression threshold delta (fraction or %)", "5%", "FRACTION",
              parse=fraction_below),
    OptionDef("device-threshold", "practical threshold of device time (kernel time per run; fraction or %)",
              "1%", "FRACTION", parse=fraction_below),
    OptionDef("fdr", "session-wide false discovery rate across gated items (LOND)", "0.05", "Q",
              parse=partial(fraction_below, upper=0.5)),
    OptionDef("confirm", "re-measure a suspected regression with a fresh session before failing", "on", "on|off",
              parse=on_off),
    OptionDef("strict-inconclusive", "fail items whose verdict is inconclusive", False, ini_type="bool"),
    OptionDef("fail-blind", "fail inconclusive stored-baseline items whose detectable effect exceeds the threshold",
              False, ini_type="bool"),
    OptionDef("require-baseline", "fail items that have no stored baseline for this runner (a CI gate that must"
              " not pass unjudged)", False, ini_type="bool"),
    OptionDef("baseline-runner", "gate against another runner's history (KEY: a folder under the baseline folder)",
              "", "KEY",
              parse=runner_key),
    OptionDef("fail-on-improvement", "fail items that got significantly faster (stale baseline)", False,
              ini_type="bool"),
    OptionDef("gate-p99", "also gate p99 latency (bootstrap over rounds)", False, ini_type="bool"),
    OptionDef("device-id", "GPU id(s) for the EP: an id, a list (0,1,2,3: one per pytest-xdist worker) or all",
              "0", "ID[,ID...]|all", parse=device_list),
    OptionDef("strict-provider", "fail, instead of skip, when a requested EP is unavailable", False,
              ini_type="bool"),
    OptionDef("provider-option", "provider option KEY=VALUE for every requested EP (repeatable)", "",
              "KEY=VALUE", "linelist", True),
    OptionDef("iobinding", "input/output binding: auto, none (host arrays, copies timed), inputs, all",
              "auto", "MODE", parse=partial(choice, choices=IOBINDING_MODES)),
    OptionDef("device-time", "kernel time per run from the vendor's tracer, gated beside wall time: auto, on, off",
              "auto", "MODE", parse=partial(choice, choices=DEVICE_TIME_MODES)),
    OptionDef("graph", "graph replay on device EPs (needs --aaco-iobinding=all): auto (off), on, off",
              "auto", "MODE", parse=partial(choice, choices=GRAPH_MODES)),
    OptionDef("placement", "compute fallen to the CPU on device EPs: check (fail), warn, off", "check", "MODE",
              parse=partial(choice, choices=PLACEMENT_MODES)),
    OptionDef("intra-op-threads", "ORT intra-op threads (0: ORT's default)", "0", "N",
              parse=partial(int_at_least, minimum=0)),
    OptionDef("ort-log-level", "ONNX Runtime log level: verbose, info, warning, error, fatal", "error", "LEVEL",
              parse=ort_log_level),
    OptionDef("max-contention", "cores other processes may keep busy before a regression is withheld (off: never)",
              "0.1", "CORES", parse=cores),
    OptionDef("lock-timeout", "seconds an item waits for the device lock before it fails (off: no limit)", "3600",
              "S|off", parse=lock_timeout),
    OptionDef("sample-interval", "telemetry sampling period in ms", "100", "MS", parse=seconds_from_ms),
    OptionDef("reference", "workload timed beside each round: mix, mix-small, a model-zoo name (resnet50, ...) or none",
              "mix", "NAME", parse=reference_name),
    OptionDef("memory-threshold", "own RSS/device-memory growth that counts as a memory regression", "10%", "FRACTION",
              parse=partial(fraction_below, upper=10.0)),
    OptionDef("memory-slack", "growth in MB below which memory is never a regression", "50", "MB", parse=megabytes),
    OptionDef("profile", "one extra per-operator profiled pass per item: on, failing (failed items only), off",
              "off", "MODE",
              parse=partial(choice, choices=PROFILE_MODES)),
    OptionDef("cold-start", "fresh sessions per item timed for cold start (0: off; auto: 5 side by side, else off)",
              "auto", "N|auto", parse=int_or_auto),
    OptionDef("cold-start-threshold", "practical threshold of a cold-start regression (fraction or %)", "20%",
              "FRACTION", parse=partial(fraction_below, upper=10.0)),
    OptionDef("cupti", "trace GPU kernels with CUPTI after the measured rounds (pip install pytest-aaco[cupti])",
              "off", "on|off", parse=on_off),
    OptionDef("rocprof", "run the profile pass under rocprofv3: on (from PATH), off, or its path", "off", "EXE",
              parse=partial(executable, default_name="rocprofv3"),
              path="on, off or the path of the rocprofv3 executable"),
    OptionDef("session-dir", "where session bundles are written", ".aaco/sessions", "DIR",
              path="a folder such as .aaco/sessions"),
    OptionDef("no-bundle", "do not write a session bundle", False, ini_type="bool"),
    OptionDef("junit", "write a performance JUnit XML file", "", "PATH", path="a file such as perf-junit.xml"),
    OptionDef("html", "write a self-contained HTML report", "", "PATH", path="a file such as perf.html"),
    OptionDef("compare", "gate each item side by side against this git revision (origin/main, a SHA, HEAD~1)", "",
              "REF", parse=revision_or_none),
    OptionDef("compare-unchanged", "with --aaco-compare, an item unchanged at REF: skip it, or measure it anyway",
              "skip", "skip|measure", parse=partial(choice, choices=COMPARE_UNCHANGED_MODES)),
    OptionDef("compare-python", "run the baseline side in this Python interpreter (another onnxruntime)", "", "PATH",
              parse=interpreter_or_none, path="the path of a Python interpreter such as .venv-old/bin/python"),
    OptionDef("compile-cache", "compile cache of MIGraphX, TensorRT, OpenVINO: auto (user cache folder), off, a folder",
              "auto", "DIR|auto|off",
              parse=compile_cache_setting, path="auto, off or a folder such as /var/cache/aaco-compile"),
    OptionDef("ep-library", "plugin EP library to register and run on (PATH or NAME=PATH; repeatable)",
              "", "[NAME=]PATH", "linelist", True, parse=ep_libraries),
    OptionDef("compare-budget", "seconds per item for more cycles while a side-by-side verdict is inconclusive",
              "60", "S", parse=partial(amount, unit="s", example="a number of seconds like 60",
                                                     positive=True)),
    OptionDef("compare-processes", "with --aaco-compare-python: pairs of fresh worker processes at the first look",
              "3", "N", parse=partial(int_at_least, minimum=1, maximum=20)),
)

BY_NAME = {opt.name: opt for opt in OPTIONS}

#: ``pytest --help``'s groups, in the order it shows them: (pytest's group name, title, options in
#: the order shown). Everyday options first, then the finer settings of measuring and judging, the
#: reports, side by side, and what only device execution providers (GPUs) use.
HELP_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("aaco", "pytest-aaco: ONNX Runtime performance gate",
     ("provider", "models", "shard", "baseline-dir", "save-baseline", "baseline-reset", "smoke", "threshold", "fdr",
      "strict-provider", "provider-option", "warmup", "rounds", "iterations", "item-timeout")),
    ("aaco-verdict", "pytest-aaco: measuring and judging",
     ("history", "min-history", "run-noise", "confirm", "strict-inconclusive", "fail-blind", "require-baseline",
      "baseline-runner", "fail-on-improvement", "gate-p99", "reference", "max-contention", "lock-timeout",
      "memory-threshold", "memory-slack", "cold-start",
      "cold-start-threshold", "profile", "intra-op-threads", "sample-interval", "ort-log-level")),
    ("aaco-reports", "pytest-aaco: reports", ("session-dir", "no-bundle", "junit", "html")),
    ("aaco-compare", "pytest-aaco: side by side (against a git revision or another Python environment)",
     ("compare", "compare-unchanged", "compare-python", "compare-budget", "compare-processes")),
    ("aaco-gpu", "pytest-aaco: GPUs and other device execution providers",
     ("device-id", "device-threshold", "device-time", "iobinding", "graph", "placement", "compile-cache",
      "ep-library", "cupti", "rocprof")),
)


#: the documentation site (pyproject's ``[project.urls] Documentation``): the options reference is
#: ``DOCS_URL + "options/"``, generated from this table (``docs/options.md``, tests/test_docs.py)
DOCS_URL = "https://pytest-aaco.readthedocs.io/en/latest/"

#: the options ``pytest --help`` shows (the plugin's share of it stays within
#: :data:`HELP_LINE_BUDGET` lines at 80 columns, tests/test_help_budget.py); every other option works
#: the same and is listed, with its ini twin, in the options reference the first group's title names
HELP_SHOWN = ("provider", "models", "baseline-dir", "save-baseline", "threshold", "compare", "compare-python",
              "smoke", "shard", "fail-blind", "strict-inconclusive", "html", "junit", "device-id", "device-time")
#: the most lines the plugin may add to ``COLUMNS=80 pytest --help`` (ini twins included)
HELP_LINE_BUDGET = 120
#: ``pytest --help`` starts an ini twin's help on its own line when ``name (type):`` is longer than this
#: (``_pytest.helpconfig.showhelp``, indent 24): such a twin gets no help text, so that it stays one line
INI_SPEC_ON_ONE_LINE = 21


def ini_help(opt: OptionDef) -> str:
    """The help of *opt*'s ini twin: ``ini twin of --aaco-x`` where it fits on the name's line, else
    nothing (the name says it; one line each keeps ``--help`` short)."""
    return f"ini twin of {opt.flag}" if len(f"{opt.dest} ({opt.ini_type}):") <= INI_SPEC_ON_ONE_LINE else ""


def default_text(opt: OptionDef) -> str:
    """The default as ``--help`` shows it: the text a user would type, ``off`` for a flag, ``none`` for empty."""
    if opt.default is False:
        return "off"
    return "none" if opt.default == "" else str(opt.default)


def ini_default(opt: OptionDef) -> str | bool | list[str | bool] | None:
    """The default ``Parser.addini`` is given for *opt*'s ini twin: a list for ``linelist``, None for a
    path option (unset, the table's default, told apart from set empty, which is refused)."""
    if opt.ini_type == "linelist":
        return [opt.default] if opt.default else []
    if opt.path is not None:
        return None
    return opt.default


def add_options(parser: pytest.Parser) -> None:
    """Register every option with pytest's *parser* (``pytest.Parser``), in the groups of
    :data:`HELP_GROUPS`, each with its ini twin ``aaco_*`` (:func:`ini_help`). ``--help`` shows the
    options of :data:`HELP_SHOWN`; the first group's title names the options reference for the rest."""
    import argparse

    for name, title, members in HELP_GROUPS:
        if name == HELP_GROUPS[0][0]:  # within 80 columns: the address without its scheme
            title = f"pytest-aaco (every option: {DOCS_URL.split('://', 1)[-1]}options/)"
        group = parser.getgroup(name, title)
        for opt in (BY_NAME[m] for m in members):
            # argparse %-formats option help ("5%" would crash --help)
            cli_help = (f"{opt.help} (default: {default_text(opt)})".replace("%", "%%") if opt.name in HELP_SHOWN
                        else argparse.SUPPRESS)
            if opt.metavar is None:
                group.addoption(opt.flag, action="store_true", default=None, dest=opt.dest, help=cli_help)
            else:
                group.addoption(opt.flag, action="append" if opt.multiple else "store", default=None,
                                dest=opt.dest, metavar=opt.metavar, help=cli_help)
            parser.addini(opt.dest, help=ini_help(opt), type=opt.ini_type, default=ini_default(opt))


def ini_set(getini: Callable[[str], object]) -> bool:
    """Whether any ini twin is set to something other than its default (*getini*: ``pytest.Config.getini``)."""
    return any(getini(opt.dest) != ini_default(opt) for opt in OPTIONS)


def option(name: str) -> OptionDef:
    """The table's entry for ``--aaco-<name>``; KeyError for a name not in the table."""
    return BY_NAME[name]


def default(name: str) -> Any:
    """The typed default of ``--aaco-<name>`` (``default("threshold") == 0.05``)."""
    opt = BY_NAME[name]
    return opt.value(opt.default)


def setting(name: str) -> Any:
    """A dataclass field for ``--aaco-<name>``: its default is the table's, and
    :meth:`pytest_aaco.config.AacoConfig.from_pytest_config` reads it through the table's parser."""
    return field(default=default(name), metadata={"option": name})


#: fresh sessions per item for the cold-start pass under ``--aaco-cold-start auto`` side by side
COLD_SESSIONS = 5


@dataclass(frozen=True)
class GateSettings:
    """Thresholds of the gate: fractions (0.05 = 5%) and MB; defaults from the option table."""

    threshold: float = setting("threshold")
    device_threshold: float = setting("device-threshold")
    min_history: int = setting("min-history")
    run_noise: float = setting("run-noise")
    strict_inconclusive: bool = setting("strict-inconclusive")
    fail_blind: bool = setting("fail-blind")
    require_baseline: bool = setting("require-baseline")
    fail_on_improvement: bool = setting("fail-on-improvement")
    gate_p99: bool = setting("gate-p99")
    memory_threshold: float = setting("memory-threshold")
    memory_slack_mb: float = setting("memory-slack")
