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
    ModelSpec,
    RegistryError,
    content_hash,
    model_path,
    parse_model,
    parse_registry_text,
)

UNCHANGED, NEW, CHANGED = "unchanged", "new", "changed"
#: the option the errors name
OPTION = "--aaco-compare"
#: a model file this small is read (without external data) to find its external data files
EXTERNAL_DATA_SCAN_MAX_BYTES = 256 * 2**20
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


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


class RefTree:
    """Files as they were at a commit, materialised on demand in a temporary directory.

    Use as a context manager (the directory is removed on exit) or call :meth:`close`.
    """

    def __init__(self, gitref: GitRef, tmp_root: Path | None = None) -> None:
        self.gitref = gitref
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

    def relative(self, path: Path) -> str:
        """*path* relative to the repository, POSIX style; GitRefError when it lies outside."""
        try:
            return path.resolve().relative_to(self.gitref.repo.resolve()).as_posix()
        except ValueError:
            raise GitRefError(f"{path}: outside the git repository {self.gitref.repo}, so {OPTION} cannot find"
                              f" it at {self.gitref.ref}; keep the registry and its models in the repository")\
                from None

    def blob_at_ref(self, rel: str) -> str | None:
        """The blob id of *rel* at the commit, or None when it did not exist there."""
        found = _git(self.gitref.repo, "rev-parse", "--verify", "--quiet", f"{self.gitref.commit}:{rel}")
        return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else None

    def require_tracked(self, path: Path) -> str:
        """*path*'s repository-relative name; GitRefError naming the file when git does not track it."""
        rel = self.relative(path)
        tracked = _git(self.gitref.repo, "ls-files", "--error-unmatch", "--", rel)
        if tracked.returncode:
            raise GitRefError(f"{path}: not tracked by git, so {OPTION}={self.gitref.ref} cannot tell what it was"
                              f" at that revision; commit it (git add {rel}), or run without {OPTION}")
        return rel

    def working_blob(self, path: Path) -> str:
        """The blob id git would give *path* now (``git hash-object``, streamed, filters applied)."""
        out = _git(self.gitref.repo, "hash-object", "--", str(path))
        if out.returncode:
            raise GitRefError(f"{path}: git hash-object failed: {out.stderr.strip()}")
        return out.stdout.strip()

    def materialize(self, rel: str, blob: str) -> Path:
        """Make *rel* (blob *blob* at REF) exist under :attr:`root`: a link to the working-tree file
        when that has the same bytes, else a copy streamed from ``git cat-file``. Returns its path.
        Raises GitRefError for a Git LFS pointer (run ``git lfs pull``) or a failed write (disk full)."""
        target = self.root / rel
        if target.exists() or target.is_symlink():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        current = self.gitref.repo / rel
        if current.is_file() and self.working_blob(current) == blob:
            target.symlink_to(current.resolve())
            return target
        try:
            with open(target, "wb") as out:
                proc = subprocess.run(["git", "-C", str(self.gitref.repo), "cat-file", "blob", blob], stdout=out,
                                      stderr=subprocess.PIPE, check=False)
        except OSError as exc:
            target.unlink(missing_ok=True)
            raise GitRefError(f"{rel} at {self.gitref.ref}: cannot write a temporary copy under {self.root}"
                              f" ({exc.strerror}); free space there or set TMPDIR to a larger disk") from None
        if proc.returncode:
            raise GitRefError(f"{rel} at {self.gitref.ref}: git cat-file failed: {proc.stderr.decode().strip()}")
        with open(target, "rb") as head:
            if head.read(len(_LFS_POINTER)) == _LFS_POINTER:
                raise GitRefError(f"{rel} at {self.gitref.ref} is a Git LFS pointer; fetch the objects"
                                  " (git lfs fetch origin <ref>) so the model can be read")
        return target

    def registry_at_ref(self, registry_path: Path) -> tuple[Path, dict[str, Any]] | None:
        """The registry file at REF, materialised, and its parsed YAML; None when it did not exist.

        Raises GitRefError when the registry is not tracked, or its YAML at REF does not parse
        (:func:`pytest_aaco.measure.registry.parse_registry_text`: a key given twice included).
        """
        key = registry_path.resolve()
        if key not in self._registries:
            rel = self.require_tracked(key)
            blob = self.blob_at_ref(rel)
            if blob is None:
                self._registries[key] = None
            else:
                path = self.materialize(rel, blob)
                try:  # the working tree's reader: a duplicate key is refused at REF too, never lost
                    data = parse_registry_text(f"{rel} at {self.gitref.ref}", path.read_bytes())
                except RegistryError as exc:
                    raise GitRefError(f"{exc}; compare with a later revision ({OPTION}=REF)") from None
                self._registries[key] = (self.root / rel, data if isinstance(data, dict) else {})
        return self._registries[key]

    def _external_data(self, model_rel: str, model_file: Path) -> list[str]:
        """Materialise the external data files a small ONNX graph file at REF refers to; returns
        those whose bytes differ from the working tree's (copied, not linked)."""
        if model_file.stat().st_size > EXTERNAL_DATA_SCAN_MAX_BYTES or not _may_have_external_data(model_file):
            return []
        import onnx

        try:
            model = onnx.load(str(model_file), load_external_data=False)
        except Exception:  # noqa: BLE001  # not an ONNX file: ORT will say so when it loads it
            return []
        folder = Path(model_rel).parent
        differ: list[str] = []
        for tensor in model.graph.initializer:
            if tensor.data_location != onnx.TensorProto.EXTERNAL:
                continue
            location = next((e.value for e in tensor.external_data if e.key == "location"), None)
            if location:
                rel = (folder / location).as_posix()
                blob = self.blob_at_ref(rel)
                if blob is None:
                    raise GitRefError(f"{model_rel} at {self.gitref.ref}: its external data file {rel} is not"
                                      " in that revision")
                if rel not in differ and not self.materialize(rel, blob).is_symlink():
                    differ.append(rel)
        return differ

    def side_at_revision(self, spec: ModelSpec, provider_short: str) -> BaselineSide:
        """What item (*spec*, *provider_short*) was at REF: unchanged, new, or changed (with files).

        Raises GitRefError for an untracked registry or model file, a registry at REF that no
        longer parses, and the errors of :meth:`materialize`.
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
        if raw_path is not None:
            if spec.source.startswith("path:"):
                self.require_tracked(Path(spec.source.removeprefix("path:")))
            rel = posixpath.normpath((Path(self.relative(spec.registry_path)).parent / str(raw_path)).as_posix())
            blob = self.blob_at_ref(rel)
            if blob is None:
                return BaselineSide(NEW, changes=[f"model file {rel} did not exist"])
            external = self._external_data(rel, self.materialize(rel, blob))
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
