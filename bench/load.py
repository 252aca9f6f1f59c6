"""Load for the benches that compare under it: busy Python loops, one per core asked for."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from typing import Iterator


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` busy Python loops for the length of the block, stopped by pid (none for 0)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(count)]
    try:
        if loops:
            time.sleep(3)  # let the load average feel them
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
