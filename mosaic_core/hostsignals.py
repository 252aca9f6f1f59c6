"""The host's stop signals (SIGINT, SIGTERM, SIGHUP, and SIGUSR1: what a scheduler sends before a
time limit or a preemption) while ``mosaic run`` starts a run.

The contract: a run signalled before its run directory exists leaves nothing (no directory, no
event); the host says so in one line on stderr and exits 128 + the signal (130 for SIGINT, 143
for SIGTERM). From the moment its run directory is made, a signal cancels the run, which always
ends with a terminal event: a signal that comes before the launcher's own handlers are in place
(:mod:`mosaic_core.supervisor`, :mod:`mosaic_core.caller`) is held for them and handed over
when they take the signals (:func:`handed_to`, the one way a launcher takes them).

The handler's exception can be lost: a signal is handled wherever the main thread is, and Python
drops an exception raised inside a weakref callback or a ``__del__`` (the import system's module
locks have one), handing it to ``sys.unraisablehook``. While guarded, that hook keeps a dropped stop
(printing nothing), and :func:`hold`, or the end of :func:`guarded`, raises it again.

A signal in the interpreter's first moments, before ``mosaic`` enters :func:`guarded`, ends
the process as Python's defaults do, with nothing written either; so does one after the command
is over (the run's end is on record by then). A hangup ignored when the host started
(``nohup``) stays ignored.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)
NEAR_END = "received SIGUSR1 (the scheduler's time limit or a preemption is near)"


def reason(signum: int) -> str:
    """Why a run stopped, for ``run_cancelled``: ``received SIGTERM``, or :data:`NEAR_END`."""
    return NEAR_END if signum == signal.SIGUSR1 else f"received {signal.Signals(signum).name}"


_held: list[int] = []
_dropped: list[int] = []  # stops whose exception Python dropped while guarded


class StoppedBeforeStart(BaseException):
    """A stop signal came before the run directory existed (a BaseException: no ``except
    Exception`` on the way swallows it)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    def line(self, prog: str) -> str:
        return f"{prog}: stopped by {signal.Signals(self.signum).name} before the run started; nothing was written"


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Around ``mosaic run``: until :func:`hold`, a stop signal ends the command at once
    (StoppedBeforeStart); at the end the handlers found are back, and nothing is held."""
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} if _main_thread() else {}
    hook = sys.unraisablehook
    if _main_thread():  # where signal handlers run
        sys.unraisablehook = _keeping_dropped_stops(hook)
    _install(_stop_now)
    try:
        yield
        _raise_dropped_stop()  # a command that never reached hold (a dry run, an evaluation)
    finally:
        _install(_hold)  # a signal now must not raise on the way out
        _restore(previous)
        sys.unraisablehook = hook
        _held.clear()
        _dropped.clear()


@contextlib.contextmanager
def handed_to(on_stop: Callable[[int], None], signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """While a launcher runs a run: each stop signal calls ``on_stop(signum)``, first the one
    held since :func:`hold` (if any); after, the handlers found are back. ``on_stop`` runs in a
    signal handler: it only records the stop (or writes a pipe). Off the main thread signals
    stay where they are (the caller's thread, a daemon's worker, owns none)."""
    previous = {sig: signal.getsignal(sig) for sig in signals} if _main_thread() else {}
    _install(lambda signum, _frame: on_stop(signum), signals)
    held = take_held()  # one that came after the run directory was made
    try:
        if held is not None:
            on_stop(held)
        yield
    finally:
        _restore(previous)


def hold() -> None:
    """The run directory is about to be made: from now on a stop signal is held for the launcher.
    A stop before it whose exception was dropped ends the command here, before the directory."""
    _install(_hold)
    _raise_dropped_stop()


def _raise_dropped_stop() -> None:
    if _dropped:
        raise StoppedBeforeStart(_dropped[0])


def _keeping_dropped_stops(hook: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def keep(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, StoppedBeforeStart):
            _dropped.append(unraisable.exc_value.signum)
        else:
            hook(unraisable)

    return keep


def take_held() -> int | None:
    """The first stop signal held since :func:`hold` (each is taken once), or None."""
    return _held.pop(0) if _held else None


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _install(handler: Any, signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> None:
    if not _main_thread():
        return
    for sig in signals:
        if sig != signal.SIGHUP or signal.getsignal(sig) is not signal.SIG_IGN:  # nohup: stays ignored
            signal.signal(sig, handler)


def _restore(previous: dict[signal.Signals, Any]) -> None:
    for sig, handler in previous.items():
        if handler is not None:
            signal.signal(sig, handler)


def _stop_now(signum: int, _frame: Any) -> None:
    raise StoppedBeforeStart(signum)


def _hold(signum: int, _frame: Any) -> None:
    _held.append(signum)
