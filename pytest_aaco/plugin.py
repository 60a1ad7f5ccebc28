"""pytest entry point (``pytest11: aaco``): options, hooks and fixtures only.

This module is the plugin's lazy boundary. At load it imports only the option table
(:mod:`pytest_aaco.options`) and the hook specifications; everything else (the session object of
:mod:`pytest_aaco.session`, and through it numpy, PyYAML, onnxruntime, the reports) is imported the
first time a run uses the plugin: an ``--aaco-*`` option or ini twin is set, an item asks for one
of its fixtures or carries the ``aaco`` marker, or pytest-xdist distributes the run. A suite that
never uses the plugin pays for the option table and nothing else, and its signal handlers are
left alone (:class:`pytest_aaco.measure.stopping.InterruptGuard`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_aaco import hookspecs
from pytest_aaco.options import OPTIONS, add_options, ini_set

if TYPE_CHECKING:
    from pytest_aaco.config import AacoConfig
    from pytest_aaco.measure.inference import SessionHandle
    from pytest_aaco.measure.providers import ProviderSpec
    from pytest_aaco.measure.registry import ModelSpec
    from pytest_aaco.measure.results import BenchmarkResult
    from pytest_aaco.session import AacoSession

MARKER_HELP = (
    "aaco(models=None, providers=None, threshold=None, warmup=None, iterations=None, rounds=None,"
    " gate_p99=None): narrow the models or execution providers of a pytest-aaco benchmark, or override"
    " its settings"
)


def _session(config: pytest.Config) -> AacoSession:
    """The run's session object, started (and its modules imported) at the first use."""
    from pytest_aaco.session import get_session

    return get_session(config)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


# ------------------------------------------------------------------ options read as test paths

#: the options that take a value (``--aaco-junit PATH``), as written on the command line
VALUE_FLAGS = frozenset(opt.flag for opt in OPTIONS if opt.metavar is not None)


def _first_pass_args(config: pytest.Config) -> list[str]:
    """The arguments pytest parsed to choose its rootdir: ``PYTEST_ADDOPTS``, then the command line."""
    import os
    import shlex

    try:
        env = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    except ValueError:
        env = []
    return [*env, *(str(a) for a in config.invocation_params.args)]


def stray_option_values(args: list[str], invocation_dir: object) -> list[tuple[str, str]]:
    """``(flag, value)`` for each value-taking ``--aaco-*`` option written with its value as the next
    argument (``--aaco-junit out/perf.xml``) where that value exists on disk, relative to
    *invocation_dir*: pytest takes such a value for a test path when it chooses its rootdir, because
    it parses the command line for that before it loads the plugins that declare the options."""
    from pathlib import Path

    stray = []
    for flag, value in zip(args, args[1:], strict=False):
        if flag in VALUE_FLAGS and not value.startswith("-"):
            path = Path(value.split("::")[0]).expanduser()
            try:
                exists = (path if path.is_absolute() else Path(str(invocation_dir)) / path).exists()
            except (OSError, ValueError):
                exists = False
            if exists:
                stray.append((flag, value))
    return stray


def check_rootdir(config: pytest.Config) -> None:
    """Refuse a run whose rootdir or ini file an ``--aaco-*`` option value chose (a one-line usage error).

    pytest chooses its rootdir and ini file from the command line before it loads plugins installed
    by entry points (``_pytest.config.Config.parse``: ``determine_setup`` runs on the first
    ``parse_known_args``, ``load_setuptools_entrypoints`` comes after), so ``--aaco-junit /reports/perf.xml``
    with an existing file reads ``/reports/perf.xml`` as a test path: the rootdir moves to ``/reports``,
    the project's ``pytest.ini`` is skipped and the built-in registry is measured. The setup is worked
    out again without those values (:func:`stray_option_values`); when it differs, the run stops,
    naming the option and the fix, ``--aaco-junit=/reports/perf.xml``, which is never misread.
    """
    stray = stray_option_values(_first_pass_args(config), config.invocation_params.dir)
    if not stray:
        return
    ns = config.known_args_namespace
    true_args = [str(a) for a in getattr(ns, "file_or_dir", None) or [] if str(a) not in {v for _, v in stray}]
    try:
        from _pytest.config.findpaths import determine_setup

        kwargs: dict[str, Any] = {"inifile": getattr(ns, "inifilename", None), "args": true_args,
                                  "rootdir_cmd_arg": getattr(ns, "rootdir", None) or None,
                                  "invocation_dir": config.invocation_params.dir}
        try:
            rootpath, inipath, *_ = determine_setup(override_ini=getattr(ns, "override_ini", None), **kwargs)
        except TypeError:  # pytest 8 has no override_ini parameter
            rootpath, inipath, *_ = determine_setup(**kwargs)
        moved = (rootpath, inipath) != (config.rootpath, config.inipath)
    except Exception:  # noqa: BLE001 - a pytest whose internals differ: refuse, the value was read as a path
        rootpath, inipath, moved = None, None, True
    if not moved:
        return
    flag, value = stray[0]
    meant = f" (it would be {rootpath}, ini file {inipath or 'none'})" if rootpath is not None else ""
    raise pytest.UsageError(
        f"{flag} {value}: pytest read {value} as a test path when it chose its rootdir, before it knew"
        f" pytest-aaco's options, so the rootdir is {config.rootpath} and the ini file"
        f" {config.inipath or 'none'}{meant}; write the value with '=': {flag}={value}")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before any conftest is imported: :func:`check_rootdir`."""
    check_rootdir(early_config)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    asked = any(config.getoption(opt.dest, default=None) is not None for opt in OPTIONS)
    if asked:
        check_ort(config)  # an --aaco-* option asks for the plugin: before anything loads onnxruntime
    # started now where the run is known to use the plugin (its options are checked before anything
    # runs), or where it cannot be known here: a pytest-xdist controller collects nothing itself,
    # and must open the session bundle for its workers before they start
    distributing = config.getoption("dist", default="no") != "no" and not hasattr(config, "workerinput")
    if asked or distributing or ini_set(config.getini):
        _session(config)


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before pytest-xdist's own (CPU count), which never returns None
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` with ``--aaco-device-id 0,1,2,3`` (or ``all``) on a GPU EP: one worker per listed GPU
    (:func:`pytest_aaco.config.auto_workers`); None leaves the count to pytest-xdist."""
    from pytest_aaco.config import auto_workers

    return auto_workers(config)


# ------------------------------------------------------------------ the ONNX Runtime build

#: fixtures that make an item a pytest-aaco item (with the ``aaco`` marker)
AACO_FIXTURES = frozenset({"aaco_model", "aaco_provider", "ort_session", "benchmark_model"})
ORT_CHECKED: pytest.StashKey[bool] = pytest.StashKey()


def check_ort(config: pytest.Config) -> None:
    """Once per run that uses the plugin: a one-line usage error when no ONNX Runtime can be imported,
    a warning when several ONNX Runtime builds are installed over each other in the folder Python imports
    it from (:mod:`pytest_aaco.flavors`; neither imports onnxruntime), a one-line usage error (exit 4)
    instead when warnings are errors (``-W error``). A run that never uses the plugin is not checked, so a suite without
    pytest-aaco items runs where no ONNX Runtime is installed. On a pytest-xdist worker a usage error
    would crash the worker: there the ``ort_session`` fixture fails each item with the same line."""
    if config.stash.get(ORT_CHECKED, False) or hasattr(config, "workerinput"):
        return
    config.stash[ORT_CHECKED] = True
    from pytest_aaco import flavors
    from pytest_aaco.warnings import AacoFlavorWarning

    problem = flavors.missing_problem()
    if problem is not None:
        raise pytest.UsageError(problem)
    overlap = flavors.overlap_problem()
    if overlap is not None:
        try:
            config.issue_config_time_warning(AacoFlavorWarning(overlap), stacklevel=2)
        except AacoFlavorWarning:  # -W error / filterwarnings = error: a one-line usage error, not an INTERNALERROR
            raise pytest.UsageError(f"pytest-aaco: {overlap}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(AACO_FIXTURES.intersection(getattr(item, "fixturenames", ())) or item.get_closest_marker("aaco")
           for item in items):
        check_ort(config)
        _session(config)  # before pytest_collection_finish, which counts the benchmark items


# ------------------------------------------------------------------ parametrization


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    wants_model = "aaco_model" in metafunc.fixturenames
    wants_provider = "aaco_provider" in metafunc.fixturenames
    if wants_model or wants_provider:
        _session(metafunc.config).item_setup.parametrize(metafunc, wants_model, wants_provider)


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def aaco_config(pytestconfig: pytest.Config) -> AacoConfig:
    """The session's frozen :class:`~pytest_aaco.config.AacoConfig`."""
    return _session(pytestconfig).config


@pytest.fixture
def aaco_model(request: pytest.FixtureRequest) -> ModelSpec:
    """The registry model of this item (parametrized from the registry)."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def aaco_provider(request: pytest.FixtureRequest) -> ProviderSpec:
    """The execution provider of this item (parametrized from ``--aaco-provider``)."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def ort_session(request: pytest.FixtureRequest, aaco_model: ModelSpec, aaco_provider: ProviderSpec) -> SessionHandle:
    """A :class:`~pytest_aaco.measure.inference.SessionHandle`: the InferenceSession (``.session``) for this
    model × EP, built once per (model, provider, options), with its creation time (``.create_ms``).

    Skips (or fails with ``--aaco-strict-provider``) when the EP is not in this ORT build; fails
    with ORT's message when the session cannot be created.
    """
    return _session(request.config).item_setup.ort_session_for(request, aaco_model, aaco_provider)


@pytest.fixture
def benchmark_model(request: pytest.FixtureRequest, ort_session: SessionHandle, aaco_model: ModelSpec
                    ) -> Iterator[Callable[..., BenchmarkResult]]:
    """``benchmark_model(**overrides) -> BenchmarkResult``: warmup, then K rounds × N iterations on
    this item's InferenceSession, with telemetry; the gate then judges the last result.

    Overrides: ``warmup``, ``rounds``, ``iterations``. Raises ``pytest.fail`` with ORT's message
    when a run fails or ORT fell back off the requested EP (never recorded as that EP's result).
    Under ``--aaco-smoke`` it runs the model once and checks its outputs are finite.
    """
    yield from _session(request.config).item_setup.benchmark_for(request, ort_session, aaco_model)
