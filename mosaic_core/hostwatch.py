"""The training process outlives nothing: when its host dies (``kill -9`` of ``mosaic run``),
the run still ends with a terminal event that says what happened, its plugins free what the
host would have freed, and none of its processes keeps training.

The host starts the training process with ``PR_SET_PDEATHSIG`` (it gets SIGTERM when the host
dies). A Python training process trades that for this watchdog, installed by
:func:`mosaic_core.child.install`: it notices the host gone within :data:`POLL_S`, calls every
plugin's ``mosaic_host_lost``, appends ``run_failed`` to ``events.jsonl`` (and writes
``analytics.json`` if the host could not), then stops the run's process group.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from typing import Any

from mosaic_core import procs
from mosaic_core.events import TERMINAL, finite, open_append
from mosaic_core.files import tail_lines, write_json_atomic
from mosaic_core.types import ChildContext

POLL_S = 0.25
GRACE_S = 3.0


def watch_host(child: ChildContext, host: Any) -> threading.Thread:
    procs.parent_death_signal_setter(0)()  # the watchdog stops the run itself, and says why
    thread = threading.Thread(target=_watch, args=(child, host), name="mosaic-host-watch", daemon=True)
    thread.start()
    return thread


def _watch(child: ChildContext, host: Any) -> None:
    while os.getppid() == child.host_pid:
        time.sleep(POLL_S)
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
    record = {"event": "run_failed", "run_id": child.run_id, "seq": int((last or {}).get("seq", 0)) + 1,
              "timestamp": time.time(), "payload": {"error": error, "returncode": None, "host_lost": True}}
    with open_append(events) as handle:
        handle.write(json.dumps(finite(record), allow_nan=False) + "\n")
    manifest = child.run_dir / "analytics.json"
    if not manifest.exists():
        write_json_atomic(manifest, {"schema": "mosaic.analytics/1", "run_id": child.run_id, "worker": child.worker,
                                     "status": "failed", "algo": child.algo, "env_id": child.env_id,
                                     "written_at": time.time(), "error": error})


def _stop_group() -> None:
    group = os.getpgrp()
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 0)):
        try:
            os.killpg(group, sig)
        except OSError:
            return
        time.sleep(wait)
