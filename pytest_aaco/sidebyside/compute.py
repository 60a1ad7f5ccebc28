"""Whether two ONNX model files compute the same thing: a canonical digest of the graph.

``--aaco-compare=REF`` measures an item side by side when its model bytes changed. Many such
changes leave the compute alone: a re-export that renames values and nodes, reorders nodes, edits
``doc_string``, ``producer_name`` or ``metadata_props``, or stores the same weights another way
(``raw_data`` or ``float_data``, inline or external). :func:`graph_digest` hashes what ONNX Runtime
executes and nothing else, and :func:`compare_compute` decides:

* **same graph**: the digests of the two files are equal, and ONNX Runtime loads the new file
  (:func:`loads_in_ort`: the digest leaves out names, ``value_info`` and the IR version, which can
  make a file invalid);
* **same graph after ONNX Runtime's basic optimizations**: they differ, but the graphs ONNX Runtime
  writes (``SessionOptions.optimized_model_filepath``) at ``ORT_ENABLE_BASIC`` are equal. Basic
  optimizations (constant folding, redundant-node elimination) run before the graph is partitioned
  among execution providers (https://onnxruntime.ai/docs/performance/model-optimizations/graph-optimizations.html),
  so what every execution provider receives is the same;
* otherwise not proven, with the reason in words (the item is then measured side by side).

The digest is a Merkle hash over the dataflow graph (a value's hash is its producer's operator,
domain, attributes and input hashes, and its output position), so names and node order do not
count. It covers: the opset imports; the graph inputs in order, with their names (the plugin makes
inputs by name), element types and shapes (``dim_param`` included: the registry's ``dims`` are by
name); every initializer's element type, shape and values; every node, live or dead (a dead node
changes the digest: the proof stays conservative); the graph outputs in order with their types;
and the model-local functions. A node with a subgraph attribute (``If``, ``Loop``, ``Scan``) is not
digested: its body reads outer-scope values by name, so the proof is refused with that reason.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_aaco.jsonio import JSONDict

if TYPE_CHECKING:
    from onnx import AttributeProto, FunctionProto, ModelProto, TensorProto, TypeProto

#: how the check proved the compute unchanged
SAME_GRAPH = "same graph"
SAME_OPTIMIZED = "same graph after ONNX Runtime's basic optimizations"


class NotDigestible(ValueError):
    """The graph cannot be digested; the message says why (a control-flow subgraph, say)."""


@dataclass(frozen=True)
class ComputeCheck:
    """The finding of :func:`compare_compute`: ``proven`` (the compute is the same), ``how``
    (:data:`SAME_GRAPH` or :data:`SAME_OPTIMIZED`) or ``reason`` (why it is not proven), and the
    seconds the check took."""

    proven: bool
    how: str = ""
    reason: str = ""
    seconds: float = 0.0

    def to_dict(self) -> JSONDict:
        return {"proven": self.proven, "how": self.how or None, "reason": self.reason or None,
                "seconds": round(self.seconds, 3)}


def _h(*parts: bytes | str) -> bytes:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.digest()


def _tensor_digest(tensor: TensorProto) -> bytes:
    """Element type, shape and values of a TensorProto (names and doc strings left out)."""
    from onnx import TensorProto, numpy_helper

    if tensor.HasField("raw_data") and tensor.data_type not in (TensorProto.STRING,):
        data = tensor.raw_data  # little-endian, what to_array(...).tobytes() gives on x86 and ARM, without a copy
    else:
        data = numpy_helper.to_array(tensor).tobytes()
    return _h("tensor", str(tensor.data_type), ",".join(map(str, tensor.dims)), data)


def _type_text(value_type: TypeProto) -> str:
    """A TypeProto as text, ``denotation`` left out (it does not change compute)."""
    copy = type(value_type)()
    copy.CopyFrom(value_type)
    copy.ClearField("denotation")
    return str(copy.SerializeToString(deterministic=True).hex())


def _attribute_digest(attr: AttributeProto, where: str) -> bytes:
    from onnx import AttributeProto

    if attr.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
        raise NotDigestible(f"{where} has a subgraph (attribute {attr.name!r}), whose body reads outer values"
                            " by name")
    if attr.type == AttributeProto.TENSOR:
        return _h("attr", attr.name, _tensor_digest(attr.t))
    if attr.type == AttributeProto.TENSORS:
        return _h("attr", attr.name, *(_tensor_digest(t) for t in attr.tensors))
    copy = AttributeProto()
    copy.CopyFrom(attr)
    copy.ClearField("doc_string")
    return _h("attr", copy.SerializeToString(deterministic=True))


def _function_digest(functions: Iterable[FunctionProto]) -> bytes:
    parts = []
    for function in functions:
        copy = type(function)()
        copy.CopyFrom(function)
        copy.ClearField("doc_string")
        for node in copy.node:
            node.ClearField("doc_string")
            node.ClearField("name")
        parts.append(copy.SerializeToString(deterministic=True))
    return _h("functions", *sorted(parts))


def graph_digest(model: ModelProto) -> str:
    """The canonical digest (hex) of an ``onnx.ModelProto`` *model*'s compute (see the module's
    docstring for what it covers). Raises :class:`NotDigestible` for a subgraph attribute or a node
    whose input no node, input or initializer produces."""
    graph = model.graph
    names = Counter(node.name for node in graph.node if node.name)
    repeated = sorted(name for name, count in names.items() if count > 1)
    if repeated:  # ONNX Runtime refuses the model ("two nodes with same node name")
        raise NotDigestible(f"node name {repeated[0]!r} is given to {names[repeated[0]]} nodes, which ONNX Runtime"
                            " refuses")
    produced = Counter(name for node in graph.node for name in node.output if name)
    produced.update(v.name for v in graph.input)
    input_names = {v.name for v in graph.input}  # IR < 4 lists every initializer among the inputs too
    produced.update(t.name for t in graph.initializer if t.name not in input_names)
    twice = sorted(name for name, count in produced.items() if count > 1)
    if twice:
        raise NotDigestible(f"value {twice[0]!r} is produced more than once")
    values: dict[str, bytes] = {"": _h("absent")}  # an optional input left out
    initializers = {t.name: t for t in graph.initializer}
    inputs = []
    for index, value in enumerate(graph.input):
        inputs.append(_h("input", str(index), value.name, _type_text(value.type),
                         _tensor_digest(initializers[value.name]) if value.name in initializers else b""))
        values[value.name] = inputs[-1]
    for name, tensor in initializers.items():
        values.setdefault(name, _h("init", _tensor_digest(tensor)))
    pending = list(enumerate(graph.node))
    node_digests: list[bytes] = []
    while pending:
        waiting = []
        for index, node in pending:
            if any(name not in values for name in node.input):
                waiting.append((index, node))
                continue
            where = f"node {node.name or index} ({node.op_type})"
            attrs = sorted(_attribute_digest(a, where) for a in node.attribute)
            digest = _h("node", node.domain, node.op_type, *attrs, _h("inputs", *(values[n] for n in node.input)))
            node_digests.append(digest)
            for position, name in enumerate(node.output):
                if name:
                    values[name] = _h("out", digest, str(position))
        if len(waiting) == len(pending):
            missing = sorted({n for _, node in waiting for n in node.input if n not in values})
            raise NotDigestible(f"inputs {', '.join(missing[:3])} are produced by no node, graph input or"
                                " initializer (a cycle, or values from an outer scope)")
        pending = waiting
    outputs = []
    for value in graph.output:
        if value.name not in values:
            raise NotDigestible(f"graph output {value.name!r} is produced by nothing")
        outputs.append(_h("output", values[value.name], _type_text(value.type)))
    opsets = sorted(f"{o.domain}:{o.version}" for o in model.opset_import)
    return _h("model", *opsets, *inputs, _h("nodes", *sorted(node_digests)), _h("outputs", *outputs),
              _function_digest(model.functions)).hex()


def file_digest(path: Path) -> str:
    """:func:`graph_digest` of the model file at *path* (external data read from beside it).
    Raises :class:`NotDigestible` when the file is no ONNX model or cannot be digested."""
    import onnx

    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - onnx raises DecodeError, OSError, ValueError
        raise NotDigestible(f"{path.name} does not load as an ONNX model ({type(exc).__name__})") from None
    return graph_digest(model)


def optimized_digest(path: Path, folder: Path) -> str:
    """:func:`graph_digest` of the graph ONNX Runtime writes for the model at *path* after its basic
    optimizations (``ORT_ENABLE_BASIC``, CPU execution provider, written to *folder* by
    ``SessionOptions.optimized_model_filepath``). Raises :class:`NotDigestible` when ONNX Runtime
    cannot load or write it."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.log_severity_level = 3
    target = folder / f"{path.stem}.{time.monotonic_ns()}.optimized.onnx"
    options.optimized_model_filepath = str(target)
    try:
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT raises its own types
        raise NotDigestible(f"ONNX Runtime could not optimize {path.name}: {str(exc).splitlines()[0][:200]}")\
            from None
    return file_digest(target)


def loads_in_ort(path: Path) -> None:
    """Build an InferenceSession for the model at *path* on the CPU execution provider with graph
    optimizations off: ONNX Runtime's own checks of the model (names, types, shapes, opsets). Raises
    :class:`NotDigestible` with ONNX Runtime's first line when it refuses the model."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    try:
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT raises its own types
        raise NotDigestible(f"ONNX Runtime does not load {path.name}: {str(exc).splitlines()[0][:200]}") from None


def compare_compute(before: Path, after: Path) -> ComputeCheck:
    """Whether the model files *before* (the side at REF) and *after* compute the same: equal
    :func:`file_digest`, else equal :func:`optimized_digest`. Never raises: a
    file that cannot be digested, or that ONNX Runtime does not load, makes the check not proven,
    with the reason. On this project's 2-core machine a re-exported ResNet-50 (98 MB, other names)
    took about 2 s."""
    start = time.perf_counter()

    def done(proven: bool, how: str = "", reason: str = "") -> ComputeCheck:
        return ComputeCheck(proven, how, reason, time.perf_counter() - start)

    try:
        if file_digest(before) == file_digest(after):
            loads_in_ort(after)  # what the digest leaves out (value_info, IR version) must still load
            return done(True, SAME_GRAPH)
    except NotDigestible as exc:
        return done(False, reason=f"compute not proven unchanged: {exc}")
    try:
        with tempfile.TemporaryDirectory(prefix="aaco-optimized-") as folder:
            if optimized_digest(before, Path(folder)) == optimized_digest(after, Path(folder)):
                return done(True, SAME_OPTIMIZED)
    except NotDigestible as exc:
        return done(False, reason=f"compute not proven unchanged: {exc}")
    return done(False, reason="compute not proven unchanged: the graphs differ, also after ONNX Runtime's basic"
                              " optimizations")


__all__ = ["SAME_GRAPH", "SAME_OPTIMIZED", "ComputeCheck", "NotDigestible", "compare_compute", "file_digest",
           "graph_digest", "loads_in_ort", "optimized_digest"]
