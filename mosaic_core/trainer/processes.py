"""Stopping a run's processes for good (Linux ``/proc``).

A run is ``mosaic run`` (leader of its own process group, started by the daemon) plus the
training process it supervises, which has a process group of its own, plus whatever that one
starts (vector-env workers). Stopping the daemon's group with SIGTERM lets ``mosaic run``
stop its child cleanly; if it must be killed, :func:`sweep_cwd` finds what is left by the
working directory every process of the run shares: the run directory.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from mosaic_core.procs import group_alive, group_members, pids, stop_group, wait_group_gone

__all__ = ["group_alive", "stop_group", "sweep_cwd", "group_runs", "wait_group_gone"]


def group_runs(pgid: int, marker: str) -> bool:
    """Whether a live member of process group ``pgid`` has ``marker`` on its command line
    (guards against a reused pid after a daemon restart)."""
    for pid in group_members(pgid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    return True
        except OSError:
            continue
    return False


def sweep_cwd(directory: str | Path) -> list[int]:
    """SIGKILL every process whose working directory is ``directory`` or below; returns their pids."""
    if not directory or not os.path.isabs(directory) or os.path.realpath(directory) == "/":
        return []  # never sweep a relative, empty or root path (that would be the daemon's own)
    base = os.path.realpath(directory)
    killed = []
    for pid in pids():
        if pid == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == base or cwd.startswith(base + os.sep):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                continue
    return killed
