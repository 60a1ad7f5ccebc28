"""Command-line and ini options, parsed once into a frozen :class:`AacoConfig`.

Every option is ``--aaco-*`` (registered with pytest by :func:`pytest_aaco.options.add_options`) and
has an ini twin ``aaco_*`` so CI can set it in ``pyproject.toml`` / ``pytest.ini``. The command line
wins over the ini file, which wins over the default. Each value goes through a small parser that
raises ``pytest.UsageError`` naming the option and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import pytest

from pytest_aaco import options as opts
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.providers import ProviderError, ProviderSpec, check_options, parse_provider_list
from pytest_aaco.options import COLD_SESSIONS, OPTIONS, GateSettings, OptionDef, setting
from pytest_aaco.samplers.gpus import count_problem, visible_gpus

P = ParamSpec("P")
T = TypeVar("T")

# ---------------------------------------------------------------- option parsers
# Each raises ``pytest.UsageError`` naming the option; the value rules are in pytest_aaco.options.


@contextmanager
def _usage_error(option: str) -> Iterator[None]:
    """Report a ValueError about the value of *option* as ``pytest.UsageError`` naming the option."""
    try:
        yield
    except ValueError as exc:
        raise pytest.UsageError(f"{option}: {exc}") from None


def naming_option(rule: Callable[Concatenate[Any, P], T]) -> Callable[Concatenate[str, Any, P], T]:
    """``parse(option, value, *args)``: the value rule *rule* of :mod:`pytest_aaco.options`, with its
    ValueError reported as ``pytest.UsageError`` naming *option* (``--aaco-rounds: must be at least 2``)."""

    def parse(option: str, value: Any, *args: P.args, **kwargs: P.kwargs) -> T:
        with _usage_error(option):
            return rule(value, *args, **kwargs)

    parse.__name__ = f"parse_{rule.__name__}"
    parse.__doc__ = f"{rule.__doc__}\n\n``pytest.UsageError`` naming the option otherwise."
    return parse


#: one parser per kind of value; the rules (and their docstrings) are in pytest_aaco.options
parse_positive_int = naming_option(opts.int_at_least)
parse_iterations = naming_option(opts.iterations)
parse_fraction = naming_option(opts.fraction_below)
parse_fraction_or_zero = naming_option(opts.fraction_or_zero)
parse_cores = naming_option(opts.cores)
parse_milliseconds = naming_option(opts.seconds_from_ms)
parse_megabytes = naming_option(opts.megabytes)
parse_on_off = naming_option(opts.on_off)
parse_choice = naming_option(opts.choice)


def parse_providers(option: str, values: list[str]) -> tuple[ProviderSpec, ...]:
    """Repeated or comma-separated EP names; an unknown one is a UsageError listing the valid names."""
    try:
        return tuple(parse_provider_list(values))
    except ProviderError as exc:
        raise pytest.UsageError(f"{option}: {exc}") from None


parse_option_value = opts.option_value


parse_provider_options = naming_option(opts.key_values)


#: ``--aaco-compare-python``'s parser: None when empty, else the interpreter's path (symlinks kept)
parse_compare_python = naming_option(opts.interpreter_or_none)


def check_provider_options(option: str, providers: tuple[ProviderSpec, ...], options: JSONDict) -> None:
    """Each key of *options* must be taken by some requested EP (:func:`pytest_aaco.measure.providers.check_options`);
    a UsageError names the key and the valid ones otherwise (never a value: it may be a credential)."""
    with _usage_error(option):  # ProviderError is a ValueError
        check_options(providers, list(options))


def parse_option(opt: OptionDef, raw: object) -> Any:
    """*raw* through the table's parser of *opt*; ``pytest.UsageError`` naming ``--aaco-<name>``."""
    with _usage_error(opt.flag):
        return opt.value(raw)


def _raw(config: pytest.Config, opt: OptionDef) -> Any:
    value = config.getoption(opt.dest, default=None)
    if value is not None:
        if opt.path is not None:
            _check_path(opt, value, opt.flag, "leave the option out")
        return value
    value = config.getini(opt.dest)
    if opt.path is None:
        return value
    if value is None:  # not in the ini file: the table's default
        return opt.default
    _check_path(opt, value, f"{opt.dest} (ini twin of {opt.flag})", "remove the ini line")
    return value


#: what leaving out a path option with an empty default does, where it is not "turn it off"
_UNSET = {"models": "for the registry shipped with pytest-aaco"}


def _check_path(opt: OptionDef, value: object, where: str, leave_out: str) -> None:
    """An empty or blank path setting is a UsageError naming *where* it was set and the fix."""
    assert opt.path is not None
    try:
        opts.path_text(value, opt.path)
    except ValueError as exc:
        fallback = _UNSET.get(opt.name) or (f"for the default {opt.default}" if opt.default else "to turn it off")
        raise pytest.UsageError(f"{where}: {exc}, or {leave_out} {fallback}") from None


# ---------------------------------------------------------------- the frozen config


@dataclass(frozen=True)
class AacoConfig(GateSettings):
    """All pytest-aaco settings of one session. Durations in s, sizes in MB, thresholds as fractions.

    The gate's settings (threshold, history, noise, strictness, memory limits) are inherited from
    :class:`~pytest_aaco.options.GateSettings`, so each is declared once. Every default comes from
    the option table (:data:`pytest_aaco.options.OPTIONS`); fields made with
    :func:`pytest_aaco.options.setting` are parsed by the table's parser of their option.
    """

    providers: tuple[ProviderSpec, ...] = parse_providers("--aaco-provider", [opts.default("provider")])
    models_path: Path | None = None
    #: ``--aaco-shard K/N`` as (K, N), None for all items (:func:`pytest_aaco.reports.cost.select_shard`)
    shard: tuple[int, int] | None = setting("shard")
    baseline_dir: Path = field(default_factory=lambda: Path(opts.default("baseline-dir")))
    #: ``--aaco-smoke``: each model run once, outputs checked finite; nothing measured, gated or saved
    smoke: bool = setting("smoke")
    save_baseline: bool = setting("save-baseline")
    baseline_reset: bool = setting("baseline-reset")
    #: ``--aaco-baseline-runner``: the runner key whose history gates the items (another runner's), None for
    #: this runner's own (:mod:`pytest_aaco.history.across`); saving always goes to this runner's own folder
    baseline_runner: str | None = setting("baseline-runner")
    history: int = setting("history")
    warmup: int = setting("warmup")
    iterations: int | None = setting("iterations")
    #: ``--aaco-rounds`` as given: a count, or None for ``auto`` (:func:`pytest_aaco.options.auto_rounds`)
    rounds: int | None = setting("rounds")
    #: ``--aaco-item-timeout``: seconds, ``math.inf`` for off, None for auto (:func:`pytest_aaco.benchmark.item_limit`)
    item_timeout_s: float | None = setting("item-timeout")
    fdr: float = setting("fdr")
    confirm: bool = setting("confirm")
    #: ``--aaco-device-id`` as given: the ids, or None for ``all`` (resolved in :meth:`from_pytest_config`)
    device_ids: tuple[int, ...] | None = setting("device-id")
    #: the device this process measures on (:func:`pytest_aaco.options.device_for_worker`)
    device_id: int = 0
    strict_provider: bool = setting("strict-provider")
    provider_options: JSONDict = field(default_factory=dict)
    iobinding: str = setting("iobinding")
    device_time: str = setting("device-time")
    graph: str = setting("graph")
    placement: str = setting("placement")
    intra_op_threads: int = setting("intra-op-threads")
    #: ``--aaco-ort-log-level`` as ORT's severity (3: error)
    ort_log_level: int = setting("ort-log-level")
    max_contention: float | None = setting("max-contention")
    #: ``--aaco-lock-timeout``: seconds, None for off (:mod:`pytest_aaco.measure.devicelock`)
    lock_timeout_s: float | None = setting("lock-timeout")
    sample_interval_s: float = setting("sample-interval")
    profile: str = setting("profile")
    #: ``--aaco-cold-start`` as given: a count, or None for ``auto`` (see :attr:`cold_start`)
    cold_start_sessions: int | None = setting("cold-start")
    cold_start_threshold: float = setting("cold-start-threshold")
    cupti: bool = setting("cupti")
    rocprof: str | None = setting("rocprof")
    reference: str | None = setting("reference")
    session_dir: Path = field(default_factory=lambda: Path(opts.default("session-dir")))
    bundle: bool = not opts.default("no-bundle")
    junit_path: Path | None = None
    html_path: Path | None = None
    compare_ref: str | None = setting("compare")
    #: ``--aaco-compare-unchanged``: skip or measure (:mod:`pytest_aaco.sidebyside.unchanged`)
    compare_unchanged: str = setting("compare-unchanged")
    compare_python: str | None = setting("compare-python")
    compare_budget_s: float = setting("compare-budget")
    #: ``--aaco-compare-processes``: fresh worker processes per side (:mod:`pytest_aaco.sidebyside.cycles`)
    compare_processes: int = setting("compare-processes")
    #: ``--aaco-compile-cache``: auto, off or a folder (:mod:`pytest_aaco.measure.compile_cache`)
    compile_cache: str = setting("compile-cache")
    #: ``--aaco-ep-library``: plugin EP libraries as (registration name, path)
    ep_libraries: tuple[tuple[str, str], ...] = setting("ep-library")

    @property
    def side_by_side(self) -> bool:
        """Whether items are gated side by side (``--aaco-compare`` or ``--aaco-compare-python``)."""
        return bool(self.compare_ref or self.compare_python)

    @property
    def cold_start(self) -> int:
        """Fresh sessions per item for the cold-start pass (0: off). ``auto``: :data:`COLD_SESSIONS`
        when items are compared side by side (paired and confirmed: 0 false failures in 50
        unchanged runs here), off against stored baselines (unchanged runs failed that gate on a
        shared machine); docs/where-the-time-goes.md has both and what the pass costs."""
        if self.cold_start_sessions is not None:
            return self.cold_start_sessions
        return COLD_SESSIONS if self.side_by_side else 0

    @classmethod
    def from_pytest_config(cls, config: pytest.Config) -> AacoConfig:
        """Read and validate every ``--aaco-*`` option; raises ``pytest.UsageError`` on bad input."""
        raw = {opt.name: _raw(config, opt) for opt in OPTIONS}
        root = Path(str(config.rootpath))

        def ini_path(name: str) -> Path:
            # ini-relative paths resolve against the rootdir, command-line ones against the cwd
            cli = config.getoption(opts.option(name).dest, default=None)
            candidate = Path(str(raw[name]).strip()).expanduser()
            if candidate.is_absolute():
                return candidate
            return (Path.cwd() if cli is not None else root) / candidate

        def path(name: str) -> Path | None:
            return ini_path(name) if str(raw[name] or "").strip() else None

        settings = {f.name: parse_option(opts.option(f.metadata["option"]), raw[f.metadata["option"]])
                    for f in fields(cls) if "option" in f.metadata}
        providers = parse_providers("--aaco-provider", list(raw["provider"] or [opts.default("provider")]))
        provider_options = parse_provider_options("--aaco-provider-option", list(raw["provider-option"] or []))
        check_provider_options("--aaco-provider-option", providers, provider_options)
        devices = settings["device_ids"] if settings["device_ids"] is not None else all_devices(providers)
        settings["device_ids"] = devices
        worker = opts.xdist_worker_index(getattr(config, "workerinput", {}).get("workerid"))
        check_baseline_runner(settings["baseline_runner"], ini_path("baseline-dir"))
        return cls(
            providers=providers,
            models_path=path("models"),
            baseline_dir=ini_path("baseline-dir"),
            provider_options=provider_options,
            session_dir=ini_path("session-dir"),
            bundle=not raw["no-bundle"],
            junit_path=path("junit"),
            html_path=path("html"),
            device_id=opts.device_for_worker(devices, worker),
            **settings,
        )


def runner_keys(baseline_dir: Path) -> list[str]:
    """The runner keys (folder names) under *baseline_dir* that hold at least one baseline file, sorted;
    empty when the folder does not exist."""
    if not baseline_dir.is_dir():
        return []
    return sorted(p.name for p in baseline_dir.iterdir() if p.is_dir() and any(p.glob("*.json")))


def check_baseline_runner(key: str | None, baseline_dir: Path) -> None:
    """``--aaco-baseline-runner=KEY`` names a runner whose history exists: a folder *key* under *baseline_dir*.
    ``pytest.UsageError`` naming the option and listing the runner keys that exist otherwise."""
    if key is None or (baseline_dir / key).is_dir():
        return
    found = runner_keys(baseline_dir)
    listed = (f"the runners with baselines there: {', '.join(found)}" if found
              else "no runner has baselines there yet")
    raise pytest.UsageError(f"--aaco-baseline-runner={key}: no such runner under {baseline_dir} ({listed});"
                            " give one of those keys, or leave the option out to use this runner's own history")


def all_devices(providers: tuple[ProviderSpec, ...]) -> tuple[int, ...]:
    """``--aaco-device-id all``: ids 0..n-1 of the GPUs the first GPU EP requested can use
    (:func:`pytest_aaco.samplers.gpus.visible_gpus`); ``(0,)`` when no GPU EP is requested.
    ``pytest.UsageError`` naming the option when they cannot be counted."""
    gpu = next((p for p in providers if p.ep.telemetry), None)  # an EP whose GPUs NVML or amdsmi counts
    if gpu is None:
        return (0,)
    count = visible_gpus(gpu.short)
    if not count:
        raise pytest.UsageError(f"--aaco-device-id all: {count_problem(gpu.short)}; list the ids instead,"
                                " e.g. --aaco-device-id 0,1")
    return tuple(range(count))


def auto_workers(config: pytest.Config) -> int | None:
    """pytest-xdist's ``-n auto`` worker count: one per id of an ``--aaco-device-id`` list (or of
    ``all``) when a GPU EP is requested and the option was set (command line or ini file); None
    otherwise, so pytest-xdist picks its own count. Raises ``pytest.UsageError`` as the options do."""
    opt = opts.option("device-id")
    given = config.getoption(opt.dest, default=None)
    if given is None:
        given = config.getini(opt.dest)
        if str(given).strip() == str(opt.default):  # not set: the default
            return None
    providers = parse_providers("--aaco-provider", list(_raw(config, opts.option("provider")) or
                                                        [opts.default("provider")]))
    if not any(p.is_gpu for p in providers):
        return None
    devices = parse_option(opt, given)
    return len(devices if devices is not None else all_devices(providers))
