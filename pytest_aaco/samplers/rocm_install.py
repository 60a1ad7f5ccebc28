"""What a ROCm install says of itself: its version (one reader, for the samplers (rocm-smi or not),
the MIGraphX compile-cache key, the fingerprint and the environment record), the MIGraphX runtime
version and the GPU architecture.

Imports nothing of the package, so the lowest layer can use it. What follows the version reader is
the AMD software stack under the MIGraphX EP: ROCm version, MIGraphX runtime version, GPU architecture.

Read from what is installed, never guessed; each function returns None when its sources are absent.
Used by the compile-cache key (:mod:`pytest_aaco.measure.compile_cache`: a program compiled by another
MIGraphX or for another GPU is never loaded) and by the fingerprint (:mod:`pytest_aaco.history.fingerprint`).

Not ``migraphx.__version__``: MIGraphX's own build never defines ``VERSION_INFO``, so its Python module
reports ``"dev"`` (AMDMIGraphX ``src/py/migraphx_py.cpp``), and the module cannot be imported from a plain
virtual environment anyway.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping
from pathlib import Path

#: where a ROCm install records its version (``6.4.1-120`` style; the ``rocm-core`` package writes it);
#: ``$ROCM_PATH/.info/version`` is read first when ROCM_PATH is set
ROCM_VERSION_FILE = "/opt/rocm/.info/version"


def rocm_version(path: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The installed ROCm version as its install records it (``6.4.1-120``: the first line of the version
    file, stripped), or None when no version file can be read or it is empty.

    *path*: read only that file. Without it, ``$ROCM_PATH/.info/version`` (*environ*, default
    ``os.environ``) when ROCM_PATH is set, else :data:`ROCM_VERSION_FILE` (the ``rocm-core`` package
    writes it). The one reader of the ROCm version: ``rocm_major`` and ``rocm_version_text`` of
    :mod:`pytest_aaco.samplers.amd`, this module's stack key and :mod:`pytest_aaco.measure.environment` use
    it."""
    env = os.environ if environ is None else environ
    paths = [path] if path else [
        *([os.path.join(env["ROCM_PATH"], ".info", "version")] if env.get("ROCM_PATH") else []), ROCM_VERSION_FILE]
    for candidate in paths:
        try:
            with open(candidate, encoding="utf-8", errors="replace") as handle:
                text = handle.readline().strip()
        except OSError:
            continue
        if text:
            return text
    return None



#: MIGraphX's CMake package version file under a ROCm prefix (``set(PACKAGE_VERSION "2.12.0")``)
MIGRAPHX_CMAKE_VERSION = "lib/cmake/migraphx/migraphx-config-version.cmake"
#: the dpkg database (Debian/Ubuntu ROCm packages: ``Package: migraphx`` / ``Version: 2.12.0.60400-...``)
DPKG_STATUS = "/var/lib/dpkg/status"
#: the KFD topology: one folder per node, ``properties`` holds ``gfx_target_version`` (0 for CPU nodes)
KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"


def rocm_prefixes(environ: Mapping[str, str] | None = None) -> list[Path]:
    """ROCm install prefixes to look in: ``$ROCM_PATH``, ``$ROCM_HOME``, ``/opt/rocm`` (existing ones, in order)."""
    env = os.environ if environ is None else environ
    found: list[Path] = []
    for text in (env.get("ROCM_PATH"), env.get("ROCM_HOME"), "/opt/rocm"):
        if text and Path(text).is_dir() and Path(text) not in found:
            found.append(Path(text))
    return found


def _cmake_version(prefix: Path) -> str | None:
    try:
        text = (prefix / MIGRAPHX_CMAKE_VERSION).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = re.search(r'set\(\s*PACKAGE_VERSION\s+"([^"]+)"', text)
    return found.group(1) if found else None


def _dpkg_version(status: str, package: str = "migraphx") -> str | None:
    try:
        with open(status, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    for block in text.split("\n\n"):
        if re.search(rf"^Package: {re.escape(package)}$", block, re.M) and re.search(r"^Status: .*installed", block,
                                                                                     re.M):
            found = re.search(r"^Version: (\S+)", block, re.M)
            if found:
                return found.group(1)
    return None


def _library_version(dirs: list[Path]) -> str | None:
    """The file name ``libmigraphx_c.so.<N.x.y>`` that ``libmigraphx_c.so.<N>`` resolves to, in the first of *dirs*."""
    for folder in dirs:
        for link in sorted(glob.glob(str(folder / "libmigraphx_c.so.*"))):
            real = Path(os.path.realpath(link)).name
            if re.fullmatch(r"libmigraphx_c\.so\.\d+(\.\d+)+", real):
                return real
    return None


def migraphx_runtime_version(environ: Mapping[str, str] | None = None, dpkg_status: str = DPKG_STATUS) -> str | None:
    """The installed MIGraphX runtime's version, or None when nothing says.

    Sources, first found wins: MIGraphX's CMake package version file under a ROCm prefix
    (:func:`rocm_prefixes`, ``2.12.0``); the ``migraphx`` package in the dpkg database
    (``2.12.0.60400-...``); the real file name of ``libmigraphx_c.so.N`` in a ROCm ``lib`` folder or
    ``$LD_LIBRARY_PATH`` (``libmigraphx_c.so.3.0.60400``, recorded as found). Never raises.
    """
    env = os.environ if environ is None else environ
    prefixes = rocm_prefixes(env)
    for prefix in prefixes:
        version = _cmake_version(prefix)
        if version:
            return version
    version = _dpkg_version(dpkg_status)
    if version:
        return version
    dirs = [p / "lib" for p in prefixes] + [Path(p) for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    return _library_version(dirs)


def gfx_name(target_version: int) -> str | None:
    """``gfx_target_version`` (KFD, e.g. 90402 or 90010) as the ISA name (``gfx942``, ``gfx90a``); None for 0."""
    if target_version <= 0:
        return None
    major, minor, stepping = target_version // 10000, (target_version // 100) % 100, target_version % 100
    return f"gfx{major}{minor}{stepping:x}"


def gpu_archs(nodes: str = KFD_NODES) -> list[str]:
    """The distinct GPU architectures (``gfx942``) of this machine's KFD topology nodes, sorted; ``[]`` when
    there is no KFD (no AMD GPU driver). Never raises."""
    found: set[str] = set()
    for properties in glob.glob(os.path.join(nodes, "*", "properties")):
        try:
            with open(properties, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        match = re.search(r"^gfx_target_version\s+(\d+)", text, re.M)
        name = gfx_name(int(match.group(1))) if match else None
        if name:
            found.add(name)
    return sorted(found)


#: this process's memory map: the shared libraries it has loaded, by their real paths
PROC_MAPS = "/proc/self/maps"
#: the ROCm libraries whose folder names the ROCm install an EP really runs on (HIP runtime, MIGraphX)
ROCM_LIBRARIES = re.compile(r"/(libamdhip64|libmigraphx_c|libmigraphx)\.so[.\d]*$")


def loaded_rocm(maps: str = PROC_MAPS) -> tuple[Path, str | None] | None:
    """(ROCm prefix, MIGraphX library file name or None) of the ROCm libraries this process has loaded, from
    *maps* (``/proc/self/maps``): the folder above the ``lib`` folder of ``libamdhip64.so`` / ``libmigraphx_c.so``
    (``/opt/rocm-7.0.1``: the PyPI onnxruntime-migraphx wheels load the ROCm their provider library's RUNPATH names,
    which need not be ``/opt/rocm``). None when none is loaded (before the first MIGraphX session, no GPU stack, not
    Linux). Never raises."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    prefix: Path | None = None
    migraphx: str | None = None
    for line in lines:
        path = line.split(maxsplit=5)[5] if len(line.split(maxsplit=5)) == 6 else ""
        found = ROCM_LIBRARIES.search(path)
        if not found:
            continue
        library = Path(path)
        if prefix is None and library.parent.name in ("lib", "lib64"):
            prefix = library.parent.parent
        if found.group(1) == "libmigraphx_c" and re.fullmatch(r"libmigraphx_c\.so\.\d+(\.\d+)+", library.name):
            migraphx = library.name
    return (prefix, migraphx) if prefix is not None else None


def stack_key(environ: Mapping[str, str] | None = None, maps: str = PROC_MAPS) -> dict[str, str]:
    """``{"rocm", "migraphx", "gfx"}`` for the compile-cache key; each ``unknown`` when nothing says
    (a key with ``unknown`` still tells a machine that knows apart from one that does not). ``gfx``
    joins every architecture present (``gfx90a+gfx942``), since which one a device id maps to depends
    on the visibility masks.

    The ROCm the process has loaded (:func:`loaded_rocm`) wins over ``$ROCM_PATH`` and ``/opt/rocm``: its
    ``.info/version``, else the prefix's own name (``rocm-7.0.1``); the MIGraphX version likewise from the loaded
    ``libmigraphx_c.so.<N.x.y>`` first."""
    archs = gpu_archs()
    loaded = loaded_rocm(maps)
    rocm = migraphx = None
    if loaded is not None:
        prefix, library = loaded
        rocm = rocm_version(str(prefix / ".info" / "version")) or (
            prefix.name.removeprefix("rocm-") if re.fullmatch(r"rocm-\d+(\.\d+)+", prefix.name) else None)
        migraphx = _cmake_version(prefix) or library
    return {"rocm": rocm or rocm_version(environ=environ) or "unknown",
            "migraphx": migraphx or migraphx_runtime_version(environ) or "unknown",
            "gfx": "+".join(archs) or "unknown"}
