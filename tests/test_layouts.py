"""``--aaco-compare=REF`` over ordinary repository layouts, in real git repositories.

Each layout names the same model file in another way: relative or absolute, through ``~``, ``..``, a
linked folder, a committed symbolic link, a name with spaces or glob characters, a registry in a
subfolder, a git submodule. For each, the item must be ``unchanged`` against HEAD and ``changed``
(with the bytes of REF) against the commit before the model changed: never ``new``, which skips the
gate. Paths that leave the repository, and Git LFS pointers, are refused with a line naming the
file and the fix. The last test runs pytest itself on the absolute-path layout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from pytest_aaco.measure.registry import RegistryError, load_registry
from pytest_aaco.sidebyside.revision import CHANGED, UNCHANGED, GitRefError, RefTree, resolve_ref

#: a Git LFS pointer file, as git-lfs writes it (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md)
LFS_POINTER = (b"version https://git-lfs.github.com/spec/v1\n"
               b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "protocol.file.allow=always", "-c", "user.email=t@example.com",
                           "-c", "user.name=t", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def new_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    return root


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def registry(path: Path, model_path: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    quoted = model_path.replace("'", "''")
    path.write_text(f"models:\n  net:\n    path: '{quoted}'\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------ the layouts
# each: (repo, tiny model, home folder) -> (registry file, the real model file to change)

Layout = Callable[[Path, Path, Path], tuple[Path, Path]]


def relative(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    (repo / "models").mkdir()
    shutil.copy(tiny, repo / "models" / "net.onnx")
    return registry(repo / "models.yaml", "models/net.onnx"), repo / "models" / "net.onnx"


def absolute_inside(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    (repo / "models").mkdir()
    shutil.copy(tiny, repo / "models" / "net.onnx")
    return registry(repo / "models.yaml", str(repo / "models" / "net.onnx")), repo / "models" / "net.onnx"


def absolute_through_a_linked_repo(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    """The repository reached through a link outside it (``/home/me/proj`` -> ``/data/proj``)."""
    (repo / "models").mkdir()
    shutil.copy(tiny, repo / "models" / "net.onnx")
    alias = home / "proj"
    alias.symlink_to(repo, target_is_directory=True)
    return registry(repo / "models.yaml", str(alias / "models" / "net.onnx")), repo / "models" / "net.onnx"


def absolute_with_dotdot(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    (repo / "models").mkdir()
    (repo / "other").mkdir()
    (repo / "other" / "keep").write_text("x")
    shutil.copy(tiny, repo / "models" / "net.onnx")
    return registry(repo / "models.yaml", f"{repo}/other/../models/net.onnx"), repo / "models" / "net.onnx"


def home_tilde(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    """``~/...``: the test's HOME is the folder holding the repository."""
    (repo / "models").mkdir()
    shutil.copy(tiny, repo / "models" / "net.onnx")
    return registry(repo / "models.yaml", f"~/{repo.name}/models/net.onnx"), repo / "models" / "net.onnx"


def dotdot_from_a_subfolder_registry(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    (repo / "models").mkdir()
    shutil.copy(tiny, repo / "models" / "net.onnx")
    return registry(repo / "conf" / "perf" / "models.yaml", "../../models/net.onnx"), repo / "models" / "net.onnx"


def registry_in_a_subfolder(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    (repo / "perf" / "nets").mkdir(parents=True)
    shutil.copy(tiny, repo / "perf" / "nets" / "net.onnx")
    return registry(repo / "perf" / "models.yaml", "nets/net.onnx"), repo / "perf" / "nets" / "net.onnx"


def through_a_linked_folder(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    """``current/net.onnx`` where ``current`` is a committed link to ``v2``."""
    (repo / "v2").mkdir()
    shutil.copy(tiny, repo / "v2" / "net.onnx")
    (repo / "current").symlink_to("v2", target_is_directory=True)
    return registry(repo / "models.yaml", "current/net.onnx"), repo / "v2" / "net.onnx"


def model_is_a_committed_link(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    (repo / "store").mkdir()
    (repo / "models").mkdir()
    shutil.copy(tiny, repo / "store" / "net-v3.onnx")
    (repo / "models" / "net.onnx").symlink_to("../store/net-v3.onnx")
    return registry(repo / "models.yaml", "models/net.onnx"), repo / "store" / "net-v3.onnx"


def link_to_a_link_with_dotdot(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    """A link whose target goes through a linked folder and ``..``."""
    (repo / "a" / "b").mkdir(parents=True)
    (repo / "a" / "b" / "keep").write_text("git keeps no empty folder")
    shutil.copy(tiny, repo / "a" / "net.onnx")
    (repo / "lnk").symlink_to("a/b", target_is_directory=True)
    (repo / "net.onnx").symlink_to("lnk/../net.onnx")  # lnk/.. is a (physically), so a/net.onnx
    return registry(repo / "models.yaml", "net.onnx"), repo / "a" / "net.onnx"


def absolute_link_into_the_repo(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    (repo / "models").mkdir()
    shutil.copy(tiny, repo / "models" / "real.onnx")
    (repo / "models" / "net.onnx").symlink_to(repo / "models" / "real.onnx")
    return registry(repo / "models.yaml", "models/net.onnx"), repo / "models" / "real.onnx"


def spaces_and_glob_characters(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    (repo / "my models").mkdir()
    shutil.copy(tiny, repo / "my models" / "net [fp16] *.onnx")
    shutil.copy(tiny, repo / "my models" / "net f.onnx")  # what the glob would also match
    return (registry(repo / "models.yaml", "my models/net [fp16] *.onnx"),
            repo / "my models" / "net [fp16] *.onnx")


def in_a_submodule(repo: Path, tiny: Path, home: Path) -> tuple[Path, Path]:
    source = new_repo(home / "vendor-src")
    shutil.copy(tiny, source / "net.onnx")
    commit_all(source, "vendor model")
    git(repo, "submodule", "add", "-q", str(source), "vendor")
    return registry(repo / "models.yaml", "vendor/net.onnx"), repo / "vendor" / "net.onnx"


LAYOUTS: dict[str, Layout] = {f.__name__: f for f in (
    relative, absolute_inside, absolute_through_a_linked_repo, absolute_with_dotdot, home_tilde,
    dotdot_from_a_subfolder_registry, registry_in_a_subfolder, through_a_linked_folder, model_is_a_committed_link,
    link_to_a_link_with_dotdot, absolute_link_into_the_repo, spaces_and_glob_characters, in_a_submodule)}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_layout_is_unchanged_at_head_and_changed_before(layout: str, home: Path, tiny_model_path: Path) -> None:
    repo = new_repo(home / "repo")
    reg, real = LAYOUTS[layout](repo, tiny_model_path, home)
    commit_all(repo, "base")
    before = real.read_bytes()
    [spec] = load_registry(reg)
    with RefTree(resolve_ref("HEAD", repo)) as tree:
        side = tree.side_at_revision(spec, "cpu")
        assert side.status == UNCHANGED, side.describe("HEAD")

    model = onnx.load(str(real))
    model.doc_string = "other bytes"
    onnx.save(model, str(real))
    if layout == "in_a_submodule":
        commit_all(real.parent, "vendor: other bytes")
    commit_all(repo, "other bytes")
    [spec] = load_registry(reg)
    with RefTree(resolve_ref("HEAD~1", repo)) as tree:
        side = tree.side_at_revision(spec, "cpu")
        assert side.status == CHANGED and side.changes == ["model bytes"], side.describe("HEAD~1")
        assert side.model_file is not None and side.model_file.read_bytes() == before
        assert side.spec is not None and side.spec.name == "net"
    with RefTree(resolve_ref("HEAD", repo)) as tree:
        assert tree.side_at_revision(spec, "cpu").status == UNCHANGED


# ------------------------------------------------------------------ refused, naming the file and the fix


def _outside_link(repo: Path, tiny: Path, home: Path) -> Path:
    shutil.copy(tiny, home / "outside.onnx")
    (repo / "net.onnx").symlink_to(home / "outside.onnx")
    return registry(repo / "models.yaml", "net.onnx")


def _outside_relative_link(repo: Path, tiny: Path, home: Path) -> Path:
    shutil.copy(tiny, home / "outside.onnx")
    (repo / "net.onnx").symlink_to("../outside.onnx")
    return registry(repo / "models.yaml", "net.onnx")


def _outside_absolute(repo: Path, tiny: Path, home: Path) -> Path:
    shutil.copy(tiny, home / "outside.onnx")
    return registry(repo / "models.yaml", str(home / "outside.onnx"))


def _outside_tilde(repo: Path, tiny: Path, home: Path) -> Path:
    shutil.copy(tiny, home / "outside.onnx")
    return registry(repo / "models.yaml", "~/outside.onnx")


def _outside_dotdot(repo: Path, tiny: Path, home: Path) -> Path:
    shutil.copy(tiny, home / "outside.onnx")
    return registry(repo / "models.yaml", "../outside.onnx")


@pytest.mark.parametrize("make", [_outside_link, _outside_relative_link, _outside_absolute, _outside_tilde,
                                  _outside_dotdot], ids=lambda f: f.__name__.strip("_"))
def test_a_model_outside_the_repository_is_refused_by_name(make: Callable[..., Path], home: Path,
                                                          tiny_model_path: Path) -> None:
    repo = new_repo(home / "repo")
    reg = make(repo, tiny_model_path, home)
    commit_all(repo, "base")
    [spec] = load_registry(reg)
    with RefTree(resolve_ref("HEAD", repo)) as tree, pytest.raises(GitRefError) as caught:
        tree.side_at_revision(spec, "cpu")
    message = str(caught.value)
    assert "outside" in message and "repository" in message and "\n" not in message, message
    assert "outside.onnx" in message or "net.onnx" in message, message


def test_a_link_loop_is_refused(home: Path, tiny_model_path: Path) -> None:
    repo = new_repo(home / "repo")
    shutil.copy(tiny_model_path, repo / "net.onnx")
    registry(repo / "models.yaml", "net.onnx")
    commit_all(repo, "base")
    [spec] = load_registry(repo / "models.yaml")
    (repo / "net.onnx").unlink()
    (repo / "net.onnx").symlink_to("loop.onnx")
    (repo / "loop.onnx").symlink_to("net.onnx")
    commit_all(repo, "a loop")
    (repo / "net.onnx").unlink()
    shutil.copy(tiny_model_path, repo / "net.onnx")
    (repo / "loop.onnx").unlink()
    commit_all(repo, "fixed")
    with RefTree(resolve_ref("HEAD~1", repo)) as tree, pytest.raises(GitRefError, match="link loop"):
        tree.side_at_revision(spec, "cpu")


def test_a_git_lfs_pointer_says_so_in_the_work_tree_and_at_ref(home: Path, tiny_model_path: Path) -> None:
    repo = new_repo(home / "repo")
    (repo / "net.onnx").write_bytes(LFS_POINTER)
    registry(repo / "models.yaml", "net.onnx")
    commit_all(repo, "a pointer, as a clone without git-lfs has it")
    with pytest.raises(RegistryError, match=r"net\.onnx is a Git LFS pointer.*git lfs pull"):
        load_registry(repo / "models.yaml")
    shutil.copy(tiny_model_path, repo / "net.onnx")  # the object fetched now; REF holds the pointer
    [spec] = load_registry(repo / "models.yaml")
    with RefTree(resolve_ref("HEAD", repo)) as tree, pytest.raises(GitRefError) as caught:
        tree.side_at_revision(spec, "cpu")
    assert "net.onnx at HEAD is a Git LFS pointer" in str(caught.value)
    assert "git lfs fetch origin HEAD" in str(caught.value)


def test_a_submodule_without_the_commit_of_ref_says_how_to_update(home: Path, tiny_model_path: Path) -> None:
    repo = new_repo(home / "repo")
    reg, real = in_a_submodule(repo, tiny_model_path, home)
    commit_all(repo, "base")
    [spec] = load_registry(reg)
    # REF records a submodule commit that its clone here lacks (pushed to another remote, or rewritten)
    git(repo, "update-index", "--cacheinfo", f"160000,{'ab' * 20},vendor")
    git(repo, "commit", "-qm", "a submodule commit this clone lacks")
    with RefTree(resolve_ref("HEAD", repo)) as tree, pytest.raises(GitRefError) as caught:
        tree.side_at_revision(spec, "cpu")
    assert "vendor is a git submodule" in str(caught.value) and "git submodule update --init vendor" in str(
        caught.value)


def test_an_untracked_model_in_a_submodule_names_the_submodule_for_git_add(home: Path, tiny_model_path: Path) -> None:
    repo = new_repo(home / "repo")
    reg, real = in_a_submodule(repo, tiny_model_path, home)
    commit_all(repo, "base")
    shutil.copy(real, real.with_name("loose.onnx"))
    registry(reg, "vendor/loose.onnx")
    [spec] = load_registry(reg)
    with RefTree(resolve_ref("HEAD", repo)) as tree, pytest.raises(GitRefError) as caught:
        tree.side_at_revision(spec, "cpu")
    assert "not tracked by git" in str(caught.value)
    assert f"(git -C {repo / 'vendor'} add loose.onnx)" in str(caught.value), caught.value


# ------------------------------------------------------------------ end to end: pytest --aaco-compare


@pytest.mark.slow
def test_compare_end_to_end_with_an_absolute_path_and_a_committed_link(aaco_project) -> None:
    """A model named by an absolute path and slowed many times over fails the gate (it was called
    ``new``, rc 0); a model committed as a symbolic link and left alone is ``unchanged`` (it failed
    with "Protobuf parsing failed", the link's target text read as the model)."""
    from pytest_aaco.measure.modelgen import add_extra_work

    root = aaco_project.pytester.path
    (root / "nets").mkdir()
    shutil.copy(aaco_project.model, root / "nets" / "slowed.onnx")
    shutil.copy(aaco_project.model, root / "nets" / "real.onnx")
    (root / "nets" / "linked.onnx").symlink_to("real.onnx")
    aaco_project.registry(f"models:\n  slowed:\n    path: '{root / 'nets' / 'slowed.onnx'}'\n"
                          "  linked:\n    path: nets/linked.onnx\n")
    new_repo(root)
    commit_all(root, "base")
    onnx.save(add_extra_work(onnx.load(str(root / "nets" / "slowed.onnx")), matmuls=40, size=256),
              str(root / "nets" / "slowed.onnx"))
    commit_all(root, "the pull request")
    result = aaco_project.run_subprocess("--aaco-compare=HEAD~1", "--aaco-threshold=50%", "--aaco-intra-op-threads=1",
                                         "--aaco-compare-budget=20", "-v", timeout=300)
    text = result.stdout.str() + result.stderr.str()
    assert "Protobuf parsing failed" not in text
    result.stdout.fnmatch_lines(["*test_latency[[]slowed-cpu[]] *FAILED*"])
    result.stdout.fnmatch_lines(["linked*cpu*-*unchanged"])
    assert "REGRESSION slowed[cpu]" in text
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text


# ------------------------------------------------------------------ the walk at REF agrees with the file system

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_NAMES = ["a", "b", "c", "m.onnx"]
_COMPONENT = st.sampled_from(["a", "b", "c", "..", ".", "m.onnx"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(links=st.lists(st.tuples(st.sampled_from(["a", "b", "c", "a/l", "b/l", "l"]),
                                st.lists(_COMPONENT, min_size=1, max_size=4)), max_size=4),
       query=st.lists(_COMPONENT, min_size=1, max_size=5))
def test_the_walk_at_ref_finds_what_the_file_system_finds(tmp_path_factory, links, query) -> None:
    """Random trees of folders and relative links (with ``..``, links to links, loops, links out of the
    repository): the file :meth:`CommitPaths.resolve_at_ref` finds in the commit is the file the kernel
    finds in the checked-out tree, and where the kernel finds no file inside the repository the walk
    finds none either (None, or a GitRefError for a link out, a loop, a folder)."""
    repo = new_repo(tmp_path_factory.mktemp("walk") / "repo")
    for folder in ("a", "b", "c"):
        (repo / folder).mkdir()
        (repo / folder / "keep").write_text(folder)
        (repo / folder / "m.onnx").write_text(f"model in {folder}")
    (repo / "m.onnx").write_text("model at the top")
    for name, target in links:
        link = repo / name
        if link.parent.is_symlink() or not link.parent.is_dir():  # its folder was replaced by a link
            continue
        if link.is_symlink() or link.exists():
            if link.is_dir() and not link.is_symlink():
                shutil.rmtree(link)
            else:
                link.unlink()
        link.symlink_to("/".join(target))
    commit_all(repo, "tree")
    # a string, not a Path: pathlib drops ".", so Path("m.onnx/.") would name the file, which the kernel refuses
    given_path = os.path.join(repo, *query)
    real = Path(os.path.realpath(given_path))
    inside = real == repo.resolve() or repo.resolve() in real.parents
    exists = os.path.isfile(given_path)  # stat: the kernel's own walk (realpath alone fixes up missing folders)
    expected = real.relative_to(repo.resolve()).as_posix() if inside and exists else None
    with RefTree(resolve_ref("HEAD", repo)) as tree:
        try:
            found = tree.paths.resolve_at_ref(list(query), "/".join(query))
        except GitRefError:
            found = None
        assert (found.place if found is not None else None) == expected, (links, query)
