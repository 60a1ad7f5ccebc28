"""The one plugin object of a session: registry and session caches, the gate, the records.

Session-wide false-alarm control: items are judged one at a time, as pytest runs them, with
LOND (Javanmard & Montanari, Ann. Statist. 2018). The i-th gated item is tested at
``alpha_i = q * (D + 1) / m``, where ``m`` is the number of benchmark items collected and ``D``
the regressions found so far. Each decision is final when made, so the failure stays on the
item that regressed, and the session's false discovery rate stays at most ``q`` (``--aaco-fdr``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .benchmark import BenchmarkRun
from .config import AacoConfig
from .providers import ProviderSpec, available_providers, options_for, unavailable_reason
from .registry import ModelSpec, load_registry, model_path
from .runner import SessionHandle

PLUGIN_NAME = "aaco-plugin"
#: key of the JSON list of item records a pytest-xdist worker sends to the controller
WORKER_RECORDS = "aaco_records"
#: key of the controller's bundle folder in a pytest-xdist worker's workerinput
WORKER_BUNDLE = "aaco_bundle"
SESSION_CACHE_SIZE = 2


@dataclass
class ItemRecord:
    """What the reports need about one item: ids, the result summary, the verdict, the fingerprint."""

    nodeid: str
    model: str
    provider: str
    label: str
    result: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None
    fingerprint: dict[str, Any] | None = None
    outcome: str = "passed"
    error: str | None = None
    diagnosis: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid, "model": self.model, "provider": self.provider, "label": self.label,
            "result": self.result, "verdict": self.verdict, "fingerprint": self.fingerprint,
            "outcome": self.outcome, "error": self.error, "diagnosis": self.diagnosis, **self.extra,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ItemRecord:
        """Inverse of :meth:`to_dict` (keys it does not know go to ``extra``)."""
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        return cls(**{k: v for k, v in data.items() if k in known},
                   extra={k: v for k, v in data.items() if k not in known})


class AacoPlugin:
    """Session state of pytest-aaco, registered as ``aaco-plugin``; reach it with :func:`get_plugin`."""

    def __init__(self, pytest_config: pytest.Config, config: AacoConfig) -> None:
        self.pytest_config = pytest_config
        self.config = config
        self._models: list[ModelSpec] | None = None
        self._sessions: OrderedDict[tuple[Any, ...], SessionHandle] = OrderedDict()
        self._available: list[str] | None = None
        self._placements: dict[tuple[Any, ...], Any] = {}
        self._priors: dict[str, Any] = {}
        self.gated_items = 0
        self.records: list[ItemRecord] = []
        self._lond: Any = None
        self.bundle: Any = None
        self.started_at: str | None = None
        self._first_done = False

    # ------------------------------------------------------------ registry and providers

    def models(self) -> list[ModelSpec]:
        """The registry's models (loaded once). Raises RegistryError."""
        if self._models is None:
            self._models = load_registry(self.config.models_path)
        return self._models

    def available(self) -> list[str]:
        if self._available is None:
            self._available = available_providers()
        return self._available

    def provider_for(self, model: ModelSpec, provider: ProviderSpec) -> ProviderSpec:
        """*provider* with registry options for *model* and ``--aaco-provider-option`` merged in."""
        return provider.with_options({**model.options_for(provider.short),
                                      **options_for(provider, self.config.provider_options)})

    def skip_reason(self, provider: ProviderSpec) -> str | None:
        import onnxruntime as ort

        return unavailable_reason(provider, self.available(), ort.__version__)

    def session(self, model: ModelSpec, provider: ProviderSpec) -> SessionHandle:
        """A cached InferenceSession per (model, provider, options); the last few are kept."""
        path = model_path(model)
        key = (str(path), provider.ep_name, tuple(sorted(provider.options.items())), self.config.device_id)
        if key in self._sessions:
            self._sessions.move_to_end(key)
            return self._sessions[key]
        from .benchmark import build_tracked

        handle = build_tracked(path, provider, self.config.device_id, self.config.intra_op_threads)
        self._sessions[key] = handle
        while len(self._sessions) > SESSION_CACHE_SIZE:
            self._sessions.popitem(last=False)
        return handle

    def placement(self, handle: SessionHandle, feeds: dict[str, Any]) -> Any:
        """Node placement of *handle*'s model and EP (:func:`pytest_aaco.placement.placement_report`),
        profiled once per (model, EP, options). Raises SessionError / PlacementError."""
        key = (str(handle.model_path), handle.provider.ep_name, tuple(sorted(handle.options.items())))
        if key not in self._placements:
            from .placement import placement_report

            self._placements[key] = placement_report(handle.model_path, handle.provider, self.config.device_id,
                                                     feeds=feeds)
        return self._placements[key]

    def variance_prior(self, folder: Path) -> Any:
        """The runner's variance prior (:func:`pytest_aaco.baseline.runner_variance_prior`), read once."""
        key = str(folder)
        if key not in self._priors:
            from .baseline import runner_variance_prior

            self._priors[key] = runner_variance_prior(folder)
        return self._priors[key]

    # ------------------------------------------------------------ session-wide error control

    def lond(self) -> Any:
        if self._lond is None:
            from .stats import LondFdr

            self._lond = LondFdr(self.config.fdr, max(self.gated_items, 1))
        return self._lond

    # ------------------------------------------------------------ hooks

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # counted after deselection (-k, -m), so m is the number of benchmarks that will run
        self.gated_items = sum(1 for item in session.items if "benchmark_model" in getattr(item, "fixturenames", ()))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        result = yield
        run: BenchmarkRun | None = item.stash.get(RUN_KEY, None)
        if run is not None and run.results:
            from .judge import judge_item

            judge_item(self, item, run)
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        record: ItemRecord | None = item.stash.get(RECORD_KEY, None)
        if record is not None and call.when == "call" and call.excinfo is not None and record.outcome == "passed":
            record.outcome = "failed"

    # ------------------------------------------------------------ pytest-xdist

    @property
    def is_worker(self) -> bool:
        return hasattr(self.pytest_config, "workerinput")

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Controller: one bundle for the whole session; workers write their items into it."""
        if not self.config.bundle:
            return
        if self.bundle is None:
            from .reports.bundle import SessionBundle

            self.bundle = SessionBundle(self.config.session_dir)
        node.workerinput[WORKER_BUNDLE] = str(self.bundle.path)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Controller: collect a worker's records, so the summary and reports cover every item."""
        from .jsonio import loads_records

        raw = getattr(node, "workeroutput", {}).get(WORKER_RECORDS)
        if raw:
            self.records.extend(ItemRecord.from_dict(d) for d in loads_records(raw))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from .reports.terminal import write_summary

        write_summary(terminalreporter, self)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.is_worker:  # the controller writes the reports; ship the records to it
            from .jsonio import dumps

            self.pytest_config.workeroutput[WORKER_RECORDS] = dumps([r.to_dict() for r in self.records])  # type: ignore[attr-defined]
            return
        from .reports.lifecycle import finish_reports

        finish_reports(self)


RUN_KEY = pytest.StashKey[BenchmarkRun]()
RECORD_KEY = pytest.StashKey[ItemRecord]()


def get_plugin(config: pytest.Config) -> AacoPlugin:
    """The session's :class:`AacoPlugin`; raises RuntimeError when the plugin is not configured."""
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if not isinstance(plugin, AacoPlugin):
        raise RuntimeError("pytest-aaco is not active in this session (was it disabled with -p no:aaco?)")
    return plugin
