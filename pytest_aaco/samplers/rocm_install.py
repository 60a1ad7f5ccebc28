"""Where a ROCm install says which version it is: one reader, for the samplers (rocm-smi or not),
the MIGraphX compile-cache key and the environment record.

Imports nothing of the package, so the lowest layer can use it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: where a ROCm install records its version (``6.4.1-120`` style; the ``rocm-core`` package writes it);
#: ``$ROCM_PATH/.info/version`` is read first when ROCM_PATH is set
ROCM_VERSION_FILE = "/opt/rocm/.info/version"


def rocm_version(path: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The installed ROCm version as its install records it (``6.4.1-120``: the first line of the version
    file, stripped), or None when no version file can be read or it is empty.

    *path*: read only that file. Without it, ``$ROCM_PATH/.info/version`` (*environ*, default
    ``os.environ``) when ROCM_PATH is set, else :data:`ROCM_VERSION_FILE` (the ``rocm-core`` package
    writes it). The one reader of the ROCm version: ``rocm_major`` and ``rocm_version_text`` of
    :mod:`pytest_aaco.samplers.amd`, :mod:`pytest_aaco.measure.rocm_stack` and
    :mod:`pytest_aaco.measure.environment` use it."""
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
