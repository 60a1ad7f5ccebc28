"""The public API: what a script outside pytest may import from pytest-aaco (docs/api.md).

The plugin itself is used through pytest (``benchmark_model``, the ``--aaco-*`` options) and the
``aaco`` command; this module is for scripts that want its parts: the gate's statistical tests on
their own numbers, an InferenceSession built and warmed up as the plugin builds it, interleaved
A/B blocks of two sessions, the cold-start measurement and its verdict, and the telemetry samplers.
The scripts in ``studies/`` import the package only from here (tests/test_architecture.py checks it).

Every name below is re-exported from the module that owns it, with that module's docstring (shapes,
units, errors, sources). The names in :data:`__all__` and their documented signatures stay; a change
that breaks one is named in the changelog. Everything else in the package is internal and may change
in any release.

Units: latencies and times are in ms unless a name says ``_s`` (seconds) or ``_ns``; every test works
on the natural log of times (``ln ms``), so an estimate ``e`` is the ratio ``exp(e)`` (current /
baseline), and a threshold is a fraction (0.05 = 5%).
"""

from __future__ import annotations

from pytest_aaco.measure.inference import SessionError, bind_run, build_session, resolve_iobinding, warmup
from pytest_aaco.measure.inputs import InputError, make_inputs
from pytest_aaco.measure.interleave import BlockRunner, LocalSide, block_iterations, paired_log_ratios, run_cycles
from pytest_aaco.measure.providers import ProviderError, parse_provider
from pytest_aaco.measure.registry import zoo_model_path
from pytest_aaco.passes.coldstart import (
    ColdStart,
    LocalSessions,
    cold_start_verdict,
    compare_cold_start,
    measure_cold_start,
)
from pytest_aaco.samplers import TelemetrySession, build_samplers
from pytest_aaco.sidebyside.sides import DEVICE_TIME_SESSION_DF, DEVICE_TIME_SESSION_SD
from pytest_aaco.sidebyside.worker_client import WorkerError, WorkerSide
from pytest_aaco.verdict.outcome import outcome_of
from pytest_aaco.verdict.paired import paired_t
from pytest_aaco.verdict.pooling import fit_pool, pooled_test
from pytest_aaco.verdict.run_stats import run_offset_sd
from pytest_aaco.verdict.stats import Comparison, level_test, prediction_interval_test, welch_rounds

__all__ = [
    # statistics: the gate's tests on ln(ms) values, and the outcome rule
    "Comparison",
    "DEVICE_TIME_SESSION_DF",
    "DEVICE_TIME_SESSION_SD",
    "fit_pool",
    "level_test",
    "outcome_of",
    "paired_t",
    "pooled_test",
    "prediction_interval_test",
    "run_offset_sd",
    "welch_rounds",
    # sessions: built, fed and warmed up as the plugin does it
    "bind_run",
    "build_session",
    "make_inputs",
    "parse_provider",
    "resolve_iobinding",
    "warmup",
    "zoo_model_path",
    # interleaved measurement: two sides in balanced cycles of blocks, one of them in another interpreter
    "BlockRunner",
    "LocalSide",
    "WorkerSide",
    "block_iterations",
    "paired_log_ratios",
    "run_cycles",
    # cold start: fresh sessions' creation and first run, and their verdicts
    "ColdStart",
    "LocalSessions",
    "cold_start_verdict",
    "compare_cold_start",
    "measure_cold_start",
    # telemetry
    "TelemetrySession",
    "build_samplers",
    # errors the functions above raise
    "InputError",
    "ProviderError",
    "SessionError",
    "WorkerError",
]
