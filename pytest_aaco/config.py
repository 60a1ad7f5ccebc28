"""Command-line and ini options, parsed once into a frozen :class:`AacoConfig`.

Every option is ``--aaco-*`` in the ``aaco`` group and has an ini twin ``aaco_*`` so CI can set
it in ``pyproject.toml`` / ``pytest.ini``. The command line wins over the ini file, which wins
over the default. Each value goes through a small parser that raises ``pytest.UsageError``
naming the option and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from .providers import ProviderError, ProviderSpec, parse_provider_list

IOBINDING_MODES = ("auto", "none", "inputs", "all")
PLACEMENT_MODES = ("check", "warn", "off")
#: the ``Parser.addini`` types the options use
IniType = Literal["string", "bool", "linelist"]


# ---------------------------------------------------------------- numbers
# Shared with the aaco command and the model registry: ValueError says what is wrong with the
# value; each caller adds where the value came from and raises its own error type.


def int_at_least(value: Any, minimum: int) -> int:
    """An integer >= *minimum* (``7``, ``"7"``); ValueError otherwise."""
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"must be at least {minimum}, got {number}")
    return number


def fraction_below(value: Any, upper: float = 1.0) -> float:
    """A fraction in (0, *upper*): ``0.05`` or ``5%``; ValueError otherwise."""
    text = str(value).strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"expected a fraction like 0.05 or 5%, got {value!r}") from None
    if not 0 < number < upper:
        raise ValueError(f"must be between 0 and {upper:g} (exclusive), got {text}")
    return number


# ---------------------------------------------------------------- option parsers


@contextmanager
def _usage_error(option: str) -> Iterator[None]:
    """Report a ValueError about the value of *option* as ``pytest.UsageError`` naming the option."""
    try:
        yield
    except ValueError as exc:
        raise pytest.UsageError(f"{option}: {exc}") from None


def parse_positive_int(option: str, value: Any, minimum: int = 1) -> int:
    """An integer >= *minimum*; ``pytest.UsageError`` otherwise."""
    with _usage_error(option):
        return int_at_least(value, minimum)


def parse_iterations(option: str, value: Any) -> int | None:
    """``auto`` (None: adapt to the model's latency) or an integer >= 2."""
    if str(value).strip().lower() == "auto":
        return None
    return parse_positive_int(option, value, minimum=2)


def parse_fraction(option: str, value: Any, upper: float = 1.0) -> float:
    """A fraction in (0, *upper*): ``0.05`` or ``5%``; ``pytest.UsageError`` otherwise."""
    with _usage_error(option):
        return fraction_below(value, upper)


def parse_fraction_or_zero(option: str, value: Any, upper: float = 1.0) -> float:
    """``0`` (off) or a fraction in (0, *upper*); ``pytest.UsageError`` otherwise."""
    if str(value).strip().rstrip("%") in ("0", "0.0"):
        return 0.0
    return parse_fraction(option, value, upper)


def _amount(option: str, value: Any, unit: str, example: str, positive: bool) -> float:
    """A number with an optional *unit* suffix (``50`` or ``50mb``): positive, or else not negative."""
    text = str(value).strip().lower().removesuffix(unit)
    try:
        number = float(text)
    except ValueError:
        raise pytest.UsageError(f"{option}: expected {example}, got {value!r}") from None
    if positive and number <= 0:
        raise pytest.UsageError(f"{option}: must be positive, got {value!r}")
    if number < 0:
        raise pytest.UsageError(f"{option}: must not be negative, got {value!r}")
    return number


def parse_cores(option: str, value: Any) -> float | None:
    """``off`` (None) or a non-negative number of CPU cores (``0.1``)."""
    if str(value).strip().lower() == "off":
        return None
    return _amount(option, value, "cores", "a number of cores like 0.1, or off", positive=False)


def parse_milliseconds(option: str, value: Any) -> float:
    """A positive duration in ms (``100`` or ``100ms``); returned in seconds."""
    return _amount(option, value, "ms", "milliseconds like 100", positive=True) / 1000.0


def parse_megabytes(option: str, value: Any) -> float:
    """A non-negative size in MB (``50`` or ``50MB``)."""
    return _amount(option, value, "mb", "megabytes like 50", positive=False)


def parse_on_off(option: str, value: Any) -> bool:
    """``on``/``off`` (also true/false, yes/no, 1/0)."""
    text = str(value).strip().lower()
    if text in ("on", "true", "yes", "1"):
        return True
    if text in ("off", "false", "no", "0"):
        return False
    raise pytest.UsageError(f"{option}: expected on or off, got {value!r}")


def parse_choice(option: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise pytest.UsageError(f"{option}: expected one of {', '.join(choices)}, got {value!r}")
    return text


def parse_providers(option: str, values: list[str]) -> tuple[ProviderSpec, ...]:
    """Repeated or comma-separated EP names; an unknown one is a UsageError listing the valid names."""
    try:
        return tuple(parse_provider_list(values))
    except ProviderError as exc:
        raise pytest.UsageError(f"{option}: {exc}") from None


_SCALAR = re.compile(r"^-?\d+$")


def parse_option_value(text: str) -> Any:
    """Provider option values keep ORT's string form; ints stay ints so ``device_id=1`` works too."""
    return int(text) if _SCALAR.match(text) else text


def parse_provider_options(option: str, values: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (repeatable); a missing ``=`` is a UsageError."""
    result: dict[str, Any] = {}
    for item in values:
        for part in (p for p in item.split(",") if p.strip()):
            key, sep, val = part.partition("=")
            if not sep or not key.strip():
                raise pytest.UsageError(
                    f"{option}: expected KEY=VALUE (e.g. cudnn_conv_algo_search=EXHAUSTIVE), got {part!r}"
                )
            result[key.strip()] = parse_option_value(val.strip())
    return result


def parse_compare_python(option: str, value: Any) -> str | None:
    """The interpreter that runs the baseline side (``--aaco-compare-python``), or None when empty.

    An absolute path, symlinks kept (a virtualenv's ``bin/python`` selects its packages only by its
    own path); a bare name is looked up on ``PATH``. ``pytest.UsageError`` when it is not an
    executable file. Whether it has numpy and onnxruntime is checked when the worker starts
    (:class:`pytest_aaco.sideprocess.WorkerSide`).
    """
    from .sideprocess import find_interpreter

    if not str(value or "").strip():
        return None
    with _usage_error(option):
        return find_interpreter(str(value))


# ---------------------------------------------------------------- option table


@dataclass(frozen=True)
class OptionDef:
    """One ``--aaco-*`` option and its ini twin."""

    name: str  # without the leading --aaco-
    help: str
    default: Any
    metavar: str | None = None  # None: a flag
    ini_type: IniType = "string"
    multiple: bool = False

    @property
    def flag(self) -> str:
        return f"--aaco-{self.name}"

    @property
    def dest(self) -> str:
        return "aaco_" + self.name.replace("-", "_")


OPTIONS: tuple[OptionDef, ...] = (
    OptionDef("provider", "execution provider(s): short names (cpu, cuda, migraphx, rocm, tensorrt, openvino,"
              " dml) or full EP names; repeatable or comma-separated", "cpu", "EP", "linelist", True),
    OptionDef("models", "model registry YAML (none: the registry shipped with pytest-aaco)", "", "PATH"),
    OptionDef("baseline-dir", "folder of JSON baselines", "baselines", "DIR"),
    OptionDef("save-baseline", "append this run to each item's baseline history", False, ini_type="bool"),
    OptionDef("baseline-reset", "with --aaco-save-baseline: start each history again", False, ini_type="bool"),
    OptionDef("history", "baseline runs kept per item", "30", "N"),
    OptionDef("min-history", "runs of history needed before the prediction-interval test is used", "5", "N"),
    OptionDef("run-noise", "assumed run-to-run sd while the history is shorter than --aaco-min-history"
              " (0: plain Welch test on rounds)", "2%", "FRACTION"),
    OptionDef("warmup", "warmup iterations before measuring", "10", "N"),
    OptionDef("iterations", "iterations per round, or auto to adapt to the model's latency", "auto", "N"),
    OptionDef("rounds", "measured rounds per item", "10", "K"),
    OptionDef("threshold", "practical regression threshold delta (fraction or %)", "5%", "FRACTION"),
    OptionDef("fdr", "session-wide false discovery rate across gated items (LOND)", "0.05", "Q"),
    OptionDef("confirm", "re-measure a suspected regression with a fresh session before failing", "on", "on|off"),
    OptionDef("strict-inconclusive", "fail items whose verdict is inconclusive", False, ini_type="bool"),
    OptionDef("fail-on-improvement", "fail items that got significantly faster (stale baseline)", False,
              ini_type="bool"),
    OptionDef("gate-p99", "also gate p99 latency (bootstrap over rounds)", False, ini_type="bool"),
    OptionDef("device-id", "GPU device id passed to the execution provider", "0", "ID"),
    OptionDef("strict-provider", "fail, instead of skip, when a requested EP is unavailable", False,
              ini_type="bool"),
    OptionDef("provider-option", "provider option KEY=VALUE for every requested EP (repeatable)", "",
              "KEY=VALUE", "linelist", True),
    OptionDef("iobinding", "input/output binding: auto, none (host arrays, copies timed), inputs, all",
              "auto", "MODE"),
    OptionDef("placement", "node placement on device EPs (one profiled run): check fails an item whose compute"
              " fell to the CPU, warn only warns, off skips it", "check", "MODE"),
    OptionDef("intra-op-threads", "ORT intra-op threads (0: ORT's default)", "0", "N"),
    OptionDef("max-contention", "cores other processes may keep busy while an item is measured before a"
              " regression is withheld as inconclusive (off: never)", "0.1", "CORES"),
    OptionDef("sample-interval", "telemetry sampling period in ms", "100", "MS"),
    OptionDef("memory-threshold", "peak RSS/VRAM growth that counts as a memory regression", "10%", "FRACTION"),
    OptionDef("memory-slack", "growth in MB below which memory is never a regression", "50", "MB"),
    OptionDef("session-dir", "where session bundles are written", ".aaco/sessions", "DIR"),
    OptionDef("no-bundle", "do not write a session bundle", False, ini_type="bool"),
    OptionDef("junit", "write a performance JUnit XML file", "", "PATH"),
    OptionDef("html", "write a self-contained HTML report", "", "PATH"),
)


def add_options(parser: pytest.Parser) -> None:
    """Register every option in the ``aaco`` group, plus its ini twin."""
    group = parser.getgroup("aaco", "pytest-aaco: ONNX Runtime performance gate")
    for opt in OPTIONS:
        default_text = opt.default if opt.default not in ("", False) else ("off" if opt.default is False else "none")
        help_text = f"{opt.help} (default: {default_text})"
        # argparse %-formats option help ("5%" would crash --help); ini help is printed as is
        cli_help = help_text.replace("%", "%%")
        if opt.metavar is None:
            group.addoption(opt.flag, action="store_true", default=None, dest=opt.dest, help=cli_help)
        elif opt.multiple:
            group.addoption(opt.flag, action="append", default=None, dest=opt.dest, metavar=opt.metavar,
                            help=cli_help)
        else:
            group.addoption(opt.flag, action="store", default=None, dest=opt.dest, metavar=opt.metavar,
                            help=cli_help)
        ini_default: Any = opt.default
        if opt.ini_type == "linelist":
            ini_default = [opt.default] if opt.default else []
        parser.addini(opt.dest, help=f"ini twin of {opt.flag}: {help_text}", type=opt.ini_type,
                      default=ini_default)


def _raw(config: pytest.Config, opt: OptionDef) -> Any:
    value = config.getoption(opt.dest, default=None)
    if value is not None:
        return value
    return config.getini(opt.dest)


# ---------------------------------------------------------------- the frozen config


@dataclass(frozen=True)
class AacoConfig:
    """All pytest-aaco settings of one session. Durations in s, sizes in MB, thresholds as fractions."""

    providers: tuple[ProviderSpec, ...] = (ProviderSpec("cpu", "CPUExecutionProvider"),)
    models_path: Path | None = None
    baseline_dir: Path = Path("baselines")
    save_baseline: bool = False
    baseline_reset: bool = False
    history: int = 30
    min_history: int = 5
    run_noise: float = 0.02
    warmup: int = 10
    iterations: int | None = None
    rounds: int = 10
    threshold: float = 0.05
    fdr: float = 0.05
    confirm: bool = True
    strict_inconclusive: bool = False
    fail_on_improvement: bool = False
    gate_p99: bool = False
    device_id: int = 0
    strict_provider: bool = False
    provider_options: dict[str, Any] = field(default_factory=dict)
    iobinding: str = "auto"
    placement: str = "check"
    intra_op_threads: int = 0
    max_contention: float | None = 0.1
    sample_interval_s: float = 0.1
    memory_threshold: float = 0.10
    memory_slack_mb: float = 50.0
    session_dir: Path = Path(".aaco/sessions")
    bundle: bool = True
    junit_path: Path | None = None
    html_path: Path | None = None

    @classmethod
    def from_pytest_config(cls, config: pytest.Config) -> AacoConfig:
        """Read and validate every ``--aaco-*`` option; raises ``pytest.UsageError`` on bad input."""
        raw = {opt.name: _raw(config, opt) for opt in OPTIONS}
        root = Path(str(config.rootpath))

        def path(name: str) -> Path | None:
            text = str(raw[name] or "").strip()
            return ini_path(name) if text else None

        def flag(name: str) -> bool:
            return bool(raw[name])

        def ini_path(name: str) -> Path:
            # ini-relative paths resolve against the rootdir, command-line ones against the cwd
            cli = config.getoption("aaco_" + name.replace("-", "_"), default=None)
            text = str(raw[name]).strip()
            candidate = Path(text).expanduser()
            if candidate.is_absolute():
                return candidate
            return (Path.cwd() if cli is not None else root) / candidate

        return cls(
            providers=parse_providers("--aaco-provider", list(raw["provider"] or ["cpu"])),
            models_path=path("models"),
            baseline_dir=ini_path("baseline-dir"),
            save_baseline=flag("save-baseline"),
            baseline_reset=flag("baseline-reset"),
            history=parse_positive_int("--aaco-history", raw["history"]),
            min_history=parse_positive_int("--aaco-min-history", raw["min-history"], minimum=3),
            run_noise=parse_fraction_or_zero("--aaco-run-noise", raw["run-noise"], upper=0.5),
            warmup=parse_positive_int("--aaco-warmup", raw["warmup"], minimum=1),
            iterations=parse_iterations("--aaco-iterations", raw["iterations"]),
            rounds=parse_positive_int("--aaco-rounds", raw["rounds"], minimum=2),
            threshold=parse_fraction("--aaco-threshold", raw["threshold"]),
            fdr=parse_fraction("--aaco-fdr", raw["fdr"], upper=0.5),
            confirm=parse_on_off("--aaco-confirm", raw["confirm"]),
            strict_inconclusive=flag("strict-inconclusive"),
            fail_on_improvement=flag("fail-on-improvement"),
            gate_p99=flag("gate-p99"),
            device_id=parse_positive_int("--aaco-device-id", raw["device-id"], minimum=0),
            strict_provider=flag("strict-provider"),
            provider_options=parse_provider_options("--aaco-provider-option", list(raw["provider-option"] or [])),
            iobinding=parse_choice("--aaco-iobinding", raw["iobinding"], IOBINDING_MODES),
            placement=parse_choice("--aaco-placement", raw["placement"], PLACEMENT_MODES),
            intra_op_threads=parse_positive_int("--aaco-intra-op-threads", raw["intra-op-threads"], minimum=0),
            max_contention=parse_cores("--aaco-max-contention", raw["max-contention"]),
            sample_interval_s=parse_milliseconds("--aaco-sample-interval", raw["sample-interval"]),
            memory_threshold=parse_fraction("--aaco-memory-threshold", raw["memory-threshold"], upper=10.0),
            memory_slack_mb=parse_megabytes("--aaco-memory-slack", raw["memory-slack"]),
            session_dir=ini_path("session-dir"),
            bundle=not flag("no-bundle"),
            junit_path=path("junit"),
            html_path=path("html"),
        )

