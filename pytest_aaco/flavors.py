"""Which ONNX Runtime build is installed, found without importing it.

ONNX Runtime ships one Python package, ``onnxruntime``, in several distributions ("flavors"):
``onnxruntime`` (CPU), ``onnxruntime-gpu`` (CUDA, TensorRT), ``onnxruntime-migraphx`` (AMD MIGraphX),
``onnxruntime-openvino``, ``onnxruntime-directml``, ``onnxruntime-rocm`` and others. They all write
the same files (``onnxruntime/__init__.py``, ``onnxruntime/capi/onnxruntime_pybind11_state*``), and
pip does not know they conflict: installing a second one over the first leaves both listed by
``pip list`` while the files of whichever was installed last are the ones that run, and uninstalling
either one removes the shared files under the other. pytest-aaco therefore depends on no flavor
itself; its extras install one (``pytest-aaco[cpu]``, ``[cuda]``, ``[migraphx]``, ...).

This module reads only the installed distributions' metadata folders (``*.dist-info``) on
``sys.path`` and asks :func:`importlib.util.find_spec` where the package is: it never imports
onnxruntime, so it costs a directory listing per ``sys.path`` entry and is safe at plugin load.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: the import name all flavors share
PACKAGE = "onnxruntime"

#: flavors with an extra of pytest-aaco: distribution -> (extra, what it runs on)
EXTRAS = {
    "onnxruntime": ("cpu", "CPU"),
    "onnxruntime-gpu": ("cuda", "NVIDIA CUDA / TensorRT"),
    "onnxruntime-migraphx": ("migraphx", "AMD MIGraphX"),
    "onnxruntime-openvino": ("openvino", "Intel OpenVINO"),
    "onnxruntime-directml": ("directml", "DirectML, Windows"),
}

#: the first release built for numpy 2: 1.17.x and 1.18.0 set no upper bound on numpy but fail to import
#: with numpy 2 (``AttributeError: _ARRAY_API not found``, then an empty ImportError); 1.18.1 declares
#: numpy<2 (.ci/ort_floors.sh)
NUMPY2_FIRST = (1, 19)

#: the one-line fix when no ONNX Runtime can be imported
INSTALL_HINT = ("install pytest-aaco with the extra of your build: pip install 'pytest-aaco[cpu]' (CPU),"
                " 'pytest-aaco[cuda]' (NVIDIA, onnxruntime-gpu) or 'pytest-aaco[migraphx]' (AMD, onnxruntime-migraphx);"
                " from a clone: pip install -e '.[cpu]'")

#: distribution names whose metadata folders are read (a cheap filter on the folder name; that the
#: distribution really ships the ``onnxruntime`` package is then read from its metadata):
#: ``onnxruntime*`` and the nightly builds' ``ort-nightly*``
_CANDIDATE = re.compile(r"^(onnxruntime|ort[-_.]nightly)[-_.a-z0-9]*?-[^-]+\.(dist-info|egg-info)$", re.IGNORECASE)


@dataclass(frozen=True)
class OrtDistribution:
    """One installed distribution that ships the ``onnxruntime`` package."""

    #: the distribution's name, normalised as pip writes it in commands (``onnxruntime-gpu``)
    name: str
    version: str
    #: its metadata folder (``.../site-packages/onnxruntime_gpu-1.31.1.dist-info``)
    metadata: Path
    #: when that folder was written, seconds since the epoch: the install time
    installed_at: float

    @property
    def pinned(self) -> str:
        """``name==version``, for a pip command."""
        return f"{self.name}=={self.version}"


def canonical_name(name: str) -> str:
    """A distribution name as PEP 503 normalises it (``onnxruntime_gpu`` -> ``onnxruntime-gpu``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _ships_package(folder: Path) -> bool:
    """Whether the distribution whose metadata is *folder* installs the ``onnxruntime`` package:
    ``top_level.txt`` names it, or (without that file) ``RECORD`` lists a file under ``onnxruntime/``.
    ``onnxruntime-extensions``, ``onnxruntime-genai`` and the plugin-EP packages ship other packages."""
    try:
        top_level = (folder / "top_level.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        top_level = None
    if top_level is not None:
        return PACKAGE in top_level.split()
    try:
        with open(folder / ("RECORD" if folder.suffix == ".dist-info" else "SOURCES.txt"), encoding="utf-8",
                  errors="replace") as record:
            return any(line.startswith(f"{PACKAGE}/") for line in record)
    except OSError:
        return False


def ort_distributions(paths: Iterable[str] | None = None) -> list[OrtDistribution]:
    """The installed distributions that ship the ``onnxruntime`` package, found in the metadata
    folders of *paths* (default ``sys.path``), oldest install first. A distribution found on two
    path entries counts once, as Python imports it: the first entry wins. Never raises."""
    found: dict[str, OrtDistribution] = {}
    for entry in sys.path if paths is None else paths:
        try:
            with os.scandir(entry or ".") as listing:
                names = [e.name for e in listing if _CANDIDATE.match(e.name) and e.is_dir()]
        except OSError:  # a zip file, a missing folder
            continue
        for folder_name in sorted(names):
            stem = folder_name.rsplit(".", 1)[0]
            dist_name, _, rest = stem.partition("-")
            name = canonical_name(dist_name)
            if name in found:
                continue
            folder = Path(entry or ".", folder_name)
            if not _ships_package(folder):
                continue
            try:
                installed_at = folder.stat().st_mtime
            except OSError:
                installed_at = 0.0
            found[name] = OrtDistribution(name, rest.split("-")[0], folder, installed_at)
    return sorted(found.values(), key=lambda d: d.installed_at)


def missing_problem() -> str | None:
    """Why ``import onnxruntime`` cannot work here, in one line naming the fix, or None when the
    package is there (whether it then imports is not checked: that would load it).

    Two cases: no ``onnxruntime`` package at all, and a package folder without ``__init__.py`` (what
    uninstalling one of two flavors installed over each other leaves: the shared files are gone)."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):  # a broken parent entry on sys.path, a module with no spec
        spec = None
    where = f"the Python at {sys.executable}"
    if spec is None:
        return f"pytest-aaco: no ONNX Runtime in {where} (no module named '{PACKAGE}'): {INSTALL_HINT}"
    if spec.origin is None or spec.origin == "namespace":  # a leftover folder: no __init__.py
        folders = ", ".join(spec.submodule_search_locations or [])
        dists = ort_distributions()
        if dists:
            keep = _keep(dists)
            drop = " ".join(d.name for d in dists if d is not keep)
            fix = ((f"pip uninstall -y {drop} && " if drop else "")
                   + f"pip install --force-reinstall --no-deps {keep.pinned}")
        else:
            fix = f"remove that folder and {INSTALL_HINT}"
        return (f"pytest-aaco: the ONNX Runtime package in {folders} is incomplete (no __init__.py; uninstalling"
                f" one of two ONNX Runtime builds installed over each other removes the files they share): {fix}")
    return None


def _keep(dists: list[OrtDistribution]) -> OrtDistribution:
    """Of several builds (oldest install first), the one to keep: the accelerator build installed
    last, else the last one."""
    accelerated = [d for d in dists if d.name != PACKAGE]
    return accelerated[-1] if accelerated else dists[-1]


#: the file of the package every flavor's RECORD lists, relative to the folder it is installed in
INIT_FILE = f"{PACKAGE}/__init__.py"


def imported_root() -> Path | None:
    """The ``sys.path`` folder Python imports ``onnxruntime`` from (the parent of the package folder
    that holds the ``__init__.py`` :func:`importlib.util.find_spec` finds), resolved; None when there is
    no such file. Does not import onnxruntime."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or spec.origin == "namespace":
        return None
    try:
        return Path(os.path.abspath(spec.origin)).parent.parent  # as sys.path names it: links not followed
    except (OSError, ValueError):
        return None


def _owns_init(dist: OrtDistribution) -> bool:
    """Whether *dist*'s ``RECORD`` (``SOURCES.txt`` for an egg) lists ``onnxruntime/__init__.py``."""
    record = dist.metadata / ("RECORD" if dist.metadata.suffix == ".dist-info" else "SOURCES.txt")
    try:
        with open(record, encoding="utf-8", errors="replace") as lines:
            return any(line.split(",", 1)[0].strip() == INIT_FILE for line in lines)
    except OSError:
        return False


def _folder(dist: OrtDistribution) -> Path:
    return Path(os.path.abspath(dist.metadata.parent))


def importing_builds(dists: list[OrtDistribution], root: Path | None) -> list[OrtDistribution]:
    """Of *dists*, those whose ``RECORD`` owns the ``onnxruntime/__init__.py`` Python imports: installed in
    *root* (:func:`imported_root`) and listing that file. All of *dists* when *root* is None (unknown)."""
    if root is None:
        return list(dists)
    return [d for d in dists if _folder(d) == root and _owns_init(d)]


def shadowed_builds(dists: list[OrtDistribution], root: Path | None) -> list[OrtDistribution]:
    """Of *dists*, the builds installed in another folder than the one Python imports ``onnxruntime``
    from (*root*): shadowed by it (a ``pip install --target`` folder on ``PYTHONPATH``, a
    ``--system-site-packages`` venv with its own pinned wheel). Harmless: ``aaco info`` lists them."""
    if root is None:
        return []
    owners = importing_builds(dists, root)
    return [d for d in dists if d not in owners]


def overlap_problem(dists: list[OrtDistribution] | None = None, root: Path | None = None) -> str | None:
    """A warning text when more than one distribution of ONNX Runtime is installed over each other in
    the folder Python imports ``onnxruntime`` from (they overwrite each other's files: the one installed
    last runs, whatever ``pip list`` says), naming the one to uninstall and the commands; None with one
    or none. Builds in other folders are shadowed, not overlapping (:func:`shadowed_builds`).
    *dists*: :func:`ort_distributions` and *root* :func:`imported_root`, both asked when *dists* is None;
    with *dists* given and *root* None, all of *dists* count.

    The CPU ``onnxruntime`` is the one to remove when an accelerator build is there too (it is what
    a dependency on ``onnxruntime`` pulls in over a GPU build); between accelerator builds, the one
    installed last is kept. Uninstalling removes the files the builds share, so the kept one is
    reinstalled afterwards (``--force-reinstall --no-deps``: its dependencies stay as they are)."""
    if dists is None:
        dists, root = ort_distributions(), imported_root()
    dists = importing_builds(dists, root)
    if len(dists) < 2:
        return None
    keep = _keep(dists)
    drop = [d for d in dists if d is not keep]
    listed = ", ".join(f"{d.name} {d.version}" for d in dists)
    last = dists[-1]
    extra = EXTRAS.get(keep.name, (None, ""))[0]
    after = (f"; in this environment install pytest-aaco with its [{extra}] extra, not [cpu], which"
             f" installs the CPU build over it again") if extra and extra != "cpu" else ""
    return (f"{len(dists)} ONNX Runtime builds are installed over each other ({listed}): they share the"
            f" '{PACKAGE}' package's files, so the one installed last ({last.name}) runs, whatever pip list"
            f" says. Uninstall {' and '.join(d.name for d in drop)} and restore {keep.name}'s files:"
            f" pip uninstall -y {' '.join(d.name for d in drop)} && pip install --force-reinstall --no-deps"
            f" {keep.pinned}{after}")


def _release(version: str) -> tuple[int, ...]:
    """``"1.18.0"`` -> ``(1, 18, 0)``; the leading numeric parts only (``"1.20.0.dev1"`` -> ``(1, 20, 0)``)."""
    parts = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


#: the dynamic loader's words for a library built against a newer glibc than this system's
_GLIBC_NEEDED = re.compile(r"GLIBC_(\d+\.\d+)'? not found")
#: onnxruntime-migraphx releases on PyPI that import with an older glibc, newest first: tagged manylinux_2_34,
#: 1.24.4 and 1.25.0 need glibc 2.38 all the same; these ran on Debian 12's glibc 2.36 (docs/amd.md's conformance
#: table, studies/migraphx_conformance.py). Each is built for one ROCm (1.23.0: 7.0.1 ... 1.27.1: 7.2.4, read from
#: the provider library's RUNPATH)
MIGRAPHX_OLDER_GLIBC = ("1.27.1", "1.27.0", "1.24.2", "1.23.2", "1.23.0")


def glibc_version() -> str:
    """This process's glibc version (``2.35``), or ``unknown`` (another C library, or none found)."""
    import platform

    name, version = platform.libc_ver()
    return version if name == "glibc" and version else "unknown"


def glibc_fix(dist: OrtDistribution, needed: str) -> str:
    """The advice for *dist* failing to import because it needs glibc *needed* (``2.38``): reinstalling cannot
    help; name the glibc and, for onnxruntime-migraphx, the releases that import on an older one."""
    here = glibc_version()
    text = (f"{dist.name} {dist.version} needs glibc {needed} and this system has glibc {here},"
            " so reinstalling cannot help")
    if dist.name == "onnxruntime-migraphx":
        return (f"{text}: install a release that imports on glibc 2.36, the one built for your ROCm"
                f" ({', '.join(MIGRAPHX_OLDER_GLIBC)}; 1.27.1 is built for ROCm 7.2.4, 1.23.0 for ROCm 7.0.1): pip"
                f" install --force-reinstall --no-deps 'onnxruntime-migraphx=={MIGRAPHX_OLDER_GLIBC[0]}', or run on a"
                f" system with glibc {needed} or newer (Ubuntu 24.04)")
    return f"{text}: install an older release of {dist.name}, or run on a system with glibc {needed} or newer"


def import_problem(exc: BaseException) -> str:
    """One line for an ``import onnxruntime`` that raised *exc*: the builds installed, the error
    (ORT before 1.19 under numpy 2 raises an ImportError with no message), and the fix. Reads
    metadata only; never raises."""
    dists = ort_distributions()
    builds = ", ".join(f"{d.name} {d.version}" for d in dists) or "no ONNX Runtime distribution"
    error = f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__} with no message"
    try:
        numpy_version = importlib.metadata.version("numpy")
    except importlib.metadata.PackageNotFoundError:
        numpy_version = ""
    old = [d for d in dists if _release(d.version) < NUMPY2_FIRST]
    glibc = _GLIBC_NEEDED.search(str(exc))
    if glibc and dists:
        fix = glibc_fix(dists[-1], glibc.group(1))
    elif old and _release(numpy_version)[:1] >= (2,):
        name, version = old[-1].name, old[-1].version
        fix = (f"{name} {version} was built for numpy 1.x and numpy {numpy_version} is installed:"
               f" pip install -U '{name}>=1.19' (the first release built for numpy 2), or pip install 'numpy<2'")
    elif dists:
        fix = f"reinstall it: pip install --force-reinstall --no-deps {dists[-1].pinned}"
    else:
        fix = INSTALL_HINT
    return f"pytest-aaco: ONNX Runtime cannot be imported ({builds}; {error}): {fix}"
