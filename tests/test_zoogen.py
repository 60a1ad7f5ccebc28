"""The zoo architectures built in code (pytest_aaco/measure/zoogen.py): they load in ONNX Runtime with the
light files' input and output names and shapes, are deterministic for a seed, copy the light files'
graphs operator for operator, and keep `zoo:` working when onnx no longer ships those files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_aaco.measure import registry
from pytest_aaco.measure.registry import load_registry, model_path, zoo_dir, zoo_models
from pytest_aaco.measure.zoogen import ZOO_GENERATORS

#: name -> (input name, output name, output shape); the input is float32 [1, 3, 224, 224] for all
EXPECTED = {
    "resnet50": ("gpu_0/data_0", "gpu_0/softmax_1", [1, 1000]),
    "squeezenet": ("data_0", "softmaxout_1", [1, 1000, 1, 1]),
    "densenet121": ("data_0", "fc6_1", [1, 1000, 1, 1]),
    "inception_v1": ("data_0", "prob_1", [1, 1000]),
    "shufflenet": ("gpu_0/data_0", "gpu_0/softmax_1", [1, 1000]),
}


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    return {name: make(seed=0) for name, make in ZOO_GENERATORS.items()}


def test_the_registry_names_every_generated_architecture() -> None:
    zoo = {m.source.removeprefix("zoo:") for m in load_registry() if m.source.startswith("zoo:")}
    assert zoo == set(ZOO_GENERATORS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_loads_in_onnxruntime_with_the_light_files_shapes(name: str, built: dict[str, Any]) -> None:
    import onnx
    import onnxruntime as ort

    model = built[name]
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed, output, shape = EXPECTED[name]
    assert [(i.name, i.shape, i.type) for i in session.get_inputs()] == [(feed, [1, 3, 224, 224], "tensor(float)")]
    assert [(o.name, o.shape) for o in session.get_outputs()] == [(output, shape)]
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    (y,) = session.run(None, {feed: x})
    assert list(y.shape) == shape and np.isfinite(y).all()


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "inception_v1"])
def test_deterministic_for_a_seed(name: str, built: dict[str, Any]) -> None:
    make = ZOO_GENERATORS[name]
    assert make(seed=0).SerializeToString() == built[name].SerializeToString()
    assert make(seed=1).SerializeToString() != built[name].SerializeToString()


def _structure(model: Any) -> list[tuple[Any, ...]]:
    """Each compute node as (operator, attributes, producers of its inputs): the index of the compute
    node that makes each input, the graph input as -1, and a constant (an initializer, or a
    ConstantOfShape weight of a light file) as None. Attributes are rounded to float32 precision."""
    from onnx import helper

    producer: dict[str, int | None] = {i.name: -1 for i in model.graph.input}
    producer.update({init.name: None for init in model.graph.initializer})
    found = []
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape":
            producer[node.output[0]] = None
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        attrs = {k: round(v, 6) if isinstance(v, float) else v for k, v in attrs.items()}
        sources = tuple(producer.get(i) for i in node.input)
        if node.op_type in ("Unsqueeze", "Reshape") and all(s is None for s in sources):
            producer[node.output[0]] = None  # a weight reshaped: a constant too
        else:
            for out in node.output:
                producer[out] = len(found)
        found.append((node.op_type, sorted(attrs.items()), sources, len(node.output)))
    return found


#: (compute nodes, first 16 hex digits of the SHA-256 of repr(_structure(model))) of onnx 1.23.2's
#: onnx/backend/test/data/light/light_<name>.onnx (pip install onnx==1.23.2), recorded because onnx
#: is removing those files; test_same_graph_as_the_light_file compares with the file itself while it exists
LIGHT_STRUCTURE = {
    "densenet121": (910, "35698fef9e71192e"), "inception_v1": (144, "e81a7edef684e8cc"),
    "resnet50": (176, "7f1d1243fe04f9ea"), "shufflenet": (203, "9a44aa09b4219d0b"),
    "squeezenet": (66, "abb47139b733b3a9"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_same_graph_as_recorded_from_the_light_file(name: str, built: dict[str, Any]) -> None:
    import hashlib

    structure = _structure(built[name])
    digest = hashlib.sha256(repr(structure).encode()).hexdigest()[:16]
    assert (len(structure), digest) == LIGHT_STRUCTURE[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_same_graph_as_the_light_file(name: str, built: dict[str, Any]) -> None:
    import onnx

    light = zoo_dir() / f"light_{name}.onnx"
    if not light.is_file():
        pytest.skip(f"the installed onnx no longer ships {light.name}; nothing to compare with")
    assert _structure(built[name]) == _structure(onnx.load(str(light)))


def test_zoo_keeps_working_without_onnx_light_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    isolated_cache: Path, write_registry: Any) -> None:
    import onnxruntime as ort

    empty = tmp_path / "no-light-files"
    empty.mkdir()
    monkeypatch.setattr(registry, "zoo_dir", lambda: empty)
    assert zoo_models() == sorted(ZOO_GENERATORS)
    specs = {m.name: m for m in load_registry()}  # the built-in registry still validates
    assert {"resnet50", "squeezenet", "densenet121", "inception_v1", "shufflenet", "bert_base"} <= set(specs)
    path = model_path(specs["squeezenet"])
    assert path.is_relative_to(isolated_cache) and path.name.startswith("zoo-squeezenet-")
    first = path.read_bytes()
    assert model_path(specs["squeezenet"]) == path and path.read_bytes() == first  # cached, not rebuilt
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [o.shape for o in session.get_outputs()] == [[1, 1000, 1, 1]]
    with pytest.raises(registry.RegistryError, match=r"'vgg19' is not a zoo model.*available: densenet121"):
        load_registry(write_registry("models:\n  v:\n    zoo: vgg19\n"))


def test_a_light_file_without_a_generator_is_still_used(write_registry: Any) -> None:
    if not (zoo_dir() / "light_vgg19.onnx").is_file():
        pytest.skip("the installed onnx no longer ships light_vgg19.onnx")
    (spec,) = load_registry(write_registry("models:\n  v:\n    zoo: vgg19\n"))
    assert model_path(spec) == zoo_dir() / "light_vgg19.onnx"


def test_a_pytest_run_measures_a_zoo_model_without_the_light_files(
        aaco_project: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "no-light-files"
    empty.mkdir()
    monkeypatch.setattr(registry, "zoo_dir", lambda: empty)
    aaco_project.registry("models:\n  sq:\n    zoo: squeezenet\n")
    result = aaco_project.run("--aaco-provider=cpu")  # in process: the patched zoo_dir holds
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*sq*cpu*"])
