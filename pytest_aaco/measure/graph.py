"""``--aaco-graph auto|on|off``: graph replay (CUDA graphs, HIP graphs) on device EPs, or why not.

With graph replay the EP captures one run's kernel launches and replays them as one graph, so the
host's launch overhead (most of a launch-bound model's wall time on a GPU) drops out. It changes
the quantity measured, so the graph state is part of the fingerprint (a graph-on baseline never
judges a graph-off run) and of the item's record.

Provider options (each EP's :attr:`~pytest_aaco.eps.Ep.graph_option`):

* CUDA EP: ``enable_cuda_graph=1``
  (https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html#using-cuda-graphs-preview).
  ORT replays the device addresses it captured, so inputs and outputs must be bound on the device
  (``--aaco-iobinding=all``: :func:`pytest_aaco.measure.inference.bind_run`), every node must run
  on the CUDA EP, and input shapes must not change between runs.
* MIGraphX EP: only where the EP takes a graph key (:attr:`~pytest_aaco.eps.Ep.graph_probed`), asked at run time
  (:mod:`pytest_aaco.measure.migraphx_probe`). No onnxruntime-migraphx wheel 1.23.0-1.27.1 takes one
  (each refuses ``migraphx_hip_graph_enable`` with ``Unknown provider option``: ``MIGRAPHX_KEYS`` in
  :mod:`pytest_aaco.measure.providers`), so ``--aaco-graph=on`` there is refused with that reason
  before any session is built, never left to a parse error (:func:`graph_unsupported`).

:func:`choose_graph` is the one decision: ``off`` never captures; ``on`` captures or refuses with an
error (:class:`GraphRefused`) naming the reason; ``auto`` asks :func:`auto_wants_graph` and, when that
says yes but the session cannot be captured, warns naming the item and measures without a graph.
Refusal reasons: the EP has no graph replay (the CPU EP and others: "not applicable", never an
error), no device IO binding, inputs with symbolic dimensions (dynamic shapes), or nodes placed on
the CPU EP (:mod:`pytest_aaco.measure.placement`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_aaco import eps
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure import migraphx_probe
from pytest_aaco.measure.inference import SessionError
from pytest_aaco.measure.providers import ProviderSpec
from pytest_aaco.warnings import AacoProviderWarning


def graph_key(provider_short: str) -> str:
    """The provider option that turns EP *provider_short*'s graph replay on, ``""`` when it has none."""
    option = eps.get(provider_short).graph_option
    return option[0] if option else ""


def graph_unsupported(provider_short: str, ort: Any = None) -> str | None:
    """Why EP *provider_short*'s build has no graph replay (the EP refused or ignored its graph option
    when asked, :func:`pytest_aaco.measure.migraphx_probe.probe`), or None when it takes the option or
    the EP's option is not asked about. *ort*: the onnxruntime module (default: imported)."""
    ep = eps.get(provider_short)
    if not ep.graph_probed or ep.graph_option is None:
        return None
    if ort is None:
        import onnxruntime

        ort = onnxruntime
    key, value = ep.graph_option
    check = migraphx_probe.probe({key: value}, ort)[key]
    if check.state == "accepted":
        return None
    why = {"refused": f"it refuses {key} ({check.words})", "ignored": f"it ignores {key}",
           "unknown": f"it could not be asked about {key} ({check.words})"}[check.state]
    return (f"this onnxruntime build's {ep.ort_name} ({migraphx_probe.build_name(ort)}) has no"
            f" graph replay option: {why}; use --aaco-graph=off")
#: graph states recorded per item
ON, OFF, REFUSED, NOT_APPLICABLE = "on", "off", "refused", "not applicable"


class GraphRefused(SessionError):
    """``--aaco-graph=on`` for a session that cannot be captured; the message says why and what to change."""


@dataclass(frozen=True)
class GraphChoice:
    """The graph decision of one item: ``mode`` asked (auto/on/off), ``state`` (on, off, refused,
    not applicable) and the ``reason`` for anything but on/off."""

    mode: str
    state: str
    reason: str | None = None

    @property
    def on(self) -> bool:
        return self.state == ON

    def to_dict(self) -> JSONDict:
        data: JSONDict = {"mode": self.mode, "state": self.state}
        if self.reason:
            data["reason"] = self.reason
        return data

    @classmethod
    def from_dict(cls, data: JSONDict) -> GraphChoice:
        """Inverse of :meth:`to_dict`."""
        reason = data.get("reason")
        return cls(str(data.get("mode", "off")), str(data.get("state", OFF)), None if reason is None else str(reason))


def auto_wants_graph(provider_short: str) -> bool:
    """What ``--aaco-graph=auto`` asks for on EP *provider_short*: graph replay off, on every EP.

    Device time (kernel time per run from the vendor's tracer) measures what the GPU did with or
    without graph replay, and it is the metric that catches kernel-level regressions on a
    launch-bound model; graph replay would only make the wall time steadier, and it hides from
    wall time what only wall time sees (launch overhead, host work between kernels). Measured on an
    H100 (the graph_check.sh study, in git history at commit 7ecd489;
    studies/RESULTS.md has the table): an unchanged ResNet-50 side by
    side had wall CIs of about ±7-9% with graphs against ±12-33% without, and device time read the
    same to 0.1% in both modes; so auto stays off.
    """
    return False


def symbolic_inputs(model_path: str | Path, fixed: Mapping[str, int] | None = None) -> list[str]:
    """Graph inputs of the ONNX model at *model_path* with a symbolic or unknown dimension, as
    ``name[dim]`` (``input[batch]``); [] for fully static inputs. A symbolic dimension named in
    *fixed* (the registry's ``dims``) is static here: the plugin feeds every run the same shapes,
    which is what graph replay needs. Initializers listed as inputs are skipped. Reads the graph
    only (no external weights). Raises :class:`SessionError` naming the file when it is not a
    readable ONNX model."""
    import onnx

    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - onnx raises DecodeError, OSError ...
        raise SessionError(f"cannot read {Path(model_path).name} to check its input shapes: {exc}") from None
    initializers = {i.name for i in model.graph.initializer}
    found = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        for i, dim in enumerate(dims):
            if dim.dim_param and dim.dim_param in (fixed or {}):
                continue
            if dim.dim_param or not dim.HasField("dim_value") or dim.dim_value <= 0:
                found.append(f"{value.name}[{dim.dim_param or i}]")
                break
    return found


def capture_problem(provider_short: str, iobinding: str, symbolic: list[str], cpu_nodes: int,
                    cpu_ops: str = "") -> str | None:
    """Why a session of EP *provider_short* cannot be captured as a graph, or None.

    *iobinding*: the resolved binding (``all`` puts inputs and outputs on the device); *symbolic*:
    :func:`symbolic_inputs`; *cpu_nodes*: nodes placed on the CPU EP (*cpu_ops* names them).
    """
    key = graph_key(provider_short)
    if iobinding != "all":
        return (f"{key} needs inputs and outputs bound on the device, and the IO binding is {iobinding!r}:"
                " use --aaco-iobinding=all")
    if symbolic:
        return (f"{key} replays fixed shapes, and inputs have symbolic dimensions ({', '.join(symbolic)}):"
                " fix them with the registry's dims or export the model with static shapes")
    if cpu_nodes:
        return (f"{key} captures only nodes on the device, and {cpu_nodes} node(s) run on the CPU EP"
                f"{' (' + cpu_ops + ')' if cpu_ops else ''}")
    return None


def choose_graph(mode: str, provider_short: str, label: str, *, iobinding: str, symbolic: Callable[[], list[str]],
                 cpu_nodes: Callable[[], tuple[int, str]]) -> GraphChoice:
    """The graph decision for item *label* on EP *provider_short* under ``--aaco-graph`` *mode*.

    *symbolic* and *cpu_nodes* are called only when graph replay is wanted (they read the model and
    profile a run): ``symbolic()`` -> :func:`symbolic_inputs`, ``cpu_nodes()`` -> (CPU-EP node count,
    their op types). ``on`` with a session that cannot be captured raises :class:`GraphRefused`;
    ``auto`` then warns (:class:`AacoProviderWarning`, naming *label*) and returns ``refused``.
    An EP without graph replay is ``not applicable`` under every mode. Raises ValueError for an
    unknown *mode*.
    """
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"--aaco-graph must be auto, on or off, got {mode!r}")
    if not graph_key(provider_short):
        reason = f"the {provider_short} EP has no graph replay"
        return GraphChoice(mode, NOT_APPLICABLE if mode != "off" else OFF, reason if mode != "off" else None)
    if mode == "off" or (mode == "auto" and not auto_wants_graph(provider_short)):
        return GraphChoice(mode, OFF)
    unsupported = graph_unsupported(provider_short)
    if unsupported:
        if mode == "on":
            raise GraphRefused(f"{label}: --aaco-graph=on refused: {unsupported}")
        return GraphChoice(mode, NOT_APPLICABLE, unsupported)
    count, ops = (0, "")
    problem = capture_problem(provider_short, iobinding, [], 0)
    if problem is None:
        problem = capture_problem(provider_short, iobinding, symbolic(), 0)
    if problem is None:
        count, ops = cpu_nodes()
        problem = capture_problem(provider_short, iobinding, [], count, ops)
    if problem is None:
        return GraphChoice(mode, ON)
    if mode == "on":
        raise GraphRefused(f"{label}: --aaco-graph=on refused: {problem}")
    warnings.warn(AacoProviderWarning(f"{label}: graph replay not used (--aaco-graph=auto): {problem}"), stacklevel=2)
    return GraphChoice(mode, REFUSED, problem)


def with_graph(provider: ProviderSpec, choice: GraphChoice) -> ProviderSpec:
    """*provider* with its graph option (:attr:`pytest_aaco.eps.Ep.graph_option`) added when *choice* is on,
    else unchanged."""
    if not choice.on or provider.ep.graph_option is None:
        return provider
    key, value = provider.ep.graph_option
    return provider.with_options({key: value})


def without_graph(provider: ProviderSpec) -> ProviderSpec:
    """*provider* without its graph option: the placement profile runs host feeds, which a captured
    graph does not take (:func:`pytest_aaco.measure.inference.bind_run`)."""
    key = graph_key(provider.short)
    if key not in provider.options:
        return provider
    return provider.without_options([key])


def graph_build_problem(provider: ProviderSpec, reported_options: dict[str, JSONDict]) -> str | None:
    """Why a built session with graph replay asked for does not have it, or None: the EP reports
    its options (``session.get_provider_options()``) and the graph key is not among them (the build
    does not know it and ignored it)."""
    key = graph_key(provider.short)
    if not key or key not in provider.options:
        return None
    reported = reported_options.get(provider.ep_name) or {}
    if reported and key not in reported:
        return (f"this onnxruntime build's {provider.ep_name} does not know {key} (it reports"
                f" {len(reported)} other options): no graph replay here; use --aaco-graph=off")
    return None
