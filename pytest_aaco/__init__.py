"""pytest-aaco: performance-regression gate for ONNX Runtime models inside pytest.

AACO is the AMD AI Compute Observatory. Importing this package is cheap: onnxruntime,
scipy and GPU libraries are imported only when a benchmark needs them.
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``pytest_aaco.__version__``: the installed package's version, set once in pyproject.toml; read
    on first use, so that loading the plugin does not search the installed distributions."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-aaco")
    except PackageNotFoundError:  # a source tree on sys.path that was never installed
        return "0+unknown"
