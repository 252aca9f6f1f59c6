"""The caller's side of a Slurm run: ``mosaic run … --launcher slurm``.

1. The prepared run (its directory on the shared runs root, ``config.json``, ``launch.json``) is
   submitted as a job (:mod:`mosaic_slurm.sbatch`): its script runs :mod:`mosaic_slurm.node` on the
   node, which supervises the recorded command as ``mosaic run`` does here; a requeued job
   (``SLURM_RESTART_COUNT`` > 0) runs the same ``mosaic run … --run-id X`` again, which resumes the
   run (the run contract). The job's stdout and stderr go to ``slurm/`` in the run directory.
2. The run's events, written by the node into ``events.jsonl``, are printed here as they come:
   the same lines, the same terminal event, the same exit code as a local run.
3. Ctrl-C (a stop signal: the core caller's, :class:`mosaic_core.caller.RemoteCaller`) passes the signal to the job's script (``scancel --batch``),
   whose host cancels the run and records ``run_cancelled``; a job still pending is cancelled
   (``scancel``) and ``run_cancelled`` is recorded here.
4. ``--detach``: submitted, the job id printed, and this process returns (``mosaic logs -f RUN``).

The supported mode is a runs root every node shares (as on any Slurm cluster, where home and
project folders are shared): the node writes the run in place; nothing is copied back."""

from __future__ import annotations

import itertools
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

from mosaic_core import THREAD_VARS, prepared_env, procs
from mosaic_core.caller import Ending, Polled, RemoteCaller
from mosaic_core.files import check_own_dir, tail_lines, write_json_atomic
from mosaic_core.launchers import Job
from mosaic_slurm import sbatch

POLL_S = 0.2
SQUEUE_EVERY_S = 1.0
REQUEUE_WAIT_S = 10.0  # a requeued job may be missing from squeue this long between its attempts


def execute(job: Job) -> int:
    return SlurmRun(job, sbatch.Settings.parse(job.settings, job.num_cpus)).execute()


def job_script(job: Job, settings: sbatch.Settings) -> str:
    """The job's script: one attempt of the run (:mod:`mosaic_slurm.node`): the node's host on the
    prepared run, or, requeued, the same ``mosaic run … --run-id X``, which resumes it."""
    run_dir = job.run.run_dir
    rerun = [
        *job.rerun_argv,
        "--config",
        str(run_dir / "config.json"),
        "--runs-dir",
        str(run_dir.parent),
        "--launcher",
        "local",
    ]
    node = procs.python_command(
        sys.executable,
        "-m",
        "mosaic_slurm.node",
        str(run_dir),
        "--heartbeat-interval",
        f"{job.options.heartbeat_interval:g}",
        "--grace-period",
        f"{job.options.grace_period:g}",
    )
    cpus = '--num-cpus "${SLURM_CPUS_PER_TASK:-1}"'  # the thread budget: the job's CPUs
    return "\n".join(
        [
            "#!/bin/bash",
            f"# mosaic run {job.run.run_id} as a Slurm job (written by the Slurm launcher); a requeued job",
            "# (SLURM_RESTART_COUNT > 0: a preemption, a time limit) resumes the run with the command after --",
            f"cd {shlex.quote(str(run_dir))} || exit 1",
            f"exec {shlex.join(node)} {cpus} -- {shlex.join(rerun)}",
            "",
        ]
    )


def submit_env(env: dict[str, str], extras: dict[str, Any]) -> dict[str, str]:
    """What ``sbatch --export=ALL`` takes to the job: this environment and the run's variables
    (its plan's and plugins', secrets included: never written to a file of ours), less the
    thread budget computed here (the node's is the job's CPUs; a user's own one stays)."""
    run_env = {k: v for k, v in env.items() if k not in THREAD_VARS or k in os.environ}
    return {**os.environ, **prepared_env(run_env, extras)}


class SlurmRun(RemoteCaller):
    """One run as a Slurm job; the core caller owns signals, cancel, the shown log and the end."""

    shares_run_dir = True  # the node writes the run in place, events.jsonl included

    def __init__(self, job: Job, settings: sbatch.Settings):
        super().__init__(job)
        self.settings = settings
        self.job_id = ""  # once submitted
        self.next_poll = 0.0
        self.requeue_by: float | None = None

    def execute(self) -> int:
        if not self.settings.detach:
            return super().execute()
        self.job_id = self.submit()
        print(
            json.dumps({"run_id": self.run.run_id, "slurm_job_id": self.job_id, "run_dir": str(self.run.run_dir)}),
            flush=True,
        )
        if not self.run.quiet:
            print(
                f"mosaic: run {self.run.run_id} submitted as Slurm job {self.job_id}; follow it with "
                f"`mosaic logs -f {self.run.run_id}`",
                file=sys.stderr,
                flush=True,
            )
        return 0

    def submit(self) -> str:
        folder = self.run.run_dir / "slurm"  # in the run directory: new, ours, in the checked runs root
        folder.mkdir(mode=0o700, exist_ok=True)
        check_own_dir(folder, "run's slurm folder")
        script = job_script(self.job, self.settings)
        _record_script(folder, script)
        job_id = sbatch.submit(
            self.settings,
            script,
            str(folder / "job-%j.out"),
            str(folder / "job-%j.err"),
            submit_env(self.job.env, self.run.config.extras),
            name=f"mosaic-{self.run.run_id}",
        )
        write_json_atomic(folder / "job.json", {"job_id": job_id, "options": self.settings.options()})
        self.run.state["slurm"] = {"job_id": job_id}
        return job_id

    # ------------------------------------------------------------------ the core caller's steps
    def start(self) -> Ending | None:
        self.job_id = self.submit()
        return None

    def poll(self) -> Polled:
        """The job's end, once it has left the queue (a requeued job stays: its next attempt is followed)."""
        time.sleep(POLL_S)
        if time.monotonic() < self.next_poll:
            return Polled()
        self.next_poll = time.monotonic() + (POLL_S if self.terminal is not None else SQUEUE_EVERY_S)
        if sbatch.states(self.job_id):
            self.requeue_by = None
        elif self._may_be_requeued() and (self.requeue_by is None or time.monotonic() < self.requeue_by):
            # a stop that kept the run: its job is being requeued (squeue may miss it a moment)
            self.requeue_by = self.requeue_by or time.monotonic() + REQUEUE_WAIT_S
        else:
            return Polled(exit_code=0)
        return Polled()

    def _may_be_requeued(self) -> bool:
        """An attempt that ended keeping the run (a preemption, a time limit), not cancelled from here."""
        terminal = self.terminal
        return (
            self.cancel_reason is None
            and terminal is not None
            and terminal["event"] == "run_cancelled"
            and bool((terminal.get("payload") or {}).get("resumable"))
        )

    def cancel_remote(self, signum: int) -> None:
        state = sbatch.states(self.job_id).get(self.job_id)
        if self.remote_started and state == "RUNNING":  # its host cancels the run, as ours would here
            sbatch.cancel(self.job_id, signal.Signals(signum).name.removeprefix("SIG"))
        else:
            sbatch.cancel(self.job_id)

    def give_up(self) -> None:
        sbatch.cancel(self.job_id)  # the node's host did not end it in time: Slurm does (we follow on)

    def no_end(self, exit_code: int) -> Ending:
        """The node wrote no end (cancelled before it started, or it died)."""
        if self.cancel_reason is not None:
            return Ending("cancelled", {"reason": f"{self.cancel_reason}; Slurm job {self.job_id} cancelled"}, 130)
        error = f"Slurm job {self.job_id} ended without the run's end event"
        tail = "\n".join(tail_lines(self.run.run_dir / "slurm" / f"job-{self.job_id}.err", 20))
        return Ending("failed", {"error": error, "stderr_tail": tail}, 1)


def _record_script(folder: Path, script: str) -> Path:
    """The job's script kept in the run's ``slurm/`` folder, a new file each submission (``job.sh``,
    then ``job-2.sh``: a resumed run is submitted again): a record, Slurm runs the text it is
    handed on stdin, never a path."""
    for number in itertools.count(1):
        path = folder / ("job.sh" if number == 1 else f"job-{number}.sh")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(script)
        return path
    raise AssertionError("unreachable")
