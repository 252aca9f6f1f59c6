"""The job's side: ``python -I -m mosaic_slurm.node RUN_DIR --num-cpus $SLURM_CPUS_PER_TASK
-- RERUN…`` runs one attempt of the run in its job.

- The first attempt supervises the prepared run (:mod:`mosaic_core.node`: the command
  ``launch.json`` records, not prepared again), its ``run_started`` naming the job. GPUs are the
  job's (``CUDA_VISIBLE_DEVICES``, set by Slurm).
- A requeued job (``SLURM_RESTART_COUNT`` > 0: a preemption, a time limit) runs ``mosaic RERUN…``
  (``mosaic run … --run-id X``) in this process, which resumes the run from its newest checkpoint
  (the run contract: ``run_resumed``, one history).
- SIGUSR1 (``--signal=B:USR1@GRACE``: the time limit or a preemption is near) stops the run
  keeping it, as a stop signal does. Slurm requeues a preempted job itself, not one at its time
  limit: an attempt that ended so (``run_cancelled`` naming SIGUSR1) requeues its own job
  (``scontrol requeue``), as Sample Factory does, and the next attempt resumes it."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from mosaic_core import node_main, worker_main
from mosaic_core.toolkit import events_backwards
from mosaic_slurm import sbatch


def started() -> dict:
    job = os.environ.get("SLURM_JOB_ID", "?")
    return {
        "node": f"slurm job {job} on {socket.gethostname()}",
        "slurm": {
            "job_id": job,
            "restart_count": restart_count(),
            "cpus": os.environ.get("SLURM_CPUS_PER_TASK"),
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
        },
    }


def restart_count() -> int:
    try:
        return int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    except ValueError:
        return 0


def resume(rerun: list[str]) -> int:
    """``mosaic RERUN…`` here, SIGUSR1 stopping it as a stop signal does (its handler of the
    moment: held before the run starts, the supervisor's cancel once it runs)."""

    def near_end(signum: int, frame: Any) -> None:
        handler = signal.getsignal(signal.SIGTERM)
        if callable(handler):
            handler(signum, frame)

    signal.signal(signal.SIGUSR1, near_end)
    at = rerun.index("--worker")  # run --worker W …
    return worker_main(rerun[at + 1], [*rerun[1:at], *rerun[at + 2 :]], prog=f"mosaic run --worker {rerun[at + 1]}")


def log_size(run_dir: Path) -> int:
    """How far the run's ``events.jsonl`` goes now (0 when it has none)."""
    try:
        return os.lstat(run_dir / "events.jsonl").st_size
    except OSError:
        return 0


def last_event_since(run_dir: Path, size: int) -> dict[str, Any]:
    """The run's last event, if this attempt wrote any (its log grew past ``size``); read from the end."""
    if log_size(run_dir) <= size:
        return {}
    try:
        return next(events_backwards(run_dir / "events.jsonl"), {})
    except OSError:
        return {}


def stopped_near_end(last: dict[str, Any]) -> bool:
    """Did this attempt's last event end the run resumable on SIGUSR1 (``run_cancelled`` naming it)?"""
    payload = last.get("payload") or {}
    return last.get("event") == "run_cancelled" and bool(payload.get("resumable")) and "SIGUSR1" in json.dumps(payload)


def main(argv: list[str]) -> int:
    own, rerun = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    run_dir = Path(own[0]).absolute() if own else Path.cwd()
    before = log_size(run_dir)
    code = (
        resume(rerun) if restart_count() > 0 and rerun else node_main(own, started=started(), prog="mosaic_slurm.node")
    )
    job = os.environ.get("SLURM_JOB_ID")
    if job and stopped_near_end(last_event_since(run_dir, before)):  # this attempt's end, not an earlier one's
        sbatch.requeue(job)  # the next attempt resumes the run
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
