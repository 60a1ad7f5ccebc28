"""The YAML model registry: parsing, every error naming the file and the key, and model materialisation."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from pytest_aaco.measure.registry import (
    BUILTIN_REGISTRY,
    InputSpec,
    RegistryError,
    UniqueKeyLoader,
    content_hash,
    load_registry,
    load_yaml,
    model_path,
    zoo_models,
)


def registry_error(path: Path, where: str, *fragments: str) -> pytest.RaisesExc:
    """Expect RegistryError whose message starts with ``<file>: <where>`` and contains *fragments*."""
    import re

    prefix = re.escape(f"{path}: {where}")
    rest = "".join(f"(?=.*{re.escape(f)})" for f in fragments)
    return pytest.raises(RegistryError, match=f"(?s)^{prefix}{rest}")


def test_full_entry_is_parsed(write_registry, tmp_path):
    path = write_registry("""
        defaults:
          warmup: 7
          rounds: 4
        models:
          tiny:
            path: tiny.onnx
            dims: {batch: 2, seq: 16}
            inputs:
              x: {kind: uniform, low: -1, high: 1, seed: 3}
              ids: ints
              c: {kind: constant, value: 2.5}
            providers:
              migraphx: {migraphx_fp16_enable: "True"}
              CUDAExecutionProvider: {device_id: 0}
            extra_work: {matmuls: 3, size: 32}
            iterations: auto
            rounds: 6
            threshold: 3%
            tags: [small, mlp]
            description: a test model
          other:
            path: tiny.onnx
            iterations: 50
            threshold: 0.1
    """)
    tiny, other = load_registry(path)
    assert tiny.name == "tiny" and other.name == "other"
    assert tiny.source == f"path:{(tmp_path / 'tiny.onnx').resolve()}"
    assert tiny.registry_path == path.resolve()
    assert tiny.dims == {"batch": 2, "seq": 16}
    assert tiny.inputs["x"] == InputSpec(kind="uniform", low=-1, high=1, seed=3)
    assert tiny.inputs["ids"] == InputSpec(kind="ints")
    assert tiny.inputs["c"].value == 2.5
    assert tiny.options_for("migraphx") == {"migraphx_fp16_enable": "True"}
    assert tiny.options_for("cuda") == {"device_id": 0}
    assert tiny.options_for("cpu") == {}
    assert tiny.extra_work == {"matmuls": 3, "size": 32}
    assert tiny.iterations is None and tiny.rounds == 6 and tiny.warmup == 7
    assert tiny.threshold == pytest.approx(0.03)
    assert tiny.tags == ("small", "mlp")
    assert other.iterations == 50 and other.rounds == 4 and other.threshold == pytest.approx(0.1)


def test_builtin_registry_loads():
    models = load_registry()
    names = [m.name for m in models]
    assert names[:2] == ["resnet50", "squeezenet"] and "bert_base" in names
    for m in models:
        assert m.registry_path == BUILTIN_REGISTRY.resolve()
        kind, _, value = m.source.partition(":")
        assert kind in ("zoo", "generator")
        if kind == "zoo":
            assert value in zoo_models()
    bert = next(m for m in models if m.name == "bert_base")
    assert bert.dims == {"batch": 1} and bert.inputs["attention_mask"].kind == "ones"


def test_zoo_entry(write_registry):
    (spec,) = load_registry(write_registry("models:\n  sq:\n    zoo: squeezenet\n"))
    assert spec.source == "zoo:squeezenet"
    assert model_path(spec).name.startswith("zoo-squeezenet-")  # generated in code (tests/test_zoogen.py)
    assert model_path(spec).is_file()


# ---------------------------------------------------------------- errors name the file and the key

ERROR_CASES = [
    ("models:\n  a: [1,\n", "invalid YAML", ()),
    ("models:\n  a:\n   path: tiny.onnx\n  b: {\n", "invalid YAML", ("line",)),
    ("model:\n  a: {path: tiny.onnx}\n", "expected a top-level 'models:' mapping", ()),
    ("", "expected a top-level 'models:' mapping", ()),
    ("models: {}\n", "expected a top-level 'models:' mapping", ("at least one model",)),
    ("models:\n  a: {path: tiny.onnx}\nextras: 1\n", "unknown top-level key(s) ['extras']", ("models, defaults",)),
    ("defaults: [1]\nmodels:\n  a: {path: tiny.onnx}\n", "defaults: expected a mapping, got list", ()),
    ("models:\n  a: tiny.onnx\n", "models.a: expected a mapping, got str", ()),
    ("models:\n  a:\n    path: tiny.onnx\n    iteratons: 5\n", "models.a: unknown key(s) ['iteratons']",
     ("allowed:", "iterations")),
    ("defaults: {warmpu: 3}\nmodels:\n  a: {path: tiny.onnx}\n", "models.a: unknown key(s) ['warmpu']", ()),
    ("models:\n  a: {path: nope.onnx}\n", "models.a.path: ", ("nope.onnx does not exist", "relative to the registry")),
    ("models:\n  a: {zoo: resnet5}\n", "models.a.zoo: 'resnet5' is not a zoo model",
     ("available:", "resnet50")),
    ("models:\n  a: {generator: gpt}\n", "models.a.generator: unknown generator 'gpt'", ("bert-encoder",)),
    ("models:\n  a: {zoo: resnet50, path: tiny.onnx}\n", "models.a: give exactly one of zoo, path or generator", ()),
    ("models:\n  a: {dims: {batch: 1}}\n", "models.a: give exactly one of zoo, path or generator", ()),
    ("models:\n  a: {path: tiny.onnx, inputs: {x: {kind: gaussian}}}\n", "models.a.inputs.x.kind: unknown kind",
     ("'gaussian'", "normal, uniform, ints, ones, zeros, constant")),
    ("models:\n  a: {path: tiny.onnx, inputs: {x: gaussian}}\n", "models.a.inputs.x.kind: unknown kind", ()),
    ("models:\n  a: {path: tiny.onnx, inputs: {x: {kind: ints, spread: 3}}}\n",
     "models.a.inputs.x: unknown key(s) ['spread']", ()),
    ("models:\n  a: {path: tiny.onnx, inputs: {x: [1, 2]}}\n", "models.a.inputs.x: expected a mapping", ()),
    ("models:\n  a: {path: tiny.onnx, inputs: {x: {kind: ints, low: 5, high: 1}}}\n",
     "models.a.inputs.x: low (5) must be below high (1)", ()),
    ("models:\n  a: {path: tiny.onnx, inputs: {x: {kind: ints, low: a, high: 1}}}\n",
     "models.a.inputs.x.low: expected a finite number, got 'a'", ()),
    ("models:\n  a: {path: tiny.onnx, inputs: {x: {kind: constant, value: big}}}\n",
     "models.a.inputs.x.value: expected a finite number", ()),
    ("models:\n  a: {path: tiny.onnx, inputs: {x: {kind: constant}}}\n",
     "models.a.inputs.x: kind constant needs a value", ()),
    ("models:\n  a: {path: tiny.onnx, inputs: {x: {seed: -1}}}\n", "models.a.inputs.x.seed: expected an integer >= 0",
     ()),
    ("models:\n  a: {path: tiny.onnx, dims: {batch: 0}}\n", "models.a.dims.batch: expected an integer >= 1, got 0",
     ()),
    ("models:\n  a: {path: tiny.onnx, dims: {seq: two}}\n", "models.a.dims.seq: expected an integer >= 1, got 'two'",
     ()),
    ("models:\n  a: {path: tiny.onnx, dims: {seq: true}}\n", "models.a.dims.seq: expected an integer", ()),
    ("models:\n  a: {path: tiny.onnx, dims: [1]}\n", "models.a.dims: expected a mapping, got list", ()),
    ("models:\n  a: {path: tiny.onnx, extra_work: {size: 256}}\n", "models.a.extra_work: needs matmuls", ()),
    ("models:\n  a: {path: tiny.onnx, extra_work: {matmuls: 0}}\n",
     "models.a.extra_work.matmuls: expected an integer >= 1, got 0", ()),
    ("models:\n  a: {path: tiny.onnx, extra_work: {matmuls: 2, sise: 64}}\n",
     "models.a.extra_work: unknown key(s) ['sise']", ("matmuls", "size")),
    ("models:\n  a: {path: tiny.onnx, extra_work: 40}\n", "models.a.extra_work: expected a mapping, got int", ()),
    ("models:\n  a: {path: tiny.onnx, threshold: 5}\n", "models.a.threshold: must be between 0 and 1", ()),
    ("models:\n  a: {path: tiny.onnx, threshold: lots}\n", "models.a.threshold: expected a fraction", ()),
    ("models:\n  a: {path: tiny.onnx, iterations: fast}\n", "models.a.iterations: expected an integer >= 2", ()),
    ("models:\n  a: {path: tiny.onnx, rounds: 1}\n", "models.a.rounds: expected an integer >= 2", ()),
    ("models:\n  a: {path: tiny.onnx, warmup: 0}\n", "models.a.warmup: expected an integer >= 1", ()),
    ("models:\n  a: {path: tiny.onnx, tags: vision}\n", "models.a.tags: expected a list of strings", ()),
    ("models:\n  a: {path: tiny.onnx, providers: {gpu: {x: 1}}}\n",
     "models.a.providers.gpu: unknown execution provider 'gpu'", ("valid: cpu, cuda, migraphx",)),
    ("models:\n  a: {path: tiny.onnx, providers: {cuda: [1]}}\n", "models.a.providers.cuda: expected a mapping", ()),
]


@pytest.mark.parametrize(("text", "where", "fragments"), ERROR_CASES, ids=[c[1][:50] for c in ERROR_CASES])
def test_errors_name_file_and_key(write_registry, text, where, fragments):
    path = write_registry(text)
    with registry_error(path.resolve(), where, *fragments):
        load_registry(path)


def test_missing_registry_file(tmp_path):
    path = tmp_path / "absent.yaml"
    with registry_error(path, "cannot read the model registry", "--aaco-models"):
        load_registry(path)


@pytest.mark.parametrize("text", [
    "models:\n  a: !!python/object/apply:os.system ['touch {marker}']\n",
    "models: !!python/object/new:collections.OrderedDict [[[a, {{path: tiny.onnx}}]]]\n",
    "models:\n  a: !!python/name:os.system\n",
])
def test_python_tags_are_refused_not_executed(write_registry, tmp_path, text):
    marker = tmp_path / "executed"
    path = write_registry(text.format(marker=marker))
    with registry_error(path.resolve(), "tag not allowed", "yaml.safe_load", "python/"):
        load_registry(path)
    assert not marker.exists()


DUPLICATE_CASES = [
    ("models:\n  a: {path: tiny.onnx}\n  b: {path: tiny.onnx}\n  a: {zoo: resnet50}\n", "'a' on lines 2 and 4"),
    ("models:\n  a:\n    path: tiny.onnx\n    warmup: 3\n    warmup: 5\n", "'warmup' on lines 4 and 5"),
    ("defaults: {rounds: 3}\nmodels:\n  a: {path: tiny.onnx}\ndefaults: {rounds: 4}\n", "'defaults' on lines 1 and 4"),
    ("models:\n  a: {path: tiny.onnx, inputs: {x: ones, x: zeros}}\n", "'x' on lines 2 and 2"),
    ("models:\n  1: {path: tiny.onnx}\n  0x1: {path: tiny.onnx}\n", "1 on lines 2 and 3"),  # the same int
]


@pytest.mark.parametrize(("text", "lines"), DUPLICATE_CASES, ids=[c[1] for c in DUPLICATE_CASES])
def test_duplicate_keys_are_refused_naming_both_lines(write_registry, text, lines):
    """``yaml.safe_load`` kept the last of two entries and lost the first silently (issue 22)."""
    path = write_registry(text)
    with registry_error(path.resolve(), f"duplicate key {lines}", "keeps only the last", "rename or remove one"):
        load_registry(path)


def test_merge_keys_may_still_be_overridden(write_registry):
    path = write_registry("""\
        defaults: &base {rounds: 3, warmup: 2}
        models:
          a: {path: tiny.onnx, <<: *base, rounds: 4}
    """)
    [spec] = load_registry(path)
    assert spec.rounds == 4 and spec.warmup == 2


def test_the_duplicate_key_loader_is_safe(tmp_path):
    assert issubclass(UniqueKeyLoader, yaml.SafeLoader)
    marker = tmp_path / "executed"
    with pytest.raises(yaml.constructor.ConstructorError):
        load_yaml(f"a: !!python/object/apply:os.system ['touch {marker}']\n")
    assert not marker.exists()


# ---------------------------------------------------------------- path: that is not a model file (issue 22)


def test_path_that_is_a_folder_says_so(write_registry, tmp_path):
    (tmp_path / "nets").mkdir()
    path = write_registry("models:\n  a: {path: nets}\n")
    with registry_error(path.resolve(), "models.a.path: ", f"{tmp_path / 'nets'} is a folder, not a model file",
                        "give the path of an .onnx file"):
        load_registry(path)


#: symlinks on Windows need a privilege (administrator or developer mode), and os.readlink and a
#: loop's error read differently there: the symlink messages are checked on POSIX systems
SYMLINKS = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks (Windows needs a privilege)")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_path_that_is_a_fifo_says_so(write_registry, tmp_path):
    os.mkfifo(tmp_path / "pipe.onnx")
    path = write_registry("models:\n  a: {path: pipe.onnx}\n")
    with registry_error(path.resolve(), "models.a.path: ", f"{tmp_path / 'pipe.onnx'} is a FIFO, not a model file"):
        load_registry(path)  # returns: the FIFO is looked at, never opened


@SYMLINKS
def test_path_that_is_a_broken_symlink_says_so(write_registry, tmp_path):
    (tmp_path / "link.onnx").symlink_to(tmp_path / "gone.onnx")
    path = write_registry("models:\n  a: {path: link.onnx}\n")
    with registry_error(path.resolve(), "models.a.path: ",
                        f"link.onnx is a broken symlink (to {tmp_path / 'gone.onnx'})", "relative to the registry"):
        load_registry(path)


@SYMLINKS
def test_path_that_is_a_symlink_loop_says_so(write_registry, tmp_path):
    (tmp_path / "loop.onnx").symlink_to(tmp_path / "loop.onnx")
    path = write_registry("models:\n  a: {path: loop.onnx}\n")
    with registry_error(path.resolve(), "models.a.path: ", "loop.onnx cannot be resolved", "give the path"):
        load_registry(path)


@SYMLINKS
def test_path_through_a_working_symlink_is_the_target(write_registry, tmp_path):
    (tmp_path / "link.onnx").symlink_to(tmp_path / "tiny.onnx")
    [spec] = load_registry(write_registry("models:\n  a: {path: link.onnx}\n"))
    assert spec.source == f"path:{(tmp_path / 'tiny.onnx').resolve()}"


def test_generator_params_error_names_the_key(write_registry):
    (bad_kw,) = load_registry(write_registry("models:\n  b: {generator: bert-encoder, params: {layres: 1}}\n"))
    with pytest.raises(RegistryError, match=r"models\.b\.params: .*layres"):
        model_path(bad_kw)
    (bad_value,) = load_registry(write_registry(
        "models:\n  b: {generator: bert-encoder, params: {layers: 1, hidden: 30, heads: 4}}\n"))
    with pytest.raises(RegistryError, match=r"models\.b\.params: hidden \(30\) must be divisible by heads \(4\)"):
        model_path(bad_value)


# ---------------------------------------------------------------- materialising models


def test_extra_work_model_is_built_once_and_cached(write_registry, aaco_cache_dir):
    import onnx

    (spec,) = load_registry(write_registry("models:\n  t: {path: tiny.onnx, extra_work: {matmuls: 2, size: 16}}\n"))
    built = model_path(spec)
    assert built.parent == aaco_cache_dir / "models" and built.is_file()
    graph = onnx.load(str(built)).graph
    assert [o.name for o in graph.output] == ["y", "aaco_extra_work"]
    assert sum(n.op_type == "MatMul" for n in graph.node) == 3 + 2
    mtime = built.stat().st_mtime_ns
    assert model_path(spec) == built and built.stat().st_mtime_ns == mtime  # cached, not rebuilt
    (bigger,) = load_registry(write_registry("models:\n  t: {path: tiny.onnx, extra_work: {matmuls: 3, size: 16}}\n"))
    assert model_path(bigger) != built


@pytest.mark.parametrize("zoo", ["squeezenet", "resnet50"])
def test_extra_work_hangs_on_a_runtime_input(write_registry, zoo):
    """Zoo models (IR 3) list initializers as inputs; a chain hung on one would be constant-folded away."""
    import onnx

    (spec,) = load_registry(write_registry(f"models:\n  z: {{zoo: {zoo}, extra_work: {{matmuls: 1, size: 8}}}}\n"))
    graph = onnx.load(str(model_path(spec))).graph
    initializers = {i.name for i in graph.initializer}
    (cast,) = [n for n in graph.node if n.name == "xw.cast"]
    assert cast.input[0] not in initializers
    assert cast.input[0] == next(i.name for i in graph.input if i.name not in initializers)


def test_extra_work_is_not_folded_away(write_registry):
    """ORT keeps the extra MatMuls: the optimized model still computes them at run time."""
    import onnx
    import onnxruntime as ort

    (spec,) = load_registry(write_registry("models:\n  z: {zoo: squeezenet, extra_work: {matmuls: 3, size: 8}}\n"))
    optimized = spec.registry_path.parent / "optimized.onnx"
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(optimized)
    ort.InferenceSession(str(model_path(spec)), options, providers=["CPUExecutionProvider"])
    kept = [n for n in onnx.load(str(optimized)).graph.node if n.name.startswith("xw.mm")]
    assert len(kept) == 3


def test_plain_path_model_is_used_in_place(write_registry, tmp_path):
    (spec,) = load_registry(write_registry("models:\n  t: {path: tiny.onnx}\n"))
    assert model_path(spec) == (tmp_path / "tiny.onnx").resolve()


def test_content_hash_follows_the_file(tmp_path, tiny_model_path):
    import hashlib
    import os
    import shutil

    copy = shutil.copy(tiny_model_path, tmp_path / "m.onnx")
    copy = Path(copy)
    first = content_hash(copy)
    assert first == hashlib.sha256(copy.read_bytes()).hexdigest()
    copy.write_bytes(copy.read_bytes() + b"\0")
    os.utime(copy, ns=(1, 1))  # a different size and mtime: the memo must not return the old hash
    assert content_hash(copy) != first
