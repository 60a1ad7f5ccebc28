"""What the ``benchmark_model`` fixture returns: a callable that measures one model × EP.

It owns the per-item work around the runner: settings from options, registry and marker;
the device lock (never two benchmarks on one device at once, also under xdist); the
telemetry samplers; and a fresh-session re-measurement for the confirmation look.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .config import AacoConfig
from .inputs import batch_size, make_inputs
from .providers import ProviderSpec
from .registry import ModelSpec
from .results import BenchmarkResult
from .runner import MeasureSettings, SessionHandle, build_session, resolve_iobinding, run_benchmark

MARKER_KEYS = ("models", "providers", "threshold", "warmup", "iterations", "rounds", "gate_p99")


def marker_overrides(item: Any) -> dict[str, Any]:
    """Keyword arguments of the closest ``@pytest.mark.aaco(...)``; unknown keys raise TypeError."""
    marker = item.get_closest_marker("aaco") if item is not None else None
    if marker is None:
        return {}
    if marker.args:
        raise TypeError("@pytest.mark.aaco takes keyword arguments only, e.g. @pytest.mark.aaco(threshold=0.03)")
    unknown = set(marker.kwargs) - set(MARKER_KEYS)
    if unknown:
        raise TypeError(f"@pytest.mark.aaco got unknown keyword(s) {sorted(unknown)}; valid: {', '.join(MARKER_KEYS)}")
    return dict(marker.kwargs)


def item_settings(config: AacoConfig, model: ModelSpec, provider: ProviderSpec, marker: dict[str, Any]
                  ) -> tuple[MeasureSettings, float]:
    """Measurement settings and threshold for one item: marker > registry > command line."""

    def pick(key: str, default: Any) -> Any:
        if marker.get(key) is not None:
            return marker[key]
        value = getattr(model, key)
        return default if value is None else value

    settings = MeasureSettings(
        warmup=int(pick("warmup", config.warmup)),
        rounds=int(pick("rounds", config.rounds)),
        iterations=pick("iterations", config.iterations),
        iobinding=resolve_iobinding(config.iobinding, provider),
        device_id=config.device_id,
    )
    return settings, float(pick("threshold", config.threshold))


def device_lock_path(provider: ProviderSpec, device_id: int) -> Path:
    """One lock file per device: the host for CPU-side EPs, the GPU id otherwise."""
    name = f"gpu{device_id}" if provider.is_gpu else "host"
    return Path(tempfile.gettempdir()) / f"pytest-aaco-{name}.lock"


@dataclass
class BenchmarkRun:
    """The callable behind ``benchmark_model``: ``benchmark_model(**overrides) -> BenchmarkResult``.

    Overrides: ``warmup``, ``rounds``, ``iterations`` (ints). Each call measures afresh and the
    last result is the one the gate judges.
    """

    config: AacoConfig
    model: ModelSpec
    provider: ProviderSpec
    handle: SessionHandle
    settings: MeasureSettings
    threshold: float
    results: list[BenchmarkResult] = field(default_factory=list)
    _feeds: dict[str, np.ndarray] | None = None

    @property
    def feeds(self) -> dict[str, np.ndarray]:
        if self._feeds is None:
            self._feeds = make_inputs(self.model.name, self.handle.session.get_inputs(), self.model.dims,
                                      self.model.inputs)
        return self._feeds

    def _telemetry(self) -> Any:
        try:
            from .samplers import TelemetrySession, build_samplers
        except ImportError:  # telemetry is optional
            return None
        samplers = build_samplers(self.provider.short, self.config.device_id, self.config.sample_interval_s)
        return TelemetrySession(samplers)

    def measure(self, handle: SessionHandle, settings: MeasureSettings) -> BenchmarkResult:
        """Measure on *handle* under the device lock, with telemetry during the measured rounds."""
        from filelock import FileLock

        with FileLock(str(device_lock_path(self.provider, self.config.device_id))):
            return run_benchmark(handle, self.feeds, settings, self.model.name, batch_size(self.feeds),
                                 telemetry=self._telemetry())

    def __call__(self, **overrides: Any) -> BenchmarkResult:
        unknown = set(overrides) - {"warmup", "rounds", "iterations"}
        if unknown:
            raise TypeError(f"benchmark_model() got unknown argument(s) {sorted(unknown)};"
                            " valid: warmup, rounds, iterations")
        settings = replace(self.settings, **overrides)
        result = self.measure(self.handle, settings)
        self.results.append(result)
        return result

    def remeasure(self) -> BenchmarkResult:
        """The confirmation look: a fresh InferenceSession and fresh rounds, same settings and inputs."""
        handle = build_session(self.handle.model_path, self.provider, self.config.device_id,
                               self.config.intra_op_threads)
        last = self.results[-1]
        iterations = int(np.median([r.n for r in last.rounds])) if last.rounds else self.settings.iterations
        settings = replace(self.settings, iterations=iterations, rounds=len(last.rounds) or self.settings.rounds)
        try:
            return self.measure(handle, settings)
        finally:
            del handle
