"""The one session object of pytest-aaco: caches, session-wide error control, the records, and
every pytest side effect of the gate (stash, ``pytest.fail``, hook calls, the bundle, reports).

Registered with pytest's plugin manager as ``aaco-plugin``; reach it with :func:`get_session`.
It hands the item-session cache, the session bundle and the report writers to its collaborators
(:mod:`pytest_aaco.session_parts`).
The per-item decision itself is :func:`pytest_aaco.gate.judge`, which needs no pytest: the session
gathers its inputs first (:func:`pytest_aaco.gate.gather`) and records it after (:func:`pytest_aaco.gate.conclude`).

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
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

import pytest

from pytest_aaco import flavors
from pytest_aaco.benchmark import (
    AacoMarker,
    BenchmarkRun,
    item_device_threshold,
    item_settings,
    smoke_run,
    terminal_line,
)
from pytest_aaco.config import AacoConfig
from pytest_aaco.extra_passes import node_placement_problem
from pytest_aaco.gate import GateContext, cause_and_fix, conclude, crash_record, error_record, gather, judge, mark_error
from pytest_aaco.history.across import other_runner_gate
from pytest_aaco.history.judge import MachineOffset
from pytest_aaco.history.store import forget_parsed, report_baselines
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.commit import commit_info
from pytest_aaco.measure.compile_cache import set_compile_cache
from pytest_aaco.measure.devicelock import set_lock_timeout
from pytest_aaco.measure.graph import (
    GraphRefused,
    graph_build_problem,
)
from pytest_aaco.measure.inference import (
    MeasureSettings,
    SessionError,
    SessionHandle,
    check_placement,
    set_ort_log_level,
)
from pytest_aaco.measure.inputs import InputError
from pytest_aaco.measure.modelgen import CacheError, cache_dir, drop_fallback_caches
from pytest_aaco.measure.placement import PlacementError
from pytest_aaco.measure.plugin_eps import PluginEpError, register_libraries
from pytest_aaco.measure.providers import (
    ProviderSpec,
)
from pytest_aaco.measure.registry import ModelSpec, RegistryError
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.measure.stopping import InterruptGuard, add_last_words
from pytest_aaco.records.base import PLUGIN_NAME, Outcome
from pytest_aaco.records.item import ItemRecord, SessionSummary
from pytest_aaco.redact import redact_argv
from pytest_aaco.reports import ReportContext, junit, terminal
from pytest_aaco.reports.cost import COST_PLUGIN_NAME, CostClock
from pytest_aaco.reports.markup import param_id, terminal_block
from pytest_aaco.reports.progress import announce, write_line
from pytest_aaco.reports.wording import failure_text
from pytest_aaco.samplers.clocks import clock_warnings, read_clock_state
from pytest_aaco.samplers.gpus import physical_gpu
from pytest_aaco.session_parts import BundleKeeper, ItemSessions, ReportWriters
from pytest_aaco.sidebyside.gate import ItemOptions, SideBySideGate
from pytest_aaco.sidebyside.revision import GitRefError
from pytest_aaco.sidebyside.sides import CompareSettings
from pytest_aaco.sidebyside.unchanged import MEASURE_UNCHANGED, note_triage, skip_unchanged
from pytest_aaco.sidebyside.worker_client import WorkerError
from pytest_aaco.tracers.base import TracerError
from pytest_aaco.verdict.multiplicity import LondFdr
from pytest_aaco.warnings import (
    AacoBaselineWarning,
    AacoClockWarning,
    AacoProviderWarning,
    AacoWarning,
    escalated,
)
from pytest_aaco.xdist import XDIST_PLUGIN_NAME, XdistBridge, attach_record, merge_lond

#: InferenceSessions kept alive at once (each may hold a model's weights on the device)
SESSION_CACHE_SIZE = 2

#: the item's BenchmarkRun, set by the ``benchmark_model`` fixture and judged after the test body
RUN_KEY: pytest.StashKey[BenchmarkRun] = pytest.StashKey()
#: the item's record, once judged or once it failed or was skipped by the plugin
RECORD_KEY: pytest.StashKey[ItemRecord] = pytest.StashKey()
#: pytest's duration of the item's phases so far (setup, call, teardown; s)
DURATION_KEY: pytest.StashKey[float] = pytest.StashKey()


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
        #: the session bundle (:class:`~pytest_aaco.session_parts.BundleKeeper`)
        self.bundles = BundleKeeper(pytest_config, config, self._meta)
        #: the report writers (:class:`~pytest_aaco.session_parts.ReportWriters`)
        self.reports = ReportWriters(pytest_config, cause_and_fix)
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
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
        #: the item-session cache: models, EPs, InferenceSessions, references, tracers, placements, priors
        self.items = ItemSessions(config, compares=self.side_gate is not None)
        self.machine_offset = MachineOffset()
        if self.side_gate is not None and self.side_gate.tree is not None:  # a temporary tree to remove
            self.interruptible.hold()  # however the run ends; released when the tree is

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
        self.bundles.open()  # first: under -W error the warning below ends this item, not the session's bundle
        for message in clock_warnings(read_clock_state()):
            warnings.warn(AacoClockWarning(message), stacklevel=3)

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
        self.bundles.write_item(item.nodeid, record)

    def keep_unmeasured(self, item: pytest.Item, record: ItemRecord) -> None:
        """:meth:`keep` for an item that is not measured (unchanged under ``--aaco-compare``): the
        bundle is opened first, as before a measurement, so its record is written there too."""
        self.start_benchmark()
        self.keep(item, record)

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
            context = GateContext(self.config, self.lond(), self.items.variance_priors, self.announce,
                                  self.machine_offset, self.commit_info, other_runner_gate)
            with self.interruptible:  # a confirmation look, then the baseline save
                gathered = gather(item.nodeid, run, extra, context)  # fingerprint, baseline, priors, LOND level
                record = conclude(gathered, judge(gathered.case), run, context)  # decided on the gathered case
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
        reason = self.items.skip_reason(provider)
        if reason:
            if self.config.strict_provider:
                self._fail(request, model, provider, f"{reason} (--aaco-strict-provider)")
            self.skip_item(request.node, model.name, provider.test_id, reason)
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
                           side_gate=self.side_gate, lond=self.lond, say=terminal_line(self.pytest_config),
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
            self.announce(label, chosen)
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
                self.bundles.write_item(item.nodeid, record)
        if record is not None and call.when == "call" and call.excinfo is not None and record.outcome == Outcome.PASSED:
            # the test body failed (or skipped itself) after the record was kept
            skipped = call.excinfo.errisinstance(pytest.skip.Exception)
            record.outcome = Outcome.SKIPPED if skipped else Outcome.FAILED
            self.bundles.write_item(item.nodeid, record)
        if self.is_worker and record is not None and call.when == "teardown":
            attach_record(report, record)
        return report

    # ------------------------------------------------------------ pytest-xdist

    @property
    def is_worker(self) -> bool:
        return self.xdist.is_worker

    def bundle_folder(self) -> str | None:
        """The session bundle's folder (:meth:`pytest_aaco.session_parts.BundleKeeper.folder`)."""
        return self.bundles.folder()

    # ------------------------------------------------------------ session end

    def summary(self) -> SessionSummary:
        """Counts of effective outcomes and the LOND state, for session_meta.json and the reports."""
        return SessionSummary.of(self.records, self.lond_state)

    def report_context(self) -> ReportContext:
        """What the report writers need besides the records."""
        return ReportContext(
            summary=self.summary(), started_at=self.started_at, fdr=self.config.fdr,
            bundle_path=None if self.bundles.bundle is None else self.bundles.bundle.path,
            junit_path=self.config.junit_path, html_path=self.config.html_path, commit_info=self.commit_info,
            say=lambda text, **markup: write_line(self.pytest_config, text, **markup),
        )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.records:
            self.reports.terminal_summary(terminalreporter, self.records, self.report_context())

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        set_ort_log_level(self._old_ort_log_level)  # an in-process pytester run leaves the outer level as it was
        set_compile_cache(self._old_compile_cache)
        set_lock_timeout(self._old_lock_timeout)
        self._unsay()
        while self.interruptible.depth:  # the signal handlers as they were, whatever was left held
            self.interruptible.release()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.items.close()  # the reference sessions are released with the session
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
        self.bundles.finish(self.records, context.summary, self.cost)
        if self.config.html_path is not None:  # what the HTML report shows besides the records
            context = replace(context, baselines=report_baselines(self.records), environment=self.bundles.environment())
        self.reports.write(self.records, context)

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
