"""A stop that keeps the model: SIGTERM (the host's cancel, Ctrl-C at ``mosaic run``) or SIGINT
asks a bundled algorithm to end at its next step boundary, save its final model and exit as
killed by that signal, so the host still sees a cancel. A second signal ends the process at
once; the host's SIGKILL after its grace period (``--grace-period``) bounds the whole stop.

    stop = StopOnSignal()
    for global_step in range(...):
        ...
        if stop.requested:
            break
    if args.save_model:
        save(...)                      # the model as it is now
    stop.exit()                        # re-raised: the process ends as killed by the signal
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any


class StopOnSignal:
    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)):
        self.signum: int | None = None
        if threading.current_thread() is threading.main_thread():
            for signum in signals:
                signal.signal(signum, self._received)

    def _received(self, signum: int, _frame: Any) -> None:
        if self.signum is not None:  # asked twice: no more waiting
            self._reraise(signum)
        self.signum = signum

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def exit(self) -> None:
        """After a requested stop, end the process as killed by the signal (a no-op otherwise)."""
        if self.signum is not None:
            print(f"stopped by {signal.Signals(self.signum).name} after saving what the run keeps", file=sys.stderr)
            sys.stderr.flush()
            sys.stdout.flush()
            self._reraise(self.signum)

    @staticmethod
    def _reraise(signum: int) -> None:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
