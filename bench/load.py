"""Load for the benches that compare under it: busy Python loops, one per core asked for.

Each loop, and each side a bench compares, runs in a session of its own, as separate jobs would:
with the kernel's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``) CPU time is
shared between sessions first, so a side in the bench's own session, beside loops there too,
got a smaller share than one that started its own session (as ``mosaic run`` starts its
training process)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` busy Python loops for the length of the block, stopped by pid (none for 0)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while 1: pass"], start_new_session=True) for _ in range(count)]
    try:
        if loops:
            time.sleep(3)  # let the load average feel them
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
