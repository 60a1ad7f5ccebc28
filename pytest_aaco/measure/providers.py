"""Execution providers: short names, full ORT names, availability and the placement check.

ONNX Runtime falls back to the CPU silently when an execution provider (EP) cannot be
used, so a benchmark must check ``InferenceSession.get_providers()`` before it records
anything as a GPU result. Reference: https://onnxruntime.ai/docs/execution-providers/
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.redact import redact_options

#: what an EP name outside :data:`pytest_aaco.eps.ALL` must look like to be taken as a plugin EP's
#: (``AMDGPUExecutionProvider``): such a spec keeps the full name as its short name, and whether any EP library
#: reports it is checked once ONNX Runtime is loaded (:func:`unavailable_reason`, :mod:`pytest_aaco.measure.plugin_eps`)
PLUGIN_EP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*ExecutionProvider$")
#: what separates the EPs of a fallback chain in ``--aaco-provider`` (``vitisai|dml|cpu``)
CHAIN_SEPARATOR = "|"
#: what to use instead of a provider option the CPU EP ignores (they are session options there)
CPU_OPTION_HINTS = {
    "intra_op_num_threads": "--aaco-intra-op-threads",
    "inter_op_num_threads": "--aaco-intra-op-threads (inter-op threads are not set by pytest-aaco)",
}


class ProviderError(ValueError):
    """An execution provider name or option is not valid; the message lists the valid choices."""


@dataclass(frozen=True)
class ProviderSpec:
    """One requested execution provider.

    ``short`` is the id used in test ids (``cpu``, ``cuda``, ``migraphx`` ...), ``ep_name`` the
    ONNX Runtime name (``CUDAExecutionProvider``), ``options`` the provider options passed to
    ``InferenceSession(providers=[(ep_name, options)])``. The EP's facts are :attr:`ep`
    (:mod:`pytest_aaco.eps`).

    ``chain`` is set for a fallback chain (``--aaco-provider=vitisai|dml|cpu``): the short names of its
    EPs in order. Until :func:`resolve_chain` picks the first one this runner offers, the spec is the
    chain's first EP; after, the one picked. The test id stays the chain's (:attr:`test_id`).
    """

    short: str
    ep_name: str
    options: JSONDict = field(default_factory=dict, hash=False, compare=False, repr=False)
    #: which side of a comparison the sessions belong to (``candidate``, ``baseline``): the compile cache
    #: keeps a folder per side (:mod:`pytest_aaco.measure.compile_cache`), so the sides never share a program
    side: str = field(default="candidate", hash=False, compare=False, repr=False)
    chain: tuple[str, ...] = ()
    #: for a chain resolved to a later EP, why the earlier ones were passed over (:func:`resolve_chain`);
    #: recorded in the item's bundle record, not raised as a warning: the chain is the user's own choice
    chain_reason: str = field(default="", hash=False, compare=False, repr=False)

    def __repr__(self) -> str:  # options may hold credentials: shown redacted (pytest_aaco.redact)
        chain = f", chain={self.test_id!r}" if self.chain else ""
        return (f"ProviderSpec(short={self.short!r}, ep_name={self.ep_name!r}, options={redact_options(self.options)!r}"
                f"{chain})")

    @property
    def ep(self) -> eps.Ep:
        """The EP's record (:func:`pytest_aaco.eps.get`)."""
        return eps.get(self.short)

    @property
    def is_gpu(self) -> bool:
        return self.ep.is_gpu

    @property
    def test_id(self) -> str:
        """The item's provider id: the short name, or a chain's names joined by ``|`` whichever EP ran."""
        return CHAIN_SEPARATOR.join(self.chain) if self.chain else self.short

    @property
    def label(self) -> str:
        """What the reports call it: the short name, with the chain it came from (``cpu (vitisai|dml|cpu)``)."""
        return f"{self.short} ({self.test_id})" if self.chain else self.short

    def with_options(self, options: JSONDict) -> ProviderSpec:
        """A copy with *options* merged over the current ones (later wins)."""
        return replace(self, options={**self.options, **options})

    def without_options(self, keys: Iterable[str]) -> ProviderSpec:
        """A copy without the options *keys*."""
        drop = set(keys)
        return replace(self, options={k: v for k, v in self.options.items() if k not in drop})

    def for_side(self, side: str) -> ProviderSpec:
        """A copy whose sessions belong to *side* (``baseline`` / ``candidate``)."""
        return replace(self, options=dict(self.options), side=side)


def valid_names() -> str:
    """Human-readable list of accepted provider names, for error messages."""
    shorts = ", ".join(ep.short for ep in eps.ALL)
    return (f"{shorts} (or the full EP names, e.g. {eps.get('migraphx').ort_name}; a fallback chain as"
            " vitisai|dml|cpu)")


def parse_provider(name: str) -> ProviderSpec:
    """Turn a short name (``migraphx``), an alias (``trt``), a full EP name (``MIGraphXExecutionProvider``) or a
    fallback chain (``vitisai|dml|cpu``: :func:`resolve_chain` picks the first available) into a spec.

    Raises :class:`ProviderError` naming the valid choices for an unknown name.
    """
    if CHAIN_SEPARATOR in name:
        parts = [parse_provider(part) for part in name.split(CHAIN_SEPARATOR) if part.strip()]
        shorts = tuple(dict.fromkeys(p.short for p in parts))
        if len(shorts) < 2:
            raise ProviderError(f"fallback chain {name.strip()!r} names fewer than two EPs; give them as"
                                " vitisai|dml|cpu, or one EP alone")
        return replace(parts[0], chain=shorts)
    found = eps.lookup(name)
    if found is not None:
        return ProviderSpec(found.short, found.ort_name)
    if PLUGIN_EP_NAME.match(name.strip()):  # an EP library's own name: checked against get_ep_devices() at start
        return ProviderSpec(name.strip(), name.strip())
    raise ProviderError(f"unknown execution provider {name.strip()!r}; valid: {valid_names()}, or the name of an"
                        " EP that a registered EP library reports (onnxruntime.get_ep_devices(), --aaco-ep-library)")


def alternatives(spec: ProviderSpec) -> list[ProviderSpec]:
    """The specs *spec* may run as: the chain's EPs in order (same options, side and chain), or *spec* alone."""
    if not spec.chain:
        return [spec]
    return [replace(spec, short=short, ep_name=parse_provider(short).ep_name) for short in spec.chain]


def resolve_chain(spec: ProviderSpec, available: list[str], ort_version: str,
                  refused: Callable[[ProviderSpec], str | None] | None = None) -> tuple[ProviderSpec, str | None]:
    """The EP of fallback chain *spec* that runs here: the first one in *available* (the EP names this build
    and the registered EP libraries offer) that *refused* (an EP -> why it cannot make a session here, or
    None: :func:`session_refusal`) lets through, with the note that says so (None when the chain's first EP
    runs, or *spec* is no chain). When none is, *spec* unchanged (its :func:`unavailable_reason` says why
    each is not). Never a silent fallback: the caller records the note."""
    options = alternatives(spec)
    reasons: list[str] = []
    for index, candidate in enumerate(options):
        reason = ep_unavailable(candidate, available, ort_version)
        if reason is None and refused is not None and index < len(options) - 1:  # the last one runs or fails
            problem = refused(candidate)
            reason = None if problem is None else f"{candidate.ep_name} listed but cannot run here: {problem}"
        if reason is None:
            if index == 0:
                return candidate, None
            note = (f"runs on {candidate.ep_name}, the first EP of --aaco-provider={spec.test_id} this"
                    f" runner offers ({'; '.join(reasons)})")
            return replace(candidate, chain_reason=note), note
        reasons.append(reason)
    return spec, None


def session_refusal(spec: ProviderSpec) -> str | None:
    """Why an InferenceSession on *spec*'s EP alone cannot be made here, or None when one can and runs on
    it: a one-node model (``Identity``, float32[1]) is loaded with ``providers=[spec.ep_name]``; ORT's
    error (its first line, which names a missing library such as ``libnvinfer.so.10`` or the missing
    driver), or the EPs the session fell back to, is the reason. Imports onnxruntime and onnx; never raises."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper

        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = min(model.ir_version, 8)
        options = ort.SessionOptions()
        options.log_severity_level = 4  # the fallback is reported here, not in ORT's log
        session = ort.InferenceSession(model.SerializeToString(), options, providers=[spec.ep_name])
        ran = session.get_providers()
        if spec.ep_name in ran:
            return None
        return (f"ONNX Runtime fell back to {', '.join(ran) or 'nothing'}"
                + (f" ({missing})" if (missing := library_problem(spec)) else ""))
    except Exception as exc:  # noqa: BLE001 - whatever ORT raises is the reason
        text = str(exc).strip().splitlines()
        return (text[0] if text else type(exc).__name__)[:400]


def library_problem(spec: ProviderSpec) -> str | None:
    """Why the EP's shared library in the imported onnxruntime package (``capi/libonnxruntime_providers_<ep>.so``)
    cannot be loaded: the loader's error names the missing dependency (``libnvinfer.so.10: cannot open
    shared object file``); None when it loads or there is no such file (Linux only). Imports onnxruntime;
    never raises."""
    import ctypes
    import os

    try:
        import onnxruntime as ort
    except Exception:  # noqa: BLE001 - no build to ask
        return None
    library = os.path.join(os.path.dirname(ort.__file__), "capi", f"libonnxruntime_providers_{spec.short}.so")
    if not os.path.isfile(library):
        return None
    try:
        ctypes.CDLL(library)
    except OSError as exc:
        return str(exc).replace(f"{library}: ", "")[:300] or None
    return None


def parse_provider_list(values: list[str]) -> list[ProviderSpec]:
    """Parse repeated and/or comma-separated provider names, keeping order and dropping repeats."""
    specs: list[ProviderSpec] = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            spec = parse_provider(part)
            if spec not in specs:
                specs.append(spec)
    if not specs:
        raise ProviderError(f"no execution provider given; valid: {valid_names()}")
    return specs


def takes_option(short: str, key: str) -> bool:
    """Whether the EP *short* may take option *key*: in its table, or the EP lists its own (checked later)."""
    table = eps.get(short).option_keys
    return table is None or key in table


def option_problem(short: str, keys: list[str]) -> str | None:
    """Why the EP *short* does not take *keys* (option names, never values), or None.

    The message names the keys and the valid ones, e.g. ``CPUExecutionProvider takes no provider options
    (ONNX Runtime ignores them): got intra_op_num_threads; use --aaco-intra-op-threads``.
    """
    ep = eps.get(short).ort_name
    table = eps.get(short).option_keys
    bad = sorted(k for k in keys if table is not None and k not in table)
    if not bad:
        return None
    if table:
        return f"{ep} does not take option(s) {', '.join(bad)}; valid: {', '.join(sorted(table))}"
    text = f"{ep} takes no provider options (ONNX Runtime ignores them): got {', '.join(bad)}"
    hints = sorted({CPU_OPTION_HINTS[k] for k in bad if k in CPU_OPTION_HINTS})
    return text + (f"; thread counts are session options: use {', '.join(hints)}" if hints else "")


def check_options(specs: list[ProviderSpec] | tuple[ProviderSpec, ...], keys: list[str]) -> None:
    """Options given for every requested EP: each key must be one some requested EP takes.

    Raises :class:`ProviderError` naming the keys no requested EP takes and the valid ones.
    """
    shorts = [a.short for s in specs for a in alternatives(s)]  # a fallback chain: each of its EPs
    orphans = sorted(k for k in keys if not any(takes_option(short, k) for short in shorts))
    if orphans:
        problems = [option_problem(short, orphans) for short in shorts]
        raise ProviderError("; ".join(p for p in problems if p))


def options_for(spec: ProviderSpec, options: JSONDict) -> JSONDict:
    """The options given for every requested EP that *spec*'s EP takes (:func:`takes_option`): with
    ``--aaco-provider=cuda,cpu``, ``cudnn_conv_algo_search`` goes to CUDA and not to the CPU EP."""
    return {k: v for k, v in options.items() if takes_option(spec.short, k)}


def available_providers() -> list[str]:
    """The EP names this onnxruntime build offers (imports onnxruntime)."""
    import onnxruntime as ort

    return list(ort.get_available_providers())


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def unavailable_reason(spec: ProviderSpec, available: list[str], ort_version: str) -> str | None:
    """Why *spec* cannot run on this build, or None when it can.

    The reason lists the available EPs, e.g.
    ``MIGraphXExecutionProvider not available (available: CPUExecutionProvider, AzureExecutionProvider)``.
    """
    if spec.chain:
        reasons = [ep_unavailable(a, available, ort_version) for a in alternatives(spec)]
        if any(r is None for r in reasons):
            return None
        return f"none of --aaco-provider={spec.test_id} is available: " + "; ".join(r for r in reasons if r)
    return ep_unavailable(spec, available, ort_version)


def ep_unavailable(spec: ProviderSpec, available: list[str], ort_version: str) -> str | None:
    """Why *spec*'s own EP (not its chain's others) cannot run on this build, or None: :func:`unavailable_reason`."""
    if spec.ep_name in available:
        return None
    ep = spec.ep
    reason = f"{spec.ep_name} not available (available: {', '.join(available)})"
    if not ep.known:
        reason += ("; no built-in EP and no registered EP library reports it (onnxruntime.get_ep_devices()):"
                   " register its library with --aaco-ep-library NAME=PATH, or request one of those offered")
    if ep.removed(_version_tuple(ort_version)) and ep.removed_in is not None:
        removed = ".".join(map(str, ep.removed_in))
        reason += f"; {ep.ort_name} was removed in onnxruntime {removed} and this is {ort_version}: {ep.removed_hint}"
    off = ep.off_platform()
    if off:
        reason += f"; {off}"
    return reason


def session_fallback_problem(spec: ProviderSpec, session_providers: list[str]) -> str | None:
    """Check that the session really runs on the requested EP.

    *session_providers* is ``InferenceSession.get_providers()``. Returns a message when ORT fell
    back (the requested EP is not among them), else None.
    """
    if spec.ep_name in session_providers:
        return None
    missing = library_problem(spec)  # the EP's library names what it lacks (libnvinfer.so.10 for TensorRT)
    return (
        f"{spec.ep_name} was requested but the session runs on {', '.join(session_providers) or 'nothing'}"
        " (ONNX Runtime fell back" + (f": {missing}" if missing else "") + "): not recorded as a " + spec.short
        + " result"
    )


# --- MIGraphX provider options -------------------------------------------------------------------
# Checked against the real option parsers, not by version: every onnxruntime-migraphx wheel on PyPI
# (1.23.0, 1.23.2, 1.24.2, 1.24.4, 1.25.0, 1.27.0, 1.27.1) was loaded with its own
# libonnxruntime_providers_migraphx.so over stand-in HIP/MIGraphX libraries and fed each key
# (tests/migraphx_wheels.py, studies/migraphx_conformance.py; tests/test_migraphx_conformance.py in CI).
# Their parser (MIGraphXExecutionProviderInfo's ProviderOptionsParser, upstream
# onnxruntime/core/providers/migraphx/migraphx_execution_provider_info.cc) takes exactly MIGRAPHX_KEYS and
# refuses anything else with 'Unknown provider option: "<key>"'; none has a save/load-compiled-model key
# or a graph-replay key. Other builds differ (AMD's ROCm/onnxruntime wheels refuse with "Invalid MIGraphX EP
# option"; upstream 1.20-1.22's EP reads only device_id and takes the rest from ORT_MIGRAPHX_* variables),
# so the plugin asks the EP at run time (pytest_aaco.measure.migraphx_probe) instead of trusting a table.

#: the MIGraphX option keys every onnxruntime-migraphx wheel 1.23.0 ... 1.27.1 takes (checked as above)
MIGRAPHX_KEYS = frozenset({
    "device_id", "migraphx_fp16_enable", "migraphx_bf16_enable", "migraphx_fp8_enable", "migraphx_int8_enable",
    "migraphx_int8_calibration_table_name", "migraphx_int8_use_native_calibration_table",
    "migraphx_exhaustive_tune", "migraphx_mem_limit", "migraphx_arena_extend_strategy", "migraphx_model_cache_dir",
    "migraphx_external_alloc", "migraphx_external_free", "migraphx_external_empty_cache",
})
#: MIGraphX keys that take a boolean; their values are sent as "True"/"False", the one spelling every real
#: parser takes (the PyPI wheels take True/False/true/false/1/0 and refuse yes/TRUE/on; the Python binding
#: of upstream <= 1.22 and AMD's ROCm branches compares with "True" and "False" only)
MIGRAPHX_BOOL_KEYS = frozenset({
    "migraphx_fp16_enable", "migraphx_bf16_enable", "migraphx_fp8_enable", "migraphx_int8_enable",
    "migraphx_int8_use_native_calibration_table", "migraphx_exhaustive_tune",
})
#: keys of older or other builds that no PyPI wheel takes, and what to use instead
MIGRAPHX_REPLACED = {
    "migraphx_use_native_calibration_table": "migraphx_int8_use_native_calibration_table",
    "migraphx_save_compiled_model": "--aaco-compile-cache (migraphx_model_cache_dir)",
    "migraphx_save_model_path": "--aaco-compile-cache (migraphx_model_cache_dir)",
    "migraphx_load_compiled_model": "--aaco-compile-cache (migraphx_model_cache_dir)",
    "migraphx_load_model_path": "--aaco-compile-cache (migraphx_model_cache_dir)",
}
_TRUE = frozenset({"1", "true", "yes"})
_FALSE = frozenset({"0", "false", "no"})


def migraphx_bool(key: str, value: object) -> str:
    """*value* of boolean MIGraphX option *key* as "True"/"False"; 1/0/true/false/yes/no in any case.

    Raises :class:`ProviderError` naming the key for anything else.
    """
    text = str(value).strip().lower()
    if text in _TRUE:
        return "True"
    if text in _FALSE:
        return "False"
    raise ProviderError(f"MIGraphXExecutionProvider option {key}={value!r} is not a boolean;"
                        " use 1/0, true/false or yes/no")


def migraphx_options(options: JSONDict) -> JSONDict:
    """The MIGraphX provider options to pass: booleans (:data:`MIGRAPHX_BOOL_KEYS`) as "True"/"False", the
    rest unchanged. Nothing is added: no save/load key nor any default (whether the EP takes each key is
    asked at run time, :mod:`pytest_aaco.measure.migraphx_probe`). Raises :class:`ProviderError` naming a
    boolean key whose value is not one."""
    return {k: migraphx_bool(k, v) if k in MIGRAPHX_BOOL_KEYS else v for k, v in options.items()}


def migraphx_env_overrides(environ: Iterable[str]) -> list[str]:
    """Names of ``ORT_MIGRAPHX_*`` variables set in *environ*: the EP reads them over its provider options."""
    return sorted(k for k in environ if k.upper().startswith("ORT_MIGRAPHX_"))
