"""Warning classes of pytest-aaco.

Every warning the plugin emits is an :class:`AacoWarning`, a subclass of
``pytest.PytestWarning``, so a project can silence or escalate all of them at once
(``filterwarnings = ["error::pytest_aaco.warnings.AacoWarning"]``) or one kind at a time.
The message of each warning names the cause and the fix.
"""

from __future__ import annotations

import pytest


class AacoWarning(pytest.PytestWarning):
    """Base class of all pytest-aaco warnings.

    The message is one terminal line (:func:`pytest_aaco.reports.markup.terminal_line`): a model
    name or path quoted in it cannot break the line, drive the terminal or form a GitHub Actions
    workflow command in pytest's warnings summary."""

    def __init__(self, *args: object) -> None:
        from pytest_aaco.reports.markup import terminal_line

        super().__init__(*(terminal_line(a) if isinstance(a, str) else a for a in args))


class AacoProviderWarning(AacoWarning):
    """An execution provider was requested but is not available, or ORT placed nodes elsewhere."""


class AacoBaselineWarning(AacoWarning):
    """A baseline is missing, unreadable, or recorded on a different fingerprint."""


class AacoClockWarning(AacoWarning):
    """CPU or GPU clock settings make timings unstable (governor not ``performance``, GPU perf level ``auto``)."""


class AacoReferenceWarning(AacoWarning):
    """The reference workload could not be built or run on an EP: its items are judged on raw figures."""


class AacoLockWarning(AacoWarning):
    """The device lock could not be taken; the benchmark ran without it (another may have shared the device)."""


class AacoReportWarning(AacoWarning):
    """A report or the session bundle could not be written; the benchmarks and the other reports went on."""


class AacoCacheWarning(AacoWarning):
    """The model cache folder cannot be written; generated models went to a temporary folder instead."""


class AacoDeviceTimeWarning(AacoWarning):
    """Device time (GPU kernel time) could not be measured for an item that asked for it; the item
    was gated on wall time only."""


class AacoFlavorWarning(AacoWarning):
    """Several ONNX Runtime builds (``onnxruntime``, ``onnxruntime-gpu``, ...) are installed over each other."""
