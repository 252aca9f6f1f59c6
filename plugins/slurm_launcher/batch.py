"""A batch as one Slurm job array (the seam's ``launch_many``): task ``i`` runs command ``i``,
at most ``%N`` at a time (``--slurm-array-limit``, or the batch's limit). Each task writes its exit
code where the caller reads it; Ctrl-C here cancels the whole array (``scancel``: SIGTERM to
each running task's processes, pending tasks dropped)."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time
from typing import Any

from mosaic_core import SHARE_VAR, UsageError
from mosaic_core.launchers import Batch
from mosaic_slurm import sbatch

POLL_S = 1.0
CANCEL_WAIT_S = 60.0


def array_script(batch: Batch) -> str:
    """One script for every task: its command by ``$SLURM_ARRAY_TASK_ID``, its exit code recorded."""
    cases = [f"    {index}) {shlex.join(command)} ;;" for index, command in enumerate(batch.commands)]
    rc = shlex.quote(str(batch.folder)) + '/task-"$SLURM_ARRAY_TASK_ID".rc'
    return "\n".join(
        [
            "#!/bin/bash",
            f"# {batch.name}: {len(batch.commands)} commands as one job array (written by the Slurm launcher)",
            f'export {SHARE_VAR}="${{SLURM_CPUS_PER_TASK:-1}}"  # the task\'s runs: a thread budget of its CPUs',
            'case "$SLURM_ARRAY_TASK_ID" in',
            *cases,
            "    *) exit 2 ;;",
            "esac",
            f"echo $? > {rc}",
            "",
        ]
    )


def launch_many(raw: dict[str, Any], batch: Batch) -> int:
    settings = sbatch.Settings.parse(raw, batch.num_cpus)
    limit = batch.limit or settings.array_limit
    array = f"0-{len(batch.commands) - 1}" + (f"%{limit}" if limit else "")
    refusal = sbatch.test_only(settings, array)
    if refusal:
        raise UsageError(refusal)
    batch.folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    batch.folder.mkdir(mode=0o700)  # new and ours: nobody's script runs as the array
    script = batch.folder / "array.sh"
    fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(array_script(batch))
    job_id = sbatch.submit(
        settings,
        str(script),
        str(batch.folder / "task-%A_%a.out"),
        str(batch.folder / "task-%A_%a.err"),
        dict(os.environ),
        name=batch.name,
        array=array,
        preemptible=False,
    )
    print(
        f"mosaic: {len(batch.commands)} commands as Slurm job array {job_id} ({array}); their output in {batch.folder}",
        file=sys.stderr,
        flush=True,
    )
    cancelled = _wait(job_id)
    codes = []
    for index in range(len(batch.commands)):
        try:
            codes.append(int((batch.folder / f"task-{index}.rc").read_text().strip()))
        except (OSError, ValueError):
            codes.append(130 if cancelled else 1)  # cancelled, or killed before it recorded an end
    return 130 if cancelled else max(codes, default=0)


def _wait(job_id: str) -> bool:
    """Until the array has left the queue; True when a signal here cancelled it."""
    reason: list[str] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, lambda signum, _f: reason.append(signal.Signals(signum).name))
    try:
        cancel_sent = None
        while sbatch.states(job_id):
            if reason and cancel_sent is None:
                sbatch.cancel(job_id)
                cancel_sent = time.monotonic()
            elif cancel_sent is not None and time.monotonic() - cancel_sent > CANCEL_WAIT_S:
                break
            time.sleep(POLL_S)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return bool(reason)
