"""Lines pytest-aaco writes to the terminal while the session runs.

:func:`announce` says which item is being measured, so a long run (a slow model, a hung GPU)
shows where it is:

* ``-q`` (verbosity < 0): nothing.
* ``-v``: appended to the item's own line, before pytest writes ``PASSED``, cut to what fits
  on the line with room left for `` PASSED [100%]`` (:data:`OUTCOME_COLUMNS`), so the line
  never wraps::

      test_models.py::test_latency[resnet50-cpu] aaco: measuring resnet50[cpu] (warmup 10, 10 rounds)... PASSED

* default verbosity on a terminal: a transient status after the progress dots, erased before
  pytest writes the item's letter, so the dots line looks as usual once the item is done.
* default verbosity into a file or CI log (not a tty): nothing, so the log keeps pytest's own
  layout (one file path, its dots on one line). ``-v`` names each item before it runs, which
  is what tells where a job hung.

Writes happen with pytest's output capture suspended (the benchmark runs inside the test
body, where stdout is captured), as pytest's own live logging does.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from pytest_aaco.measure.inference import MeasureSettings
from pytest_aaco.reports.markup import terminal_line

if TYPE_CHECKING:
    import pytest

PROGRESS_PLUGIN_NAME = "aaco-progress"
#: a transient status is only shown when at least this many columns are free on the line
MIN_FREE_COLUMNS = 24
#: columns kept free after a ``-v`` status for pytest's `` PASSED [100%]`` (the longest outcome
#: word pytest writes there is ``SKIPPED``/``XFAILED``: 1 + 7 + 1 + 6, and one to spare)
OUTCOME_COLUMNS = 16


def describe_settings(settings: MeasureSettings) -> str:
    """``warmup 10, 10 rounds`` (``x 50 iterations`` added when fixed) from a MeasureSettings-like object."""
    parts = []
    warmup = getattr(settings, "warmup", None)
    if warmup is not None:
        parts.append(f"warmup {warmup}")
    rounds = getattr(settings, "rounds", None)
    if rounds is not None:
        text = f"{rounds} rounds"
        iterations = getattr(settings, "iterations", None)
        if iterations:
            text += f" x {iterations} iterations"
        parts.append(text)
    return ", ".join(parts)


def status_text(item_label: str, settings: MeasureSettings) -> str:
    """``aaco: measuring resnet50[cpu] (warmup 10, 10 rounds)...``."""
    detail = describe_settings(settings)
    return f"aaco: measuring {item_label}" + (f" ({detail})" if detail else "") + "..."


@contextlib.contextmanager
def uncaptured(config: pytest.Config) -> Iterator[None]:
    """Suspend pytest's global and fixture capture while writing (no-op when capture is off)."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    if capman is None:
        yield
        return
    with capman.global_and_fixture_disabled():
        yield


class _TransientStatus:
    """Plugin that erases the status written after the progress dots before pytest writes the
    item's letter (``tryfirst`` on ``pytest_runtest_logreport``).

    The status goes straight to ``sys.stdout`` (pytest's terminal file while capture is
    suspended), not through pytest's TerminalWriter, so the writer's idea of the current line
    width, which places the ``[ 42%]`` progress, stays right once the status is erased.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.pending = 0

    def show(self, text: str) -> None:
        """Write *text* after the dots when it fits on the line (cut to the free columns)."""
        self.erase()
        writer = self.config.get_terminal_writer()
        free = writer.fullwidth - writer.width_of_current_line - 2
        if free < MIN_FREE_COLUMNS:
            return
        text = " " + (text if len(text) < free else text[: free - 4] + "...")
        writer.flush()
        sys.stdout.write(text)
        sys.stdout.flush()
        self.pending = len(text)

    def erase(self) -> None:
        """Blank the pending status and move the cursor back to where it started."""
        if not self.pending:
            return
        n, self.pending = self.pending, 0
        with uncaptured(self.config):
            sys.stdout.write("\b" * n + " " * n + "\b" * n)
            sys.stdout.flush()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.erase()

    def pytest_sessionfinish(self) -> None:
        self.erase()


def announce(config: pytest.Config, item_label: str, settings: MeasureSettings) -> None:
    """Tell the user that *item_label* (``resnet50[cpu]``) is about to be measured.

    *settings* is the item's ``MeasureSettings`` (``warmup``, ``rounds``, ``iterations``; None
    iterations means adaptive). Does nothing without a terminal reporter (``-p no:terminal``,
    xdist workers) or with ``-q``. Never raises.
    """
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or tr.verbosity < 0:
        return
    item_label = terminal_line(item_label)  # a registry key may hold control characters
    text = status_text(item_label, settings)
    try:
        with uncaptured(config):
            if tr.verbosity > 0:
                writer = config.get_terminal_writer()
                fitted = fit_verbose(text, item_label, writer.fullwidth - writer.width_of_current_line)
                if fitted:
                    tr.write(fitted + " ", flush=True)
            elif getattr(tr, "isatty", False) and sys.stdout.isatty():
                status = config.pluginmanager.get_plugin(PROGRESS_PLUGIN_NAME)
                if status is None:
                    status = _TransientStatus(config)
                    config.pluginmanager.register(status, PROGRESS_PLUGIN_NAME)
                status.show(text)
    except (OSError, ValueError):  # a closed or broken terminal must not fail the benchmark
        pass


def fit_verbose(text: str, item_label: str, free: int) -> str:
    """The longest of *text*, ``aaco: measuring LABEL...`` and ``aaco...`` that leaves
    :data:`OUTCOME_COLUMNS` of the *free* columns (and one for the space after it) for pytest's
    outcome and progress; '' when none does."""
    room = free - OUTCOME_COLUMNS - 1
    for candidate in (text, f"aaco: measuring {item_label}...", "aaco..."):
        if len(candidate) <= room:
            return candidate
    return ""


def write_line(config: pytest.Config, text: str, **markup: bool) -> None:
    """Write one line on pytest's terminal (stdout), or print it when there is no terminal reporter.

    Used by the session-end reports (GitHub workflow commands, write errors). Never raises. The
    line goes through :func:`pytest_aaco.reports.markup.terminal_line` (control characters escaped,
    no workflow command), unless *workflow_command* is true: a command built, escaped, by
    :func:`pytest_aaco.reports.github.command`.
    """
    if not markup.pop("workflow_command", False):
        text = terminal_line(text)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    try:
        if tr is not None:
            if config.get_terminal_writer().width_of_current_line:  # after the dots and "[100%]"
                tr.write("\n")
            tr.write_line(text, **markup)
        else:
            print(text, flush=True)
    except (OSError, ValueError):
        pass
