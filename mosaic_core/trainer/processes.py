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
import subprocess
import time
from pathlib import Path

from mosaic_core.supervisor import group_alive

__all__ = ["group_alive", "stop_group", "sweep_cwd", "group_runs", "wait_group_gone"]


def _proc_ids() -> list[int]:
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def _members(pgid: int) -> list[int]:
    found = []
    for pid in _proc_ids():
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                rest = fh.read().rsplit(b")", 1)[1].split()
            if int(rest[2]) == pgid and rest[0] != b"Z":
                found.append(pid)
        except (OSError, IndexError, ValueError):
            continue
    return found


def group_runs(pgid: int, marker: str) -> bool:
    """Whether a live member of process group ``pgid`` has ``marker`` on its command line
    (guards against a reused pid after a daemon restart)."""
    for pid in _members(pgid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    return True
        except OSError:
            continue
    return False


def wait_group_gone(pgid: int, timeout: float, proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None:
            proc.poll()  # reap the leader so it does not linger as a zombie
        if not group_alive(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def stop_group(pgid: int, grace: float, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM the group, SIGKILL whatever is left after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        if wait_group_gone(pgid, wait, proc):
            return


def sweep_cwd(directory: str | Path) -> list[int]:
    """SIGKILL every process whose working directory is ``directory`` or below; returns their pids."""
    if not directory or not os.path.isabs(directory) or os.path.realpath(directory) == "/":
        return []  # never sweep a relative, empty or root path (that would be the daemon's own)
    base = os.path.realpath(directory)
    killed = []
    for pid in _proc_ids():
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
