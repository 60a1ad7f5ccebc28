"""The one session object of pytest-aaco: caches, session-wide error control, the records, and
every pytest side effect of the gate (stash, ``pytest.fail``, hook calls, the bundle, reports).

Registered with pytest's plugin manager as ``aaco-plugin``; reach it with :func:`get_session`.
The per-item decision itself is :func:`pytest_aaco.gate.judge`, which needs no pytest.

Session-wide false-alarm control: items are judged one at a time, as pytest runs them, with
LOND (Javanmard & Montanari, Ann. Statist. 2018). The i-th gated item is tested at
``alpha_i = q * (D + 1) / m``, where ``m`` is the number of benchmark items collected and ``D``
the regressions found so far. Each decision is final when made, so the failure stays on the
item that regressed, and the session's false discovery rate stays at most ``q`` (``--aaco-fdr``).

Reports open with the first benchmark, not at configure time, so ``pytest --help`` and runs
without benchmarks stay fast.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

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
from pytest_aaco.gate import GateContext, cause_and_fix, crash_record, error_record, judge, mark_error
from pytest_aaco.history.across import other_runner_gate
from pytest_aaco.history.judge import MachineOffset
from pytest_aaco.history.store import RunnerPriors, forget_parsed, report_baselines, runner_priors
from pytest_aaco.jsonio import AacoFileError, JSONDict, read_json
from pytest_aaco.measure.commit import commit_info
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
    MeasureSettings,
    SessionError,
    SessionHandle,
    check_placement,
    resolve_iobinding,
    set_ort_log_level,
)
from pytest_aaco.measure.inputs import InputError
from pytest_aaco.measure.modelgen import CacheError, cache_dir, drop_fallback_caches
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
from pytest_aaco.measure.stopping import InterruptGuard, add_last_words
from pytest_aaco.records import (
    PLUGIN_NAME,
    ItemRecord,
    Outcome,
    SessionSummary,
)
from pytest_aaco.redact import redact_argv
from pytest_aaco.reports import ReportContext, github, html, junit, terminal
from pytest_aaco.reports.bundle import ENVIRONMENT_FILE, SessionBundle
from pytest_aaco.reports.cost import COST_PLUGIN_NAME, META_KEY, CostClock
from pytest_aaco.reports.markup import param_id, terminal_block
from pytest_aaco.reports.progress import announce, write_line
from pytest_aaco.reports.wording import failure_text
from pytest_aaco.samplers.clocks import clock_warnings, read_clock_state
from pytest_aaco.samplers.gpus import physical_gpu
from pytest_aaco.sidebyside.cycles import CompareSettings
from pytest_aaco.sidebyside.gate import ItemOptions, SideBySideGate
from pytest_aaco.sidebyside.revision import GitRefError
from pytest_aaco.sidebyside.unchanged import MEASURE_UNCHANGED, note_triage, skip_unchanged
from pytest_aaco.sidebyside.worker_client import WorkerError
from pytest_aaco.tracers import select
from pytest_aaco.tracers.base import InProcessTracer, TracerError
from pytest_aaco.verdict.stats import LondFdr
from pytest_aaco.warnings import (
    AacoBaselineWarning,
    AacoClockWarning,
    AacoProviderWarning,
    AacoReferenceWarning,
    AacoReportWarning,
)
from pytest_aaco.xdist import NO_BUNDLE, XDIST_PLUGIN_NAME, XdistBridge, attach_record, merge_lond, shared_bundle

#: InferenceSessions kept alive at once (each may hold a model's weights on the device)
SESSION_CACHE_SIZE = 2

#: the item's BenchmarkRun, set by the ``benchmark_model`` fixture and judged after the test body
RUN_KEY: pytest.StashKey[BenchmarkRun] = pytest.StashKey()
#: the item's record, once judged or once it failed or was skipped by the plugin
RECORD_KEY: pytest.StashKey[ItemRecord] = pytest.StashKey()
#: pytest's duration of the item's phases so far (setup, call, teardown; s)
DURATION_KEY: pytest.StashKey[float] = pytest.StashKey()


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


class AacoSession:
    """Session state of pytest-aaco, registered as ``aaco-plugin``; reach it with :func:`get_session`."""

    def __init__(self, pytest_config: pytest.Config, config: AacoConfig) -> None:
        self.pytest_config = pytest_config
        self.config = config
        #: ORT's log level before this session set ``--aaco-ort-log-level``, put back by pytest_unconfigure
        self._old_ort_log_level = set_ort_log_level(config.ort_log_level)
        self._old_compile_cache = set_compile_cache(config.compile_cache, cache_dir)
        self._old_lock_timeout = set_lock_timeout(config.lock_timeout_s)
        if config.ep_libraries:
            import onnxruntime as ort

            try:
                register_libraries(config.ep_libraries, ort)
            except PluginEpError as exc:
                raise pytest.UsageError(str(exc)) from None
        #: SIGTERM/SIGHUP as Ctrl-C, held while measuring, saving, or side by side for the whole session
        self.interruptible = InterruptGuard()
        #: a second signal inside a run that cannot be stopped ends the process: the table so far first
        self._unsay = add_last_words(lambda: terminal.write_interrupted(self.pytest_config, self.records))
        self.records: list[ItemRecord] = []
        self.gated_items = 0
        self.bundle: SessionBundle | None = None
        #: the bundle could not be written once (said once): no further tries this session
        self.bundle_dropped = False
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._models: list[ModelSpec] | None = None
        self._available: list[str] | None = None
        self._refusals: dict[str, str | None] = {}  # EP name -> why it cannot make a session here (asked once)
        self._sessions: OrderedDict[tuple[object, ...], SessionHandle] = OrderedDict()
        self._placements: dict[tuple[object, ...], Placement] = {}
        self._priors: dict[str, RunnerPriors] = {}
        forget_parsed()  # baseline files are parsed once per session (history.store.read_baseline)
        self._lond: LondFdr | None = None
        #: the pytest-xdist hooks, registered beside this object (:mod:`pytest_aaco.xdist`)
        self.xdist = XdistBridge(pytest_config, self.records, self.bundle_folder,
                                 self.config.session_dir if self.config.bundle else None)
        self._started = False
        self.side_gate: SideBySideGate | None = None
        #: shards, and the wall-time ledger of the bundle (:mod:`pytest_aaco.reports.cost`)
        self.cost = CostClock(config.shard)
        if config.side_by_side:
            try:
                self.side_gate = SideBySideGate(config.compare_ref, config.compare_python,
                                                CompareSettings(budget_s=config.compare_budget_s,
                                                                confirm=config.confirm),
                                                Path(str(pytest_config.rootpath)),
                                                ItemOptions(config.provider_options, config.intra_op_threads,
                                                            config.device_time, config.cold_start,
                                                            config.cold_start_threshold, config.max_contention))
            except GitRefError as exc:
                raise pytest.UsageError(str(exc)) from None
        self._references = ReferenceCache(config.reference, lock=gpu_locks)
        self.machine_offset = MachineOffset()
        self._tracers: dict[str, tuple[InProcessTracer | None, str | None]] = {}
        if self.side_gate is not None and self.side_gate.tree is not None:  # a temporary tree to remove
            self.interruptible.hold()  # however the run ends; released when the tree is

    # ------------------------------------------------------------ registry and providers

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
        if self.side_gate is None:  # side by side compares sides, never with the reference workload
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

    # ------------------------------------------------------------ session-wide error control

    def lond(self) -> LondFdr:
        """The session's LOND procedure over the benchmark items collected (made at first use)."""
        if self._lond is None:
            self._lond = LondFdr(self.config.fdr, max(self.gated_items, 1))
        return self._lond

    @property
    def lond_state(self) -> JSONDict | None:
        """``LondFdr.to_dict()`` once an item was gated, else None. On a pytest-xdist controller,
        the workers' states summed (:func:`pytest_aaco.xdist.merge_lond`)."""
        return merge_lond(([] if self._lond is None else [self._lond.to_dict()]) + self.xdist.worker_londs)

    # ------------------------------------------------------------ items

    def announce(self, label: str, settings: MeasureSettings) -> None:
        """Say on the terminal that *label* is about to be measured."""
        announce(self.pytest_config, label, settings)

    def start_benchmark(self) -> None:
        """Called before each measurement; the first call checks clocks and opens the bundle."""
        if self._started:
            return
        self._started = True
        for message in clock_warnings(read_clock_state()):
            warnings.warn(AacoClockWarning(message), stacklevel=3)
        if not self.config.bundle or self.bundle_dropped:
            return
        shared = shared_bundle(self.pytest_config)
        if shared == NO_BUNDLE:  # the controller could not write one, and said so
            self.bundle_dropped = True
            return
        if shared:  # a pytest-xdist worker writes into its controller's bundle
            try:
                self.bundle = SessionBundle.attach(shared)
            except OSError as exc:
                self._drop_bundle(exc, shared)
            return
        self.bundle_folder()  # opens it, or says once why not
        if self.bundle is None:
            return
        try:
            self._write_head(self.bundle)
        except OSError as exc:
            self._drop_bundle(exc, self.config.session_dir)

    def _drop_bundle(self, exc: OSError, where: object) -> None:
        """The session bundle cannot be written: say so once and go on without it (never fail an item)."""
        self.bundle = None
        self.bundle_dropped = True
        self._warn_or_say(AacoReportWarning(
            f"session bundle {where}: {exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''};"
            " the session goes on without a bundle: point --aaco-session-dir at a writable folder"))

    def keep(self, item: pytest.Item, record: ItemRecord) -> None:
        """Store *record*, with the physical GPU it ran on (``gpu``: ``PhysicalGpu.to_dict()``, GPU EPs only):
        the session's list, the item's stash, pytest's ``--junitxml`` properties
        (:func:`pytest_aaco.reports.junit.properties`), the bundle (written now) and the
        ``pytest_aaco_verdict`` hook.

        Never raises for the item's own work: a failing ``pytest_aaco_verdict`` hook makes the record
        an ``error`` row, a bundle that cannot be written is dropped with a warning."""
        if record.gpu is None:
            gpu = physical_gpu(record.provider, self.config.device_id)
            record.gpu = None if gpu is None else gpu.to_dict()
        note_triage(item, record)
        self.records.append(record)
        item.stash[RECORD_KEY] = record
        try:
            item.config.hook.pytest_aaco_verdict(config=item.config, item=item, record=record.to_dict())
        except Exception as exc:  # noqa: BLE001 - one broken hook never takes the run down
            mark_error(record, cause_and_fix(exc, "run a pytest_aaco_verdict hook"))
        item.user_properties.extend(junit.properties(record))
        self._write_item(item.nodeid, record)

    def keep_unmeasured(self, item: pytest.Item, record: ItemRecord) -> None:
        """:meth:`keep` for an item that is not measured (unchanged under ``--aaco-compare``): the
        bundle is opened first, as before a measurement, so its record is written there too."""
        self.start_benchmark()
        self.keep(item, record)

    def _write_item(self, nodeid: str, record: ItemRecord) -> None:
        """Write (or rewrite) the item's file of the bundle; a write that fails drops the bundle, with a warning."""
        if self.bundle is not None:
            try:
                self.bundle.write_item(nodeid, record.to_dict())
            except OSError as exc:
                self._drop_bundle(exc, self.bundle.path)

    def judge_item(self, item: pytest.Item, run: BenchmarkRun, user_failed: bool = False) -> None:
        """Judge the last result of *run*; fail *item* through ``pytest.fail`` when it must fail.

        Any exception in the judging (a ``pytest_aaco_fingerprint`` hook, the disk) makes the item an
        ``error`` row with a one-line cause and fix, its measurement kept. With *user_failed* (the test
        body raised after measuring) the item is judged, recorded and saved, and fails for the user's
        reason only.
        """
        try:
            extra: JSONDict = {}
            item.config.hook.pytest_aaco_fingerprint(config=item.config, item=item, fields=extra)
            context = GateContext(self.config, self.lond(), self.variance_priors, self.announce,
                                  self.machine_offset, self.commit_info, other_runner_gate)
            with self.interruptible:  # a confirmation look, then the baseline save
                record = judge(item.nodeid, run, extra, context)
        except Exception as exc:  # noqa: BLE001 - the item becomes an error row, the session goes on
            record = crash_record(item.nodeid, run.model.name, run.provider.short,
                                  cause_and_fix(exc, "judge the measurement"), run.results[-1])
        if item.location[1] is not None:  # the test's line (1-based), for the GitHub annotations
            record.extra.setdefault("test_line", item.location[1] + 1)
        with self.interruptible:  # the bundle's item file
            self.keep(item, record)
        for text in record.warnings:  # a baseline moved aside or a history archived, naming the files
            warnings.warn(AacoBaselineWarning(text), stacklevel=2)
        if record.fails and not user_failed:
            pytest.fail(terminal_block(failure_text(record)), pytrace=False)

    def crash_item(self, item: pytest.Item, model: str, provider: str, exc: Exception, doing: str) -> None:
        """*exc* escaped pytest-aaco's own work for *item* while it tried *doing*: keep an ``error`` row
        with a one-line cause and fix (:func:`pytest_aaco.gate.cause_and_fix`) and fail the item, no traceback."""
        message = cause_and_fix(exc, doing)
        self.keep(item, crash_record(item.nodeid, model, provider, message))
        pytest.fail(terminal_block(message), pytrace=False)

    def fail_item(self, item: pytest.Item, model: str, provider: str, message: str) -> None:
        """Keep a failed record of *item* and fail it with *message*, without a traceback."""
        self.keep(item, error_record(item.nodeid, model, provider, message, Outcome.FAILED))
        pytest.fail(terminal_block(message), pytrace=False)

    def skip_item(self, item: pytest.Item, model: str, provider: str, message: str) -> None:
        """Keep a skipped record of *item* and skip it with *message*."""
        self.keep(item, error_record(item.nodeid, model, provider, message, Outcome.SKIPPED))
        pytest.skip(terminal_block(message))

    # ------------------------------------------------------------ the plugin's parametrization and fixtures

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
                models = self.models()
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
        self.crash_item(request.node, model.name, provider.short, exc, doing)
        raise AssertionError("unreachable: crash_item raises")  # pragma: no cover

    def _fail(self, request: pytest.FixtureRequest, model: ModelSpec, provider: ProviderSpec, reason: str) -> NoReturn:
        """Fail this item only, with a message and no traceback from inside the plugin."""
        self.fail_item(request.node, model.name, provider.short, reason)
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
        reason = self.skip_reason(provider)
        if reason:
            if self.config.strict_provider:
                self._fail(request, model, provider, f"{reason} (--aaco-strict-provider)")
            self.skip_item(request.node, model.name, provider.test_id, reason)
        provider = self.provider_for(model, requested)  # a fallback chain: the EP that runs here
        if self.side_gate is not None:  # --aaco-compare: an unchanged item is skipped before its session is built
            skip_unchanged(self.side_gate, request.node, model, provider.short,
                           self.config.compare_unchanged == MEASURE_UNCHANGED or self.config.save_baseline,
                           lambda: item_settings(self.config, model, provider, AacoMarker.of(request.node))[1],
                           partial(self.keep_unmeasured, request.node))
        crash: Exception | None = None
        try:
            provider, graph = self.graph_for(model, provider)  # GraphRefused (a SessionError) under "on"
            handle = self.session(model, provider)
            check_placement(handle)  # a session that fell back whole is refused before anything runs
            unknown = graph_build_problem(provider, handle.session.get_provider_options())
            if unknown:
                raise GraphRefused(f"{model.name}[{provider.short}]: --aaco-graph={graph.mode}: {unknown}")
            handle.graph = graph.to_dict()
            return handle
        except (SessionError, RegistryError, PlacementError) as exc:
            problem = str(exc)
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
                           side_gate=self.side_gate, lond=self.lond, say=terminal_line(self.pytest_config),
                           reference=None if self.side_gate is not None else self.reference_for(provider))
        label = f"{model.name}[{provider.short}]"
        if self.side_gate is None and not self.config.smoke:  # side by side traces its own cycles
            try:
                run.tracer, run.no_tracer = self.tracer_for(provider)
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
            self.announce(label, chosen)
            crash: Exception | None = None
            try:
                with self.interruptible:  # a stopped run cleans up as on Ctrl-C
                    return run.run_with(chosen)
            except (SessionError, InputError, RegistryError, GitRefError, WorkerError) as exc:
                problem = str(exc)
            except Exception as exc:  # noqa: BLE001 - an OS error mid-item is an error row, not a lost item
                crash = exc
            if crash is not None:
                self._crash(request, model, provider, crash, f"measure {label}")
            self._fail(request, model, provider, problem)  # outside except: no chained trace

        self.start_benchmark()
        if provider.is_gpu and self.config.placement != "off":
            try:
                problem = node_placement_problem(run, self.placement)
            except Exception as exc:  # noqa: BLE001 - the placement check never takes the item down unseen
                self._crash(request, model, provider, exc, f"check where {label}'s nodes run")
            if problem is not None and self.config.placement == "warn":
                warnings.warn(AacoProviderWarning(f"{label}: {problem}"), stacklevel=2)
            elif problem is not None:
                self._fail(request, model, provider, problem)
        request.node.stash[RUN_KEY] = run
        yield guarded

    # ------------------------------------------------------------ hooks

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # counted after deselection (-k, -m), so m is the number of benchmarks that will run
        self.gated_items = sum(1 for item in session.items if "benchmark_model" in getattr(item, "fixturenames", ()))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        try:
            result = yield
        except (KeyboardInterrupt, SystemExit, pytest.exit.Exception):
            raise
        except BaseException:  # the test body failed (or skipped) after measuring: the measurement is valid
            self._judge_measured(item, user_failed=True)
            raise
        self._judge_measured(item, user_failed=False)
        return result

    def _judge_measured(self, item: pytest.Item, user_failed: bool) -> None:
        run = item.stash.get(RUN_KEY, None)
        if run is not None and run.results and RECORD_KEY not in item.stash:
            self.judge_item(item, run, user_failed)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        duration = item.stash.get(DURATION_KEY, 0.0) + float(report.duration or 0.0)
        item.stash[DURATION_KEY] = duration
        record = item.stash.get(RECORD_KEY, None)
        if record is not None:  # pytest's own duration of the item so far (s), for --aaco-junit's case time
            record.extra["duration_s"] = round(duration, 6)
            if call.when == "teardown":
                self._write_item(item.nodeid, record)
        if record is not None and call.when == "call" and call.excinfo is not None and record.outcome == Outcome.PASSED:
            # the test body failed (or skipped itself) after the record was kept
            skipped = call.excinfo.errisinstance(pytest.skip.Exception)
            record.outcome = Outcome.SKIPPED if skipped else Outcome.FAILED
            self._write_item(item.nodeid, record)
        if self.is_worker and record is not None and call.when == "teardown":
            attach_record(report, record)
        return report

    # ------------------------------------------------------------ pytest-xdist

    @property
    def is_worker(self) -> bool:
        return self.xdist.is_worker

    def bundle_folder(self) -> str | None:
        """The session bundle's folder, opened here first if needed (controller); None when off;
        :data:`~pytest_aaco.xdist.NO_BUNDLE` when the folder cannot be written (then one warning names
        it and the option to change, and the session goes on without a bundle, as without xdist)."""
        if not self.config.bundle:
            return None
        if self.bundle is None and not self.bundle_dropped:
            try:
                ignore_in_git(self.config.session_dir)
                self.bundle = SessionBundle(self.config.session_dir)
            except OSError as exc:
                self._drop_bundle(exc, self.config.session_dir)
        return NO_BUNDLE if self.bundle is None else str(self.bundle.path)

    # ------------------------------------------------------------ session end

    def summary(self) -> SessionSummary:
        """Counts of effective outcomes and the LOND state, for session_meta.json and the reports."""
        return SessionSummary.of(self.records, self.lond_state)

    def report_context(self) -> ReportContext:
        """What the report writers need besides the records."""
        return ReportContext(
            summary=self.summary(), started_at=self.started_at, fdr=self.config.fdr,
            bundle_path=None if self.bundle is None else self.bundle.path,
            junit_path=self.config.junit_path, html_path=self.config.html_path, commit_info=self.commit_info,
            say=lambda text, **markup: write_line(self.pytest_config, text, **markup),
        )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.records:
            try:
                terminal.write_summary(terminalreporter, self.records, self.report_context())
            except Exception as exc:  # noqa: BLE001 - never raise from the terminal summary
                terminalreporter.write_line(cause_and_fix(exc, "write the pytest-aaco summary"), yellow=True)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        set_ort_log_level(self._old_ort_log_level)  # an in-process pytester run leaves the outer level as it was
        set_compile_cache(self._old_compile_cache)
        set_lock_timeout(self._old_lock_timeout)
        self._unsay()
        while self.interruptible.depth:  # the signal handlers as they were, whatever was left held
            self.interruptible.release()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._references.close()  # the reference sessions are released with the session
        drop_fallback_caches()  # a temporary model cache (unwritable cache folder) goes with it
        if self.is_worker:  # the controller writes the reports; ship the records and LOND's state to it
            self.xdist.ship(self.records, self.lond_state)
            return
        if self.side_gate is not None:
            self.side_gate.close()
            if self.side_gate.tree is not None:
                self.interruptible.release()  # the hold taken for the tree
        if not self.records:
            return
        context = self.report_context()
        if self.bundle is not None:
            if not (self.bundle.path / ENVIRONMENT_FILE).exists():  # made for xdist workers
                self._write_head(self.bundle)
            meta = self._meta()
            meta["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            meta["summary"] = {**context.summary.to_dict(), "device_lock": terminal.lock_waits(self.records)}
            meta[META_KEY] = self.cost.to_dict(self.records)
            try:
                self.bundle.finish(meta)
            except OSError as exc:
                self._drop_bundle(exc, self.bundle.path)
        if self.config.html_path is not None:  # what the HTML report shows besides the records
            context = replace(context, baselines=report_baselines(self.records), environment=self._environment())
        for name, writer in (("JUnit", junit.write), ("GitHub", github.write), ("HTML", html.write)):
            try:
                with warnings.catch_warnings():  # a dependency's deprecation (matplotlib at its floor with a
                    # current pyparsing) must not end the run under -W error: the report is still right
                    for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
                        warnings.filterwarnings("ignore", category=category)
                    writer(self.records, context)
            except Exception as exc:  # noqa: BLE001 - one report that cannot be written never loses the others
                self._warn_or_say(AacoReportWarning(cause_and_fix(exc, f"write the {name} report")))

    def _warn_or_say(self, warning: Warning) -> None:
        """Issue *warning* from a session hook; under ``-W error``, where raising from the hook would end
        pytest in an INTERNALERROR or a traceback with the other reports unwritten, the same line goes to
        the terminal instead."""
        try:
            warnings.warn(warning, stacklevel=3)
        except Warning:
            terminal_line(self.pytest_config)(f"{type(warning).__name__}: {warning}")

    def _environment(self) -> JSONDict | None:
        """The session's environment record: the bundle's when there is one, else collected now."""
        if self.bundle is not None:
            try:
                data = read_json(self.bundle.path / ENVIRONMENT_FILE)
                return data if isinstance(data, dict) else None
            except AacoFileError:
                pass
        return collect_environment(device_id=self.config.device_id)

    def _meta(self) -> JSONDict:
        c = self.config
        return {
            "started_at": self.started_at,
            "argv": redact_argv(sys.argv[1:]),
            "providers": [p.short for p in c.providers],
            "settings": {
                "warmup": c.warmup, "rounds": c.rounds or "auto", "iterations": c.iterations or "auto",
                "threshold": c.threshold, "fdr": c.fdr, "confirm": c.confirm, "iobinding": c.iobinding,
                "save_baseline": c.save_baseline, "sample_interval_s": c.sample_interval_s,
            },
            "gated_items": self.gated_items,
            "device_ids": list(c.device_ids or ()),
            "commit_info": self.commit_info,
        }

    @functools.cached_property
    def commit_info(self) -> JSONDict:
        """The git commit, branch and dirty flag of the project under test (pytest's root folder),
        read once per session (:func:`pytest_aaco.measure.commit.commit_info`; unknown without git)."""
        return commit_info(Path(str(self.pytest_config.rootpath)))

    def _write_head(self, bundle: SessionBundle) -> None:
        """``session_meta.json`` and ``environment.json`` of the bundle."""
        bundle.write_meta(self._meta())
        bundle.write_environment(collect_environment(device_id=self.config.device_id))


def get_session(config: pytest.Config) -> AacoSession:
    """The run's :class:`AacoSession`, started at its first use: the options are read (``pytest.UsageError``
    for a bad one) and it is registered with pytest's plugin manager, with its pytest-xdist hooks. A run
    that never uses the plugin never starts one. RuntimeError when the plugin is disabled (``-p no:aaco``)."""
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if isinstance(plugin, AacoSession):
        return plugin
    if plugin is not None or config.pluginmanager.is_blocked("aaco"):
        raise RuntimeError("pytest-aaco is not active in this session (was it disabled with -p no:aaco?)")
    session = AacoSession(config, AacoConfig.from_pytest_config(config))
    config.pluginmanager.register(session, PLUGIN_NAME)
    config.pluginmanager.register(session.xdist, XDIST_PLUGIN_NAME)
    config.pluginmanager.register(session.cost, COST_PLUGIN_NAME)
    return session
