"""Registry keys that YAML reads as something other than a string are refused, naming the file and key.

``1:`` and ``'1':`` both became model ``1`` (``str(1)``), as ``null:``/``'None':`` and ``true:``/``'True':``
did, so two entries shared one name and reordering them swapped their baseline histories.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_aaco.measure.registry import RegistryError, load_registry

#: (unquoted YAML key, what YAML makes of it, the name the error shows)
UNQUOTED = [
    ("1", "an integer", "1"), ("0x1F", "an integer", "31"), ("1.5", "a number", "1.5"), (".inf", "a number", "inf"),
    ("true", "a boolean", "true"), ("False", "a boolean", "false"), ("yes", "a boolean", "true"),  # YAML 1.1
    ("null", "null", "null"), ("~", "null", "null"), ("2024-01-01", "date", "2024-01-01"), ("net", None, None),
]


def _write(folder: Path, tiny: Path, models: str) -> Path:
    shutil.copy(tiny, folder / "tiny.onnx")
    path = folder / "models.yaml"
    path.write_text("models:\n" + models, encoding="utf-8")
    return path


@pytest.mark.parametrize(("key", "kind", "shown"), UNQUOTED, ids=[k for k, _, _ in UNQUOTED])
def test_an_unquoted_non_string_model_name_is_refused_and_the_quoted_one_loads(tmp_path, tiny_model_path, key, kind,
                                                                                shown):
    path = _write(tmp_path, tiny_model_path, f"  {key}:\n    path: tiny.onnx\n")
    if kind is None:
        assert [s.name for s in load_registry(path)] == [key]
    else:
        with pytest.raises(RegistryError) as caught:
            load_registry(path)
        message = str(caught.value)
        assert message.startswith(f"{path.resolve()}: models.{shown}: YAML reads this key as {kind}"), message
        assert "quotes" in message and "\n" not in message
    quoted = _write(tmp_path, tiny_model_path, f"  '{key}':\n    path: tiny.onnx\n")
    assert [s.name for s in load_registry(quoted)] == [key]


@pytest.mark.parametrize(("first", "second"), [("1", "'1'"), ("null", "'None'"), ("true", "'True'"), ("~", "'None'")])
def test_two_keys_that_used_to_share_a_name_are_refused_in_either_order(tmp_path, tiny_model_path, first, second):
    for a, b in ((first, second), (second, first)):
        path = _write(tmp_path, tiny_model_path, f"  {a}:\n    path: tiny.onnx\n  {b}:\n    path: tiny.onnx\n")
        with pytest.raises(RegistryError, match="YAML reads this key as"):
            load_registry(path)


@pytest.mark.parametrize("entry", [
    "dims: {1: 4}", "inputs: {0: {kind: ones}}", "providers: {cuda: {true: 1}}", "providers: {null: {}}",
])
def test_non_string_keys_inside_an_entry_are_refused_with_their_path(tmp_path, tiny_model_path, entry):
    path = _write(tmp_path, tiny_model_path, f"  net:\n    path: tiny.onnx\n    {entry}\n")
    with pytest.raises(RegistryError, match=r"models\.net\.\w+(\.\w+)?\.\w+: YAML reads this key as"):
        load_registry(path)
