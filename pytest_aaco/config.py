"""Command-line and ini options, parsed once into a frozen :class:`AacoConfig`.

Every option is ``--aaco-*`` in the ``aaco`` group and has an ini twin ``aaco_*`` so CI can set
it in ``pyproject.toml`` / ``pytest.ini``. The command line wins over the ini file, which wins
over the default. Each value goes through a small parser that raises ``pytest.UsageError``
naming the option and the fix.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from . import options as opts
from .options import (  # noqa: F401 - the shared value parsers, re-exported for callers of the config
    IOBINDING_MODES,
    OPTIONS,
    PLACEMENT_MODES,
    OptionDef,
    fraction_below,
    int_at_least,
)
from .providers import ProviderError, ProviderSpec, parse_provider_list

# ---------------------------------------------------------------- option parsers
# Each raises ``pytest.UsageError`` naming the option; the value rules are in pytest_aaco.options.


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
        return opts.int_at_least(value, minimum)


def parse_iterations(option: str, value: Any) -> int | None:
    """``auto`` (None: adapt to the model's latency) or an integer >= 2."""
    with _usage_error(option):
        return opts.iterations(value)


def parse_fraction(option: str, value: Any, upper: float = 1.0) -> float:
    """A fraction in (0, *upper*): ``0.05`` or ``5%``; ``pytest.UsageError`` otherwise."""
    with _usage_error(option):
        return opts.fraction_below(value, upper)


def parse_fraction_or_zero(option: str, value: Any, upper: float = 1.0) -> float:
    """``0`` (off) or a fraction in (0, *upper*); ``pytest.UsageError`` otherwise."""
    with _usage_error(option):
        return opts.fraction_or_zero(value, upper)


def parse_cores(option: str, value: Any) -> float | None:
    """``off`` (None) or a non-negative number of CPU cores (``0.1``)."""
    with _usage_error(option):
        return opts.cores(value)


def parse_milliseconds(option: str, value: Any) -> float:
    """A positive duration in ms (``100`` or ``100ms``); returned in seconds."""
    with _usage_error(option):
        return opts.seconds_from_ms(value)


def parse_megabytes(option: str, value: Any) -> float:
    """A non-negative size in MB (``50`` or ``50MB``)."""
    with _usage_error(option):
        return opts.megabytes(value)


def parse_on_off(option: str, value: Any) -> bool:
    """``on``/``off`` (also true/false, yes/no, 1/0)."""
    with _usage_error(option):
        return opts.on_off(value)


def parse_choice(option: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of *choices* (case-insensitive)."""
    with _usage_error(option):
        return opts.choice(value, choices)


def parse_providers(option: str, values: list[str]) -> tuple[ProviderSpec, ...]:
    """Repeated or comma-separated EP names; an unknown one is a UsageError listing the valid names."""
    try:
        return tuple(parse_provider_list(values))
    except ProviderError as exc:
        raise pytest.UsageError(f"{option}: {exc}") from None


parse_option_value = opts.option_value


def parse_provider_options(option: str, values: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (repeatable); a missing ``=`` is a UsageError."""
    with _usage_error(option):
        return opts.key_values(values)


def parse_option(opt: OptionDef, raw: Any) -> Any:
    """*raw* through the table's parser of *opt*; ``pytest.UsageError`` naming ``--aaco-<name>``."""
    with _usage_error(opt.flag):
        return opt.value(raw)


# ---------------------------------------------------------------- registering the table


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


def _default_path(name: str) -> Path:
    return Path(opts.default(name))


@dataclass(frozen=True)
class AacoConfig:
    """All pytest-aaco settings of one session. Durations in s, sizes in MB, thresholds as fractions.

    Every default comes from the option table (:data:`pytest_aaco.options.OPTIONS`).
    """

    providers: tuple[ProviderSpec, ...] = parse_providers("--aaco-provider", [opts.default("provider")])
    models_path: Path | None = None
    baseline_dir: Path = field(default_factory=lambda: _default_path("baseline-dir"))
    save_baseline: bool = opts.default("save-baseline")
    baseline_reset: bool = opts.default("baseline-reset")
    history: int = opts.default("history")
    min_history: int = opts.default("min-history")
    run_noise: float = opts.default("run-noise")
    warmup: int = opts.default("warmup")
    iterations: int | None = opts.default("iterations")
    rounds: int = opts.default("rounds")
    threshold: float = opts.default("threshold")
    fdr: float = opts.default("fdr")
    confirm: bool = opts.default("confirm")
    strict_inconclusive: bool = opts.default("strict-inconclusive")
    fail_on_improvement: bool = opts.default("fail-on-improvement")
    gate_p99: bool = opts.default("gate-p99")
    device_id: int = opts.default("device-id")
    strict_provider: bool = opts.default("strict-provider")
    provider_options: dict[str, Any] = field(default_factory=dict)
    iobinding: str = opts.default("iobinding")
    placement: str = opts.default("placement")
    intra_op_threads: int = opts.default("intra-op-threads")
    max_contention: float | None = opts.default("max-contention")
    sample_interval_s: float = opts.default("sample-interval")
    memory_threshold: float = opts.default("memory-threshold")
    memory_slack_mb: float = opts.default("memory-slack")
    session_dir: Path = field(default_factory=lambda: _default_path("session-dir"))
    bundle: bool = not opts.default("no-bundle")
    junit_path: Path | None = None
    html_path: Path | None = None

    @classmethod
    def from_pytest_config(cls, config: pytest.Config) -> AacoConfig:
        """Read and validate every ``--aaco-*`` option; raises ``pytest.UsageError`` on bad input."""
        raw = {opt.name: _raw(config, opt) for opt in OPTIONS}
        root = Path(str(config.rootpath))

        def value(name: str) -> Any:
            return parse_option(opts.option(name), raw[name])

        def path(name: str) -> Path | None:
            text = str(raw[name] or "").strip()
            return ini_path(name) if text else None

        def flag(name: str) -> bool:
            return bool(raw[name])

        def ini_path(name: str) -> Path:
            # ini-relative paths resolve against the rootdir, command-line ones against the cwd
            cli = config.getoption(opts.option(name).dest, default=None)
            candidate = Path(str(raw[name]).strip()).expanduser()
            if candidate.is_absolute():
                return candidate
            return (Path.cwd() if cli is not None else root) / candidate

        return cls(
            providers=parse_providers("--aaco-provider", list(raw["provider"] or [opts.default("provider")])),
            models_path=path("models"),
            baseline_dir=ini_path("baseline-dir"),
            save_baseline=flag("save-baseline"),
            baseline_reset=flag("baseline-reset"),
            history=value("history"),
            min_history=value("min-history"),
            run_noise=value("run-noise"),
            warmup=value("warmup"),
            iterations=value("iterations"),
            rounds=value("rounds"),
            threshold=value("threshold"),
            fdr=value("fdr"),
            confirm=value("confirm"),
            strict_inconclusive=flag("strict-inconclusive"),
            fail_on_improvement=flag("fail-on-improvement"),
            gate_p99=flag("gate-p99"),
            device_id=value("device-id"),
            strict_provider=flag("strict-provider"),
            provider_options=parse_provider_options("--aaco-provider-option", list(raw["provider-option"] or [])),
            iobinding=value("iobinding"),
            placement=value("placement"),
            intra_op_threads=value("intra-op-threads"),
            max_contention=value("max-contention"),
            sample_interval_s=value("sample-interval"),
            memory_threshold=value("memory-threshold"),
            memory_slack_mb=value("memory-slack"),
            session_dir=ini_path("session-dir"),
            bundle=not flag("no-bundle"),
            junit_path=path("junit"),
            html_path=path("html"),
        )
