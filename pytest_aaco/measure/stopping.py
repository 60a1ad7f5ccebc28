"""Stopping a run: SIGTERM, SIGHUP and Ctrl-C while pytest-aaco measures or saves.

CI systems cancel a job with SIGTERM (GitLab, Jenkins, ``docker stop``), a closed terminal sends SIGHUP, and
pytest cleans up only on SIGINT (Ctrl-C). While an :class:`InterruptGuard` is held, SIGTERM and SIGHUP therefore
stop pytest as Ctrl-C does (:class:`Terminated`, a ``KeyboardInterrupt``): the session's clean-up runs, the
results table is printed, the session bundle keeps every item finished so far.

A Python signal handler runs only when the main thread is back in the interpreter. ``InferenceSession.run``
releases the GIL and stays in C++ until the run ends, hours for a slow model, so the handler alone would
wait that long and a second signal would meet the same handler. While held, the guard therefore also points
Python's signal wakeup file descriptor (:func:`signal.set_wakeup_fd`) at a watcher thread
(:class:`SignalWatcher`), which the C-level handler wakes at once:

* the first signal stops every run in flight (:func:`pytest_aaco.measure.timedloop.stop_all`: ORT's
  ``RunOptions.terminate``, checked before each kernel), so the main thread comes back and the handler
  raises;
* a second signal before the handler could run (the run is inside one kernel that does not yield) ends the
  process within about a second: the watcher writes one line to stderr, gives the session's last words
  (:func:`add_last_words`: the results table so far) at most :data:`LAST_WORDS_S`, and exits with status
  128 + the signal number, as a shell reports a process killed by it;
* once the handler has run, the three signals are back at their default action, so a second one during the
  clean-up ends the process at once.

Outside the guard the process keeps the handlers it had, so a suite that never measures is not touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any

from pytest_aaco.measure.timedloop import stop_all

#: signals that CI systems stop a job with (GitLab, Jenkins and ``docker stop`` send SIGTERM; a
#: closed terminal, SIGHUP); pytest cleans up only on SIGINT, so these are turned into one
TERMINATING_SIGNALS = ("SIGTERM", "SIGHUP")
#: seconds the last words (:func:`add_last_words`) may take before a forced exit goes ahead anyway
LAST_WORDS_S = 1.0


class Terminated(KeyboardInterrupt):
    """A terminating signal arrived: pytest stops as on Ctrl-C, so the session's clean-up runs
    (the baseline side's temporary folders are removed; baselines are written atomically)."""


def _interrupt(signum: int, frame: object) -> None:
    """The handler :class:`InterruptGuard` installs. The first signal interrupts as Ctrl-C does; every
    signal it handles goes back to the default action first, so a second SIGTERM, SIGHUP or Ctrl-C
    while the clean-up runs ends the process at once."""
    for name in (*TERMINATING_SIGNALS, "SIGINT"):
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is _interrupt:
            signal.signal(number, signal.SIG_DFL)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(f"stopped by {signal.Signals(signum).name}")


_LAST_WORDS: list[Callable[[], None]] = []


def add_last_words(say: Callable[[], None]) -> Callable[[], None]:
    """Register *say*, called (from the watcher thread, at most :data:`LAST_WORDS_S` for all) just before a
    second signal ends the process; returns a function that unregisters it."""
    _LAST_WORDS.append(say)

    def remove() -> None:
        with contextlib.suppress(ValueError):
            _LAST_WORDS.remove(say)

    return remove


def _last_words() -> None:
    for say in list(_LAST_WORDS):
        with contextlib.suppress(Exception):
            say()


def force_exit(signum: int) -> None:
    """End the process now with status 128 + *signum*, after the last words (at most :data:`LAST_WORDS_S`;
    they put pytest's output capture aside) and one line on stderr. Called by the watcher on a second signal
    that the handler could not take."""
    talker = threading.Thread(target=_last_words, name="aaco-last-words", daemon=True)
    talker.start()
    talker.join(LAST_WORDS_S)
    name = signal.Signals(signum).name
    with contextlib.suppress(OSError):
        os.write(2, (f"\npytest-aaco: a second {name} while ONNX Runtime was still inside a run: ending the"
                     f" process now (exit status {128 + signum}); the items finished so far are in the session"
                     " bundle\n").encode())
    os._exit(128 + signum)


class SignalWatcher:
    """A thread woken by Python's C-level signal handler through :func:`signal.set_wakeup_fd`, for the
    signals in *numbers*: the first stops the runs in flight, a second ends the process (see the module
    docstring). Bytes are passed on to a wakeup descriptor set before (asyncio's, say). Start and stop it
    in the main thread."""

    def __init__(self, numbers: set[int], exit_process: Callable[[int], None] = force_exit,
                 on_first: Callable[[int], None] | None = None) -> None:
        self.numbers = numbers
        self.exit_process = exit_process
        self.on_first = on_first
        self.count = 0
        self._old_fd = -1
        self._pair: tuple[socket.socket, socket.socket] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Set the wakeup descriptor and start the thread; False where that is not possible here."""
        try:
            reader, writer = socket.socketpair()
            writer.setblocking(False)
            self._old_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except (OSError, ValueError):
            return False
        self._pair = (reader, writer)
        self._thread = threading.Thread(target=self._run, args=(reader,), name="aaco-signal-watcher", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Put the previous wakeup descriptor back and end the thread."""
        if self._pair is None:
            return
        reader, writer = self._pair
        with contextlib.suppress(OSError, ValueError):
            signal.set_wakeup_fd(self._old_fd)
        with contextlib.suppress(OSError):
            writer.setblocking(True)
            writer.send(b"\0")  # no signal has number 0: the end
        if self._thread is not None:
            self._thread.join(5)
        reader.close()
        writer.close()
        self._pair = None

    def _run(self, reader: socket.socket) -> None:
        while True:
            try:
                data = reader.recv(64)
            except OSError:
                return
            for number in data:
                if number == 0:
                    return
                if self._old_fd >= 0:
                    with contextlib.suppress(OSError):
                        os.write(self._old_fd, bytes([number]))
                if number in self.numbers:
                    self.signalled(number)
            if not data:
                return

    def signalled(self, number: int) -> None:
        """One of the watched signals arrived (its Python handler may not have run yet)."""
        self.count += 1
        if self.count == 1:
            if self.on_first is not None:
                self.on_first(number)
            stop_all(f"stopped by {signal.Signals(number).name}")
        else:
            self.exit_process(number)


class InterruptGuard:
    """While held (``with guard:``, or :meth:`hold` / :meth:`release`; re-entrant): SIGTERM and SIGHUP
    stop pytest as Ctrl-C does, the first signal of the three also stops the ONNX Runtime run in flight,
    and a second one ends the process, even inside a run (:class:`SignalWatcher`).

    Held only while something must be cleaned up if the run is stopped: a measurement, a baseline
    save, a side-by-side session's temporary tree. Outside, the process keeps the handlers it had,
    so a suite that never measures is not touched (a forked ``multiprocessing`` child stopped with
    ``terminate()`` still exits with -SIGTERM). Only handlers at their default (SIG_DFL, and
    Python's own SIGINT handler) are replaced, only in the main thread; :meth:`release` puts them back.
    """

    def __init__(self) -> None:
        self.depth = 0
        #: signal number -> the handler replaced, while held
        self.replaced: dict[int, Any] = {}
        self.watcher: SignalWatcher | None = None
        #: the first stopping signal the watcher saw since the guard was taken (its number), None: none
        self.signalled: int | None = None

    def _seen(self, number: int) -> None:
        self.signalled = number

    def interrupt_if_signalled(self) -> None:
        """Raise the interrupt of a stopping signal the watcher saw that has not reached pytest:
        ``KeyboardInterrupt`` for SIGINT, :class:`Terminated` for SIGTERM and SIGHUP; then forget it. Called
        where a failed run would become an item's error and when an item's test body has ended. The signal's
        Python handler raises at the next Python call of the main thread, wherever that is; where CPython
        cannot pass an exception on (a finalizer, a weak-reference callback) it is dropped. A side-by-side run
        under 4 busy processes once ended so: its run, stopped by SIGINT, failed with
        :data:`~pytest_aaco.measure.timedloop.TERMINATED_TEXT`, the item was an error row, and pytest exited
        1 instead of 2. Does nothing without such a signal."""
        number, self.signalled = self.signalled, None
        if number is None:
            return
        if number == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(f"stopped by {signal.Signals(number).name}")

    def hold(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self.depth += 1
        if self.depth > 1:
            return
        for name in TERMINATING_SIGNALS:
            number = getattr(signal, name, None)
            if number is not None and signal.getsignal(number) == signal.SIG_DFL:
                self.replaced[number] = signal.signal(number, _interrupt)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.replaced[signal.SIGINT] = signal.signal(signal.SIGINT, _interrupt)
        if self.replaced:
            self.signalled = None
            watcher = SignalWatcher(set(self.replaced), on_first=self._seen)
            self.watcher = watcher if watcher.start() else None

    def release(self) -> None:
        if self.depth == 0 or threading.current_thread() is not threading.main_thread():
            return
        self.depth -= 1
        if self.depth:
            return
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        for number, handler in self.replaced.items():
            signal.signal(number, handler)
        self.replaced.clear()

    def __enter__(self) -> InterruptGuard:
        self.hold()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
