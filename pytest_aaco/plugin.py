"""pytest entry point (``pytest11: aaco``): options, hooks and fixtures only.

Importing this module is cheap: onnxruntime, scipy and the GPU libraries load only when a
benchmark fixture or an ``--aaco-*`` feature needs them.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from .config import AacoConfig, add_options
from .gate import PLUGIN_NAME, RUN_KEY, AacoPlugin, get_plugin
from .providers import ProviderError, ProviderSpec, parse_provider
from .registry import ModelSpec, RegistryError

MARKER_HELP = (
    "aaco(models=None, providers=None, threshold=None, warmup=None, iterations=None, rounds=None,"
    " gate_p99=None): narrow the models or execution providers of a pytest-aaco benchmark, or override"
    " its settings"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    plugin = AacoPlugin(config, AacoConfig.from_pytest_config(config))
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    from .reports.lifecycle import start_reports

    start_reports(plugin)


# ------------------------------------------------------------------ parametrization


def _narrow(values: Any, option: str) -> set[str] | None:
    if values is None:
        return None
    return {values} if isinstance(values, str) else set(values)


def _marker_providers(names: set[str] | None) -> set[str] | None:
    if names is None:
        return None
    try:
        return {parse_provider(n).short for n in names}
    except ProviderError as exc:
        raise pytest.Collector.CollectError(f"@pytest.mark.aaco(providers=...): {exc}") from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    wants_model = "aaco_model" in metafunc.fixturenames
    wants_provider = "aaco_provider" in metafunc.fixturenames
    if not (wants_model or wants_provider):
        return
    plugin = get_plugin(metafunc.config)
    marker = metafunc.definition.get_closest_marker("aaco")
    kwargs = marker.kwargs if marker else {}
    if wants_model:
        try:
            models = plugin.models()
        except RegistryError as exc:
            raise pytest.Collector.CollectError(str(exc)) from None
        wanted = _narrow(kwargs.get("models"), "models")
        if wanted is not None:
            unknown = wanted - {m.name for m in models}
            if unknown:
                names = ", ".join(m.name for m in models)
                raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: @pytest.mark.aaco(models=...)"
                                                    f" names {sorted(unknown)}, not in the registry ({names})")
            models = [m for m in models if m.name in wanted]
        metafunc.parametrize("aaco_model", models, ids=[m.name for m in models])
    if wants_provider:
        providers = list(plugin.config.providers)
        wanted_p = _marker_providers(_narrow(kwargs.get("providers"), "providers"))
        if wanted_p is not None:
            providers = [p for p in providers if p.short in wanted_p]
        metafunc.parametrize("aaco_provider", providers, ids=[p.short for p in providers])


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def aaco_config(pytestconfig: pytest.Config) -> AacoConfig:
    """The session's frozen :class:`~pytest_aaco.config.AacoConfig`."""
    return get_plugin(pytestconfig).config


@pytest.fixture
def aaco_model(request: pytest.FixtureRequest) -> ModelSpec:
    """The registry model of this item (parametrized from the registry)."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def aaco_provider(request: pytest.FixtureRequest) -> ProviderSpec:
    """The execution provider of this item (parametrized from ``--aaco-provider``)."""
    return request.param  # type: ignore[no-any-return]


def _record_failure(request: pytest.FixtureRequest, model: ModelSpec, provider: ProviderSpec, reason: str) -> None:
    """Fail this item only, with a message and no traceback from inside the plugin."""
    from .judge import record_error

    record_error(get_plugin(request.config), request.node, model.name, provider.short, reason, "failed")
    pytest.fail(reason, pytrace=False)


def _unavailable(request: pytest.FixtureRequest, model: ModelSpec, provider: ProviderSpec, reason: str) -> None:
    """Skip the item for an EP this ORT build lacks, or fail it under ``--aaco-strict-provider``."""
    from .judge import record_error

    plugin = get_plugin(request.config)
    if plugin.config.strict_provider:
        record_error(plugin, request.node, model.name, provider.short, reason, "failed")
        pytest.fail(f"{reason} (--aaco-strict-provider)", pytrace=False)
    record_error(plugin, request.node, model.name, provider.short, reason, "skipped")
    pytest.skip(reason)


def _check_placement(request: pytest.FixtureRequest, plugin: Any, run: Any) -> None:
    """Fail (``--aaco-placement=check``) or warn (``warn``) when the compute fell to the CPU, so it
    is never recorded as the device EP's result."""
    from .benchmark import placement_problem
    from .warnings import AacoProviderWarning

    problem = placement_problem(plugin, run)
    if problem is None:
        return
    if plugin.config.placement == "warn":
        warnings.warn(AacoProviderWarning(f"{run.model.name}[{run.provider.short}]: {problem}"), stacklevel=2)
        return
    _record_failure(request, run.model, run.provider, problem)


@pytest.fixture
def ort_session(request: pytest.FixtureRequest, aaco_model: ModelSpec, aaco_provider: ProviderSpec) -> Any:
    """A :class:`~pytest_aaco.runner.SessionHandle`: the InferenceSession (``.session``) for this
    model × EP, built once per (model, provider, options), with its creation time (``.create_ms``).

    Skips (or fails with ``--aaco-strict-provider``) when the EP is not in this ORT build; fails
    with ORT's message when the session cannot be created.
    """
    from .runner import SessionError, check_placement

    plugin = get_plugin(request.config)
    provider = plugin.provider_for(aaco_model, aaco_provider)
    reason = plugin.skip_reason(provider)
    if reason:
        _unavailable(request, aaco_model, provider, reason)
    try:
        handle = plugin.session(aaco_model, provider)
        check_placement(handle)  # a session that fell back whole is refused before anything runs
        return handle
    except (SessionError, RegistryError) as exc:
        problem = str(exc)
    _record_failure(request, aaco_model, provider, problem)


@pytest.fixture
def benchmark_model(request: pytest.FixtureRequest, ort_session: Any, aaco_model: ModelSpec) -> Iterator[Any]:
    """``benchmark_model(**overrides) -> BenchmarkResult``: warmup, then K rounds × N iterations on
    this item's InferenceSession, with telemetry; the gate then judges the last result.

    Overrides: ``warmup``, ``rounds``, ``iterations``. Raises ``pytest.fail`` with ORT's message
    when a run fails or ORT fell back off the requested EP (never recorded as that EP's result).
    """
    from .benchmark import BenchmarkRun, item_settings, marker_overrides
    from .inputs import InputError
    from .runner import SessionError

    plugin = get_plugin(request.config)
    try:
        marker = marker_overrides(request.node)
    except pytest.UsageError as exc:
        problem = f"{request.node.nodeid}: {exc}"
        marker = None
    if marker is None:
        pytest.fail(problem, pytrace=False)
    settings, threshold, gate_p99 = item_settings(plugin.config, aaco_model, ort_session.provider, marker)
    run = BenchmarkRun(plugin.config, aaco_model, ort_session.provider, ort_session, settings, threshold, gate_p99)

    def guarded(**overrides: Any) -> Any:
        from .reports.progress import announce

        chosen = run.settings_for(**overrides)
        announce(plugin, f"{aaco_model.name}[{ort_session.provider.short}]", chosen)
        try:
            return run.run_with(chosen)
        except (SessionError, InputError, RegistryError) as exc:
            problem = str(exc)
        _record_failure(request, aaco_model, ort_session.provider, problem)  # outside except: no chained trace

    from .reports.lifecycle import first_benchmark

    first_benchmark(plugin)
    if ort_session.provider.is_gpu and plugin.config.placement != "off":
        _check_placement(request, plugin, run)
    request.node.stash[RUN_KEY] = run
    yield guarded
