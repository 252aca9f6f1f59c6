"""The training process outlives nothing: when its host dies (``kill -9`` of ``mosaic run``),
the run still ends with a terminal event that says what happened, its plugins free what the
host would have freed, and none of its processes keeps training.

The host starts the training process with ``PR_SET_PDEATHSIG`` (it gets SIGTERM when the host
dies). A Python training process trades that for this watchdog, installed by
:func:`mosaic_core._patchpoints.install`: it notices the host gone, calls every plugin's
``mosaic_host_lost``, appends ``run_failed`` to ``events.jsonl`` (and writes ``manifest.json`` if
the host could not), then stops the run's process group.

"Gone" is the kernel's word, never a guess from timing: the watchdog holds a pidfd of the host
(opened while the host is provably its parent, so a reused pid cannot stand in for it) and wakes
when the host exits, however busy the machine; where pidfds are missing it polls the parent pid
every :data:`POLL_S`, and the host counts as gone only once that changed *and* the host's own pid
(with its start time) is gone too.
"""

from __future__ import annotations

import json
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from mosaic_core import procs
from mosaic_core.events import TERMINAL, open_append
from mosaic_core.files import tail_lines, write_json_atomic
from mosaic_core.jsontext import finite
from mosaic_core.types import ChildContext

POLL_S = 0.25
GRACE_S = 3.0


def watch_host(child: ChildContext, host: Any) -> threading.Thread:
    """Start the watchdog (in the training process, whose parent is the host)."""
    wait = _host_exit_waiter(child.host_pid)
    procs.parent_death_signal_setter(0)()  # the watchdog stops the run itself, and says why
    thread = threading.Thread(target=_watch, args=(child, host, wait), name="mosaic-host-watch", daemon=True)
    thread.start()
    return thread


def _host_exit_waiter(host_pid: int) -> Callable[[], None]:
    """A function that returns once the host has exited."""
    start = procs.process_start(host_pid)
    try:
        pidfd = os.pidfd_open(host_pid)
    except (AttributeError, OSError):  # no pidfds (Linux < 5.3, or not Linux)
        pidfd = None
    if os.getppid() != host_pid:  # it died meanwhile (the pidfd and start time may be another's)
        return lambda: None
    if pidfd is not None:
        exited = select.poll()
        exited.register(pidfd, select.POLLIN)  # readable once the process has exited

        def wait() -> None:
            exited.poll()

        return wait

    def poll() -> None:
        while os.getppid() == host_pid or procs.process_alive(host_pid, start):
            time.sleep(POLL_S)

    return poll


def _watch(child: ChildContext, host: Any, wait: Callable[[], None]) -> None:
    wait()
    try:
        host.host_lost(child)
        record_host_loss(child)
    finally:
        _stop_group()


def record_host_loss(child: ChildContext) -> None:
    """Append the terminal event the host could not write (unless one is there already)."""
    events = child.run_dir / "events.jsonl"
    last = None
    for line in reversed(tail_lines(events, 50)):
        try:
            last = json.loads(line)
            break
        except ValueError:
            continue
    if last is not None and last.get("event") in TERMINAL:
        return
    error = f"the host process (pid {child.host_pid}) died; the training process stopped itself"
    record = {
        "event": "run_failed",
        "run_id": child.run_id,
        "seq": int((last or {}).get("seq", 0)) + 1,
        "timestamp": time.time(),
        "payload": {"error": error, "returncode": None, "host_lost": True},
    }
    with open_append(events) as handle:
        handle.write(json.dumps(finite(record), allow_nan=False) + "\n")
    from mosaic_core.runs import MANIFEST_NAME, MANIFEST_SCHEMA, manifest_of

    if not manifest_of(child.run_dir).exists():
        write_json_atomic(
            child.run_dir / MANIFEST_NAME,
            {
                "schema": MANIFEST_SCHEMA,
                "run_id": child.run_id,
                "worker": child.worker,
                "status": "failed",
                "algo": child.algo,
                "env_id": child.env_id,
                "written_at": time.time(),
                "error": error,
            },
        )


def _stop_group() -> None:
    group = os.getpgrp()
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 0)):
        try:
            os.killpg(group, sig)
        except OSError:
            return
        time.sleep(wait)
