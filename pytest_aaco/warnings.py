"""Warning classes of pytest-aaco.

Every warning the plugin emits is an :class:`AacoWarning`, a subclass of
``pytest.PytestWarning``, so a project can silence or escalate all of them at once
(``filterwarnings = ["error::pytest_aaco.warnings.AacoWarning"]``) or one kind at a time.
The message of each warning names the cause and the fix, and is one terminal line
(:func:`terminal_line`, the rule every terminal writer uses through :mod:`pytest_aaco.reports.markup`).
"""

from __future__ import annotations

import re

import pytest

#: a GitHub Actions workflow command: ``::`` after leading white space (runner ``TryParseV2``)
_WORKFLOW_START = re.compile(r"^(\s*):(?=:)")


def char_escape(ch: str) -> str:
    r"""One character as a visible backslash escape: ``\n``, ``\t``, ``\x1b``, ``\u202e``, ``\U000e0001``."""
    code = ord(ch)
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch)
    if named:
        return named
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _visible(text: str, keep: str = "") -> str:
    """*text* with every character that is not printable (``str.isprintable``; a space is) and not
    in *keep* as :func:`char_escape`."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " or c in keep else char_escape(c) for c in text)


def terminal_text(value: object) -> str:
    r"""*value* for one line of a terminal: non-printable characters (line breaks, ESC, the other C0
    and C1 controls, DEL, U+2028/U+2029, format characters such as bidi overrides) as backslash
    escapes (``\n``, ``\x1b``, ``\u202e``), so it stays on one line and cannot drive the terminal."""
    return _visible(str(value))


def terminal_line(value: object) -> str:
    r"""One whole line for stdout or stderr: :func:`terminal_text`, and a GitHub Actions workflow
    command it would form broken up (a leading ``::`` becomes ``\x3a:``; ``##[`` anywhere becomes
    ``#\x23[``), so the runner never executes a line the report prints."""
    text = _WORKFLOW_START.sub(r"\1\\x3a", terminal_text(value))
    return text.replace("##[", "#\\x23[")


class AacoWarning(pytest.PytestWarning):
    """Base class of all pytest-aaco warnings.

    The message is one terminal line (:func:`terminal_line`): a model
    name or path quoted in it cannot break the line, drive the terminal or form a GitHub Actions
    workflow command in pytest's warnings summary."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(terminal_line(a) if isinstance(a, str) else a for a in args))


def escalated(warning: Warning) -> str:
    """The one line an item fails with when one of pytest-aaco's warnings was raised as an error inside
    its own work for the item (``-W error``, ``filterwarnings = error``): the warning's class and message,
    and the ``-W`` filter that keeps that class a warning. Not a crash of the plugin: the cause is named."""
    kind = type(warning)
    return (f"{kind.__name__}: {warning} (a warning, raised as an error by -W error / filterwarnings = error;"
            f" -W default::{kind.__module__}.{kind.__name__} keeps it a warning)")


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
