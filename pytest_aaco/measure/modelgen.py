"""Deterministic model generators and transforms, for models that cannot be downloaded at run time.

* :func:`bert_encoder` builds a BERT-base-shaped transformer encoder (Devlin et al., 2019,
  "BERT: Pre-training of Deep Bidirectional Transformers", table of BERT-base: 12 layers,
  hidden 768, 12 heads, FFN 3072) from standard ONNX ops with seeded weights. Its outputs
  are meaningless: it exists for timing.
* :func:`reference_mix` builds the reference workload measured alongside every item for stored
  baselines (:mod:`pytest_aaco.measure.reference_workload`): a few convolutions, a token MLP and the elementwise
  ops between them, so its compute and memory traffic follow the machine the way typical models do.
* :func:`add_extra_work` appends a chain of MatMul/Tanh on a side output that depends on the
  model's input, so ORT cannot constant-fold it away: a calibrated, real slowdown for A/B tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_aaco.jsonio import JSONValue
from pytest_aaco.warnings import AacoCacheWarning

if TYPE_CHECKING:
    import onnx

OPSET = 17


#: configured cache folder that could not be written -> the temporary folder used instead, this session
_FALLBACKS: dict[str, Path] = {}


def configured_cache_dir() -> tuple[Path, str]:
    """The configured cache folder and the setting it came from: ``$AACO_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/pytest-aaco``, else ``~/.cache/pytest-aaco``."""
    explicit = os.environ.get("AACO_CACHE_DIR")
    if explicit:
        return Path(explicit), "AACO_CACHE_DIR"
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "pytest-aaco", "XDG_CACHE_HOME"
    return Path.home() / ".cache" / "pytest-aaco", "HOME (no AACO_CACHE_DIR or XDG_CACHE_HOME set)"


def _writable(folder: Path) -> OSError | None:
    """None when files can be created in *folder* (made if missing), else the error that said no."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".aaco-probe-"):
            pass
    except OSError as exc:
        return exc
    return None


def cache_dir() -> Path:
    """Where generated models are cached, outside git (:func:`configured_cache_dir`).

    A folder that cannot be written (a read-only HOME) is replaced by one temporary folder for the
    rest of the session, with one :class:`~pytest_aaco.warnings.AacoCacheWarning` naming the folder
    and the setting to change; :func:`drop_fallback_caches` removes it at the session's end.
    """
    folder, setting = configured_cache_dir()
    key = str(folder)
    if key in _FALLBACKS:
        return _FALLBACKS[key]
    problem = _writable(folder)
    if problem is None:
        return folder
    fallback = Path(tempfile.mkdtemp(prefix="aaco-cache-"))
    _FALLBACKS[key] = fallback
    reason = problem.strerror or type(problem).__name__
    warnings.warn(AacoCacheWarning(
        f"the model cache folder {folder} cannot be written ({reason}); generated models go to {fallback}"
        f" for this session and are built again next time. Set AACO_CACHE_DIR (or XDG_CACHE_HOME) to a"
        f" writable folder (the folder came from {setting})"), stacklevel=2)
    return fallback


def drop_fallback_caches() -> None:
    """Remove the temporary cache folders :func:`cache_dir` made this session (the next warns again)."""
    for fallback in _FALLBACKS.values():
        shutil.rmtree(fallback, ignore_errors=True)
    _FALLBACKS.clear()


def cache_key(kind: str, params: Mapping[str, JSONValue]) -> str:
    """A short content key for a generated model: the generator's name and parameters."""
    text = json.dumps({"kind": kind, "params": params, "version": 1}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class CacheError(OSError):
    """A generated model could not be written to the model cache (an OSError, so its path and reason
    are kept); reported as a cache error, never as the InferenceSession's."""


def save_model_atomic(model: onnx.ModelProto, path: Path) -> Path:
    """Save an ``onnx.ModelProto`` through a temporary file and a rename. Raises :class:`CacheError`."""
    import onnx

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save_model(model, str(tmp))
        os.replace(tmp, path)
    except OSError as exc:
        raise CacheError(exc.errno, exc.strerror or str(exc), exc.filename) from exc
    finally:
        with contextlib.suppress(OSError):  # also when the folder itself could not be made
            tmp.unlink(missing_ok=True)
    return path


#: suffix of the file beside each generated model that holds the SHA-256 (hex) of its bytes, written when
#: the model is generated and checked each time it is used (:func:`cached_model`)
DIGEST_SUFFIX = ".sha256"
#: (path, size, mtime_ns) of cache files checked in this process: each is hashed once per process
_VERIFIED: set[tuple[str, int, int]] = set()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stamp(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns)


def cached_model(target: Path, build: Callable[[], onnx.ModelProto], what: str) -> Path:
    """*target*, the cache file of the generated model *what* (``zoo: resnet50``), built by *build* when
    missing; the SHA-256 of its bytes is recorded beside it (``<target>.sha256``) when it is generated and
    checked when it is used. A file that does not match (replaced by another model, truncated, garbage)
    is never used as *what*: it is generated again, and an :class:`AacoCacheWarning` says so once. A file
    from before digests were recorded is generated again in memory: same bytes, its digest is recorded
    silently; other bytes, it is replaced and said so. Raises :class:`CacheError` when the cache cannot
    be written."""
    sidecar = target.with_name(target.name + DIGEST_SUFFIX)
    try:
        stamp = _stamp(target)
    except OSError:
        stamp = None
    if stamp is not None and stamp in _VERIFIED:
        return target
    if stamp is not None:
        try:
            actual = _sha256(target)
            recorded = sidecar.read_text(encoding="ascii", errors="replace").strip()
        except FileNotFoundError:
            recorded = None
        except OSError:
            actual, recorded = "", "unreadable"
        if recorded == actual:
            _VERIFIED.add(stamp)
            return target
    save_model_atomic(build(), target)
    fresh = _sha256(target)
    try:
        sidecar.write_text(fresh + "\n", encoding="ascii")
    except OSError as exc:
        raise CacheError(exc.errno, exc.strerror or str(exc), exc.filename) from exc
    _VERIFIED.add(_stamp(target))
    if stamp is not None and (recorded is not None or fresh != actual):
        reason = ("does not match the SHA-256 recorded when it was generated" if recorded is not None
                  else "was not what the generator builds (no SHA-256 recorded)")
        warnings.warn(AacoCacheWarning(
            f"model cache file {target} (the generated {what}) {reason}: it was replaced or damaged, so it was"
            " generated again and the run measures the real model; nothing else in the cache was touched"),
            stacklevel=3)
    return target


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    from onnx import numpy_helper

    return numpy_helper.from_array(array, name)


class _Graph:
    """The initializers and nodes of a graph being generated, in the order they are added."""

    def __init__(self) -> None:
        self.inits: list[onnx.TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []

    def const(self, name: str, array: np.ndarray) -> str:
        """Add initializer *name* holding *array*; returns the name."""
        self.inits.append(_init(name, array))
        return name

    def node(self, op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        """Add one node with a single *output* (also its name); returns the output name."""
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output


def bert_encoder(
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    intermediate: int = 3072,
    seq: int = 128,
    vocab: int = 30522,
    seed: int = 0,
) -> onnx.ModelProto:
    """A BERT-base-shaped encoder as an ``onnx.ModelProto`` (opset 17).

    Inputs: ``input_ids`` int64 ``[batch, seq]`` and ``attention_mask`` int64 ``[batch, seq]``
    (``batch`` is a symbolic dimension). Output: ``last_hidden_state`` float32
    ``[batch, seq, hidden]``. Weights are drawn from ``N(0, 0.02²)`` with ``seed``.
    Raises ValueError when ``hidden`` is not divisible by ``heads``.
    """
    from onnx import TensorProto, helper

    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    rng = np.random.default_rng(seed)
    head_dim = hidden // heads
    g = _Graph()
    inits, nodes, const, node = g.inits, g.nodes, g.const, g.node

    def weight(name: str, *shape: int) -> str:
        return const(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    def layer_norm(x: str, prefix: str) -> str:
        gamma = const(f"{prefix}.gamma", np.ones(hidden, np.float32))
        beta = const(f"{prefix}.beta", np.zeros(hidden, np.float32))
        return node("LayerNormalization", [x, gamma, beta], f"{prefix}.out", axis=-1, epsilon=1e-12)

    def dense(x: str, prefix: str, n_in: int, n_out: int) -> str:
        mm = node("MatMul", [x, weight(f"{prefix}.W", n_in, n_out)], f"{prefix}.mm")
        return node("Add", [mm, const(f"{prefix}.b", np.zeros(n_out, np.float32))], f"{prefix}.out")

    # embeddings: word + position, then LayerNorm
    word = node("Gather", [weight("emb.word", vocab, hidden), "input_ids"], "emb.word_out", axis=0)
    pos = const("emb.pos", (rng.standard_normal((1, seq, hidden)) * 0.02).astype(np.float32))
    x = layer_norm(node("Add", [word, pos], "emb.sum"), "emb.ln")

    # additive attention bias from the mask: (1 - mask) * -10000, shape [batch, 1, 1, seq]
    mask_f = node("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    inv = node("Sub", [const("one", np.array(1.0, np.float32)), mask_f], "mask.inv")
    bias = node("Mul", [inv, const("neg", np.array(-10000.0, np.float32))], "mask.bias2d")
    bias = node("Unsqueeze", [bias, const("axes12", np.array([1, 2], np.int64))], "mask.bias")

    split_shape = const("shape.split", np.array([0, seq, heads, head_dim], np.int64))
    merge_shape = const("shape.merge", np.array([0, seq, hidden], np.int64))
    scale = const("attn.scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    for i in range(layers):
        p = f"l{i}"

        def heads_of(t: str, name: str, perm: list[int], p: str = p) -> str:
            r = node("Reshape", [t, split_shape], f"{p}.{name}.r")
            return node("Transpose", [r], f"{p}.{name}.t", perm=perm)

        q = heads_of(dense(x, f"{p}.q", hidden, hidden), "q", [0, 2, 1, 3])
        k = heads_of(dense(x, f"{p}.k", hidden, hidden), "k", [0, 2, 3, 1])
        v = heads_of(dense(x, f"{p}.v", hidden, hidden), "v", [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{p}.qk"), scale], f"{p}.scaled")
        probs = node("Softmax", [node("Add", [scores, bias], f"{p}.masked")], f"{p}.probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{p}.ctx")], f"{p}.ctx.t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge_shape], f"{p}.ctx.m")
        attn = dense(ctx, f"{p}.o", hidden, hidden)
        x = layer_norm(node("Add", [x, attn], f"{p}.res1"), f"{p}.ln1")
        h = dense(x, f"{p}.ffn1", hidden, intermediate)
        # GELU, erf form: 0.5 * h * (1 + erf(h / sqrt(2)))
        erf = node("Erf", [node("Div", [h, const(f"{p}.sqrt2", np.array(np.sqrt(2.0), np.float32))],
                                f"{p}.gelu.div")], f"{p}.gelu.erf")
        one_plus = node("Add", [erf, const(f"{p}.gelu.one", np.array(1.0, np.float32))], f"{p}.gelu.add")
        gelu = node("Mul", [node("Mul", [h, one_plus], f"{p}.gelu.mul"),
                            const(f"{p}.gelu.half", np.array(0.5, np.float32))], f"{p}.gelu")
        out = dense(gelu, f"{p}.ffn2", intermediate, hidden)
        x = layer_norm(node("Add", [x, out], f"{p}.res2"), f"{p}.ln2")

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    graph = helper.make_graph(
        nodes,
        "bert_base_shaped_encoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", seq]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", seq, hidden])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="pytest-aaco")
    model.ir_version = 8
    return model


def add_extra_work(model: onnx.ModelProto, matmuls: int, size: int = 256, seed: int = 0) -> onnx.ModelProto:
    """Return a copy of *model* with ``matmuls`` extra ``[size,size]`` MatMul+Tanh steps.

    The chain starts from ``ReduceMean(Cast(first input))`` (the first input that is not an
    initializer) so it depends on the input and ORT cannot fold it into a constant; it ends in
    an extra graph output ``aaco_extra_work`` (a scalar) that ``session.run(None, ...)``
    computes on every call. Each step costs ``2 * size³`` FLOPs. Raises ValueError for
    ``matmuls < 1`` or a model without a runtime input.
    """
    from onnx import TensorProto, helper

    out, graph, rng = _copy_for_chain(model, matmuls, seed)
    # IR < 4 models (most of the onnx zoo) list their initializers as graph inputs too: starting
    # from one of those would let ORT constant-fold the whole chain away, so take a real input
    initializers = {init.name for init in graph.initializer}
    feeds = [i.name for i in graph.input if i.name not in initializers]
    if not feeds:
        raise ValueError("the model has no runtime input to hang the extra work on")
    first = feeds[0]
    graph.node.append(helper.make_node("Cast", [first], ["xw.cast"], to=TensorProto.FLOAT, name="xw.cast"))
    graph.node.append(helper.make_node("ReduceMean", ["xw.cast"], ["xw.mean"], keepdims=0, name="xw.mean"))
    base = (rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32)
    graph.initializer.append(_init("xw.base", base))
    graph.node.append(helper.make_node("Add", ["xw.base", "xw.mean"], ["xw.h0"], name="xw.h0"))
    _tanh_chain(graph, rng, "xw", matmuls, size, "aaco_extra_work")
    return out


def _copy_for_chain(model: onnx.ModelProto, matmuls: int,
                    seed: int) -> tuple[onnx.ModelProto, onnx.GraphProto, np.random.Generator]:
    """``(copy of model, its graph, rng(seed))`` for a transform adding *matmuls* steps; ValueError below 1."""
    import onnx

    if matmuls < 1:
        raise ValueError(f"matmuls must be >= 1, got {matmuls}")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out, out.graph, np.random.default_rng(seed)


def _tanh_chain(graph: onnx.GraphProto, rng: np.random.Generator, prefix: str, matmuls: int, size: int,
                output: str) -> None:
    """Append ``matmuls`` MatMul([size,size] weights)+Tanh steps to *graph*, from ``<prefix>.h0`` to a
    scalar ``ReduceSum`` graph output *output*; weights drawn from *rng* as ``N(0, 1/size)``."""
    from onnx import TensorProto, helper

    current = f"{prefix}.h0"
    for i in range(matmuls):
        w = (rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32)
        graph.initializer.append(_init(f"{prefix}.W{i}", w))
        graph.node.append(helper.make_node("MatMul", [current, f"{prefix}.W{i}"], [f"{prefix}.mm{i}"],
                                           name=f"{prefix}.mm{i}"))
        graph.node.append(helper.make_node("Tanh", [f"{prefix}.mm{i}"], [f"{prefix}.h{i + 1}"],
                                           name=f"{prefix}.tanh{i}"))
        current = f"{prefix}.h{i + 1}"
    graph.node.append(helper.make_node("ReduceSum", [current], [output], keepdims=0, name=f"{prefix}.sum"))
    graph.output.append(helper.make_tensor_value_info(output, TensorProto.FLOAT, []))


def add_folding_work(model: onnx.ModelProto, matmuls: int, size: int = 512,
                     seed: int = 0) -> onnx.ModelProto:
    """Return a copy of *model* with a chain of ``matmuls`` constant ``[size,size]`` MatMul+Tanh steps.

    Every input of the chain is an initializer, so ORT's constant folding computes it while the
    InferenceSession is created and the runs never see it: a calibrated slowdown of session creation
    alone, for cold-start A/B tests (each step costs ``2 * size³`` FLOPs once). The chain ends in an
    extra scalar graph output ``aaco_folding_work`` so it is not pruned. Raises ValueError for
    ``matmuls < 1``.
    """
    out, graph, rng = _copy_for_chain(model, matmuls, seed)
    graph.initializer.append(_init("fw.h0", (rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32)))
    _tanh_chain(graph, rng, "fw", matmuls, size, "aaco_folding_work")
    return out


def reference_mix(channels: int = 32, size: int = 56, embed: int = 256, hidden: int = 1024,
                  seed: int = 0) -> onnx.ModelProto:
    """The generated reference workload: a small CNN stem followed by a transformer-style MLP.

    Input ``x`` float32 ``[1, channels, size, size]``; output ``y`` float32 ``[(size/4)², embed]``.
    Ops: Conv 3x3 (channels -> 2c) + Relu; Conv 3x3 stride 2 (2c -> 2c) + BatchNormalization +
    Relu; Conv 3x3 stride 2 (2c -> *embed*) + Relu; then the ``(size/4)²`` positions as tokens:
    MatMul (*embed* -> *hidden*), erf GELU, MatMul (*hidden* -> *embed*), residual Add,
    LayerNormalization, Softmax. At the defaults about 0.45 GFLOP and 2.4 MB of weights, so it
    exercises caches and memory bandwidth as well as the arithmetic units (studies/RESULTS.md
    has its measured cost). Weights are drawn from ``N(0, 1/fan_in)`` with *seed*, so the file is the
    same on every machine (same bytes, same hash). Raises ValueError for a *size* not divisible by
    4 or a non-positive argument.
    """
    from onnx import TensorProto, helper

    if min(channels, size, embed, hidden) < 1 or size % 4:
        raise ValueError(f"reference_mix needs positive sizes and a size divisible by 4, got channels={channels},"
                         f" size={size}, embed={embed}, hidden={hidden}")
    rng = np.random.default_rng(seed)
    c2, tokens = 2 * channels, (size // 4) ** 2
    g = _Graph()
    inits, nodes, const, node = g.inits, g.nodes, g.const, g.node

    def weight(name: str, *shape: int) -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) == 4 else shape[0]
        return const(name, (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32))

    pads, stride2 = [1, 1, 1, 1], [2, 2]
    h = node("Relu", [node("Conv", ["x", weight("c1.W", c2, channels, 3, 3)], "c1", pads=pads)], "c1.relu")
    h = node("Conv", [h, weight("c2.W", c2, c2, 3, 3)], "c2", pads=pads, strides=stride2)
    ones, zeros = np.ones(c2, np.float32), np.zeros(c2, np.float32)
    h = node("BatchNormalization", [h, const("bn.scale", ones), const("bn.bias", zeros),
                                    const("bn.mean", zeros), const("bn.var", ones)], "bn")
    h = node("Conv", [node("Relu", [h], "c2.relu"), weight("c3.W", embed, c2, 3, 3)], "c3", pads=pads,
             strides=stride2)
    tokens_shape = const("shape.tokens", np.array([embed, tokens], np.int64))
    t = node("Transpose", [node("Reshape", [node("Relu", [h], "c3.relu"), tokens_shape], "tok.r")], "tok",
             perm=[1, 0])
    u = node("MatMul", [t, weight("mlp1.W", embed, hidden)], "mlp1")
    erf = node("Erf", [node("Mul", [u, const("rsqrt2", np.array(1 / np.sqrt(2.0), np.float32))], "gelu.s")],
               "gelu.erf")
    u = node("Mul", [u, node("Add", [erf, const("one", np.array(1.0, np.float32))], "gelu.a")], "gelu.m")
    u = node("Mul", [u, const("half", np.array(0.5, np.float32))], "gelu")
    r = node("Add", [t, node("MatMul", [u, weight("mlp2.W", hidden, embed)], "mlp2")], "res")
    r = node("LayerNormalization", [r, const("ln.g", np.ones(embed, np.float32)),
                                    const("ln.b", np.zeros(embed, np.float32))], "ln", axis=-1)
    nodes.append(helper.make_node("Softmax", [r], ["y"], name="softmax", axis=-1))
    graph = helper.make_graph(
        nodes, "aaco_reference_mix",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [tokens, embed])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="pytest-aaco")
    model.ir_version = 8
    return model


#: generator name (as in the registry's ``generator:`` key) -> function returning an ``onnx.ModelProto``
GENERATORS: dict[str, Callable[..., onnx.ModelProto]] = {"bert-encoder": bert_encoder, "reference-mix": reference_mix}
