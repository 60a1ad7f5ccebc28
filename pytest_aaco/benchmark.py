"""What the ``benchmark_model`` fixture returns: a callable that measures one model × EP.

It owns the per-item work around the measurement loop (:mod:`pytest_aaco.measure.inference`): settings
from options, registry and the typed ``@pytest.mark.aaco`` marker (:class:`AacoMarker`); the
device lock (:mod:`pytest_aaco.measure.devicelock`: never two benchmarks on one device at once, also
under xdist); the telemetry samplers; and a fresh-session re-measurement for the confirmation look.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import pytest

from pytest_aaco.config import AacoConfig, parse_fraction, parse_iterations, parse_positive_int
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.devicelock import NOTICE_S, DeviceHold, DeviceLockTimeout
from pytest_aaco.measure.gpulocks import gpu_locks
from pytest_aaco.measure.inference import (
    MeasureSettings,
    SessionError,
    SessionHandle,
    build_session,
    resolve_iobinding,
)
from pytest_aaco.measure.inputs import batch_size, make_inputs
from pytest_aaco.measure.process_memory import rss_mb
from pytest_aaco.measure.providers import ProviderError, ProviderSpec, parse_provider
from pytest_aaco.measure.reference_workload import Reference
from pytest_aaco.measure.registry import ModelSpec
from pytest_aaco.measure.results import BenchmarkResult, RoundResult
from pytest_aaco.measure.rounds import adaptive_iterations, run_benchmark
from pytest_aaco.measure.timedloop import Deadline
from pytest_aaco.options import (
    ITEM_TIMEOUT_CAP_S,
    ITEM_TIMEOUT_FACTOR,
    ITEM_TIMEOUT_FLOOR_S,
    MAX_ROUNDS,
    MAX_WARMUP,
    GateSettings,
    auto_rounds,
    count_setting,
    latency_count,
)
from pytest_aaco.records.device import ColdStartComparison
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.reports.progress import uncaptured, write_line
from pytest_aaco.samplers import TelemetrySession, build_samplers
from pytest_aaco.samplers.gpu_memory import DeviceMemoryProbe, record_own_vram
from pytest_aaco.tracers.base import InProcessTracer
from pytest_aaco.verdict.multiplicity import LondFdr

MARKER_KEYS = ("models", "providers", "threshold", "device_threshold", "warmup", "iterations", "rounds", "gate_p99")


_T = TypeVar("_T")

def _names(value: str | Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset({value} if isinstance(value, str) else value)


class Marked(Protocol):
    """What :meth:`AacoMarker.of` reads of a pytest node (an item, a function definition)."""

    def get_closest_marker(self, name: str) -> pytest.Mark | None: ...


@dataclass(frozen=True)
class AacoMarker:
    """The validated ``@pytest.mark.aaco(...)`` of an item; None means "not set here".

    ``models``: registry names; ``providers``: EP short names; ``threshold``: a fraction;
    ``device_threshold``: a fraction, device time's threshold (where device time is traced);
    ``warmup``/``rounds``/``iterations``: counts (``iterations="auto"`` is None, as not set);
    ``gate_p99``: also gate p99 latency.
    """

    models: frozenset[str] | None = None
    providers: frozenset[str] | None = None
    threshold: float | None = None
    warmup: int | None = None
    iterations: int | None = None
    rounds: int | None = None
    gate_p99: bool | None = None
    device_threshold: float | None = None

    @classmethod
    def of(cls, node: Marked | None) -> AacoMarker:
        """The closest ``@pytest.mark.aaco`` of *node* (an item or a function definition), validated.

        Raises ``pytest.UsageError`` naming the marker key for positional arguments, unknown keys
        and bad values (``threshold="3%"`` and ``0.03`` both work; ``threshold=5`` does not).
        """
        marker = node.get_closest_marker("aaco") if node is not None else None
        if marker is None:
            return cls()
        if marker.args:
            raise pytest.UsageError("@pytest.mark.aaco takes keyword arguments only,"
                                    " e.g. @pytest.mark.aaco(threshold=0.03)")
        unknown = set(marker.kwargs) - set(MARKER_KEYS)
        if unknown:
            raise pytest.UsageError(f"@pytest.mark.aaco got unknown keyword(s) {sorted(unknown)};"
                                    f" valid: {', '.join(MARKER_KEYS)}")
        kw = marker.kwargs

        def where(key: str) -> str:
            return f"@pytest.mark.aaco({key}=...)"

        def given(key: str, parse: Any, *args: Any) -> Any:
            value = kw.get(key)
            return None if value is None else parse(where(key), value, *args)

        gate_p99 = kw.get("gate_p99")
        if gate_p99 is not None and not isinstance(gate_p99, bool):
            raise pytest.UsageError(f"{where('gate_p99')}: expected True or False, got {gate_p99!r}")
        providers = _names(kw.get("providers"))
        if providers is not None:
            try:
                providers = frozenset(parse_provider(name).short for name in providers)
            except ProviderError as exc:
                raise pytest.UsageError(f"{where('providers')}: {exc}") from None
        return cls(
            models=_names(kw.get("models")),
            providers=providers,
            threshold=given("threshold", parse_fraction),
            device_threshold=given("device_threshold", parse_fraction),
            warmup=given("warmup", parse_positive_int, 1, MAX_WARMUP),
            iterations=given("iterations", parse_iterations),
            rounds=given("rounds", parse_positive_int, 2, MAX_ROUNDS),
            gate_p99=gate_p99,
        )


def _pick(marker: AacoMarker, model: ModelSpec, key: str, fallback: _T) -> _T:
    """*key* of the item: the marker's, else the registry's, else *fallback* (the command line's)."""
    for value in (getattr(marker, key), getattr(model, key)):
        if value is not None:
            return value  # type: ignore[no-any-return]
    return fallback


def item_settings(config: AacoConfig, model: ModelSpec, provider: ProviderSpec, marker: AacoMarker
                  ) -> tuple[MeasureSettings, float, bool]:
    """Measurement settings, threshold and p99 gating for one item: marker > registry > command line."""

    def pick(key: str, fallback: _T) -> _T:
        return _pick(marker, model, key, fallback)

    settings = MeasureSettings(
        warmup=int(pick("warmup", config.warmup)),
        rounds=int(pick("rounds", auto_rounds(provider.is_gpu) if config.rounds is None else config.rounds)),
        iterations=pick("iterations", config.iterations),
        iobinding=resolve_iobinding(config.iobinding, provider),
        device_id=config.device_id,
    )
    gate_p99 = config.gate_p99 if marker.gate_p99 is None else marker.gate_p99
    return settings, float(pick("threshold", config.threshold)), gate_p99


def item_device_threshold(config: AacoConfig, model: ModelSpec, marker: AacoMarker) -> float:
    """The item's practical threshold of device time (a fraction): the marker's ``device_threshold``, else the
    registry's, else ``--aaco-device-threshold`` (marker > registry > command line, as the wall-time threshold)."""
    return float(_pick(marker, model, "device_threshold", config.device_threshold))


@contextmanager
def device_lock(provider: ProviderSpec, device_id: int, label: str,
                waiting: Callable[[str], None] | None = None) -> Iterator[DeviceHold]:
    """Hold the device lock of EP *provider*'s device *device_id* (:func:`pytest_aaco.measure.gpulocks.gpu_locks`:
    keyed by its physical GPU on GPU EPs, and an older version's ``gpu<N>.lock``). *waiting* is told once when
    the wait passes a second. Raises :class:`LockTimeout` (a :class:`SessionError`: the item fails, naming the
    lock) when the lock stays held past ``--aaco-lock-timeout``."""
    with ExitStack() as stack:
        try:
            hold = stack.enter_context(gpu_locks(provider, device_id, label, waiting=waiting))
        except DeviceLockTimeout as exc:
            raise LockTimeout(str(exc)) from None
        yield hold


class ItemTimeout(SessionError):
    """The item's measurement ran past ``--aaco-item-timeout`` and its ONNX Runtime run was stopped."""


class LockTimeout(SessionError):
    """The device lock stayed held by another benchmark past ``--aaco-lock-timeout``; nothing was measured."""


def planned_runs(settings: MeasureSettings, first_run_s: float) -> int:
    """Runs one measurement with *settings* plans: the first, the warmup and the rounds' iterations (adaptive
    iterations estimated from the first run, as :func:`pytest_aaco.measure.rounds.adaptive_iterations` does
    from the warmup)."""
    iterations = settings.iterations or adaptive_iterations(np.array([first_run_s * 1000]))
    return 1 + settings.warmup + settings.rounds * iterations


def item_limit(setting: float | None, first_run_ms: float | None = None,
               settings: MeasureSettings | None = None) -> float | None:
    """The item timeout in seconds for ``--aaco-item-timeout`` *setting* (seconds; ``math.inf``: off; None:
    auto); None means no limit.

    ``auto``: until the first run has finished, :data:`~pytest_aaco.options.ITEM_TIMEOUT_CAP_S`; then
    :data:`~pytest_aaco.options.ITEM_TIMEOUT_FACTOR` x the first run's time x :func:`planned_runs`, at least
    :data:`~pytest_aaco.options.ITEM_TIMEOUT_FLOOR_S` and at most the cap. The first run is the slowest
    (allocation, a compiling EP's program), and the factor leaves room for the reference blocks, traced
    blocks and a busy machine, so only a run that hangs or a model far slower than its first run reaches it.
    """
    if setting is not None:
        return None if math.isinf(setting) else float(setting)
    if first_run_ms is None or settings is None:
        return ITEM_TIMEOUT_CAP_S
    scaled = ITEM_TIMEOUT_FACTOR * first_run_ms / 1000 * planned_runs(settings, first_run_ms / 1000)
    return min(ITEM_TIMEOUT_CAP_S, max(ITEM_TIMEOUT_FLOOR_S, scaled))


def terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """A function writing one line on pytest's terminal at once, also while the test body's output is
    captured (as the progress line does); never raises."""

    def say(text: str) -> None:
        with uncaptured(config):
            write_line(config, text, yellow=True)

    return say


def build_tracked(model_path: Path, provider: ProviderSpec, device_id: int, intra_op_threads: int) -> SessionHandle:
    """:func:`~pytest_aaco.measure.inference.build_session`, recording the RSS the session added (MB) and
    starting the probe of its own device memory (:class:`~pytest_aaco.samplers.gpu_memory.DeviceMemoryProbe`).

    On a GPU EP the session is built under the GPU's device lock (:func:`device_lock`): building one
    (weights uploaded, cuDNN or MIGraphX tuning) while another pytest-xdist worker measures on the same
    GPU (``--aaco-device-id 0,0``) would slow that worker's rounds. Never called with the lock held. Raises
    :class:`LockTimeout` when the lock stays held past ``--aaco-lock-timeout``."""
    probe = DeviceMemoryProbe(provider.short, device_id)
    label = f"{model_path.name}[{provider.short}]"
    with ExitStack() as stack:
        if provider.is_gpu:
            stack.enter_context(device_lock(provider, device_id, label))
        probe.start()
        before = rss_mb()
        handle = build_session(model_path, provider, device_id, intra_op_threads)
        handle.build_rss_mb = rss_mb() - before
    handle.device_probe = probe
    return handle


def add_rss_growth(result: BenchmarkResult, build_rss_mb: float | None, rss_start_mb: float) -> None:
    """Add ``rss_growth_mb`` (MB) to the telemetry summary: the item's own memory footprint.

    It is the RSS its session added when built plus the growth from the start of the warmup to
    the peak of the measured rounds. Both windows exclude what the plugin or other items load
    between them (scipy for a verdict, say), so the figure does not depend on the order of items
    or on whether the run saves or gates.
    """
    summary = (result.telemetry or {}).get("summary")
    peak = ((summary or {}).get("rss_mb") or {}).get("max")
    if summary is None or build_rss_mb is None or not isinstance(peak, (int, float)):
        return
    growth = build_rss_mb + max(peak - rss_start_mb, 0.0)
    summary["rss_growth_mb"] = {"max": growth, "mean": growth, "n": 1}


class SideGate(Protocol):
    """The side-by-side gate as a run sees it (:class:`pytest_aaco.sidebyside.gate.SideBySideGate`,
    which sits below this module and is handed in by the plugin): it measures the item side by side
    with *settings* and judges it with *gate* at the level *level()* returns, holding *lock* while it
    measures. Returns the candidate's result and the Verdict."""

    def judge_item(self, run: BenchmarkRun, settings: MeasureSettings, gate: GateSettings,
                   level: Callable[[], float], lock: Callable[[], AbstractContextManager[object]]
                   ) -> tuple[BenchmarkResult, Verdict]: ...


@dataclass
class BenchmarkRun:
    """The callable behind ``benchmark_model``: ``benchmark_model(**overrides) -> BenchmarkResult``.

    Overrides: ``warmup``, ``rounds``, ``iterations`` (ints). Each call measures afresh and the
    last result is the one the gate judges. With a *reference* (:mod:`pytest_aaco.measure.reference_workload`),
    every round is paired with a short block of it.
    """

    config: AacoConfig
    model: ModelSpec
    provider: ProviderSpec
    handle: SessionHandle
    settings: MeasureSettings
    threshold: float
    gate_p99: bool = False
    results: list[BenchmarkResult] = field(default_factory=list)
    #: the item's device-time threshold (:func:`item_device_threshold`); None: ``--aaco-device-threshold``
    device_threshold: float | None = None
    placement: JSONDict | None = None
    reference: Reference | None = None
    _feeds: dict[str, np.ndarray] | None = None
    #: with ``--aaco-compare`` / ``--aaco-compare-python``: the session's side-by-side gate, which
    #: measures the item side by side and judges it (:meth:`pytest_aaco.sidebyside.gate.SideBySideGate.judge_item`)
    side_gate: SideGate | None = None
    #: the session's LOND procedure (made at first use), from which a side-by-side item draws its level
    lond: Callable[[], LondFdr] | None = None
    #: the side-by-side verdict of the last measurement, which the gate then records as is
    side_verdict: Verdict | None = None
    #: with ``--aaco-compare``, for an item measured against its baseline side: measures both sides'
    #: cold start alternately and judges it (:meth:`pytest_aaco.sidebyside.gate.SideBySideGate.cold_start`,
    #: set by :meth:`~pytest_aaco.sidebyside.gate.SideBySideGate.judge_item`); the cold-start pass after
    #: the rounds (:func:`pytest_aaco.extra_passes.measure_insight`) calls it
    compare_cold_start: Callable[[], ColdStartComparison] | None = None
    #: device time in stored rounds: the EP's kernel tracer (:func:`pytest_aaco.tracers.select.tracer_for`),
    #: and, where device time was wanted but no tracer is available, the one line saying why (the item is
    #: then gated on wall time)
    tracer: InProcessTracer | None = None
    no_tracer: str | None = None
    #: writes one line on the terminal (:func:`terminal_line`): a wait for the device lock past a second
    say: Callable[[str], None] | None = None
    #: seconds waited for the device lock by each hold of this item (measurements, the confirmation look)
    lock_waits: list[float] = field(default_factory=list)
    #: the item timeout's watchdog of the latest hold, and how its limit was set (for the message)
    _deadline: Deadline | None = field(default=None, repr=False)
    _limit_rule: str = ""

    @property
    def label(self) -> str:
        return f"{self.model.name}[{self.provider.short}]"

    @property
    def feeds(self) -> dict[str, np.ndarray]:
        if self._feeds is None:
            self._feeds = make_inputs(self.model.name, self.handle.session.get_inputs(), self.model.dims,
                                      self.model.inputs)
        return self._feeds

    def telemetry_session(self) -> TelemetrySession:
        """A new, not yet started telemetry session with the item's samplers (EP, device, interval)."""
        samplers = build_samplers(self.provider.short, self.config.device_id, self.config.sample_interval_s)
        return TelemetrySession(samplers)

    def gate_settings(self) -> GateSettings:
        """The gate's settings for this item: the session's, with the item's own thresholds (wall time, device
        time) and p99 choice."""
        shared = {f.name: getattr(self.config, f.name) for f in fields(GateSettings)}
        own = {"threshold": self.threshold, "gate_p99": self.gate_p99}
        if self.device_threshold is not None:
            own["device_threshold"] = self.device_threshold
        return GateSettings(**{**shared, **own})

    def device_lock(self) -> AbstractContextManager[object]:
        """What a measurement of this item holds (:meth:`measuring`): the device lock of its EP and device, keyed
        by its physical GPU (:func:`device_lock`), and the item timeout's watchdog."""
        return self.measuring()

    @contextmanager
    def measuring(self, handle: SessionHandle | None = None) -> Iterator[Deadline]:
        """Hold the device lock (its wait appended to :attr:`lock_waits`; :class:`LockTimeout` past
        ``--aaco-lock-timeout``), then run the item timeout's watchdog (:class:`~pytest_aaco.measure.timedloop.
        Deadline`, limit :func:`item_limit`) over the block: when it fires, the ONNX Runtime runs of this
        process are stopped before their next kernel. *handle*'s (default: the item's) runs are let go first."""
        with ExitStack() as stack:
            hold = stack.enter_context(device_lock(self.provider, self.config.device_id, self.label, self.say))
            self.lock_waits.append(hold.wait_s)
            if self.say is not None and hold.wait_s > NOTICE_S:
                self.say(f"{self.label}: took the device lock {hold.path} after waiting {hold.wait_s:.1f} s")
            (handle or self.handle).run_stop.reset()
            setting = self.config.item_timeout_s
            self._limit_rule = "" if setting is not None else f", auto: at most {ITEM_TIMEOUT_CAP_S:g} s"
            self._deadline = stack.enter_context(Deadline(item_limit(setting), "the item timeout"))
            yield self._deadline

    def _limit_from_first_run(self, first_ms: float, settings: MeasureSettings) -> None:
        """``auto``: scale the running watchdog's limit to the first run (:func:`item_limit`)."""
        setting = self.config.item_timeout_s
        if setting is not None or self._deadline is None:
            return
        runs = planned_runs(settings, first_ms / 1000)
        self._limit_rule = (f", auto: {ITEM_TIMEOUT_FACTOR:g} x the first run's {first_ms / 1000:.3g} s x {runs}"
                            f" runs planned, within {ITEM_TIMEOUT_FLOOR_S:g}..{ITEM_TIMEOUT_CAP_S:g} s")
        self._deadline.set_limit(item_limit(setting, first_ms, settings))

    def timed_out(self) -> ItemTimeout | None:
        """The error to raise instead of a failed run when the item timeout stopped it, else None."""
        deadline = self._deadline
        if deadline is None or not deadline.expired:
            return None
        given = self.config.item_timeout_s
        option = "auto" if given is None else f"{given:g}"
        return ItemTimeout(f"{self.label}: stopped after {deadline.limit_s or 0:g} s, the item timeout"
                           f" (--aaco-item-timeout={option}{self._limit_rule}; ini aaco_item_timeout); the"
                           " ONNX Runtime run was stopped and nothing of this measurement is kept: raise the"
                           " timeout, or set it to off")

    @contextmanager
    def stopped_by_timeout(self) -> Iterator[None]:
        """Raise :meth:`timed_out`'s :class:`ItemTimeout` in place of whatever a run that the item timeout
        stopped raised; any other error passes unchanged."""
        try:
            yield
        except Exception:
            timeout = self.timed_out()
            if timeout is not None:
                raise timeout from None
            raise

    def measure(self, handle: SessionHandle, settings: MeasureSettings) -> BenchmarkResult:
        """Measure on *handle* under the device lock and the item timeout (:meth:`measuring`), with telemetry
        during the measured rounds. Raises :class:`ItemTimeout` when the timeout stopped it."""
        waits = len(self.lock_waits)
        with self.measuring(handle):
            rss_start_mb = rss_mb()
            with self.stopped_by_timeout():
                result = run_benchmark(handle, self.feeds, settings, self.model.name, batch_size(self.feeds),
                                       telemetry=self.telemetry_session(), reference=self.reference,
                                       tracer=self.tracer,
                                       on_first_run=lambda ms: self._limit_from_first_run(ms, settings))
        result.lock_wait_s = sum(self.lock_waits[waits:])
        add_rss_growth(result, handle.build_rss_mb, rss_start_mb)
        if handle.device_probe is not None and "summary" in (result.telemetry or {}):
            record_own_vram(result.telemetry["summary"], *handle.device_probe.stop())
        return result

    def settings_for(self, **overrides: Any) -> MeasureSettings:
        """This item's settings with ``warmup``/``rounds``/``iterations`` overrides; TypeError for others;
        ValueError for a count out of bounds, or rounds x iterations over
        :data:`~pytest_aaco.options.MAX_LATENCIES`."""
        unknown = set(overrides) - {"warmup", "rounds", "iterations"}
        if unknown:
            raise TypeError(f"benchmark_model() got unknown argument(s) {sorted(unknown)};"
                            " valid: warmup, rounds, iterations")
        for key, value in overrides.items():
            if value is not None:
                try:
                    overrides[key] = count_setting(key, value, 1 if key == "warmup" else 2)
                except ValueError as exc:
                    raise ValueError(f"benchmark_model({key}=...): {exc}") from None
        chosen = replace(self.settings, **overrides)
        latency_count(chosen.rounds, chosen.iterations)
        return chosen

    def __call__(self, **overrides: object) -> BenchmarkResult:
        return self.run_with(self.settings_for(**overrides))

    def run_with(self, settings: MeasureSettings) -> BenchmarkResult:
        """Measure with *settings* on the item's session and keep the result for the gate; side by
        side (:attr:`side_gate`), the candidate's blocks are the result and the verdict is kept too."""
        if self.side_gate is not None:
            lond = self.lond
            assert lond is not None  # given with the side-by-side gate
            waits = len(self.lock_waits)
            with self.stopped_by_timeout():
                result, self.side_verdict = self.side_gate.judge_item(self, settings, self.gate_settings(),
                                                                      lambda: lond().next_level(), self.device_lock)
            result.lock_wait_s = sum(self.lock_waits[waits:])
        else:
            result = self.measure(self.handle, settings)
        self.results.append(result)
        return result

    def remeasure(self) -> BenchmarkResult:
        """The confirmation look: a fresh InferenceSession and fresh rounds, same settings and inputs."""
        handle = build_tracked(self.handle.model_path, self.provider, self.config.device_id,
                               self.config.intra_op_threads)
        last = self.results[-1]
        iterations = int(np.median([r.n for r in last.rounds])) if last.rounds else self.settings.iterations
        settings = replace(self.settings, iterations=iterations, rounds=len(last.rounds) or self.settings.rounds)
        return self.measure(handle, settings)


def smoke_run(handle: SessionHandle, feeds: dict[str, np.ndarray], model: str) -> BenchmarkResult:
    """``--aaco-smoke``: run *handle* once on *feeds* and check every output is finite.

    Returns a result of one round of that one run (timed, never gated). Raises SessionError
    when the run fails or an output holds NaN or infinity.
    """
    start = time.perf_counter_ns()
    try:
        outputs = handle.session.run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - ORT raises its own types
        raise SessionError(f"{model}[{handle.provider.short}]: the run failed: {exc}") from None
    end = time.perf_counter_ns()
    names = [o.name for o in handle.session.get_outputs()]
    for name, value in zip(names, outputs, strict=False):
        array = np.asarray(value)
        if array.dtype.kind in "fc" and not np.isfinite(array).all():
            bad = int(array.size - np.isfinite(array).sum())
            raise SessionError(f"{model}[{handle.provider.short}]: output {name!r} has {bad} of {array.size}"
                               " values that are NaN or infinite (--aaco-smoke)")
    ms = (end - start) / 1e6
    return BenchmarkResult(model=model, provider=handle.provider.short,
                           rounds=[RoundResult(0, np.array([ms]), start, end)], warmup_iterations=0,
                           warmup_latencies_ms=np.array([]), session_create_ms=handle.create_ms, first_run_ms=ms,
                           providers_used=list(handle.session.get_providers()), batch_size=batch_size(feeds))
