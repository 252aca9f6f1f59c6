"""A batch as one Slurm job array (the seam's ``launch_many``): task ``i`` runs command ``i``,
at most ``%N`` at a time (``--slurm-array-limit``, or the batch's limit). The script reaches
``sbatch`` on its stdin (no path to swap); each task writes its exit code into the batch's folder
(new, ours alone, in the checked runs root), where the caller reads it as a file of ours; Ctrl-C
here cancels the whole array (``scancel``: SIGTERM to each running task's processes, pending
tasks dropped)."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from mosaic_core import SHARE_VAR, UsageError
from mosaic_core.caller import stop_signals_to
from mosaic_core.files import check_ancestors, check_own_dir, read_private_text
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
    _check_folder(batch.folder)
    script = array_script(batch)
    fd = os.open(batch.folder / "array.sh", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(script)  # a record: Slurm runs the text it is handed on stdin, never a path
    job_id = sbatch.submit(
        settings,
        script,
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
    codes = [_exit_code(batch, index, cancelled) for index in range(len(batch.commands))]
    return 130 if cancelled else max(codes, default=0)


def _check_folder(folder: Path) -> None:
    """The batch's folder must be ours, only ours to write, in folders nobody else can change
    (:func:`mosaic_core.runs.job_folder` makes one so): the tasks' output and exit codes land there."""
    try:
        check_own_dir(folder, "job array folder")
        check_ancestors(folder, "job array folder")
    except OSError as exc:
        raise UsageError(str(exc)) from None


def _exit_code(batch: Batch, index: int, cancelled: bool) -> int:
    """Task ``index``'s exit code, as it recorded it: a regular file of ours, nothing else."""
    try:
        return int(read_private_text(batch.folder / f"task-{index}.rc", limit=64).strip())
    except (OSError, ValueError):
        return 130 if cancelled else 1  # cancelled, or killed before it recorded an end


def _wait(job_id: str) -> bool:
    """Until the array has left the queue; True when a stop signal here cancelled it."""
    stops: list[int] = []
    with stop_signals_to(stops.append):
        cancel_sent = None
        while sbatch.states(job_id):
            if stops and cancel_sent is None:
                sbatch.cancel(job_id)
                cancel_sent = time.monotonic()
            elif cancel_sent is not None and time.monotonic() - cancel_sent > CANCEL_WAIT_S:
                break
            time.sleep(POLL_S)
    return bool(stops)
