"""The host's stop signals (SIGINT, SIGTERM, SIGHUP, and SIGUSR1: what a scheduler sends before a
time limit or a preemption) while ``mosaic run`` starts a run.

The contract: a run signalled before its run directory exists leaves nothing (no directory, no
event); the host says so in one line on stderr and exits 128 + the signal (130 for SIGINT, 143
for SIGTERM). From the moment its run directory is made, a signal cancels the run, which always
ends with a terminal event: a signal that comes before the launcher's own handlers are in place
(:mod:`mosaic_core.supervisor`, :mod:`mosaic_core.caller`) is held for them and handed over
when they take the signals (:func:`handed_to`, the one way a launcher takes them).

A signal in the interpreter's first moments, before ``mosaic`` enters :func:`guarded`, ends
the process as Python's defaults do, with nothing written either; so does one after the command
is over (the run's end is on record by then). A hangup ignored when the host started
(``nohup``) stays ignored.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)
NEAR_END = "received SIGUSR1 (the scheduler's time limit or a preemption is near)"


def reason(signum: int) -> str:
    """Why a run stopped, for ``run_cancelled``: ``received SIGTERM``, or :data:`NEAR_END`."""
    return NEAR_END if signum == signal.SIGUSR1 else f"received {signal.Signals(signum).name}"


_held: list[int] = []


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
    _install(_stop_now)
    try:
        yield
    finally:
        _install(_hold)  # a signal now must not raise on the way out
        _restore(previous)
        _held.clear()


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
    """The run directory is about to be made: from now on a stop signal is held for the launcher."""
    _install(_hold)


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
