"""The collaborators of the session object (:class:`pytest_aaco.session.AacoSession`), each doing one thing
for it: the item-session cache (:class:`ItemSessions`: the registry, the EPs offered, the InferenceSessions,
reference workloads, tracers, placements and variance priors, each made once), the item's setup
(:class:`ItemSetup`: the parametrization, the ``ort_session`` and ``benchmark_model`` fixtures, and the row of
an item whose setup cannot go on), the session bundle (:class:`BundleKeeper`), the report writers
(:class:`ReportWriters`), the process-wide settings put back at the end (:class:`ProcessSettings`) and the
side-by-side gate of ``--aaco-compare`` (:func:`compare_gate`). pytest's hooks stay on the session object."""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, Protocol

import numpy as np
import pytest

from pytest_aaco import flavors
from pytest_aaco.benchmark import (
    AacoMarker,
    BenchmarkRun,
    build_tracked,
    item_device_threshold,
    item_settings,
    smoke_run,
    terminal_line,
)
from pytest_aaco.config import AacoConfig
from pytest_aaco.extra_passes import node_placement_problem
from pytest_aaco.history.store import RunnerPriors, runner_priors
from pytest_aaco.jsonio import AacoFileError, JSONDict, read_json
from pytest_aaco.measure.compile_cache import set_compile_cache
from pytest_aaco.measure.devicelock import set_lock_timeout
from pytest_aaco.measure.environment import collect_environment
from pytest_aaco.measure.gpulocks import gpu_locks
from pytest_aaco.measure.graph import (
    GraphChoice,
    GraphRefused,
    choose_graph,
    graph_build_problem,
    symbolic_inputs,
    with_graph,
    without_graph,
)
from pytest_aaco.measure.inference import (
    FallbackError,
    SessionError,
    SessionHandle,
    check_placement,
    resolve_iobinding,
    set_ort_log_level,
)
from pytest_aaco.measure.inputs import InputError
from pytest_aaco.measure.modelgen import CacheError, cache_dir
from pytest_aaco.measure.placement import CPU_EP, Placement, PlacementError, placement_report
from pytest_aaco.measure.plugin_eps import PluginEpError, plugin_ep_names, register_libraries
from pytest_aaco.measure.providers import (
    ProviderSpec,
    available_providers,
    resolve_chain,
    session_refusal,
    unavailable_reason,
)
from pytest_aaco.measure.reference_workload import Reference, ReferenceCache
from pytest_aaco.measure.registry import ModelSpec, RegistryError, item_provider, load_registry, model_path
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.measure.stopping import InterruptGuard
from pytest_aaco.records.item import ItemRecord, SessionSummary
from pytest_aaco.reports import ReportContext, github, html, junit, terminal
from pytest_aaco.reports.bundle import ENVIRONMENT_FILE, SessionBundle
from pytest_aaco.reports.cost import META_KEY, CostClock
from pytest_aaco.reports.markup import param_id
from pytest_aaco.reports.progress import announce
from pytest_aaco.samplers.clocks import clock_warnings, read_clock_state
from pytest_aaco.sidebyside.gate import ItemOptions, SideBySideGate
from pytest_aaco.sidebyside.revision import GitRefError
from pytest_aaco.sidebyside.sides import CompareSettings
from pytest_aaco.sidebyside.unchanged import MEASURE_UNCHANGED, skip_unchanged
from pytest_aaco.sidebyside.worker_client import WorkerError
from pytest_aaco.tracers import select
from pytest_aaco.tracers.base import InProcessTracer, TracerError
from pytest_aaco.verdict.multiplicity import LondFdr
from pytest_aaco.warnings import (
    AacoClockWarning,
    AacoProviderWarning,
    AacoReferenceWarning,
    AacoReportWarning,
    AacoWarning,
    escalated,
)
from pytest_aaco.xdist import NO_BUNDLE, shared_bundle

#: what :func:`ignore_in_git` writes: everything in the folder, itself included, as pytest does for ``.pytest_cache``
GITIGNORE_TEXT = "# Created by pytest-aaco automatically: session bundles are build output.\n*\n"


def ignore_in_git(session_dir: Path) -> None:
    """Create the ``.aaco`` folder that holds *session_dir* (the default ``.aaco/sessions``) with a
    ``.gitignore`` of ``*`` in it, so a ``git add -A`` never commits session bundles (issue 21: one
    commit took 57 files, 100,234 lines). Only when this call creates the folder, as pytest does for
    ``.pytest_cache``: an existing ``.aaco`` is left as its owner made it, and a *session_dir*
    outside any ``.aaco`` folder is not touched. Raises OSError when the folder cannot be created."""
    folder = next((f for f in (session_dir, *session_dir.parents) if f.name == ".aaco"), None)
    if folder is None or folder.exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".gitignore").write_text(GITIGNORE_TEXT, encoding="utf-8")


#: InferenceSessions kept alive at once (each may hold a model's weights on the device)
SESSION_CACHE_SIZE = 2


def warn_or_say(pytest_config: pytest.Config, warning: Warning) -> None:
    """Issue *warning* from a session hook; under ``-W error``, where raising from the hook would end
    pytest in an INTERNALERROR or a traceback with the other reports unwritten, the same line goes to
    the terminal instead."""
    try:
        warnings.warn(warning, stacklevel=3)
    except Warning:
        terminal_line(pytest_config)(f"{type(warning).__name__}: {warning}")


#: the item's BenchmarkRun, set by the ``benchmark_model`` fixture and judged after the test body
RUN_KEY: pytest.StashKey[BenchmarkRun] = pytest.StashKey()


class ProcessSettings:
    """The process-wide settings a session sets when it starts, put back by :meth:`restore` at its end (an
    in-process pytester run leaves the outer run's as they were): ORT's log level (``--aaco-ort-log-level``),
    the compile-cache root (``--aaco-compile-cache``) and the device-lock timeout (``--aaco-lock-timeout``).
    The EP libraries of ``--aaco-ep-library`` are registered with onnxruntime; pytest.UsageError, in
    :class:`~pytest_aaco.measure.plugin_eps.PluginEpError`'s words, for one that cannot be."""

    def __init__(self, config: AacoConfig) -> None:
        #: ORT's log level, the compile-cache root and the lock timeout (s) before this session set them
        self._old_ort_log_level = set_ort_log_level(config.ort_log_level)
        self._old_compile_cache = set_compile_cache(config.compile_cache, cache_dir)
        self._old_lock_timeout = set_lock_timeout(config.lock_timeout_s)
        if config.ep_libraries:
            import onnxruntime as ort

            try:
                register_libraries(config.ep_libraries, ort)
            except PluginEpError as exc:
                raise pytest.UsageError(str(exc)) from None

    def restore(self) -> None:
        """Put back the log level, the compile-cache root and the lock timeout this session found."""
        set_ort_log_level(self._old_ort_log_level)
        set_compile_cache(self._old_compile_cache)
        set_lock_timeout(self._old_lock_timeout)


def compare_gate(config: AacoConfig, rootpath: Path) -> SideBySideGate | None:
    """The side-by-side gate of ``--aaco-compare`` (and ``--aaco-compare-python``), run from the project's
    root folder *rootpath*; None without it. pytest.UsageError, in
    :class:`~pytest_aaco.sidebyside.revision.GitRefError`'s words, when the revision cannot be used."""
    if not config.side_by_side:
        return None
    try:
        return SideBySideGate(config.compare_ref, config.compare_python,
                              CompareSettings(budget_s=config.compare_budget_s, confirm=config.confirm,
                                              processes=config.compare_processes), rootpath,
                              ItemOptions(config.provider_options, config.intra_op_threads, config.device_time,
                                          config.cold_start, config.cold_start_threshold, config.max_contention))
    except GitRefError as exc:
        raise pytest.UsageError(str(exc)) from None


class ItemSessions:
    """What the session makes once for its items: the registry's models, the EPs this build offers, the
    EPs that cannot make a session here, the InferenceSessions (the last :data:`SESSION_CACHE_SIZE` kept),
    the reference workloads, kernel tracers, node placements and variance priors. *compares*: the session
    gates side by side (``--aaco-compare``), which never builds the reference workload."""

    def __init__(self, config: AacoConfig, compares: bool) -> None:
        self.config = config
        self.compares = compares
        self._models: list[ModelSpec] | None = None
        self._available: list[str] | None = None
        self._refusals: dict[str, str | None] = {}  # EP name -> why it cannot make a session here (asked once)
        self._sessions: OrderedDict[tuple[object, ...], SessionHandle] = OrderedDict()
        self._placements: dict[tuple[object, ...], Placement] = {}
        self._priors: dict[str, RunnerPriors] = {}
        self._references = ReferenceCache(config.reference, lock=gpu_locks)
        self._tracers: dict[str, tuple[InProcessTracer | None, str | None]] = {}

    def close(self) -> None:
        """Release the reference workloads' sessions (at the session's end)."""
        self._references.close()

    def models(self) -> list[ModelSpec]:
        """The registry's models (loaded once). Raises RegistryError."""
        if self._models is None:
            self._models = load_registry(self.config.models_path)
        return self._models

    def available(self) -> list[str]:
        """EP names this ORT build offers (asked once), with those of the EP libraries registered
        through ``--aaco-ep-library``."""
        if self._available is None:
            import onnxruntime as ort

            self._available = available_providers() + plugin_ep_names(ort)
        return self._available

    def provider_for(self, model: ModelSpec, provider: ProviderSpec) -> ProviderSpec:
        """*provider* with registry options for *model* and ``--aaco-provider-option`` merged in; a fallback
        chain (``--aaco-provider=vitisai|dml|cpu``) first becomes the first of its EPs this runner offers.
        When that is not the chain's first, the reason is the spec's ``chain_reason``, recorded with the item
        (bundle, table, summary), not a warning: falling back is what the user's chain asks for, and a warning
        would fail every item under ``filterwarnings = error``."""
        if provider.chain:
            import onnxruntime as ort

            provider, _ = resolve_chain(provider, self.available(), ort.__version__, self._refusal)
        return item_provider(model, provider, self.config.provider_options)

    def _refusal(self, provider: ProviderSpec) -> str | None:
        """Why *provider*'s EP, listed by ORT, cannot make a session here (:func:`session_refusal`: no
        driver, a missing library), asked once per EP and run; None when it can."""
        if provider.ep_name not in self._refusals:
            self._refusals[provider.ep_name] = session_refusal(provider)
        return self._refusals[provider.ep_name]

    def graph_for(self, model: ModelSpec, provider: ProviderSpec) -> tuple[ProviderSpec, GraphChoice]:
        """*provider* with graph replay added when ``--aaco-graph`` chooses it for *model*, and the
        choice (:func:`pytest_aaco.measure.graph.choose_graph`). The CPU-node check profiles one run
        without the graph (:meth:`placement_of`, cached for the placement check). Raises
        :class:`~pytest_aaco.measure.graph.GraphRefused` under ``on`` when the session cannot be
        captured, SessionError / PlacementError when the model cannot be read or profiled."""
        label = f"{model.name}[{provider.short}]"
        path = model_path(model)

        def cpu_nodes() -> tuple[int, str]:
            report = self.placement_of(path, without_graph(provider), model.dims)
            return report.cpu_nodes, ", ".join(sorted(report.ops.get(CPU_EP, {})))

        choice = choose_graph(self.config.graph, provider.short, label,
                              iobinding=resolve_iobinding(self.config.iobinding, provider),
                              symbolic=lambda: symbolic_inputs(path, model.dims), cpu_nodes=cpu_nodes)
        return with_graph(provider, choice), choice

    def skip_reason(self, provider: ProviderSpec) -> str | None:
        """Why *provider* cannot run in this ORT build, or None."""
        import onnxruntime as ort

        return unavailable_reason(provider, self.available(), ort.__version__)

    def session(self, model: ModelSpec, provider: ProviderSpec) -> SessionHandle:
        """A cached InferenceSession per (model, provider, options); the last few are kept."""
        path = model_path(model)
        key = (str(path), provider.ep_name, tuple(sorted(provider.options.items())), self.config.device_id)
        if key in self._sessions:
            self._sessions.move_to_end(key)
            return self._sessions[key]
        # evicted before the build, so a released session's memory never offsets the new one's
        while len(self._sessions) >= SESSION_CACHE_SIZE:
            self._sessions.popitem(last=False)
        if not self.compares:  # side by side compares sides, never with the reference workload
            self.reference_for(provider)  # built first: its memory is never counted as an item's own
        handle = build_tracked(path, provider, self.config.device_id, self.config.intra_op_threads)
        self._sessions[key] = handle
        return handle

    def reference_for(self, provider: ProviderSpec) -> Reference | None:
        """The session's reference workload on *provider* (built once per EP settings), or None when
        it is off or cannot run there (then an :class:`AacoReferenceWarning` says so, once, and the
        EP's items are judged on raw figures). Raises :class:`~pytest_aaco.measure.inference.FallbackError`
        when the EP itself cannot run here (no driver, a missing library): that is the item's error, in the
        EP's words, not the reference's."""
        if self.config.smoke:  # nothing is measured, so nothing is compared with the machine's speed
            return None
        iobinding = resolve_iobinding(self.config.iobinding, provider)
        try:
            return self._references.get(provider, self.config.device_id, self.config.intra_op_threads, iobinding)
        except FallbackError:
            raise
        except SessionError as exc:
            warnings.warn(AacoReferenceWarning(f"reference workload {self.config.reference} not used on"
                                               f" {provider.ep_name}: {exc}; items are judged on raw figures"
                                               " (--aaco-reference=none silences this)"), stacklevel=2)
            return None

    def tracer_for(self, provider: ProviderSpec) -> tuple[InProcessTracer | None, str | None]:
        """The kernel tracer for *provider*'s stored rounds under ``--aaco-device-time``, found once per EP
        (:func:`pytest_aaco.tracers.select.tracer_for`): ``(tracer, None)``, or ``(None, the line saying
        which package to install)``, or ``(None, None)`` where device time does not apply. Raises
        :class:`~pytest_aaco.tracers.base.TracerError` with ``on`` and no tracer."""
        if provider.short not in self._tracers:
            self._tracers[provider.short] = select.tracer_for(provider.short, self.config.device_time)
        return self._tracers[provider.short]

    def placement(self, handle: SessionHandle, feeds: dict[str, np.ndarray]) -> Placement:
        """Node placement of *handle*'s model and EP (:func:`pytest_aaco.measure.placement.placement_report`),
        profiled once per (model, EP, options). Raises SessionError / PlacementError."""
        return self.placement_of(handle.model_path, without_graph(handle.provider), feeds=feeds)

    def placement_of(self, path: Path, provider: ProviderSpec, dims: Mapping[str, int] | None = None,
                     feeds: dict[str, np.ndarray] | None = None) -> Placement:
        """Node placement of the model at *path* on *provider* (graph replay left out: the profile
        runs host feeds), profiled once per (model, EP, options); *feeds*, else inputs made from
        *dims*. Raises SessionError / PlacementError."""
        provider = without_graph(provider)
        key = (str(path), provider.ep_name, tuple(sorted((k, str(v)) for k, v in provider.options.items())))
        if key not in self._placements:
            self._placements[key] = placement_report(path, provider, self.config.device_id, feeds=feeds, dims=dims)
        return self._placements[key]

    def variance_priors(self, folder: Path) -> RunnerPriors:
        """The machine's variance priors (:func:`pytest_aaco.history.store.runner_priors`), read once."""
        key = str(folder)
        if key not in self._priors:
            self._priors[key] = runner_priors(folder)
        return self._priors[key]


class BundleKeeper:
    """The session bundle (:class:`~pytest_aaco.reports.bundle.SessionBundle`): opened at the first
    measurement, an item file written per item, finished at the session's end. A bundle that cannot be
    written is dropped, said once, and the session goes on without it (:attr:`dropped`: no further
    tries). *meta*: the session's ``session_meta.json`` so far."""

    def __init__(self, pytest_config: pytest.Config, config: AacoConfig, meta: Callable[[], JSONDict]) -> None:
        self.pytest_config = pytest_config
        self.config = config
        self.meta = meta
        self.bundle: SessionBundle | None = None
        #: the bundle could not be written once (said once): no further tries this session
        self.dropped = False

    def open(self) -> None:
        """Open the session bundle at the first measurement (a pytest-xdist worker attaches to its
        controller's); a bundle that cannot be written is dropped, said once (never fails an item)."""
        if not self.config.bundle or self.dropped:
            return
        shared = shared_bundle(self.pytest_config)
        if shared == NO_BUNDLE:  # the controller could not write one, and said so
            self.dropped = True
            return
        if shared:  # a pytest-xdist worker writes into its controller's bundle
            try:
                self.bundle = SessionBundle.attach(shared)
            except OSError as exc:
                self.drop(exc, shared)
            return
        self.folder()  # opens it, or says once why not
        if self.bundle is None:
            return
        try:
            self.write_head(self.bundle)
        except OSError as exc:
            self.drop(exc, self.config.session_dir)

    def drop(self, exc: OSError, where: object) -> None:
        """The session bundle cannot be written: say so once and go on without it (never fail an item)."""
        self.bundle = None
        self.dropped = True
        warn_or_say(self.pytest_config, AacoReportWarning(
            f"session bundle {where}: {exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''};"
            " the session goes on without a bundle: point --aaco-session-dir at a writable folder"))

    def write_item(self, nodeid: str, record: ItemRecord) -> None:
        """Write (or rewrite) the item's file of the bundle; a write that fails drops the bundle, with a warning."""
        if self.bundle is not None:
            try:
                self.bundle.write_item(nodeid, record.to_dict())
            except OSError as exc:
                self.drop(exc, self.bundle.path)

    def folder(self) -> str | None:
        """The session bundle's folder, opened here first if needed (controller); None when off;
        :data:`~pytest_aaco.xdist.NO_BUNDLE` when the folder cannot be written (then one warning names
        it and the option to change, and the session goes on without a bundle, as without xdist)."""
        if not self.config.bundle:
            return None
        if self.bundle is None and not self.dropped:
            try:
                ignore_in_git(self.config.session_dir)
                self.bundle = SessionBundle(self.config.session_dir)
            except OSError as exc:
                self.drop(exc, self.config.session_dir)
        return NO_BUNDLE if self.bundle is None else str(self.bundle.path)

    def environment(self) -> JSONDict | None:
        """The session's environment record: the bundle's when there is one, else collected now."""
        if self.bundle is not None:
            try:
                data = read_json(self.bundle.path / ENVIRONMENT_FILE)
                return data if isinstance(data, dict) else None
            except AacoFileError:
                pass
        return collect_environment(device_id=self.config.device_id)

    def write_head(self, bundle: SessionBundle) -> None:
        """``session_meta.json`` and ``environment.json`` of the bundle."""
        bundle.write_meta(self.meta())
        bundle.write_environment(collect_environment(device_id=self.config.device_id))

    def finish(self, records: list[ItemRecord], summary: SessionSummary, cost: CostClock) -> None:
        """Finish the bundle at the session's end: its head written if a pytest-xdist worker made it,
        ``session_meta.json`` with the finish time, the *summary*, the device-lock waits and the wall-time
        ledger of *cost*; a bundle that cannot be written is dropped, said once."""
        if self.bundle is not None:
            if not (self.bundle.path / ENVIRONMENT_FILE).exists():  # made for xdist workers
                self.write_head(self.bundle)
            meta = self.meta()
            meta["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            meta["summary"] = {**summary.to_dict(), "device_lock": terminal.lock_waits(records)}
            meta[META_KEY] = cost.to_dict(records)
            try:
                self.bundle.finish(meta)
            except OSError as exc:
                self.drop(exc, self.bundle.path)


class ReportWriters:
    """The report writers of the session's end: the terminal summary, JUnit XML, the GitHub job summary
    and the HTML report (:mod:`pytest_aaco.reports`). *cause_and_fix*: the one line that says what went
    wrong in a writer (:func:`pytest_aaco.gate.cause_and_fix`)."""

    def __init__(self, pytest_config: pytest.Config, cause_and_fix: Callable[[BaseException, str], str]) -> None:
        self.pytest_config = pytest_config
        self.cause_and_fix = cause_and_fix

    def terminal_summary(self, terminalreporter: pytest.TerminalReporter, records: list[ItemRecord],
                         context: ReportContext) -> None:
        """The pytest-aaco summary at the end of the terminal output; an error in it is one yellow line."""
        if records:
            try:
                terminal.write_summary(terminalreporter, records, context)
            except Exception as exc:  # noqa: BLE001 - never raise from the terminal summary
                terminalreporter.write_line(self.cause_and_fix(exc, "write the pytest-aaco summary"), yellow=True)

    def write(self, records: list[ItemRecord], context: ReportContext) -> None:
        """Write the JUnit XML, GitHub and HTML reports of *records*; one that cannot be written is said
        (:func:`warn_or_say`) and never loses the others."""
        for name, writer in (("JUnit", junit.write), ("GitHub", github.write), ("HTML", html.write)):
            try:
                with warnings.catch_warnings():  # a dependency's deprecation (matplotlib at its floor with a
                    # current pyparsing) must not end the run under -W error: the report is still right
                    for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
                        warnings.filterwarnings("ignore", category=category)
                    writer(records, context)
            except Exception as exc:  # noqa: BLE001 - one report that cannot be written never loses the others
                warn_or_say(self.pytest_config, AacoReportWarning(self.cause_and_fix(exc, f"write the {name} report")))


class ItemOutcomes(Protocol):
    """What an item's setup (:class:`ItemSetup`) asks of the session (:class:`pytest_aaco.session.AacoSession`):
    store an item's record, end an item with a failed, skipped or ``error`` row (each raises pytest's
    ``fail`` or ``skip``), and the session's LOND procedure."""

    def keep(self, item: pytest.Item, record: ItemRecord) -> None: ...

    def fail_item(self, item: pytest.Item, model: str, provider: str, message: str) -> None: ...

    def skip_item(self, item: pytest.Item, model: str, provider: str, message: str) -> None: ...

    def crash_item(self, item: pytest.Item, model: str, provider: str, exc: Exception, doing: str) -> None: ...

    def lond(self) -> LondFdr: ...


class ItemSetup:
    """An item's setup: the plugin's parametrization (``aaco_model``, ``aaco_provider``) and the ``ort_session``
    and ``benchmark_model`` fixtures (:mod:`pytest_aaco.plugin`). An item whose setup or measurement cannot go
    on ends through *outcomes* (the session) with a failed, skipped or ``error`` row, without a traceback.

    Besides *outcomes* it takes the session's *items* (the item-session cache), *side_gate* (``--aaco-compare``,
    else None), *interruptible* (held while measuring) and *bundles* (opened at the first measurement)."""

    def __init__(self, pytest_config: pytest.Config, config: AacoConfig, items: ItemSessions,
                 side_gate: SideBySideGate | None, interruptible: InterruptGuard, bundles: BundleKeeper,
                 outcomes: ItemOutcomes) -> None:
        self.pytest_config = pytest_config
        self.config = config
        self.items = items
        self.side_gate = side_gate
        self.interruptible = interruptible
        self.bundles = bundles
        self.outcomes = outcomes
        self._started = False

    def start_benchmark(self) -> None:
        """Called before each measurement; the first call checks clocks and opens the bundle."""
        if self._started:
            return
        self._started = True
        self.bundles.open()  # first: under -W error the warning below ends this item, not the session's bundle
        for message in clock_warnings(read_clock_state()):
            warnings.warn(AacoClockWarning(message), stacklevel=3)

    def keep_unmeasured(self, item: pytest.Item, record: ItemRecord) -> None:
        """Keep the record of an item that is not measured (unchanged under ``--aaco-compare``): the
        bundle is opened first, as before a measurement, so its record is written there too."""
        self.start_benchmark()
        self.outcomes.keep(item, record)

    def parametrize(self, metafunc: pytest.Metafunc, wants_model: bool, wants_provider: bool) -> None:
        """Parametrize ``aaco_model`` from the registry and ``aaco_provider`` from ``--aaco-provider``,
        narrowed by the item's ``aaco`` marker; a bad marker or registry is a collection error."""
        where = metafunc.definition.nodeid
        try:
            marker = AacoMarker.of(metafunc.definition)
        except pytest.UsageError as exc:
            raise pytest.Collector.CollectError(f"{where}: {exc}") from None
        if wants_model:
            try:
                models = self.items.models()
            except RegistryError as exc:
                raise pytest.Collector.CollectError(str(exc)) from None
            if marker.models is not None:
                unknown = marker.models - {m.name for m in models}
                if unknown:
                    names = ", ".join(m.name for m in models)
                    raise pytest.Collector.CollectError(f"{where}: @pytest.mark.aaco(models=...)"
                                                        f" names {sorted(unknown)}, not in the registry ({names})")
                models = [m for m in models if m.name in marker.models]
            metafunc.parametrize("aaco_model", models, ids=[param_id(m.name) for m in models])
        if wants_provider:
            providers = [p for p in self.config.providers
                         if marker.providers is None or set(p.chain or (p.short,)) & set(marker.providers)]
            metafunc.parametrize("aaco_provider", providers, ids=[p.test_id for p in providers])  # a chain: its EPs

    def _crash(self, request: pytest.FixtureRequest, model: ModelSpec, provider: ProviderSpec, exc: Exception,
               doing: str) -> NoReturn:
        """An exception escaped pytest-aaco's own work for this item: an ``error`` row, the item fails
        with a one-line cause and fix, the session goes on."""
        self.outcomes.crash_item(request.node, model.name, provider.short, exc, doing)
        raise AssertionError("unreachable: crash_item raises")  # pragma: no cover

    def _fail(self, request: pytest.FixtureRequest, model: ModelSpec, provider: ProviderSpec, reason: str) -> NoReturn:
        """Fail this item only, with a message and no traceback from inside the plugin."""
        self.outcomes.fail_item(request.node, model.name, provider.short, reason)
        raise AssertionError("unreachable: fail_item raises")  # pragma: no cover

    def ort_session_for(self, request: pytest.FixtureRequest, model: ModelSpec, provider: ProviderSpec
                        ) -> SessionHandle:
        """The ``ort_session`` fixture's value (see :func:`pytest_aaco.plugin.ort_session`)."""
        requested = provider
        unusable = flavors.missing_problem()  # reached without the collection check (a pytest-xdist worker, say)
        if unusable is None:
            try:
                import onnxruntime  # noqa: F401 - the session needs it now; a build that cannot load is one line
            except ImportError as exc:
                unusable = flavors.import_problem(exc)
        if unusable is not None:
            self._fail(request, model, provider, unusable)  # outside except: no chained trace
        reason = self.items.skip_reason(provider)
        if reason:
            if self.config.strict_provider:
                self._fail(request, model, provider, f"{reason} (--aaco-strict-provider)")
            self.outcomes.skip_item(request.node, model.name, provider.test_id, reason)
        provider = self.items.provider_for(model, requested)  # a fallback chain: the EP that runs here
        if self.side_gate is not None:  # --aaco-compare: an unchanged item is skipped before its session is built
            skip_unchanged(self.side_gate, request.node, model, provider.short,
                           self.config.compare_unchanged == MEASURE_UNCHANGED or self.config.save_baseline,
                           lambda: item_settings(self.config, model, provider, AacoMarker.of(request.node))[1],
                           partial(self.keep_unmeasured, request.node))
        crash: Exception | None = None
        try:
            provider, graph = self.items.graph_for(model, provider)  # GraphRefused (a SessionError) under "on"
            handle = self.items.session(model, provider)
            check_placement(handle)  # a session that fell back whole is refused before anything runs
            unknown = graph_build_problem(provider, handle.session.get_provider_options())
            if unknown:
                raise GraphRefused(f"{model.name}[{provider.short}]: --aaco-graph={graph.mode}: {unknown}")
            handle.graph = graph.to_dict()
            return handle
        except (SessionError, RegistryError, PlacementError) as exc:
            problem = str(exc)
        except AacoWarning as exc:  # -W error made one of ours an error (model cache, reference): named, no crash
            problem = escalated(exc)
        except Exception as exc:  # noqa: BLE001 - anything else is an error row for this item only
            crash = exc
        if crash is not None:
            doing = ("write a generated model to the model cache (set AACO_CACHE_DIR to a writable folder)"
                     if isinstance(crash, CacheError) else "build the InferenceSession")
            self._crash(request, model, provider, crash, doing)
        self._fail(request, model, provider, problem)  # outside except: no chained trace

    def benchmark_for(self, request: pytest.FixtureRequest, handle: SessionHandle, model: ModelSpec
                      ) -> Iterator[Callable[..., BenchmarkResult]]:
        """The ``benchmark_model`` fixture (see :func:`pytest_aaco.plugin.benchmark_model`)."""
        provider = handle.provider
        marker = AacoMarker.of(request.node)  # validated at collection already
        settings, threshold, gate_p99 = item_settings(self.config, model, provider, marker)
        run = BenchmarkRun(self.config, model, provider, handle, settings, threshold, gate_p99,
                           device_threshold=item_device_threshold(self.config, model, marker),
                           side_gate=self.side_gate, lond=self.outcomes.lond, say=terminal_line(self.pytest_config),
                           reference=None if self.side_gate is not None else self.items.reference_for(provider))
        label = f"{model.name}[{provider.short}]"
        if self.side_gate is None and not self.config.smoke:  # side by side traces its own cycles
            try:
                run.tracer, run.no_tracer = self.items.tracer_for(provider)
            except TracerError as exc:  # --aaco-device-time=on without a tracer
                self._fail(request, model, provider, str(exc))
        if self.config.smoke:  # one run, outputs finite: no placement check, no measurement, no record
            def smoke(**overrides: Any) -> BenchmarkResult:
                try:
                    return smoke_run(handle, run.feeds, model.name)
                except (SessionError, InputError, RegistryError) as exc:
                    problem = str(exc)
                self._fail(request, model, provider, problem)

            yield smoke
            return

        def guarded(**overrides: Any) -> BenchmarkResult:
            bad: str | None = None
            try:
                chosen = run.settings_for(**overrides)
            except ValueError as exc:  # a count out of bounds: this item fails, naming it
                bad = f"{label}: {exc}"
            if bad is not None:
                self._fail(request, model, provider, bad)  # outside except: no chained trace
            announce(self.pytest_config, label, chosen)
            crash: Exception | None = None
            try:
                with self.interruptible:  # a stopped run cleans up as on Ctrl-C
                    return run.run_with(chosen)
            except (SessionError, InputError, RegistryError, GitRefError, WorkerError) as exc:
                problem = str(exc)
            except AacoWarning as exc:  # -W error made one of ours an error (the device lock): named, no crash
                problem = escalated(exc)
            except Exception as exc:  # noqa: BLE001 - an OS error mid-item is an error row, not a lost item
                crash = exc
            if crash is not None:
                self._crash(request, model, provider, crash, f"measure {label}")
            self._fail(request, model, provider, problem)  # outside except: no chained trace

        self.start_benchmark()
        if provider.is_gpu and self.config.placement != "off":
            try:
                problem = node_placement_problem(run, self.items.placement)
            except Exception as exc:  # noqa: BLE001 - the placement check never takes the item down unseen
                self._crash(request, model, provider, exc, f"check where {label}'s nodes run")
            if problem is not None and self.config.placement == "warn":
                warnings.warn(AacoProviderWarning(f"{label}: {problem}"), stacklevel=2)
            elif problem is not None:
                self._fail(request, model, provider, problem)
        request.node.stash[RUN_KEY] = run
        yield guarded

