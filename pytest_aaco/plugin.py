"""pytest entry point (``pytest11: aaco``): options, hooks and fixtures only.

Importing this module is cheap: onnxruntime, scipy and the GPU libraries load only when a
benchmark fixture or an ``--aaco-*`` feature needs them. The state and every side effect of
the gate live in the session object (:mod:`pytest_aaco.session`).
"""

from __future__ import annotations

import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest

from pytest_aaco import flavors, hookspecs
from pytest_aaco.benchmark import (
    MARKER_HELP,
    AacoMarker,
    BenchmarkRun,
    item_settings,
    node_placement_problem,
    smoke_run,
)
from pytest_aaco.config import AacoConfig, add_options, auto_workers
from pytest_aaco.measure.device_time import DeviceTimeUnavailable
from pytest_aaco.measure.graph import GraphRefused, graph_build_problem
from pytest_aaco.measure.inference import SessionError, SessionHandle, check_placement
from pytest_aaco.measure.inputs import InputError
from pytest_aaco.measure.modelgen import CacheError
from pytest_aaco.measure.placement import PlacementError
from pytest_aaco.measure.providers import ProviderSpec
from pytest_aaco.measure.registry import ModelSpec, RegistryError
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.options import OPTIONS
from pytest_aaco.records import PLUGIN_NAME
from pytest_aaco.session import RUN_KEY, AacoSession, get_session
from pytest_aaco.sidebyside.revision import GitRefError
from pytest_aaco.sidebyside.worker_client import WorkerError
from pytest_aaco.warnings import AacoFlavorWarning, AacoProviderWarning
from pytest_aaco.xdist import XDIST_PLUGIN_NAME


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    if any(config.getoption(opt.dest, default=None) is not None for opt in OPTIONS):
        check_ort(config)  # an --aaco-* option asks for the plugin: before anything loads onnxruntime
    session = AacoSession(config, AacoConfig.from_pytest_config(config))
    config.pluginmanager.register(session, PLUGIN_NAME)
    config.pluginmanager.register(session.xdist, XDIST_PLUGIN_NAME)
    config.stash[SIGNALS_KEY] = interrupt_on_termination()


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before pytest-xdist's own (CPU count), which never returns None
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` with ``--aaco-device-id 0,1,2,3`` (or ``all``) on a GPU EP: one worker per listed GPU
    (:func:`pytest_aaco.config.auto_workers`); None leaves the count to pytest-xdist."""
    return auto_workers(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    restore_signals(config.stash.get(SIGNALS_KEY, {}))


# ------------------------------------------------------------------ the ONNX Runtime build

#: fixtures that make an item a pytest-aaco item (with the ``aaco`` marker)
AACO_FIXTURES = frozenset({"aaco_model", "aaco_provider", "ort_session", "benchmark_model"})
ORT_CHECKED: pytest.StashKey[bool] = pytest.StashKey()


def check_ort(config: pytest.Config) -> None:
    """Once per run that uses the plugin: a one-line usage error when no ONNX Runtime can be imported,
    a warning when several ONNX Runtime builds are installed over each other (:mod:`pytest_aaco.flavors`;
    neither imports onnxruntime). A run that never uses the plugin is not checked, so a suite without
    pytest-aaco items runs where no ONNX Runtime is installed. On a pytest-xdist worker a usage error
    would crash the worker: there the ``ort_session`` fixture fails each item with the same line."""
    if config.stash.get(ORT_CHECKED, False) or hasattr(config, "workerinput"):
        return
    config.stash[ORT_CHECKED] = True
    problem = flavors.missing_problem()
    if problem is not None:
        raise pytest.UsageError(problem)
    overlap = flavors.overlap_problem()
    if overlap is not None:
        config.issue_config_time_warning(AacoFlavorWarning(overlap), stacklevel=2)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(AACO_FIXTURES.intersection(getattr(item, "fixturenames", ())) or item.get_closest_marker("aaco")
           for item in items):
        check_ort(config)


# ------------------------------------------------------------------ termination signals

#: signals that CI systems stop a job with (GitLab, Jenkins and ``docker stop`` send SIGTERM; a
#: closed terminal, SIGHUP); pytest cleans up only on SIGINT, so these are turned into one
TERMINATING_SIGNALS = ("SIGTERM", "SIGHUP")
SIGNALS_KEY: pytest.StashKey[dict[int, Any]] = pytest.StashKey()


class Terminated(KeyboardInterrupt):
    """A terminating signal arrived: pytest stops as on Ctrl-C, so the session's clean-up runs
    (the baseline side's temporary folders are removed; baselines are written atomically)."""


def _interrupt(signum: int, frame: object) -> None:
    raise Terminated(f"stopped by {signal.Signals(signum).name}")


def interrupt_on_termination() -> dict[int, Any]:
    """Make SIGTERM and SIGHUP stop pytest as SIGINT does, where their handler is the default one
    and this is the main thread (a handler the user installed is left alone). Returns the handlers
    replaced, for :func:`restore_signals`."""
    replaced: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return replaced
    for name in TERMINATING_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) == signal.SIG_DFL:
            replaced[signum] = signal.signal(signum, _interrupt)
    return replaced


def restore_signals(replaced: dict[int, Any]) -> None:
    """Put back the handlers :func:`interrupt_on_termination` replaced."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, handler in replaced.items():
        signal.signal(signum, handler)


# ------------------------------------------------------------------ parametrization


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    wants_model = "aaco_model" in metafunc.fixturenames
    wants_provider = "aaco_provider" in metafunc.fixturenames
    if not (wants_model or wants_provider):
        return
    session = get_session(metafunc.config)
    where = metafunc.definition.nodeid
    try:
        marker = AacoMarker.of(metafunc.definition)
    except pytest.UsageError as exc:
        raise pytest.Collector.CollectError(f"{where}: {exc}") from None
    if wants_model:
        try:
            models = session.models()
        except RegistryError as exc:
            raise pytest.Collector.CollectError(str(exc)) from None
        if marker.models is not None:
            unknown = marker.models - {m.name for m in models}
            if unknown:
                names = ", ".join(m.name for m in models)
                raise pytest.Collector.CollectError(f"{where}: @pytest.mark.aaco(models=...)"
                                                    f" names {sorted(unknown)}, not in the registry ({names})")
            models = [m for m in models if m.name in marker.models]
        metafunc.parametrize("aaco_model", models, ids=[m.name for m in models])
    if wants_provider:
        providers = [p for p in session.config.providers
                     if marker.providers is None or set(p.chain or (p.short,)) & set(marker.providers)]
        metafunc.parametrize("aaco_provider", providers, ids=[p.test_id for p in providers])  # a chain's id: its EPs


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def aaco_config(pytestconfig: pytest.Config) -> AacoConfig:
    """The session's frozen :class:`~pytest_aaco.config.AacoConfig`."""
    return get_session(pytestconfig).config


@pytest.fixture
def aaco_model(request: pytest.FixtureRequest) -> ModelSpec:
    """The registry model of this item (parametrized from the registry)."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def aaco_provider(request: pytest.FixtureRequest) -> ProviderSpec:
    """The execution provider of this item (parametrized from ``--aaco-provider``)."""
    return request.param  # type: ignore[no-any-return]


def _crash(request: pytest.FixtureRequest, model: ModelSpec, provider: ProviderSpec, exc: Exception,
           doing: str) -> NoReturn:
    """An exception escaped pytest-aaco's own work for this item: an ``error`` row, the item fails
    with a one-line cause and fix, the session goes on."""
    get_session(request.config).crash_item(request.node, model.name, provider.short, exc, doing)
    raise AssertionError("unreachable: crash_item raises")  # pragma: no cover


def _fail(request: pytest.FixtureRequest, model: ModelSpec, provider: ProviderSpec, reason: str) -> NoReturn:
    """Fail this item only, with a message and no traceback from inside the plugin."""
    get_session(request.config).fail_item(request.node, model.name, provider.short, reason)
    raise AssertionError("unreachable: fail_item raises")  # pragma: no cover


@pytest.fixture
def ort_session(request: pytest.FixtureRequest, aaco_model: ModelSpec, aaco_provider: ProviderSpec) -> SessionHandle:
    """A :class:`~pytest_aaco.measure.inference.SessionHandle`: the InferenceSession (``.session``) for this
    model × EP, built once per (model, provider, options), with its creation time (``.create_ms``).

    Skips (or fails with ``--aaco-strict-provider``) when the EP is not in this ORT build; fails
    with ORT's message when the session cannot be created.
    """
    session = get_session(request.config)
    provider = aaco_provider
    unusable = flavors.missing_problem()  # reached without the collection check (a pytest-xdist worker, say)
    if unusable is None:
        try:
            import onnxruntime  # noqa: F401 - the session needs it now; a build that cannot load is one line
        except ImportError as exc:
            unusable = flavors.import_problem(exc)
    if unusable is not None:
        _fail(request, aaco_model, provider, unusable)  # outside except: no chained trace
    reason = session.skip_reason(provider)
    if reason:
        if session.config.strict_provider:
            _fail(request, aaco_model, provider, f"{reason} (--aaco-strict-provider)")
        session.skip_item(request.node, aaco_model.name, provider.test_id, reason)
    provider = session.provider_for(aaco_model, aaco_provider)  # a fallback chain: the EP that runs here
    crash: Exception | None = None
    try:
        provider, graph = session.graph_for(aaco_model, provider)  # GraphRefused (a SessionError) under "on"
        handle = session.session(aaco_model, provider)
        check_placement(handle)  # a session that fell back whole is refused before anything runs
        unknown = graph_build_problem(provider, handle.session.get_provider_options())
        if unknown:
            raise GraphRefused(f"{aaco_model.name}[{provider.short}]: --aaco-graph={graph.mode}: {unknown}")
        handle.graph = graph.to_dict()
        return handle
    except (SessionError, RegistryError, PlacementError) as exc:
        problem = str(exc)
    except Exception as exc:  # noqa: BLE001 - anything else is an error row for this item only
        crash = exc
    if crash is not None:
        doing = ("write a generated model to the model cache (set AACO_CACHE_DIR to a writable folder)"
                 if isinstance(crash, CacheError) else "build the InferenceSession")
        _crash(request, aaco_model, provider, crash, doing)
    _fail(request, aaco_model, provider, problem)  # outside except: no chained trace


@pytest.fixture
def benchmark_model(request: pytest.FixtureRequest, ort_session: SessionHandle, aaco_model: ModelSpec
                    ) -> Iterator[Callable[..., BenchmarkResult]]:
    """``benchmark_model(**overrides) -> BenchmarkResult``: warmup, then K rounds × N iterations on
    this item's InferenceSession, with telemetry; the gate then judges the last result.

    Overrides: ``warmup``, ``rounds``, ``iterations``. Raises ``pytest.fail`` with ORT's message
    when a run fails or ORT fell back off the requested EP (never recorded as that EP's result).
    """
    session = get_session(request.config)
    provider = ort_session.provider
    marker = AacoMarker.of(request.node)  # validated at collection already
    settings, threshold, gate_p99 = item_settings(session.config, aaco_model, provider, marker)
    run = BenchmarkRun(session.config, aaco_model, provider, ort_session, settings, threshold, gate_p99,
                       side_gate=session.side_gate, lond=session.lond,
                       reference=None if session.side_gate is not None else session.reference_for(provider))
    label = f"{aaco_model.name}[{provider.short}]"
    if session.side_gate is None and not session.config.smoke:  # side by side traces its own cycles
        try:
            run.tracer, run.no_tracer = session.tracer_for(provider)
        except DeviceTimeUnavailable as exc:  # --aaco-device-time=on without a tracer
            _fail(request, aaco_model, provider, str(exc))
    if session.config.smoke:  # one run, outputs finite: no placement check, no measurement, no record
        def smoke(**overrides: Any) -> BenchmarkResult:
            try:
                return smoke_run(ort_session, run.feeds, aaco_model.name)
            except (SessionError, InputError, RegistryError) as exc:
                problem = str(exc)
            _fail(request, aaco_model, provider, problem)

        yield smoke
        return

    def guarded(**overrides: Any) -> BenchmarkResult:
        chosen = run.settings_for(**overrides)
        session.announce(label, chosen)
        crash: Exception | None = None
        try:
            return run.run_with(chosen)
        except (SessionError, InputError, RegistryError, GitRefError, WorkerError) as exc:
            problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - an OS error mid-item is an error row, not a lost item
            crash = exc
        if crash is not None:
            _crash(request, aaco_model, provider, crash, f"measure {label}")
        _fail(request, aaco_model, provider, problem)  # outside except: no chained trace

    session.start_benchmark()
    if provider.is_gpu and session.config.placement != "off":
        try:
            problem = node_placement_problem(run, session.placement)
        except Exception as exc:  # noqa: BLE001 - the placement check never takes the item down unseen
            _crash(request, aaco_model, provider, exc, f"check where {label}'s nodes run")
        if problem is not None and session.config.placement == "warn":
            warnings.warn(AacoProviderWarning(f"{label}: {problem}"), stacklevel=2)
        elif problem is not None:
            _fail(request, aaco_model, provider, problem)
    request.node.stash[RUN_KEY] = run
    yield guarded
