"""The one session object of pytest-aaco: caches, session-wide error control, the records, and
every pytest side effect of the gate (stash, ``pytest.fail``, hook calls, the bundle, reports).

Registered with pytest's plugin manager as ``aaco-plugin``; reach it with :func:`get_session`.
It hands the item-session cache, the item's setup (the parametrization and the fixtures), the session
bundle, the report writers and the process-wide settings to its collaborators (:mod:`pytest_aaco.session_parts`).
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
from collections.abc import Generator
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pytest_aaco.benchmark import BenchmarkRun
from pytest_aaco.config import AacoConfig
from pytest_aaco.gate import GateContext, cause_and_fix, conclude, crash_record, error_record, gather, judge, mark_error
from pytest_aaco.history.across import other_runner_gate
from pytest_aaco.history.judge import MachineOffset
from pytest_aaco.history.store import forget_parsed, report_baselines
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.commit import commit_info
from pytest_aaco.measure.inference import MeasureSettings
from pytest_aaco.measure.modelgen import drop_fallback_caches
from pytest_aaco.measure.stopping import InterruptGuard, add_last_words
from pytest_aaco.records.base import PLUGIN_NAME, Outcome
from pytest_aaco.records.item import ItemRecord, SessionSummary
from pytest_aaco.redact import redact_argv
from pytest_aaco.reports import ReportContext, junit, terminal
from pytest_aaco.reports.cost import COST_PLUGIN_NAME, CostClock
from pytest_aaco.reports.markup import terminal_block
from pytest_aaco.reports.progress import announce, write_line
from pytest_aaco.reports.wording import failure_text
from pytest_aaco.samplers.gpus import physical_gpu
from pytest_aaco.session_parts import (
    RUN_KEY,
    BundleKeeper,
    ItemSessions,
    ItemSetup,
    ProcessSettings,
    ReportWriters,
    compare_gate,
)
from pytest_aaco.sidebyside.unchanged import note_triage
from pytest_aaco.verdict.multiplicity import LondFdr
from pytest_aaco.warnings import AacoBaselineWarning
from pytest_aaco.xdist import XDIST_PLUGIN_NAME, XdistBridge, attach_record, merge_lond

#: the item's record, once judged or once it failed or was skipped by the plugin
RECORD_KEY: pytest.StashKey[ItemRecord] = pytest.StashKey()
#: pytest's duration of the item's phases so far (setup, call, teardown; s)
DURATION_KEY: pytest.StashKey[float] = pytest.StashKey()


class AacoSession:
    """Session state of pytest-aaco, registered as ``aaco-plugin``; reach it with :func:`get_session`."""

    def __init__(self, pytest_config: pytest.Config, config: AacoConfig) -> None:
        self.pytest_config = pytest_config
        self.config = config
        #: ORT's log level, the compile cache, the lock timeout and EP libraries; put back by pytest_unconfigure
        self.process = ProcessSettings(config)
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
        #: shards, and the wall-time ledger of the bundle (:mod:`pytest_aaco.reports.cost`)
        self.cost = CostClock(config.shard)
        self.side_gate = compare_gate(config, Path(str(pytest_config.rootpath)))  # --aaco-compare, else None
        #: the item-session cache: models, EPs, InferenceSessions, references, tracers, placements, priors
        self.items = ItemSessions(config, compares=self.side_gate is not None)
        #: the parametrization and the fixtures (:class:`~pytest_aaco.session_parts.ItemSetup`)
        self.item_setup = ItemSetup(pytest_config, config, self.items, self.side_gate, self.interruptible,
                                    self.bundles, self)
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
            self.interruptible.interrupt_if_signalled()  # a run a signal stopped: the session stops instead
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
        with a one-line cause and fix (:func:`pytest_aaco.gate.cause_and_fix`) and fail the item, no traceback.
        When a stopping signal stopped the run, the session stops instead
        (:meth:`~pytest_aaco.measure.stopping.InterruptGuard.interrupt_if_signalled`)."""
        self.interruptible.interrupt_if_signalled()
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
        self.interruptible.interrupt_if_signalled()  # a signal that stopped no run still stops the session
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
        self.process.restore()  # an in-process pytester run leaves the outer settings as they were
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
