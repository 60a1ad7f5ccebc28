"""Building InferenceSessions (:func:`build_session`: options, compile cache, MIGraphX plan, the checks of what
ORT made) and binding the run that the timed loop calls (:func:`bind_run`).

The timed loop (:mod:`pytest_aaco.measure.timedloop`) does nothing but ``perf_counter_ns(); run();
perf_counter_ns()`` into a preallocated int64 array: feeds, IO bindings and the bound ``run`` callable are
built before it. The warmup and measured rounds of an item are :func:`pytest_aaco.measure.rounds.run_benchmark`.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure import migraphx_probe
from pytest_aaco.measure.compile_cache import (
    MIGRAPHX_CACHE_ENV,
    CacheUse,
    CompileCacheError,
    CompileHold,
    cache_options,
    compile_cache_root,
    keyed_folder,
    user_steered,
)
from pytest_aaco.measure.plugin_eps import PluginEpError, add_plugin_provider, plugin_ep_names
from pytest_aaco.measure.providers import (
    MIGRAPHX_KEYS,
    MIGRAPHX_REPLACED,
    ProviderError,
    ProviderSpec,
    library_problem,
    migraphx_env_overrides,
    migraphx_options,
    session_fallback_problem,
)
from pytest_aaco.measure.timedloop import (
    MAX_EXTRA_WARMUP as MAX_EXTRA_WARMUP,  # re-exported: the warmup lives in timedloop.py,
)
from pytest_aaco.measure.timedloop import MIN_WARMUP_S as MIN_WARMUP_S  # shared with the side worker
from pytest_aaco.measure.timedloop import RunStop, bound_runner
from pytest_aaco.measure.timedloop import warmup as warmup  # re-exported for the reference workload and sides
from pytest_aaco.options import CPU_ROUNDS, default
from pytest_aaco.redact import redact_options, redact_text, secret_values
from pytest_aaco.warnings import AacoProviderWarning

if TYPE_CHECKING:
    import onnxruntime as ort

#: ORT's log severity for the plugin's sessions and ORT's default logger (``--aaco-ort-log-level``;
#: 3: error). onnxruntime-gpu logs "No registered plugin EP device found ..." through the default
#: logger at every session creation, which ``SessionOptions.log_severity_level`` alone does not quiet.
_ORT_LOG_LEVEL = default("ort-log-level")


def set_ort_log_level(level: int) -> int:
    """Use ORT severity *level* (0 verbose .. 4 fatal) from the next session on; returns the old one."""
    global _ORT_LOG_LEVEL
    old, _ORT_LOG_LEVEL = _ORT_LOG_LEVEL, int(level)
    return old


def ort_log_level() -> int:
    """The ORT severity the plugin's sessions use (:func:`set_ort_log_level`)."""
    return _ORT_LOG_LEVEL


def session_options() -> ort.SessionOptions:
    """A fresh ``ort.SessionOptions`` logging at :func:`ort_log_level`, with ORT's default logger
    set to the same severity (it prints what happens outside a session, e.g. the EP lookup)."""
    import onnxruntime as ort

    ort.set_default_logger_severity(_ORT_LOG_LEVEL)
    so = ort.SessionOptions()
    so.log_severity_level = _ORT_LOG_LEVEL
    return so


class SessionError(RuntimeError):
    """The InferenceSession could not be created or run; the message says what ORT reported."""


class FallbackError(SessionError):
    """ORT made the session on other EPs than the one requested: the EP itself cannot run here (no driver,
    a missing library), whatever the model. The message names the missing library where the EP's own
    shared library says which (:func:`pytest_aaco.measure.providers.library_problem`)."""


@dataclass
class SessionHandle:
    """A built InferenceSession, what building it cost (ms), and how much process RSS (MB) it added."""

    session: ort.InferenceSession
    provider: ProviderSpec
    model_path: Path
    create_ms: float
    options: JSONDict = field(default_factory=dict)
    #: run functions built by :func:`bind_run` on this session, by (mode, device id, feeds identity)
    bound_runs: dict[tuple[object, ...], tuple[Any, Callable[[], object]]] = field(default_factory=dict, repr=False)
    build_rss_mb: float | None = None
    #: started before the session was built: the item's own device memory (``DeviceMemoryProbe``)
    device_probe: Any = None
    #: the compile-cache folder the EP was given and what it held before (:mod:`pytest_aaco.measure.compile_cache`)
    cache: CacheUse = field(default_factory=lambda: CacheUse(None))
    #: ``hit`` / ``miss`` / ``empty`` / ``user`` after creation (:meth:`CacheUse.status`), None without a cache
    compile_cache: str | None = None
    #: the options as recorded in fingerprints: :attr:`options` without the compile-cache folder the plugin
    #: added (a path that differs per runner must not change an item's fingerprint); None: :attr:`options`
    recorded: JSONDict | None = None
    #: the item's graph decision (``GraphChoice.to_dict()``, :mod:`pytest_aaco.measure.graph`), None when not made
    graph: JSONDict | None = None
    #: the compile-cache folder's lock, held from before creation until the first run has finished
    #: (:meth:`settle_cache` gives it back; so does :meth:`release_compile_lock`, and collecting the handle)
    compile_hold: CompileHold | None = field(default=None, repr=False)
    #: the RunOptions every measured run of this session is given, so a watchdog or a signal can stop it
    #: (:class:`~pytest_aaco.measure.timedloop.RunStop`; ORT's own error line for the stop is left out at the
    #: default log level, as the plugin reports it)
    run_stop: RunStop = field(default_factory=lambda: RunStop(quiet=ort_log_level() >= 3), repr=False)
    #: requested option keys the EP applies without reporting them back (:func:`unverified_options`):
    #: sent and recorded, but ``get_provider_options()`` cannot confirm them
    unverified: tuple[str, ...] = ()

    @property
    def recorded_options(self) -> JSONDict:
        """The provider options that describe the measurement (:attr:`recorded`, else :attr:`options`)."""
        return dict(self.options if self.recorded is None else self.recorded)

    def settle_cache(self, first_run_ms: float | None = None) -> str | None:
        """Read the cache folder again after the first run (EPs compile there for symbolic shapes) and,
        for a miss, write what the compile cost into it; then give the folder's lock back (another runner
        waiting for it finds the program). Returns :attr:`compile_cache`."""
        try:
            self.compile_cache = self.cache.settle(self.compile_cache, self.create_ms, first_run_ms,
                                                   ep=self.provider.short, side=self.provider.side)
        finally:
            self.release_compile_lock()
        return self.compile_cache

    def release_compile_lock(self) -> None:
        """Give the compile-cache folder's lock back (after the first run, or when it failed); idempotent."""
        if self.compile_hold is not None:
            self.compile_hold.release()

    @property
    def cuda_graph(self) -> bool:
        """Whether the session was created with ``enable_cuda_graph`` on."""
        return cuda_graph_on(self.options)


def cuda_graph_on(options: JSONDict) -> bool:
    """Whether provider *options* turn ``enable_cuda_graph`` on."""
    return str(options.get("enable_cuda_graph", "0")).strip().lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class MeasureSettings:
    """How one item is measured: warmup iterations, rounds, iterations per round (None: adaptive),
    the resolved IO binding (:func:`resolve_iobinding`) and the GPU device id; defaults from the
    option table."""

    warmup: int = default("warmup")
    rounds: int = CPU_ROUNDS
    iterations: int | None = default("iterations")
    iobinding: str = "none"
    device_id: int = default("device-id")


def resolve_iobinding(mode: str, provider: ProviderSpec) -> str:
    """The effective binding for *provider*: ``auto`` becomes the EP's :attr:`~pytest_aaco.eps.Ep.iobinding`
    (``none`` on CPU EPs, ``all`` on CUDA, measured in docs/gpu.md, ``inputs`` on other device EPs)."""
    if mode != "auto":
        return mode
    return provider.ep.iobinding


def effective_options(provider: ProviderSpec, device_id: int, ort_version: str | None = None) -> JSONDict:
    """Provider options as passed to ORT, with ``device_id`` added for GPU EPs that lack it.

    MIGraphX options go through :func:`pytest_aaco.measure.providers.migraphx_options` (booleans as
    "True"/"False", nothing added); whether the EP takes each key is asked when the session is built
    (:func:`migraphx_plan`), not decided by *ort_version* (kept for callers; unused). Raises
    :class:`ProviderError` for a MIGraphX boolean option that is not one.
    """
    options = dict(provider.options)
    if provider.ep.takes_device_id and "device_id" not in options:
        options["device_id"] = device_id
    if provider.short == "migraphx":
        options = migraphx_options(options)
    return {k: str(v) if not isinstance(v, str) else v for k, v in options.items()}


def warn_migraphx_env(provider: ProviderSpec, environ: Mapping[str, str] | None = None) -> None:
    """Warn (:class:`AacoProviderWarning`) naming each ``ORT_MIGRAPHX_*`` variable set: the MIGraphX EP
    reads them over its provider options, so the options recorded would not be the ones in effect."""
    if provider.short != "migraphx":
        return
    names = migraphx_env_overrides(os.environ if environ is None else environ)
    if names:
        cache = (f"; {MIGRAPHX_CACHE_ENV} replaces the compile-cache folder pytest-aaco keys by side, model"
                 " SHA-256 and options (--aaco-compile-cache), so the baseline and candidate sides may load each"
                 " other's program" if MIGRAPHX_CACHE_ENV in names else "")
        warnings.warn(AacoProviderWarning(
            f"{', '.join(names)} set: the MIGraphX EP reads these over its provider options, so the options"
            f" pytest-aaco passes and records may not be the ones in effect; unset them for benchmarks{cache}"),
            stacklevel=2)


def with_compile_cache(provider: ProviderSpec, model_path: Path, options: JSONDict, ort_version: str,
                       folder: Path | None = None) -> tuple[JSONDict, CacheUse]:
    """*options* (from :func:`effective_options`) plus the ones that point a compiling EP at its
    compile-cache folder, and the :class:`~pytest_aaco.measure.compile_cache.CacheUse` listing it.

    The folder is *folder* when given (a scratch folder: the session must compile), else the one keyed
    by side, model SHA-256 and program options under the root in use
    (:func:`~pytest_aaco.measure.compile_cache.keyed_folder`). Unchanged options for EPs that do not
    compile, with the cache off, and when the user's options already name a cache. Raises OSError
    when the model file or the folder cannot be read or made.
    """
    if provider.ep.compile is None:
        return options, CacheUse(None, reason="not compiling")
    if user_steered(provider.short, provider.options):
        return options, CacheUse(None, reason="user")
    root = compile_cache_root()
    if folder is None:
        if root is None:
            return options, CacheUse(None, reason="off")
        folder = keyed_folder(root, provider.side, provider.short, model_path, options, ort_version)
    extra = cache_options(provider.short, folder)  # the EP's record says which options (pytest_aaco.eps)
    return {**options, **extra}, CacheUse.start(folder)


def migraphx_questions() -> dict[str, str]:
    """Each MIGraphX key the plugin knows (:data:`~pytest_aaco.measure.providers.MIGRAPHX_KEYS`) with a value
    every real parser takes: what the EP is asked to say which keys it takes (:func:`migraphx_plan`)."""
    return {k: _NEUTRAL.get(k, "0") for k in sorted(MIGRAPHX_KEYS | set(NATIVE_TABLE_KEYS))}


#: the native-calibration-table key under its two names: upstream <= 1.22 and AMD's fork <= 6.3 take only the
#: legacy one, the fork 6.4 on and the PyPI wheels only the ``int8_`` one (tests/migraphx_generations.py)
NATIVE_TABLE_KEYS = ("migraphx_use_native_calibration_table", "migraphx_int8_use_native_calibration_table")


def _replacement(key: str, takes: Sequence[str]) -> str | None:
    """What to use instead of refused MIGraphX *key* on an EP that *takes* these keys: the other name of the
    native-calibration-table key when the EP takes it, ``--aaco-compile-cache`` for a save/load key
    (:data:`~pytest_aaco.measure.providers.MIGRAPHX_REPLACED`); None when nothing this EP takes replaces it."""
    if key in NATIVE_TABLE_KEYS:
        other = NATIVE_TABLE_KEYS[1 - NATIVE_TABLE_KEYS.index(key)]
        return other if other in takes else None
    return MIGRAPHX_REPLACED.get(key)


def plugin_cache_folder(provider: ProviderSpec, cache: CacheUse) -> str | None:
    """The compile-cache folder pytest-aaco itself put in *provider*'s MIGraphX options (None when the
    user's options name one, or there is none): the one that may go through ``ORT_MIGRAPHX_*`` instead."""
    if cache.folder is None or "migraphx_model_cache_dir" in provider.options:
        return None
    return str(cache.folder)


def migraphx_refusal(model_path: Path, provider: ProviderSpec, build: str, refused: Mapping[str, str],
                     takes: Sequence[str]) -> str:
    """The one-line message for MIGraphX options the EP *refused* (key -> the parser's words): the keys,
    the words, the *build* (``onnxruntime-migraphx 1.27.1``), a replacement this EP takes where one is known
    (:func:`_replacement`) and the keys the EP *takes*."""
    hints = "".join(f"; for {k} use {_replacement(k, takes)}" for k in sorted(refused) if _replacement(k, takes))
    words = "; ".join(f"{k}: {v}" for k, v in sorted(refused.items()))
    return (f"{model_path.name}: this onnxruntime build's {provider.ep_name} ({build}) refuses option(s)"
            f" {', '.join(sorted(refused))} ({words}){hints}; it takes:"
            f" {', '.join(takes) or 'no option it could be asked about'}")


def migraphx_plan(provider: ProviderSpec, model_path: Path, options: JSONDict, cache: CacheUse,
                  ort: ModuleType) -> tuple[JSONDict, dict[str, str]]:
    """The MIGraphX *options* to send and the environment to set around the session's creation, after
    asking the EP which keys it takes (:func:`migraphx_build_plan`). Raises :class:`SessionError` as it does."""
    found = migraphx_build_plan(provider, model_path, options, cache, ort)
    return dict(found.options), dict(found.env)


def migraphx_build_plan(provider: ProviderSpec, model_path: Path, options: JSONDict, cache: CacheUse,
                        ort: ModuleType) -> migraphx_probe.Plan:
    """What to send to the MIGraphX EP (:func:`pytest_aaco.measure.migraphx_probe.plan`, asked once per process).

    The plugin's own cache folder goes through ``migraphx_model_cache_dir`` where the EP takes it, else through
    ``ORT_MIGRAPHX_MODEL_CACHE_PATH`` (fork 6.4 on, PyPI wheels) or the save/load program file of upstream <= 1.22
    and the fork 6.2-6.3; the fork 6.1 has none (``Plan.cache`` says which). ``ORT_MIGRAPHX_CACHE_PATH`` is the
    int8 calibration-table folder and is never set. Precision keys also go through their ``ORT_MIGRAPHX_*``
    variable (upstream <= 1.22 reads them only there). The side worker asks its own onnxruntime the same way
    (pytest_aaco/sidebyside/worker.py). Raises :class:`SessionError` naming each key the EP refuses (the
    user's options), the EP's words, the build, and the keys it takes (:func:`migraphx_refusal`).
    """
    found = migraphx_probe.plan(options, ort, plugin_cache=plugin_cache_folder(provider, cache),
                                questions=migraphx_questions())
    if found.refused:
        raise SessionError(migraphx_refusal(model_path, provider, found.build, found.refused, found.takes))
    return found


def applied_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of a plan's *env* that describes the measurement, for the fingerprint's provider options (as
    ``env:<NAME>``): the precision variables (:data:`~pytest_aaco.measure.migraphx_probe.PRECISION_ENVS`), not the
    compile-cache paths (they differ per runner)."""
    names = set(migraphx_probe.PRECISION_ENVS.values())
    return {f"env:{k}": v for k, v in sorted(env.items()) if k in names}


#: values every real MIGraphX parser takes, for asking which keys an EP takes (:func:`migraphx_plan`)
_NEUTRAL = {"device_id": "0", "migraphx_model_cache_dir": "<scratch>", "migraphx_int8_calibration_table_name": "",
            "migraphx_mem_limit": "0", "migraphx_arena_extend_strategy": "kNextPowerOfTwo",
            **{k: "False" for k in ("migraphx_fp16_enable", "migraphx_bf16_enable", "migraphx_fp8_enable",
                                    "migraphx_int8_enable", *NATIVE_TABLE_KEYS, "migraphx_exhaustive_tune")}}

#: set *env* in ``os.environ`` for a ``with`` block only (the MIGraphX cache variables around a creation)
environment = migraphx_probe.environment


#: test-only hook: when set, called instead of ``onnxruntime.InferenceSession(path, sess_options=...,
#: providers=...)`` (the simulated compiling EP of tests/fake_compiling_ep.py); None in normal use
SESSION_FACTORY: Callable[..., Any] | None = None


def build_session(model_path: Path, provider: ProviderSpec, device_id: int = 0,
                  intra_op_threads: int = 0, profile_prefix: str | None = None,
                  config_entries: dict[str, str] | None = None, cache_folder: Path | None = None) -> SessionHandle:
    """Create an InferenceSession for *model_path* on *provider*, timing the creation (ms).

    GPU EPs get the CPU EP as a fallback for the nodes they cannot run, as ORT expects; the
    placement check afterwards refuses a session that fell back entirely. Raises
    :class:`SessionError` with ORT's message when the session cannot be created, when ORT's
    Python layer fell back to the CPU because the EP could not be created (its "EP Error" text,
    which it prints instead of raising, is captured and put in the message), and when the
    EP does not know a requested option (:func:`unknown_options`). *config_entries* are session
    configuration entries (``SessionOptions.add_session_config_entry``), for example
    ``{"session.intra_op.allow_spinning": "0"}``. Compiling EPs get their compile-cache folder
    (:func:`with_compile_cache`; *cache_folder* replaces the keyed one), and the handle records
    whether the session compiled (``compile_cache``: hit / miss). An EP that only a registered EP
    library offers (``--aaco-ep-library``) is selected through ``SessionOptions.add_provider_for_devices``
    (:mod:`pytest_aaco.measure.plugin_eps`) instead of ``providers=``; ``device_id`` picks its device.
    """
    import onnxruntime as ort

    so = session_options()
    if intra_op_threads:
        so.intra_op_num_threads = intra_op_threads
    for key, value in (config_entries or {}).items():
        so.add_session_config_entry(key, value)
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    try:  # CompileCacheError is a ValueError, ProviderError too: the order matters
        recorded = effective_options(provider, device_id, ort.__version__)
        load_migraphx_libraries(provider, recorded, ort)
        options, cache = with_compile_cache(provider, model_path, recorded, ort.__version__, cache_folder)
    except ProviderError as exc:
        raise SessionError(f"{model_path.name}: {exc}") from None
    except CompileCacheError as exc:
        raise SessionError(f"{model_path.name}: {exc}") from None
    except OSError as exc:
        raise SessionError(f"{model_path.name}: the compile cache (--aaco-compile-cache) cannot be used:"
                           f" {exc}; give a writable folder or off") from None
    warn_migraphx_env(provider)
    plugin = provider.ep_name in plugin_ep_names(ort)
    env: dict[str, str] = {}
    if provider.short == "migraphx" and not plugin and SESSION_FACTORY is None and \
            provider.ep_name in ort.get_available_providers():
        plan = migraphx_build_plan(provider, model_path, options, cache, ort)
        options, env = dict(plan.options), dict(plan.env)
        recorded = {**recorded, **applied_env(env)}
        if plan.cache == migraphx_probe.NO_CACHE:  # fork 6.1: the item records its session build time instead
            cache = CacheUse.none_here(cache)
    if plugin:  # a registered EP library's EP: its device is chosen on the session options (plugin_eps.py)
        options = {k: v for k, v in options.items() if k != "device_id"}
        try:
            add_plugin_provider(so, provider.ep_name, options, device_id, ort)
        except PluginEpError as exc:
            raise SessionError(f"{model_path.name}: {exc}") from None
    printed = io.StringIO()
    factory = SESSION_FACTORY or ort.InferenceSession
    hold, cache = hold_compile_lock(model_path, cache)  # until the first run: compile + save under the lock
    try:
        with environment(env), contextlib.redirect_stdout(printed):
            start = time.perf_counter_ns()
            if plugin:
                session = factory(str(model_path), sess_options=so)
            else:
                session = factory(str(model_path), sess_options=so, providers=session_providers(provider, options))
            create_ms = (time.perf_counter_ns() - start) / 1e6
    except Exception as exc:  # ORT raises its own Fail/InvalidArgument types
        hold.release()
        raise SessionError(creation_failure(model_path, provider, options, exc)) from None  # the chain may hold secrets
    used = list(session.get_providers())
    problem = creation_problem(model_path, provider, options, printed.getvalue(), used,
                               session.get_provider_options(), ort.__version__)
    if problem:
        hold.release()
        raise (FallbackError if provider.ep_name not in used else SessionError)(problem)
    handle = SessionHandle(session, provider, model_path, create_ms, options, cache=cache, recorded=recorded,
                           compile_hold=hold)
    handle.compile_cache = cache.status()
    handle.unverified = tuple(unverified_options(provider, options, session.get_provider_options()))
    if handle.compile_cache == "miss":
        cache.record(create_ms, ep=provider.short, side=provider.side)
    return handle


def load_migraphx_libraries(provider: ProviderSpec, options: JSONDict, ort: ModuleType) -> None:
    """Ask the MIGraphX EP about *options* and the compile-cache key (:func:`pytest_aaco.measure.migraphx_probe.probe`,
    the questions :func:`migraphx_build_plan` asks next, answered once per process) before the compile-cache folder
    is keyed: the probe session loads the EP's ROCm libraries, whose folder the key's ROCm version is read from
    (:func:`pytest_aaco.samplers.rocm_install.loaded_rocm`), so every item of a process gets the same key. Only
    for the MIGraphX EP that ORT lists (not through a test's session factory, nor a registered EP library)."""
    if provider.short != "migraphx" or SESSION_FACTORY is not None or provider.ep.compile is None:
        return
    if provider.ep_name not in ort.get_available_providers() or provider.ep_name in plugin_ep_names(ort):
        return
    if compile_cache_root() is not None and not user_steered(provider.short, provider.options):
        migraphx_probe.probe({**options, migraphx_probe.CACHE_KEY: "<scratch>"}, ort)


def hold_compile_lock(model_path: Path, cache: CacheUse) -> tuple[CompileHold, CacheUse]:
    """Take the lock of *cache*'s keyed folder (:class:`~pytest_aaco.measure.compile_cache.CompileHold`; a hold
    of nothing without a folder), to keep until the session's first run has finished
    (:meth:`SessionHandle.settle_cache`), and list the folder again once it is held (what another runner
    saved while this one waited is there before, not written by this session: a hit). Raises
    :class:`SessionError` when another runner has held it longer than
    :data:`~pytest_aaco.measure.compile_cache.LOCK_TIMEOUT_S`."""
    if cache.folder is None:
        return CompileHold.nothing(), cache
    try:
        hold = CompileHold(cache.folder).acquire()
    except Exception as exc:  # filelock.Timeout, or an OSError on the lock file
        raise SessionError(f"{model_path.name}: the compile-cache folder {cache.folder} stayed locked by another"
                           f" runner compiling the same program ({exc}); give each runner its own folder"
                           " (--aaco-compile-cache) or remove a stale lock file") from None
    return hold, CacheUse.start(cache.folder)


def session_providers(provider: ProviderSpec, options: JSONDict) -> list[str | tuple[str, JSONDict]]:
    """The ``providers`` argument of ``InferenceSession``: the EP with *options*, then the CPU EP as
    the fallback for nodes a device EP cannot run, as ORT expects."""
    providers: list[str | tuple[str, JSONDict]] = [(provider.ep_name, options)]
    cpu = eps.get("cpu")
    if provider.ep is not cpu:
        providers.append(cpu.ort_name)
    return providers


def creation_failure(model_path: Path, provider: ProviderSpec, options: JSONDict, error: object) -> str:
    """The message for an InferenceSession that ORT refused to create (*error*: what ORT raised);
    option values that may be credentials are redacted (:mod:`pytest_aaco.redact`)."""
    return (f"could not create an InferenceSession for {model_path.name} on {provider.ep_name} with options"
            f" {redact_options(options)}: {redact_text(str(error), secret_values(options))}")


def creation_problem(model_path: Path, provider: ProviderSpec, options: JSONDict, printed: str,
                     providers_used: list[str], reported_options: dict[str, JSONDict],
                     ort_version: str) -> str | None:
    """Why a session that ORT created must not be measured, or None.

    *printed* is what ORT's Python layer printed while creating it: its "EP Error" notice when
    the EP could not be created and it fell back to *providers_used* instead of raising.
    *reported_options* is ``session.get_provider_options()``: a requested option missing there
    was ignored (:func:`unknown_options`).
    """
    ep_error = redact_text(_ep_error(printed), secret_values(options))
    if ep_error and provider.ep_name not in providers_used:
        missing = library_problem(provider)
        return (f"{provider.ep_name} could not be created for {model_path.name} with options"
                f" {redact_options(options)}: {ep_error}"
                + (f" ({missing})" if missing and missing.split(":")[0] not in ep_error else "")
                + f"; ONNX Runtime fell back to {', '.join(providers_used)}: not recorded as a {provider.short} result")
    unknown = unknown_options(provider, options, reported_options)
    if unknown:
        known = sorted(reported_options.get(provider.ep_name, {}))
        return (f"unknown {provider.ep_name} option(s) {', '.join(unknown)} for {model_path.name}"
                f" (ONNX Runtime {ort_version} ignored them); valid: {', '.join(known)}")
    return None


def _ep_error(printed: str) -> str:
    """The reason in ORT's printed fallback notice (``EP Error <reason> when using [...]``), or ``""``.

    ORT's C++ prefix (``/onnxruntime_src/...cc:63 static ... [ONNXRuntimeError] : 1 : FAIL :
    provider_options_utils.h:182 Parse``) is dropped, leaving e.g. ``Unknown provider option: "x".``
    """
    found = re.search(r"^EP Error (.*?)(?:\s+when using |\Z)", printed, re.S | re.M)
    text = found.group(1).strip() if found else ""
    match = re.search(r"\[ONNXRuntimeError\] : \d+ : \w+ : (.*)", text, re.S)
    if match:
        text = re.sub(r"^\S+\.(?:h|cc|cpp):\d+ \S+ ", "", match.group(1).strip())
    return text


#: option keys an EP applies but leaves out of ``get_provider_options()``, by ORT EP name. The MIGraphX branch
#: of the Python binding of AMD's ROCm/onnxruntime fork (ROCm 6.4, 6.5, 7.0) passes both int8 calibration keys
#: to the EP, but ``MIGraphXExecutionProviderInfo::ToProviderOptions`` lists neither
#: (onnxruntime/python/onnxruntime_pybind_state.cc and
#: onnxruntime/core/providers/migraphx/migraphx_execution_provider_info.cc at rocm6.4_internal_testing
#: fdb6fa9b8ba0, rocm6.5_internal_testing 008a38525ff0, rocm7.0_internal_testing 3998378a4e42; the table in
#: tests/migraphx_generations.py). Such a key missing from the report is "unverified", never "ignored".
UNREPORTED_KEYS: dict[str, frozenset[str]] = {
    "MIGraphXExecutionProvider": frozenset({
        "migraphx_int8_calibration_table_name", "migraphx_int8_use_native_calibration_table",
        "migraphx_use_native_calibration_table", "migraphx_save_model_path", "migraphx_load_model_path"}),
}
#: the names under which an EP reports a requested key, where they differ, by ORT EP name: the fork's ROCm
#: 6.1-6.3 EP reports its options under the constants of migraphx_execution_provider_info.cc
#: (rocm6.3_internal_testing 9af9406c09d9: ``kFp16Enable = "trt_fp16_enable"``, ``kInt8Enable =
#: "migx_int8_enable"``, ...), while its Python binding takes ``migraphx_*`` keys
REPORTED_AS: dict[str, dict[str, str]] = {
    "MIGraphXExecutionProvider": {
        "migraphx_fp16_enable": "trt_fp16_enable", "migraphx_fp8_enable": "migx_fp8_enable",
        "migraphx_int8_enable": "migx_int8_enable", "migraphx_exhaustive_tune": "migx_exhaustive_tune",
        "migraphx_save_compiled_model": "migx_save_compiled_model",
        "migraphx_load_compiled_model": "migx_load_compiled_model"},
}


def _is_reported(provider: ProviderSpec, key: str, reported: JSONDict) -> bool:
    return key in reported or REPORTED_AS.get(provider.ep_name, {}).get(key, "\0") in reported


def unverified_options(provider: ProviderSpec, options: JSONDict,
                       reported_options: dict[str, JSONDict]) -> list[str]:
    """Requested keys of :data:`UNREPORTED_KEYS` that *reported_options* (``session.get_provider_options()``)
    leaves out: the EP applies them without saying so, so they are sent and recorded as unverified."""
    reported = reported_options.get(provider.ep_name) or {}
    known = UNREPORTED_KEYS.get(provider.ep_name, frozenset())
    return sorted(k for k in options if k in known and not _is_reported(provider, k, reported))


def unknown_options(provider: ProviderSpec, options: JSONDict,
                    reported_options: dict[str, JSONDict]) -> list[str]:
    """Requested option keys that the EP does not report in *reported_options*
    (``session.get_provider_options()``).

    For EPs without a table of option keys (:attr:`pytest_aaco.eps.Ep.option_keys`; tabled EPs were checked
    when the options were read). The report is trusted as the full list of options for the EPs that list
    every option (:attr:`~pytest_aaco.eps.Ep.lists_all_options`), and for any other EP that reports keys
    beyond those requested (its defaults: a full list). ``[]`` when the EP reports nothing, or only echoes
    the request.
    """
    if provider.ep.option_keys is not None:
        return []
    reported = reported_options.get(provider.ep_name) or {}
    if not reported:
        return []
    if not provider.ep.lists_all_options and not set(reported) - set(options):
        return []
    unreported = UNREPORTED_KEYS.get(provider.ep_name, frozenset())
    return sorted(k for k in options if not _is_reported(provider, k, reported) and k not in unreported)


def check_placement(handle: SessionHandle) -> None:
    """Raise :class:`SessionError` when ORT fell back off the requested EP."""
    problem = session_fallback_problem(handle.provider, list(handle.session.get_providers()))
    if problem:
        raise FallbackError(problem)


def bind_run(handle: SessionHandle, feeds: dict[str, np.ndarray], mode: str,
                device_id: int) -> Callable[[], object]:
    """A zero-argument callable that runs the model once, built outside the timed loop.

    ``none``: ``session.run(None, feeds)`` with host arrays (host↔device copies are timed).
    ``inputs``: inputs copied to the device once as OrtValues; outputs come back to the host.
    ``all``: inputs and outputs stay on the device. ORT allocates the outputs on the first run;
    from then on the binding reuses those buffers, so every later run reads and writes fixed
    device addresses, as CUDA graphs (``enable_cuda_graph``) need and as a deployed server does.
    With a binding, the callable's ``binding`` attribute is the IOBinding (outputs via
    ``binding.copy_outputs_to_cpu()``). Uses ``session.io_binding()`` and ``run_with_iobinding``
    (https://onnxruntime.ai/docs/api/python/api_summary.html#iobinding).

    The callable is built once per session, mode and feeds and reused by later calls. With
    ``enable_cuda_graph`` ORT replays the device addresses it captured, so such a session takes
    exactly one binding, and ``none`` is refused: with host feeds, ``session.run`` returned no
    outputs once the graph was captured (onnxruntime-gpu 1.31.1, docs/gpu.md). Raises
    :class:`SessionError` for both.
    """
    key = (mode, device_id, id(feeds))
    cached = handle.bound_runs.get(key)
    if cached is not None and cached[0] is feeds:
        return cached[1]
    if handle.cuda_graph:
        if mode == "none":
            raise SessionError(f"{handle.model_path.name}: enable_cuda_graph=1 needs device inputs: use"
                               " --aaco-iobinding=all or inputs (with host feeds ORT's graph replay returned"
                               " no outputs)")
        if handle.bound_runs:
            raise SessionError(f"{handle.model_path.name}: a session with enable_cuda_graph=1 replays the device"
                               " addresses it captured, so it takes one IO binding (one mode, one set of inputs)")
    run = _new_run(handle, feeds, mode, device_id)
    handle.bound_runs[key] = (feeds, run)
    return run


def _new_run(handle: SessionHandle, feeds: dict[str, np.ndarray], mode: str, device_id: int) -> Callable[[], object]:
    device = handle.provider.ep.ort_device
    return bound_runner(handle.session, feeds, mode, device, device_id, handle.run_stop.run_options)
