"""Issue 22, "The registry loader and model paths": whatever bytes or file kind the loader meets, as
the registry or as a model's ``path:``, the result is a one-line :class:`RegistryError` that names
the file (and the key), never a traceback and never a hang (a FIFO is looked at, not opened).

Hypothesis draws the registry's bytes (arbitrary bytes; registry text encoded as UTF-8, UTF-8 with
a byte-order mark, UTF-16, latin-1 or cp1252; NUL and other control bytes spliced in) and the file
kind (a regular file, a folder, a FIFO, a broken symlink, a symlink loop, an unreadable file, an
empty file, /dev/null). ``AACO_FUZZ_EXAMPLES`` raises the example count, as in tests/test_fuzz.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_aaco.measure.registry import RegistryError, is_lfs_pointer, load_registry

FUZZ = settings(max_examples=int(os.environ.get("AACO_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

# ---------------------------------------------------------------- what the file holds

#: registry-shaped documents: mostly valid entries, with values that are sometimes wrong
ENTRY = st.fixed_dictionaries({}, optional={
    "path": st.sampled_from(["tiny.onnx", "model.onnx", "", "a\x00b.onnx", "nets/", "../x.onnx"]),
    "zoo": st.sampled_from(["squeezenet", "nope"]),
    "rounds": st.integers(-1, 5) | st.text(max_size=3),
    "tags": st.lists(st.text(max_size=3), max_size=2) | st.integers(),
    "threshold": st.sampled_from(["5%", "0.05", "x", 2]),
    "inputs": st.dictionaries(st.text(max_size=3), st.sampled_from(["ones", "zeros", "bogus", {"kind": "ints",
                                                                     "low": 5, "high": 1}]), max_size=2),
})
DOCUMENT = st.dictionaries(st.sampled_from(["models", "defaults", "x"]),
                           st.dictionaries(st.text(max_size=5) | st.integers(0, 3), ENTRY, max_size=3),
                           min_size=1, max_size=3).map(lambda d: yaml.safe_dump(d, allow_unicode=True))
ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "latin-1", "cp1252"]


@st.composite
def registry_bytes(draw: st.DrawFn) -> bytes:
    """Arbitrary bytes, or a registry document (with a non-ASCII model name at times) in some
    encoding, with at times a control byte (NUL, ESC, DEL, a lone 0xff) spliced in."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    text = draw(DOCUMENT)
    if draw(st.booleans()):
        text = text.replace("models:", "models:\n  café-ü: {path: tiny.onnx}", 1)
    data = text.encode(draw(st.sampled_from(ENCODINGS)), errors="replace")
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\x00", b"\x1b", b"\x7f", b"\xff", b"\x00\x00\x00"])) + data[at:]
    return data


# ---------------------------------------------------------------- what kind of file it is

def _regular(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _folder(path: Path, data: bytes) -> None:
    path.mkdir()


def _fifo(path: Path, data: bytes) -> None:
    os.mkfifo(path)


def _broken_link(path: Path, data: bytes) -> None:
    path.symlink_to(path.parent / "gone")


def _link_loop(path: Path, data: bytes) -> None:
    path.symlink_to(path)


def _unreadable(path: Path, data: bytes) -> None:
    path.write_bytes(data or b"models: {}\n")
    path.chmod(0)


def _empty(path: Path, data: bytes) -> None:
    path.write_bytes(b"")


def _dev_null(path: Path, data: bytes) -> None:
    path.symlink_to("/dev/null")


#: kind -> (make it at a path, words the error must hold); the regular file's words depend on its bytes
KINDS: dict[str, tuple[Callable[[Path, bytes], None], str]] = {
    "regular": (_regular, ""),
    "folder": (_folder, "a folder"),
    "fifo": (_fifo, "a FIFO"),
    "broken-symlink": (_broken_link, "broken symlink"),
    "symlink-loop": (_link_loop, ""),  # ELOOP's words, or pathlib's "Symlink loop", by Python version
    "unreadable": (_unreadable, "ermission denied"),
    "empty": (_empty, "empty"),
    "dev-null": (_dev_null, "a character device"),
}
if AS_ROOT:  # root reads a chmod 000 file: nothing to test
    del KINDS["unreadable"]
if not hasattr(os, "mkfifo"):
    del KINDS["fifo"]


def _one_line_naming(exc: RegistryError, *names: str) -> None:
    text = str(exc)
    assert "\n" not in text and "\r" not in text, text
    assert "Traceback" not in text
    for name in names:
        assert name in text, (name, text)


@FUZZ
@given(kind=st.sampled_from(sorted(KINDS)), data=registry_bytes())
@example(kind="regular", data="models:\n  a: {path: tiny.onnx}\n".encode("utf-16"))
@example(kind="regular", data="models:\n  café: {path: tiny.onnx}\n".encode("latin-1"))
@example(kind="regular", data=b"models:\n  a: {path: tiny.onnx}\n\x00")
@example(kind="regular", data=b"\xef\xbb\xbfmodels:\n  a: {path: tiny.onnx}\n")
def test_the_registry_gives_models_or_one_line_naming_the_file(kind: str, data: bytes, tiny_model_path: Path) -> None:
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(tiny_model_path, Path(folder) / "tiny.onnx")
        path = Path(folder) / "models.yaml"
        make, words = KINDS[kind]
        make(path, data)
        try:
            models = load_registry(path)
        except RegistryError as exc:
            _one_line_naming(exc, str(path), words)
            if kind != "regular":
                assert "--aaco-models" in str(exc) or kind == "empty"
            return
        finally:
            if kind == "unreadable":
                path.chmod(0o600)
        assert kind == "regular" and models


@FUZZ
@given(kind=st.sampled_from(sorted(KINDS)), data=st.binary(max_size=64),
       key=st.sampled_from(["a", "net-fp16", "x\ny", "1"]))
def test_a_models_path_gives_a_model_or_one_line_naming_the_file_and_key(kind: str, data: bytes, key: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        registry = Path(folder) / "models.yaml"
        registry.write_text(yaml.safe_dump({"models": {key: {"path": "net.onnx"}}}), encoding="utf-8")
        target = Path(folder) / "net.onnx"
        make, words = KINDS[kind]
        make(target, data)
        try:
            [spec] = load_registry(registry)
        except RegistryError as exc:
            shown = key.replace("\n", "\\n")
            _one_line_naming(exc, str(registry), f"models.{shown}.path", "net.onnx", words)
            # only an empty regular file is refused, or a Git LFS pointer (said so)
            assert kind != "regular" or not data or (is_lfs_pointer(data) and "git lfs pull" in str(exc))
            return
        finally:
            if kind == "unreadable":
                target.chmod(0o600)
        assert kind == "regular" and data and spec.source == f"path:{target.resolve()}"


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"regular"}))
def test_through_pytest_a_registry_of_each_kind_is_one_collection_error(aaco_project, kind: str) -> None:
    path = aaco_project.pytester.path / "models.yaml"
    path.unlink(missing_ok=True)
    KINDS[kind][0](path, b"")
    aaco_project.tests()
    try:
        result = aaco_project.run()
    finally:
        if kind == "unreadable":
            path.chmod(0o600)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    head = (f"cannot read the model registry*{KINDS[kind][1]}" if kind != "empty"
            else "expected a top-level 'models:' mapping*the file is empty")
    result.stdout.fnmatch_lines([f"*{path}: {head}*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"regular"}))
def test_through_pytest_a_model_path_of_each_kind_is_one_collection_error(aaco_project, kind: str) -> None:
    root = aaco_project.pytester.path
    aaco_project.registry("models:\n  net:\n    path: nets/net.onnx\n")
    (root / "nets").mkdir()
    target = root / "nets" / "net.onnx"
    KINDS[kind][0](target, b"")
    aaco_project.tests()
    try:
        result = aaco_project.run()
    finally:
        if kind == "unreadable":
            target.chmod(0o600)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines([f"*models.yaml: models.net.path: *{KINDS[kind][1]}*"])
    assert "Traceback" not in result.stdout.str()
