"""The baseline side at a git revision, in a temporary git repository."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import onnx
import pytest

from pytest_aaco.measure.registry import load_registry
from pytest_aaco.sidebyside.revision import CHANGED, NEW, UNCHANGED, GitRefError, RefTree, resolve_ref
from tests.conftest import squeezenet_file


@pytest.fixture
def repo(model_repo: Path) -> Path:
    return model_repo


def specs(repo: Path) -> dict:
    return {s.name: s for s in load_registry(repo / "models.yaml")}


def commit(git: Any, repo: Path, message: str) -> None:
    git(repo, "commit", "-qam", message)


def test_untouched_items_are_unchanged_and_not_copied(repo: Path) -> None:
    with RefTree(resolve_ref("HEAD", repo)) as tree:
        side = tree.side_at_revision(specs(repo)["net"], "cpu")
        assert side.status == UNCHANGED and side.describe("HEAD") == "unchanged at HEAD"
        assert (tree.root / "models" / "net.onnx").is_symlink()  # same bytes: linked, not copied
        assert tree.side_at_revision(specs(repo)["zoo"], "cpu").status == UNCHANGED


def test_cosmetic_change_is_changed_with_the_old_file(repo: Path, git: Any) -> None:
    model = onnx.load(str(repo / "models" / "net.onnx"))
    model.doc_string = "same compute, different bytes"
    onnx.save(model, str(repo / "models" / "net.onnx"))
    commit(git, repo, "cosmetic")
    with RefTree(resolve_ref("HEAD~1", repo)) as tree:
        side = tree.side_at_revision(specs(repo)["net"], "cpu")
        assert side.status == CHANGED and side.changes == ["model bytes"]
        assert side.model_file is not None and not side.model_file.is_symlink()
        assert side.model_file.read_bytes() == (squeezenet_file()).read_bytes()
        assert "changed since HEAD~1: model bytes" in side.describe("HEAD~1")
        root = tree.root
    assert not root.exists()  # the temporary copy is removed


def test_options_and_inputs_count_as_changes(repo: Path, git: Any, repo_registry: Any) -> None:
    (repo / "models.yaml").write_text(repo_registry.replace("dims: {batch: 1}", "dims: {batch: 2}\n    providers:"
                                                       " {cuda: {cudnn_conv_algo_search: HEURISTIC}}"))
    commit(git, repo, "options")
    with RefTree(resolve_ref("HEAD~1", repo)) as tree:
        side = tree.side_at_revision(specs(repo)["net"], "cuda")
        assert side.status == CHANGED and side.changes == ["inputs", "cuda provider options"]
        assert side.spec is not None and side.spec.dims == {"batch": 1}
        assert tree.side_at_revision(specs(repo)["net"], "cpu").changes == ["inputs"]


def test_new_model_and_new_registry(repo: Path, git: Any, repo_registry: Any) -> None:
    shutil.copy(squeezenet_file(), repo / "models" / "other.onnx")
    (repo / "models.yaml").write_text(repo_registry + "  other:\n    path: models/other.onnx\n")
    git(repo, "add", ".")
    commit(git, repo, "new model")
    with RefTree(resolve_ref("HEAD~1", repo)) as tree:
        side = tree.side_at_revision(specs(repo)["other"], "cpu")
        assert side.status == NEW and "no model 'other'" in side.describe("HEAD~1")
    (repo / "sub").mkdir()
    shutil.copy(repo / "models.yaml", repo / "sub" / "models.yaml")
    (repo / "sub" / "models.yaml").write_text(repo_registry.replace("models/net.onnx", "../models/net.onnx"))
    git(repo, "add", ".")
    commit(git, repo, "second registry")
    with RefTree(resolve_ref("HEAD~1", repo)) as tree:
        side = tree.side_at_revision(load_registry(repo / "sub" / "models.yaml")[0], "cpu")
        assert side.status == NEW and "models.yaml did not exist" in side.changes[0]
    with RefTree(resolve_ref("HEAD", repo)) as tree:  # '..' in a path resolves at REF too
        assert tree.side_at_revision(load_registry(repo / "sub" / "models.yaml")[0], "cpu").status == UNCHANGED


def test_model_file_missing_at_ref_is_new(repo: Path, git: Any, repo_registry: Any) -> None:
    # at REF the entry named a file that the commit did not hold; now the file is committed
    (repo / "models.yaml").write_text(repo_registry + "  ghost:\n    path: models/ghost.onnx\n")
    commit(git, repo, "entry first")
    shutil.copy(squeezenet_file(), repo / "models" / "ghost.onnx")
    git(repo, "add", ".")
    commit(git, repo, "file later")
    with RefTree(resolve_ref("HEAD~1", repo)) as tree:
        side = tree.side_at_revision(specs(repo)["ghost"], "cpu")
        assert side.status == NEW and side.changes == ["model file models/ghost.onnx did not exist"]


def test_untracked_files_are_named(repo: Path, git: Any, repo_registry: Any) -> None:
    shutil.copy(squeezenet_file(), repo / "models" / "loose.onnx")
    (repo / "models.yaml").write_text(repo_registry + "  loose:\n    path: models/loose.onnx\n")
    commit(git, repo, "entry only")  # the registry names a file that git does not track
    with RefTree(resolve_ref("HEAD~1", repo)) as tree:
        assert tree.side_at_revision(specs(repo)["loose"], "cpu").status == NEW
    with RefTree(resolve_ref("HEAD", repo)) as tree, pytest.raises(GitRefError, match=r"loose\.onnx: not tracked"):
        tree.side_at_revision(specs(repo)["loose"], "cpu")
    (repo / "extra.yaml").write_text(repo_registry)
    match = r"extra\.yaml: not tracked.*git add"
    with RefTree(resolve_ref("HEAD", repo)) as tree, pytest.raises(GitRefError, match=match):
        tree.side_at_revision(load_registry(repo / "extra.yaml")[0], "cpu")


def test_bad_ref_names_the_option_and_the_fix(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(GitRefError, match=r"--aaco-compare=origin/nope: no such commit.*fetch-depth: 0"):
        resolve_ref("origin/nope", repo)
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(GitRefError, match="not inside a git repository"):
        resolve_ref("HEAD", outside)


def test_shallow_clone_says_so_and_how_to_deepen(tmp_path: Path, git: Any) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q")
    for n in (1, 2):
        (origin / "f.txt").write_text(str(n), encoding="utf-8")
        git(origin, "add", "f.txt")
        git(origin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"c{n}")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(clone))
    with pytest.raises(GitRefError, match=r"--aaco-compare=HEAD~1: no such commit.*shallow clone.*"
                                          r"git fetch --deepen=N.*fetch-depth: 0") as caught:
        resolve_ref("HEAD~1", clone)
    assert "git fetch origin" not in str(caught.value)
    assert resolve_ref("HEAD~1", origin).commit  # the full repository has it


def test_large_model_is_streamed_to_disk(repo: Path, git: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # a model bigger than what git would hand over in one read; the copy must match byte for byte
    big = (squeezenet_file()).read_bytes()
    model = onnx.load_from_string(big)
    model.doc_string = "x" * (8 * 2**20)
    onnx.save(model, str(repo / "models" / "net.onnx"))
    commit(git, repo, "big")
    expected = (repo / "models" / "net.onnx").read_bytes()
    shutil.copy(squeezenet_file(), repo / "models" / "net.onnx")
    commit(git, repo, "small again")
    with RefTree(resolve_ref("HEAD~1", repo)) as tree:
        side = tree.side_at_revision(specs(repo)["net"], "cpu")
        assert side.model_file is not None and side.model_file.read_bytes() == expected


def test_external_data_comes_along(repo: Path, git: Any, repo_registry: Any) -> None:
    model = onnx.load(str(repo / "models" / "net.onnx"))
    onnx.save(model, str(repo / "models" / "net.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="net.data", size_threshold=0)
    git(repo, "add", ".")
    commit(git, repo, "external")
    if not (repo / "models" / "net.data").exists():
        pytest.skip("the zoo model has no initializer to move out")
    with RefTree(resolve_ref("HEAD", repo)) as tree:
        assert tree.side_at_revision(specs(repo)["net"], "cpu").status == UNCHANGED
    # new weights, same graph file: the external data file alone changed
    data = (repo / "models" / "net.data").read_bytes()
    (repo / "models" / "net.data").write_bytes(bytes(len(data)))
    commit(git, repo, "weights")
    with RefTree(resolve_ref("HEAD~1", repo)) as tree:
        side = tree.side_at_revision(specs(repo)["net"], "cpu")
        assert side.status == CHANGED and side.changes == ["model bytes"]
        copied = tree.root / "models" / "net.data"
        assert not copied.is_symlink() and copied.read_bytes() == data


@pytest.mark.parametrize(("at_ref", "says"), [
    ("models:\n  net:\n    path: models/net.onnx\n  net:\n    zoo: resnet50\n", "duplicate key 'net' on lines 2 and 4"),
    ("models:\n  net:\n    path: models/net.onnx\n    dims: {batch: 1}\n    dims: {batch: 2}\n",
     "duplicate key 'dims' on lines 4 and 5"),
    ("models:\n  net: {path: models/net.onnx\n", "invalid YAML: line 3, column 1"),
], ids=["model", "key", "syntax"])
def test_the_registry_at_ref_is_read_with_the_duplicate_refusing_loader(repo: Path, git: Any, repo_registry: Any,
                                                                       at_ref: str, says: str) -> None:
    """At REF, ``yaml.safe_load`` kept the last of two entries, so the baseline side silently measured
    another model (issue 22, fault 4, at the compared revision)."""
    (repo / "models.yaml").write_text(at_ref)
    commit(git, repo, "a registry with a duplicate key")
    (repo / "models.yaml").write_text(repo_registry)
    commit(git, repo, "fixed")
    with RefTree(resolve_ref("HEAD~1", repo)) as tree, pytest.raises(GitRefError) as caught:
        tree.side_at_revision(specs(repo)["net"], "cpu")
    message = str(caught.value)
    assert message.startswith(f"models.yaml at HEAD~1: {says}") and "\n" not in message
    assert message.endswith("compare with a later revision (--aaco-compare=REF)")
