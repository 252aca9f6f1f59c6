"""The process table (Linux ``/proc``) and stopping process groups: one helper per idea.

Every MOSAIC part that asks "is this process alive, is it the same one, who is in this
group" or "stop this group" uses these, so a fix (zombies, pid reuse, permissions) lands
once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "NEUTRAL_CWD",
    "PR_SET_PDEATHSIG",
    "ProcStat",
    "allow_exit_at_once",
    "ask_exit_at_once",
    "command_ended",
    "descendants",
    "group_alive",
    "group_members",
    "keep_cwd_off_child_paths",
    "may_exit_at_once",
    "mosaic_command",
    "parent_death_signal_setter",
    "pids",
    "process_alive",
    "process_start",
    "python_command",
    "read_stat",
    "signal_processes",
    "stop_group",
    "wait_group_gone",
    "with_environment",
    "with_parent_death_signal",
]


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` MOSAIC uses."""

    pid: int
    state: str  # R, S, D, Z (zombie), X (dead), …
    ppid: int
    pgid: int
    start_ticks: int  # start time in clock ticks since boot: with the pid, names a process uniquely

    @property
    def live(self) -> bool:
        return self.state not in ("Z", "X")


def read_stat(pid: int) -> ProcStat | None:
    """``/proc/<pid>/stat`` parsed (the command name may hold spaces and parentheses), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return ProcStat(pid, fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


def pids() -> list[int]:
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def process_start(pid: int) -> int:
    """The start time of ``pid`` in clock ticks since boot (0 when unknown)."""
    stat = read_stat(pid)
    return stat.start_ticks if stat else 0


def process_alive(pid: int, start: int = 0) -> bool:
    """Whether ``pid`` is a live (not zombie) process, the same one that started at ``start``."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    stat = read_stat(pid)
    if stat is None:
        return True  # no /proc: trust kill(0)
    return stat.live and (not start or stat.start_ticks == start)


def group_members(pgid: int) -> list[int]:
    """The live (non-zombie) processes of process group ``pgid``."""
    return [stat.pid for stat in map(read_stat, pids()) if stat and stat.pgid == pgid and stat.live]


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):
        return True
    return bool(group_members(pgid))  # a group of zombies still "exists": count live members


def wait_group_gone(pgid: int, timeout: float, proc: subprocess.Popen[Any] | None = None) -> bool:
    """Wait up to ``timeout`` s for the group to empty (reaping ``proc``, its leader, if given)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None:
            proc.poll()  # reap the leader so it does not linger as a zombie
        if not group_alive(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def stop_group(
    pgid: int, grace: float, proc: subprocess.Popen[Any] | None = None, kill_wait: float = 5.0
) -> str | None:
    """SIGTERM the group, SIGKILL whatever is left after ``grace`` seconds, and wait up to
    ``kill_wait`` s more for it to be gone (then for ``proc``, its leader, if given and alive).

    Returns the last signal sent ("SIGTERM"/"SIGKILL"), or None when the group was gone."""
    sent = None
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            break
        sent = sig.name
        if wait_group_gone(pgid, wait, proc):
            break
    if proc is not None and proc.poll() is None:
        proc.wait()
    return sent


def descendants(root: int) -> dict[int, tuple[int, int]]:
    """Live descendants of ``root`` (children, theirs…), from one read of the process table:
    pid -> (start ticks, process group)."""
    children: dict[int, list[ProcStat]] = {}
    for stat in map(read_stat, pids()):
        if stat is not None and stat.live:
            children.setdefault(stat.ppid, []).append(stat)
    found: dict[int, tuple[int, int]] = {}
    todo = [root]
    while todo:
        for stat in children.get(todo.pop(), ()):
            if stat.pid not in found:
                found[stat.pid] = (stat.start_ticks, stat.pgid)
                todo.append(stat.pid)
    return found


def with_environment(name: str, value: str) -> dict[int, tuple[int, int]]:
    """Live processes of ours started with ``name=value`` in their environment (``/proc/<pid>/environ``,
    as they were started): pid -> (start ticks, process group). Finds a run's processes whatever
    became of their parents."""
    entry = f"{name}={value}".encode()
    found: dict[int, tuple[int, int]] = {}
    for pid in pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if entry not in handle.read().split(b"\0"):
                    continue
        except OSError:  # gone, or not ours
            continue
        stat = read_stat(pid)
        if stat is not None and stat.live:
            found[pid] = (stat.start_ticks, stat.pgid)
    return found


def signal_processes(found: dict[int, tuple[int, int]], sig: int) -> None:
    """Send ``sig`` to each process of ``found`` (pid -> (start ticks, …), as :func:`descendants`
    gives) that is still the same process."""
    for pid, (start, *_rest) in found.items():
        if process_alive(pid, start):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


PR_SET_PDEATHSIG = 1

# Runs in a fresh interpreter between fork and the real program: set the parent-death signal,
# give up if the parent is already gone, exec. Never a ``Popen(preexec_fn=...)``: that makes
# subprocess fork() (not vfork) and run Python in a child of a process full of threads (gRPC's
# pollers, a W&B service): fork handlers and locks held at fork time then abort or hang the
# child (the SIGABRT after "epoll_wait error: Bad file descriptor" of a run through the daemon).
_PDEATHSIG = (
    "import ctypes, os, sys; ctypes.CDLL(None).prctl(1, int(sys.argv[1]), 0, 0, 0); "
    "os.getppid() == int(sys.argv[2]) or os._exit(1); os.execvp(sys.argv[3], sys.argv[3:])"
)


def with_parent_death_signal(argv: list[str], sig: int = signal.SIGTERM) -> list[str]:
    """``argv`` started so that it gets ``sig`` when the thread that started it ends (Linux
    ``prctl(PR_SET_PDEATHSIG)``, set by a bare interpreter that then execs ``argv``: the program's
    pid is the one Popen returns). Start it from a thread that lives as long as the parent."""
    # -P: its working directory (a run directory) is never on sys.path for its own imports.
    return [sys.executable, "-S", "-P", "-c", _PDEATHSIG, str(int(sig)), str(os.getpid()), *argv]


# ------------------------------------------------------------------ Python programs we start
# Where a Python program we start runs when it has no folder of its own: one no other user can
# write, so nothing there can pass for one of its files (the caller's cwd may be /tmp).
NEUTRAL_CWD = "/"


def python_command(python: str, *args: str, keep_environment: bool = False) -> list[str]:
    """The command line that runs interpreter ``python`` with ``args`` (``-m module …``, ``-c code
    …``) isolated from where it starts: ``-I`` (neither the cwd nor a script's folder on sys.path,
    no ``PYTHON*`` variables, no user site-packages), or with ``keep_environment`` ``-P`` (the same
    for sys.path; ``PYTHONPATH`` and the like kept, for a program that needs them). A cwd another
    user can write (``/tmp``, a shared project) then never runs their ``venv.py`` or ``pip.py``.
    Start it in its own folder or :data:`NEUTRAL_CWD`."""
    return [str(python), "-P" if keep_environment else "-I", *args]


def keep_cwd_off_child_paths() -> None:
    """Every Python program this process starts from now on, ours or a library's (multiprocessing's
    resource tracker, a ``python -c`` helper), leaves its cwd and script folder off sys.path
    (``PYTHONSAFEPATH``, what ``-P`` sets): a command of ours may be typed in ``/tmp``. An empty
    entry of ``PYTHONPATH`` (``export PYTHONPATH=$PYTHONPATH:/x`` with none before) also means the
    cwd, ``-P`` or not: dropped."""
    os.environ["PYTHONSAFEPATH"] = "1"
    if "PYTHONPATH" in os.environ:
        kept = [entry for entry in os.environ["PYTHONPATH"].split(os.pathsep) if entry]
        if kept:
            os.environ["PYTHONPATH"] = os.pathsep.join(kept)
        else:
            del os.environ["PYTHONPATH"]


def mosaic_command() -> list[str]:
    """The command that runs ``mosaic`` as this host does: the console script beside this
    interpreter (its own folder first on sys.path, never the cwd), else this interpreter on
    ``mosaic_core.cli.main`` with ``-P`` (never a ``mosaic`` found on ``PATH``, which may name ``.``)."""
    beside = Path(sys.executable).with_name("mosaic")
    if beside.exists():
        return [str(beside)]
    return python_command(sys.executable, "-m", "mosaic_core.cli.main", keep_environment=True)


def parent_death_signal_setter(sig: int) -> Callable[[], None]:
    """A function that asks the kernel to send ``sig`` to the calling process when its parent
    dies (Linux ``prctl(PR_SET_PDEATHSIG)``; 0 clears it). Made before a fork so the child
    (``Popen(preexec_fn=...)``) runs no import; a no-op where prctl is missing."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None

    def set_signal() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)

    return set_signal


# A `mosaic` command process may end with os._exit once its command returned: a launcher whose
# client library's teardown is slow and needless (Ray's shutdown, its threads, an interpreter
# full of its modules: 0.3-0.8 s) asks for it; only the console script allows it.
_exit_at_once = {"allowed": False, "asked": False}


def allow_exit_at_once() -> None:
    """This process ends when its command returns (the ``mosaic`` console script)."""
    _exit_at_once["allowed"] = True


def may_exit_at_once() -> bool:
    """Whether the process ends as soon as its command returns: what is left open then closes with it."""
    return _exit_at_once["allowed"]


def ask_exit_at_once() -> None:
    """End the process at once when its command returns (where :func:`may_exit_at_once`)."""
    _exit_at_once["asked"] = True


def command_ended(code: int) -> int:
    """``code``, or, where asked and allowed, the end of the process with it: the output flushed,
    no atexit handler, no interpreter teardown."""
    if _exit_at_once["allowed"] and _exit_at_once["asked"]:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    return code
