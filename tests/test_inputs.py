"""Seeded input generation: shapes from the model and the registry's dims, dtypes from the model."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pytest_aaco.measure.inputs import InputError, InputSpec, batch_size, generate, make_inputs, resolve_shape


def info(name: str, shape: list, type_: str = "tensor(float)") -> SimpleNamespace:
    """What ``InferenceSession.get_inputs()`` returns per input: name, shape, type."""
    return SimpleNamespace(name=name, shape=shape, type=type_)


BERT_LIKE = [
    info("input_ids", ["batch", "seq"], "tensor(int64)"),
    info("attention_mask", ["batch", "seq"], "tensor(int64)"),
    info("token_type_ids", ["batch", "seq"], "tensor(int32)"),
    info("pixel", [None, 3, 8, 8], "tensor(float16)"),
]


def test_dtypes_and_default_kinds_follow_the_model():
    feeds = make_inputs("bert", BERT_LIKE, {"seq": 16}, {})
    assert list(feeds) == ["input_ids", "attention_mask", "token_type_ids", "pixel"]
    assert feeds["input_ids"].dtype == np.int64 and feeds["input_ids"].shape == (1, 16)
    assert feeds["token_type_ids"].dtype == np.int32
    assert feeds["pixel"].dtype == np.float16 and feeds["pixel"].shape == (1, 3, 8, 8)
    # masks are ones, token types zeros, other ints ids in [0, 100), floats standard normal
    assert np.array_equal(feeds["attention_mask"], np.ones((1, 16), np.int64))
    assert not feeds["token_type_ids"].any()
    ids = feeds["input_ids"]
    assert ids.min() >= 0 and ids.max() < 100 and len(np.unique(ids)) > 1
    assert 0.2 < float(np.std(feeds["pixel"].astype(np.float32))) < 3


def test_masks_are_ones_even_with_an_explicit_seed():
    feeds = make_inputs("m", [info("encoder_attention_mask", [2, 5], "tensor(int64)")], {},
                        {"encoder_attention_mask": InputSpec(seed=7)})
    assert (feeds["encoder_attention_mask"] == 1).all()


def test_seeded_and_deterministic():
    first = make_inputs("bert", BERT_LIKE, {"seq": 16}, {})
    second = make_inputs("bert", BERT_LIKE, {"seq": 16}, {})
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])
    reseeded = make_inputs("bert", BERT_LIKE, {"seq": 16}, {"input_ids": InputSpec(seed=1)})
    assert not np.array_equal(reseeded["input_ids"], first["input_ids"])


def test_inputs_with_the_same_seed_differ_by_name():
    a = generate("a", (64,), np.float32, InputSpec(seed=3))
    b = generate("b", (64,), np.float32, InputSpec(seed=3))
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint8])
def test_int_ranges(dtype):
    values = generate("ids", (4000,), dtype, InputSpec(kind="ints", low=3, high=9))
    assert values.dtype == dtype
    assert values.min() == 3 and values.max() == 8  # high is exclusive; 4000 draws hit both ends


def test_uniform_range_and_constant_zeros_ones():
    u = generate("u", (2000,), np.float32, InputSpec(kind="uniform", low=-2, high=-1))
    assert u.dtype == np.float32 and u.min() >= -2 and u.max() < -1
    c = generate("c", (3, 2), np.float64, InputSpec(kind="constant", value=2.5))
    assert c.dtype == np.float64 and (c == 2.5).all()
    assert not generate("z", (3,), np.float32, InputSpec(kind="zeros")).any()
    assert (generate("o", (3,), np.int64, InputSpec(kind="ones")) == 1).all()


@pytest.mark.parametrize(("kind", "spec"), [
    ("ints", InputSpec(kind="ints", low=200)),  # high defaults to 100
    ("uniform", InputSpec(kind="uniform", high=-1.0)),  # low defaults to 0
])
def test_empty_range_from_one_bound_and_a_default(kind, spec):
    with pytest.raises(InputError, match=rf"input 'ids': {kind} range .* is empty; set both low and high"):
        generate("ids", (3,), np.int64, spec)


@pytest.mark.parametrize(("shape", "dims", "expected"), [
    ([1, 3, 224, 224], {}, (1, 3, 224, 224)),
    (["batch", "seq"], {"seq": 128}, (1, 128)),
    (["batch", "seq"], {"seq": 128, "batch": 4}, (4, 128)),
    (["batch_size", 10], {"batch": 2}, (2, 10)),
    (["N", 3], {}, (1, 3)),
    ([None, 3], {}, (1, 3)),
    ([-1, 3], {"batch": 8}, (8, 3)),
    (["sequence", "hidden"], {"sequence": 7, "hidden": 9}, (7, 9)),
])
def test_resolve_shape(shape, dims, expected):
    assert resolve_shape("m", "x", shape, dims) == expected


@pytest.mark.parametrize(("shape", "axis", "hint"), [
    (["batch", "seq_len"], 1, "dims: {seq_len: 128}"),
    (["tokens"], 0, "dims: {tokens: 128}"),
    ([1, None], 1, "dimension 1 is symbolic (None)"),
])
def test_unknown_symbolic_dim_is_a_clear_error(shape, axis, hint):
    with pytest.raises(InputError) as info_:
        resolve_shape("bert", "input_ids", shape, {"seq": 8})
    message = str(info_.value)
    assert message.startswith(f"model 'bert', input 'input_ids': dimension {axis} is symbolic"), message
    assert "set it in the registry" in message and hint in message, message


def test_registry_inputs_must_name_model_inputs():
    with pytest.raises(InputError, match=r"model 'bert': registry inputs \['input_idz'\] are not inputs of the model"
                                         r" \(inputs: input_ids, attention_mask, token_type_ids, pixel\)"):
        make_inputs("bert", BERT_LIKE, {"seq": 4}, {"input_idz": InputSpec(kind="ints")})


def test_unsupported_dtype():
    with pytest.raises(InputError, match=r"model 'm', input 's': unsupported type tensor\(string\)"):
        make_inputs("m", [info("s", [1], "tensor(string)")], {}, {})


def test_batch_size():
    assert batch_size({"x": np.zeros((4, 3))}) == 4
    assert batch_size({"x": np.zeros(())}) == 1
    assert batch_size({}) == 1


@pytest.mark.parametrize(("dtype", "np_dtype"), [("float", np.float32), ("double", np.float64)])
def test_real_session_inputs(tmp_path, make_model, dtype, np_dtype):
    """With a real InferenceSession: dtype and symbolic shape come from the model, and the feeds run."""
    import onnxruntime as ort

    path = make_model(tmp_path / f"{dtype}.onnx", batch="batch", dtype=dtype)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = make_inputs("tiny", session.get_inputs(), {"batch": 3}, {})
    assert feeds["x"].dtype == np_dtype and feeds["x"].shape == (3, 64)
    (out,) = session.run(None, feeds)
    assert out.shape == (3, 64) and out.dtype == np_dtype
