"""The baseline side at a git revision: what the registry and the model file were at REF.

``--aaco-compare=REF`` measures every item against the same item as it was at REF, side by side.
This module finds that item without touching the user's working tree:

* the registry file at REF comes from ``git show`` (``git cat-file blob``) into a temporary
  directory laid out like the repository, so ``path:`` entries resolve as they did at REF;
* a model file is streamed from ``git cat-file`` to that directory (never held in memory), and
  only when its bytes differ from the working tree's (compared by git blob id, which
  ``git hash-object`` computes while streaming); identical files are linked, not copied;
* an ONNX model with external data (the only way past protobuf's 2 GB) has its data files
  brought along the same way, and a changed data file makes the model's bytes count as changed.

An item is :data:`UNCHANGED` when the model bytes, the input specification (``dims``,
``inputs``) and the provider options for its EP are identical at REF: it needs no second
measurement. It is :data:`NEW` when the registry, its entry or its model file did not exist at
REF. Otherwise it is :data:`CHANGED` and the baseline side is ``(spec at REF, model file at REF)``.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.registry import (
    LFS_POINTER_MAX_BYTES,
    ModelSpec,
    RegistryError,
    content_hash,
    is_lfs_pointer,
    model_path,
    parse_model,
    parse_registry_text,
)

UNCHANGED, NEW, CHANGED = "unchanged", "new", "changed"
#: the option the errors name
OPTION = "--aaco-compare"
#: a model file this small is read (without external data) to find its external data files
EXTERNAL_DATA_SCAN_MAX_BYTES = 256 * 2**20
#: at most this many symbolic links are followed for one path (Linux's own limit, MAXSYMLINKS)
MAX_LINK_HOPS = 40


@dataclass(frozen=True)
class RefFile:
    """A file at REF: its ``blob`` at ``commit`` of ``repo`` (the repository, or a submodule's clone),
    ``rel`` its path there, ``place`` its path below the top-level repository (where it goes in the tree)."""

    repo: Path
    commit: str
    rel: str
    place: str
    blob: str


def _may_have_external_data(path: Path) -> bool:
    """Whether the file at *path* contains the bytes ``location``: every external-data entry of an
    ONNX tensor names its file under that key (``TensorProto.external_data``), so a file without
    them has no external data and need not be parsed (0.5 s for a 100 MB ResNet-50 on 2 cores)."""
    import mmap

    try:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(b"location") >= 0
    except (OSError, ValueError):  # an empty file cannot be mapped; let the parser decide
        return True


class GitRefError(ValueError):
    """REF or a file cannot be used for the comparison; the message names the option or file and the fix."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise GitRefError(f"{OPTION} needs the git command, which is not on PATH") from None


@dataclass(frozen=True)
class GitRef:
    """A revision resolved in a repository: ``ref`` as given, ``commit`` its SHA, ``repo`` the top level."""

    ref: str
    commit: str
    repo: Path


def resolve_ref(ref: str, where: Path) -> GitRef:
    """Resolve *ref* (``origin/main``, a SHA, ``HEAD~1``) in the repository holding *where*.

    Raises :class:`GitRefError` when *where* is not in a git repository, or when *ref* is not a
    commit there (the message says to fetch it: a CI checkout lacks the base branch; or, in a shallow
    clone, to deepen it: ``HEAD~1`` of a depth-1 clone is cut off, and a plain fetch does not bring it).
    """
    top = _git(where, "rev-parse", "--show-toplevel")
    if top.returncode:
        raise GitRefError(f"{OPTION}={ref}: {where} is not inside a git repository; run pytest from the"
                          f" repository that holds the model registry, or drop {OPTION}")
    repo = Path(top.stdout.strip())
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if found.returncode or not found.stdout.strip():
        shallow = _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
        if shallow:  # HEAD~1 of a depth-1 clone: fetching the branch again would not bring the history
            raise GitRefError(f"{OPTION}={ref}: no such commit in {repo}, which is a shallow clone (its history"
                              " is cut off). Deepen it first (git fetch --deepen=N, N the commits to go back,"
                              " or git fetch --unshallow; in GitHub Actions use actions/checkout with"
                              " fetch-depth: 0), or pass a commit SHA that the clone holds")
        raise GitRefError(f"{OPTION}={ref}: no such commit in {repo}. Fetch it first (git fetch origin"
                          f" {ref.split('/')[-1]}; in GitHub Actions use actions/checkout with fetch-depth: 0),"
                          " or pass a commit SHA")
    return GitRef(ref, found.stdout.strip(), repo)


@dataclass
class BaselineSide:
    """The baseline side of one item: ``status`` (:data:`UNCHANGED`, :data:`NEW`, :data:`CHANGED`),
    the spec and model file at REF (None when new), and ``changes``: what differs, in words."""

    status: str
    spec: ModelSpec | None = None
    model_file: Path | None = None
    changes: list[str] = field(default_factory=list)

    def describe(self, ref: str) -> str:
        """``unchanged at REF``, ``new (did not exist at REF: ...)`` or ``changed since REF: ...``."""
        if self.status == UNCHANGED:
            return f"unchanged at {ref}"
        if self.status == NEW:
            return f"new (did not exist at {ref}{': ' + '; '.join(self.changes) if self.changes else ''})"
        return f"changed since {ref}: {', '.join(self.changes)}"


#: temporary folders of the baseline side: ``$TMPDIR/aaco-ref-*``, each with its owner's pid
TREE_PREFIX = "aaco-ref-"
OWNER_FILE = "aaco-owner.pid"
#: a tree older than this (s) whose owner process is gone is removed by the next run
STALE_AFTER_S = 24 * 3600


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):  # exists, owned by someone else
        return True
    return True


def remove_stale_trees(tmp_root: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove ``aaco-ref-*`` folders under *tmp_root* (default: the system's temporary folder)
    older than :data:`STALE_AFTER_S` whose owner process is gone: what a killed run (SIGKILL, a
    power cut) left behind. Returns the folders removed; a folder that cannot be read or removed
    is left alone."""
    root = Path(tmp_root) if tmp_root is not None else Path(tempfile.gettempdir())
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        candidates = [p for p in root.iterdir() if p.name.startswith(TREE_PREFIX) and p.is_dir()]
    except OSError:
        return removed
    for path in candidates:
        try:
            if now - path.stat().st_mtime < STALE_AFTER_S:
                continue
            owner = path / OWNER_FILE
            if owner.exists() and _process_alive(int(owner.read_text(encoding="ascii").strip() or 0)):
                continue
        except (OSError, ValueError):
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed


class CommitPaths:
    """The repository's paths as they were at a commit (REF), read from git's tree objects, never from
    the working tree: where a path of the working tree lies in the repository (:meth:`repo_parts`), what
    it named at REF (:meth:`resolve_at_ref`: ``..``, symbolic links and submodules followed as stored at
    REF), and whether git tracks it now (:meth:`require_tracked`). Each folder's listing is read once."""

    def __init__(self, gitref: GitRef) -> None:
        self.gitref = gitref
        self._trees: dict[tuple[Path, str, str], dict[str, tuple[str, str, str]]] = {}

    def relative(self, path: Path) -> str:
        """*path* relative to the repository, POSIX style; GitRefError when it lies outside."""
        return "/".join(self.repo_parts(path.absolute()))

    def repo_parts(self, path: Path, top: Path | None = None) -> list[str]:
        """The components of *path* (absolute, as written) below the repository *top* (default: the one
        of REF): the shortest leading part of *path* whose real path lies in the repository is replaced by
        its place there, the rest is kept as written, so ``..`` and symbolic links inside the repository
        are followed as they were at REF (:meth:`resolve_at_ref`), not as they are now. An absolute path
        naming the repository through a linked folder (``/home/me/proj`` -> ``/data/proj``) is found too.
        GitRefError naming *path* when no part of it lies in the repository."""
        top = (top or self.gitref.repo).resolve()
        parts = path.parts
        for count in range(1, len(parts) + 1):
            real = Path(os.path.realpath(Path(*parts[:count])))
            if real == top or top in real.parents:
                return [*real.relative_to(top).parts, *parts[count:]]
        raise GitRefError(f"{path}: outside the git repository {top}, so {OPTION} cannot find it at"
                          f" {self.gitref.ref}; keep the registry and its models in the repository") from None

    def _tree_entries(self, repo: Path, commit: str, folder: str) -> dict[str, tuple[str, str, str]]:
        """The entries of *folder* (``""``: the top) at *commit* of *repo*: name -> (mode, type, object id).
        The folder is named as ``COMMIT:FOLDER``, so no name is read as a pathspec pattern."""
        key = (repo, commit, folder)
        if key not in self._trees:
            out = subprocess.run(["git", "-C", str(repo), "ls-tree", "-z", f"{commit}:{folder}"],
                                 capture_output=True, check=False)
            entries: dict[str, tuple[str, str, str]] = {}
            for record in out.stdout.split(b"\0") if out.returncode == 0 else []:
                head, sep, name = record.partition(b"\t")
                if sep:
                    mode, kind, obj = head.decode().split()
                    entries[os.fsdecode(name)] = (mode, kind, obj)
            self._trees[key] = entries
        return self._trees[key]

    def resolve_at_ref(self, parts: list[str], what: str) -> RefFile | None:
        """The file that the path *parts* (below the repository, as :meth:`repo_parts` gives them) named at
        REF, following ``..`` and symbolic links as git stored them at that commit (a link's blob is the
        text of its target), and into git submodules at the commit REF recorded for them; None when
        nothing was there. *what* names the path in errors.

        Raises GitRefError for a link that leads out of the repository, a link loop, a folder or a
        submodule where a file is wanted, and a submodule whose commit at REF its clone lacks."""
        repo, commit = self.gitref.repo, self.gitref.commit
        base: list[str] = []  # the place of the submodule the walk is in
        stack: list[str] = []
        queue = list(parts)
        hops = 0
        at = f"{what} at {self.gitref.ref}"
        while queue:
            name = queue.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if not stack:
                    raise GitRefError(f"{at}: the path leads out of the repository ({'/'.join(parts)});"
                                      f" {OPTION} reads the model from the repository at that revision, so"
                                      " keep it inside")
                stack.pop()
                continue
            entry = self._tree_entries(repo, commit, "/".join(stack)).get(name)
            if entry is None:
                return None
            mode, kind, obj = entry
            rel = "/".join([*stack, name])
            if mode == "120000":  # a symbolic link: git stores its target text as the blob
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise GitRefError(f"{at}: more than {MAX_LINK_HOPS} symbolic links in a row at {rel}"
                                      " (a link loop); fix the links")
                target = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", obj], capture_output=True,
                                        check=False).stdout.decode("utf-8", "surrogateescape")
                if os.path.isabs(target):
                    try:
                        inner = self.repo_parts(Path(target), repo)
                    except GitRefError:
                        inner = None
                    if inner is None:
                        raise GitRefError(f"{at}: {rel} is a symbolic link to {target}, outside the repository;"
                                          f" {OPTION} reads files only from the repository at that revision, so"
                                          " commit the model itself rather than a link out of the repository")
                    stack, queue = [], [*inner, *queue]
                else:
                    if _leaves(target, len(stack)):
                        raise GitRefError(f"{at}: {rel} is a symbolic link to {target}, outside the repository;"
                                          f" {OPTION} reads files only from the repository at that revision,"
                                          " so commit the model itself rather than a link out of the"
                                          " repository")
                    queue = [*target.split("/"), *queue]
                continue
            if mode == "160000":  # a git submodule: continue in its clone, at the commit REF recorded
                sub = repo / rel
                place = "/".join([*base, rel])
                if not queue:
                    raise GitRefError(f"{at}: {place} is a git submodule, not a file")
                has = subprocess.run(["git", "-C", str(sub), "cat-file", "-e", f"{obj}^{{commit}}"],
                                     capture_output=True, check=False) if (sub / ".git").exists() else None
                if has is None or has.returncode:
                    raise GitRefError(f"{at}: {place} is a git submodule whose commit at that revision"
                                      f" ({obj[:12]}) is not in its clone; run git submodule update --init"
                                      f" {place} (or git -C {place} fetch) and re-run")
                repo, commit, base, stack = sub, obj, [*base, *stack, name], []
                continue
            if kind == "tree":
                if not queue:
                    raise GitRefError(f"{at}: {'/'.join([*base, rel])} is a folder, not a model file")
                stack.append(name)
                continue
            if queue:  # a file where a folder is wanted: nothing of that name
                return None
            return RefFile(repo, commit, rel, "/".join([*base, rel]), obj)
        return None

    def require_tracked(self, path: Path) -> str:
        """*path*'s repository-relative name; GitRefError naming the file when git does not track it.
        A file inside a git submodule is looked up in the submodule, where it is tracked."""
        rel = self.relative(path)
        real = path.resolve()
        top = _git(real.parent, "rev-parse", "--show-toplevel") if real.parent.is_dir() else None
        holder = Path(top.stdout.strip()) if top is not None and top.returncode == 0 else self.gitref.repo
        try:
            name = real.relative_to(holder.resolve()).as_posix()
        except ValueError:
            holder, name = self.gitref.repo, rel
        tracked = _git(holder, "ls-files", "--error-unmatch", "--", f":(literal){name}")
        if tracked.returncode:
            command = "git" if holder.resolve() == self.gitref.repo.resolve() else f"git -C {holder}"  # a submodule
            raise GitRefError(f"{path}: not tracked by git, so {OPTION}={self.gitref.ref} cannot tell what it was"
                              f" at that revision; commit it ({command} add {name}), or run without {OPTION}")
        return rel


class RefTree:
    """Files as they were at a commit, materialised on demand in a temporary directory: the registry and
    model files of REF (:meth:`side_at_revision`), found through :attr:`paths` (:class:`CommitPaths`).

    Use as a context manager (the directory is removed on exit) or call :meth:`close`.
    """

    def __init__(self, gitref: GitRef, tmp_root: Path | None = None) -> None:
        self.gitref = gitref
        #: the paths at REF, as git's tree objects of that commit name them
        self.paths = CommitPaths(gitref)
        remove_stale_trees(tmp_root)
        self.root = Path(tempfile.mkdtemp(prefix=TREE_PREFIX, dir=tmp_root))
        (self.root / OWNER_FILE).write_text(str(os.getpid()), encoding="ascii")
        self._registries: dict[Path, tuple[Path, JSONDict] | None] = {}

    def __enter__(self) -> RefTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def working_blob(self, path: Path, repo: Path | None = None) -> str:
        """The blob id git would give *path* now (``git hash-object``, streamed, filters applied)."""
        out = _git(repo or self.gitref.repo, "hash-object", "--", str(path))
        if out.returncode:
            raise GitRefError(f"{path}: git hash-object failed: {out.stderr.strip()}")
        return out.stdout.strip()

    def materialize_file(self, found: RefFile, copy: bool = False) -> Path:
        """Make *found* exist under :attr:`root` at its place: a link to the working-tree file when that
        has the same bytes (and not *copy*), else a copy streamed from ``git cat-file`` (smudge filters
        applied, so a Git LFS object fetched locally comes out as the model). Returns its path.
        Raises GitRefError for a Git LFS pointer (naming ``git lfs fetch``) or a failed write (disk full)."""
        target = self.root / found.place
        if target.is_symlink() and copy:
            target.unlink()
        if target.exists() or target.is_symlink():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        current = found.repo / found.rel
        if not copy and current.is_file() and self.working_blob(current, found.repo) == found.blob:
            target.symlink_to(current.resolve())
            self._check_lfs(target, found.place)
            return target
        try:
            with open(target, "wb") as out:
                proc = subprocess.run(["git", "-C", str(found.repo), "cat-file", "--filters", f"--path={found.rel}",
                                       found.blob], stdout=out, stderr=subprocess.PIPE, check=False)
                if proc.returncode:  # a git without --filters for a blob id: the stored bytes
                    out.seek(0)
                    out.truncate()
                    proc = subprocess.run(["git", "-C", str(found.repo), "cat-file", "blob", found.blob], stdout=out,
                                          stderr=subprocess.PIPE, check=False)
        except OSError as exc:
            target.unlink(missing_ok=True)
            raise GitRefError(f"{found.place} at {self.gitref.ref}: cannot write a temporary copy under {self.root}"
                              f" ({exc.strerror}); free space there or set TMPDIR to a larger disk") from None
        if proc.returncode:
            raise GitRefError(f"{found.place} at {self.gitref.ref}: git cat-file failed:"
                              f" {proc.stderr.decode().strip()}")
        self._check_lfs(target, found.place)
        return target

    def _check_lfs(self, target: Path, place: str) -> None:
        with open(target, "rb") as head:
            if is_lfs_pointer(head.read(LFS_POINTER_MAX_BYTES + 1)):
                raise GitRefError(f"{place} at {self.gitref.ref} is a Git LFS pointer, not the model; fetch the"
                                  f" objects of that revision (git lfs fetch origin {self.gitref.ref}, with git-lfs"
                                  " installed) so the model can be read")

    def registry_at_ref(self, registry_path: Path) -> tuple[Path, dict[str, Any]] | None:
        """The registry file at REF, materialised, and its parsed YAML; None when it did not exist.

        Raises GitRefError when the registry is not tracked, or its YAML at REF does not parse
        (:func:`pytest_aaco.measure.registry.parse_registry_text`: a key given twice included).
        """
        key = registry_path.resolve()
        if key not in self._registries:
            rel = self.paths.require_tracked(key)
            found = self.paths.resolve_at_ref(rel.split("/"), rel)
            if found is None:
                self._registries[key] = None
            else:
                path = self.materialize_file(found)
                try:  # the working tree's reader: a duplicate key is refused at REF too, never lost
                    data = parse_registry_text(f"{rel} at {self.gitref.ref}", path.read_bytes())
                except RegistryError as exc:
                    raise GitRefError(f"{exc}; compare with a later revision ({OPTION}=REF)") from None
                self._registries[key] = (self.root / found.place, data if isinstance(data, dict) else {})
        return self._registries[key]

    def _external_data(self, model: RefFile, model_file: Path) -> list[str]:
        """Materialise the external data files a small ONNX graph file at REF refers to (next to the
        model file at REF, links followed); returns those whose bytes differ from the working tree's
        (copied, not linked)."""
        if model_file.stat().st_size > EXTERNAL_DATA_SCAN_MAX_BYTES or not _may_have_external_data(model_file):
            return []
        import onnx

        try:
            model_proto = onnx.load(str(model_file), load_external_data=False)
        except Exception:  # noqa: BLE001  # not an ONNX file: ORT will say so when it loads it
            return []
        folder = model.place.split("/")[:-1]
        differ: list[str] = []
        for tensor in model_proto.graph.initializer:
            if tensor.data_location != onnx.TensorProto.EXTERNAL:
                continue
            location = next((e.value for e in tensor.external_data if e.key == "location"), None)
            if location:
                rel = posixpath.normpath("/".join([*folder, location]))
                found = self.paths.resolve_at_ref([*folder, *location.split("/")], rel)
                if found is None:
                    raise GitRefError(f"{model.place} at {self.gitref.ref}: its external data file {rel} is not"
                                      " in that revision")
                data = self.materialize_file(found)
                if found.place != posixpath.normpath("/".join([*folder, location])):  # reached through a link:
                    alias = self.root.joinpath(*folder, location)                    # also where ORT looks
                    if not alias.exists():
                        alias.parent.mkdir(parents=True, exist_ok=True)
                        alias.symlink_to(data.resolve())
                if found.place not in differ and not data.is_symlink():
                    differ.append(found.place)
        return differ

    def model_at_ref(self, spec: ModelSpec, raw_path: str) -> RefFile | None:
        """The model file that ``path:`` *raw_path* of *spec*'s entry at REF named: relative to the
        registry file as it was at REF, or absolute (``~`` expanded) and then found in the repository."""
        given = Path(os.path.expanduser(raw_path))
        if given.is_absolute():
            parts = self.paths.repo_parts(given)
        else:
            parts = [*self.paths.relative(spec.registry_path).split("/")[:-1], *given.parts]
        return self.paths.resolve_at_ref(parts, raw_path)

    def side_at_revision(self, spec: ModelSpec, provider_short: str) -> BaselineSide:
        """What item (*spec*, *provider_short*) was at REF: unchanged, new, or changed (with files).

        The ``path:`` of the entry at REF is followed in the tree of that commit (:meth:`model_at_ref`:
        relative or absolute, through ``..``, symbolic links and submodules), so an absolute path or
        a committed link names the same file at REF as in the working tree.
        Raises GitRefError for an untracked registry or model file, a registry at REF that no
        longer parses, a path or link that leads out of the repository, and the errors of
        :meth:`materialize_file`.
        """
        found = self.registry_at_ref(spec.registry_path)
        if found is None:
            return BaselineSide(NEW, changes=[f"{spec.registry_path.name} did not exist"])
        ref_registry, data = found
        entries: JSONDict = data["models"] if isinstance(data.get("models"), dict) else {}
        if spec.name not in entries:
            return BaselineSide(NEW, changes=[f"no model {spec.name!r} in {spec.registry_path.name}"])
        defaults: JSONDict = data["defaults"] if isinstance(data.get("defaults"), dict) else {}
        entry = entries[spec.name]
        raw_path = ({**defaults, **entry} if isinstance(entry, dict) else {}).get("path")
        external: list[str] = []
        if raw_path is not None and isinstance(entry, dict):
            if spec.source.startswith("path:"):
                self.paths.require_tracked(Path(spec.source.removeprefix("path:")))
            model = self.model_at_ref(spec, str(raw_path))
            if model is None:
                return BaselineSide(NEW, changes=[f"model file {raw_path} did not exist"])
            model_file = self.materialize_file(model)
            external = self._external_data(model, model_file)
            if external and model_file.is_symlink():  # the graph must sit next to the data of REF
                model_file = self.materialize_file(model, copy=True)
            entry = {**entry, "path": str(model_file)}  # the file of REF, wherever the path pointed
        try:
            ref_spec = parse_model(spec.name, entry, ref_registry, defaults)
            ref_file = model_path(ref_spec)
        except RegistryError as exc:
            raise GitRefError(f"{OPTION}={self.gitref.ref}: the registry at that revision does not load: {exc}")\
                from None
        changes = []
        if content_hash(ref_file) != content_hash(model_path(spec)) or external:
            changes.append("model bytes")
        if ref_spec.dims != spec.dims or ref_spec.inputs != spec.inputs:
            changes.append("inputs")
        if ref_spec.options_for(provider_short) != spec.options_for(provider_short):
            changes.append(f"{provider_short} provider options")
        return BaselineSide(CHANGED if changes else UNCHANGED, ref_spec, ref_file, changes)


def _leaves(target: str, depth: int) -> bool:
    """Whether the relative link text *target*, read in a folder *depth* levels below the top, climbs above the top."""
    level = depth
    for name in target.split("/"):
        if name == "..":
            level -= 1
            if level < 0:
                return True
        elif name not in ("", "."):
            level += 1
    return False
