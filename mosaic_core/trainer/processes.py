"""The processes a daemon started, and only those (Linux ``/proc``).

A run is ``mosaic run`` (leader of its own process group, started by the daemon) plus the
training process it supervises, which leads a process group of its own, plus whatever that
one starts (a vector env's env processes). The daemon stops a run's ``mosaic run`` group (which stops
its child cleanly on SIGTERM), then what it has seen descend from it: :class:`Tracked` holds
those processes by pid *and* start time, so a reused pid is never hit, and a process that
merely works in the run directory is never touched.

``mosaic run`` is started with a parent-death signal (:func:`die_with_parent`): a daemon
killed with SIGKILL takes its runs down cleanly (each ends with ``run_cancelled``) instead
of leaving them unsupervised.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mosaic_core import procs
from mosaic_core.procs import descendants, group_alive, group_members, pids, read_stat, stop_group, wait_group_gone

__all__ = [
    "Tracked",
    "descendants",
    "die_with_parent",
    "find_leader",
    "group_alive",
    "group_runs",
    "stop_group",
    "wait_group_gone",
]

PR_SET_PDEATHSIG = 1


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


def find_leader(marker: str) -> int | None:
    """The process group led by a live process of ours whose command line names ``marker`` (a
    run's config path: ``mosaic run`` leads a group of its own), or None."""
    for stat in filter(None, map(read_stat, pids())):
        if stat.live and stat.pid == stat.pgid and group_runs(stat.pgid, marker):
            try:
                if os.stat(f"/proc/{stat.pid}").st_uid == os.geteuid():
                    return stat.pgid
            except OSError:
                continue
    return None


@dataclass
class Tracked:
    """The processes seen below one run's ``mosaic run``: pid -> (start ticks, group)."""

    processes: dict[int, tuple[int, int]] = field(default_factory=dict)

    def scan(self, root: int) -> None:
        self.processes.update(descendants(root))

    def same(self, pid: int) -> bool:
        stat = read_stat(pid)
        return stat is not None and stat.live and stat.start_ticks == self.processes[pid][0]

    def stop(self, wait: float = 5.0) -> list[int]:
        """SIGKILL what is left of them: first the groups whose leader is still the same
        process, then each tracked process itself; then wait up to ``wait`` s for them to be gone
        (a killed process still runs until the kernel gets to it: on a busy machine, after the
        run's end is recorded); returns the pids signalled."""
        hit = []
        for pid, (_, pgid) in list(self.processes.items()):
            if pid == pgid and self.same(pid):
                _signal(functools.partial(os.killpg, pgid, signal.SIGKILL))
                hit.append(pid)
        for pid in list(self.processes):
            if self.same(pid) and _signal(functools.partial(os.kill, pid, signal.SIGKILL)):
                hit.append(pid)
        deadline = time.monotonic() + wait
        while any(self.same(pid) for pid in hit) and time.monotonic() < deadline:
            time.sleep(0.02)
        return sorted(set(hit))


def _signal(send: Callable[[], None]) -> bool:
    try:
        send()
        return True
    except OSError:
        return False


def die_with_parent(argv: list[str], sig: int = signal.SIGTERM) -> list[str]:
    """``argv`` started so that it gets ``sig`` when the thread that started it ends (start
    children from a thread that lives as long as the daemon); see
    :func:`mosaic_core.procs.with_parent_death_signal`."""
    return procs.with_parent_death_signal(argv, sig)
