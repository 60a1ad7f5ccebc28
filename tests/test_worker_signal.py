"""A side worker (``--aaco-compare-python``) ended by a signal is reported as killed by that signal, never
blamed on the interpreter's version (it used to say "is it a Python 3.8 or newer?")."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pytest_aaco.sidebyside.worker_client import WorkerEnvironmentError, WorkerError, WorkerKilled, WorkerSide

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the side worker is POSIX only")


def _interpreter(tmp_path: Path, body: str) -> Path:
    """An executable standing in for the other environment's python."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(("sig", "why"), [("SIGKILL", "stopped from outside pytest-aaco: the out-of-memory killer"),
                                          ("SIGTERM", "stopped from outside pytest-aaco"),
                                          ("SIGSEGV", "a crash inside the interpreter or a native library")])
def test_a_worker_killed_by_a_signal_at_start_is_reported_as_such(tmp_path, sig, why):
    python = _interpreter(tmp_path, f"kill -{sig[3:]} $$")
    side = WorkerSide(python)
    with pytest.raises(WorkerKilled) as caught:
        side.start()
    message = str(caught.value)
    number = int(getattr(signal, sig))
    assert f"the worker was killed by {sig} during hello (signal {number}: {why}" in message, message
    assert "Python 3.8" not in message and not isinstance(caught.value, WorkerEnvironmentError)
    assert caught.value.signum == number
    assert not side.running


def test_a_worker_that_exits_at_start_is_still_an_interpreter_problem(tmp_path):
    side = WorkerSide(_interpreter(tmp_path, "exit 3"))
    with pytest.raises(WorkerEnvironmentError, match=r"is it a Python 3.8 or newer\?.*exited with status 3"):
        side.start()
    assert isinstance(WorkerEnvironmentError("x"), WorkerError)
