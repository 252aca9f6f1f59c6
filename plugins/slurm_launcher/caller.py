"""The caller's side of a Slurm run: ``mosaic run … --launcher slurm``.

1. The prepared run (its directory on the shared runs root, ``config.json``, ``launch.json``) is
   submitted as a job (:mod:`mosaic_slurm.sbatch`): its script runs :mod:`mosaic_slurm.node` on the
   node, which supervises the recorded command as ``mosaic run`` does here; a requeued job
   (``SLURM_RESTART_COUNT`` > 0) runs the same ``mosaic run … --run-id X`` again, which resumes the
   run (the run contract). The job's stdout and stderr go to ``slurm/`` in the run directory.
2. The run's events, written by the node into ``events.jsonl``, are printed here as they come:
   the same lines, the same terminal event, the same exit code as a local run.
3. Ctrl-C (SIGINT/SIGTERM/SIGHUP) passes the signal to the job's script (``scancel --batch``),
   whose host cancels the run and records ``run_cancelled``; a job still pending is cancelled
   (``scancel``) and ``run_cancelled`` is recorded here.
4. ``--detach``: submitted, the job id printed, and this process returns (``mosaic logs -f RUN``).

The supported mode is a runs root every node shares (as on any Slurm cluster, where home and
project folders are shared): the node writes the run in place; nothing is copied back."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mosaic_core import (
    EVENT_OF,
    STATUS_OF,
    TERMINAL,
    THREAD_VARS,
    EventEmitter,
    prepared_env,
    procs,
    record_run_end,
    take_held_signals,
)
from mosaic_core.files import check_own_dir, tail_lines, write_json_atomic
from mosaic_core.launchers import Job
from mosaic_slurm import sbatch

POLL_S = 0.2
SQUEUE_EVERY_S = 1.0
REQUEUE_WAIT_S = 10.0  # a requeued job may be missing from squeue this long between its attempts
CANCEL_EXTRA_S = 20.0  # after the grace period: the node's host records the end, Slurm ends the job
CODE_OF = {"completed": 0, "cancelled": 130, "failed": 1}


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


class SlurmRun:
    def __init__(self, job: Job, settings: sbatch.Settings):
        self.job, self.settings, self.run = job, settings, job.run
        self.job_id: str | None = None
        self.cancel_reason: str | None = None
        self.cancel_signal = signal.SIGINT

    def execute(self) -> int:
        self.job_id = self.submit()
        if self.settings.detach:
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
        previous = self._install_signal_handlers()
        try:
            terminal = self.follow()
        finally:
            self._restore(previous)
        if terminal is None:
            return self._finish_here()
        return CODE_OF[STATUS_OF[terminal["event"]]]

    def submit(self) -> str:
        folder = self.run.run_dir / "slurm"  # in the run directory: new, ours, in the checked runs root
        folder.mkdir(mode=0o700, exist_ok=True)
        check_own_dir(folder, "run's slurm folder")
        script = job_script(self.job, self.settings)
        fd = os.open(folder / "job.sh", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(script)  # a record: Slurm runs the text it is handed on stdin, never a path
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

    # ------------------------------------------------------------------ following the node's events
    def follow(self) -> dict[str, Any] | None:
        """The node's events printed as they come, until the job is gone; its terminal event."""
        reader = EventLines(self.run.directory.events)
        terminal, cancel_deadline, next_poll, started = None, None, 0.0, False
        requeue_by: float | None = None
        while True:
            for line, record in reader.new():
                started = started or record["event"] == "run_started"
                if record["event"] in TERMINAL:
                    terminal = record
                self._show(line, record)
            if self.cancel_reason is not None and cancel_deadline is None:
                self._cancel(started)
                cancel_deadline = time.monotonic() + self.job.options.grace_period + CANCEL_EXTRA_S
            if cancel_deadline is not None and time.monotonic() > cancel_deadline:
                sbatch.cancel(self.job_id)  # the node's host did not end it in time: Slurm does
                cancel_deadline = float("inf")
            if time.monotonic() >= next_poll:  # soon after the end event: the job is about to leave
                next_poll = time.monotonic() + (POLL_S if terminal is not None else SQUEUE_EVERY_S)
                if sbatch.states(self.job_id):
                    requeue_by = None
                elif self._may_be_requeued(terminal) and (requeue_by is None or time.monotonic() < requeue_by):
                    # a stop that kept the run: its job is being requeued (squeue may miss it a moment)
                    requeue_by = requeue_by or time.monotonic() + REQUEUE_WAIT_S
                else:  # ended (a requeued job stays queued: we go on following its next attempt)
                    for line, record in reader.new():
                        terminal = record if record["event"] in TERMINAL else terminal
                        self._show(line, record)
                    return terminal
            time.sleep(POLL_S)

    def _may_be_requeued(self, terminal: dict[str, Any] | None) -> bool:
        """An attempt that ended keeping the run (a preemption, a time limit), not cancelled from here."""
        return (
            self.cancel_reason is None
            and terminal is not None
            and terminal["event"] == "run_cancelled"
            and bool((terminal.get("payload") or {}).get("resumable"))
        )

    def _cancel(self, started: bool) -> None:
        state = sbatch.states(self.job_id).get(self.job_id)
        if started and state == "RUNNING":  # its host cancels the run, as ours would here
            sbatch.cancel(self.job_id, self.cancel_signal.name.removeprefix("SIG"))
        else:
            sbatch.cancel(self.job_id)

    def _show(self, line: str, record: dict[str, Any]) -> None:
        if self.job.options.json_stdout:
            print(line, flush=True)
        elif not self.run.quiet:
            payload = record.get("payload") or {}
            brief = ", ".join(f"{k}={v}" for k, v in payload.items() if isinstance(v, (int, float, str)))[:200]
            print(f"{record['event']}: {brief}", flush=True)

    def _finish_here(self) -> int:
        """The node wrote no end (cancelled before it started, or it died): the end recorded here."""
        run, options = self.run, self.job.options
        if self.cancel_reason is not None:
            status, payload = "cancelled", {"reason": f"{self.cancel_reason}; Slurm job {self.job_id} cancelled"}
        else:
            status, payload = (
                "failed",
                {
                    "error": f"Slurm job {self.job_id} ended without the run's end event",
                    "stderr_tail": self._stderr_tail(),
                },
            )
        run.emitter = EventEmitter(
            run.run_id, run.directory.events, stream=options.stream, to_stream=options.json_stdout
        )
        try:
            if not run.directory.manifest.exists():
                payload = record_run_end(run, self.job.host, status, payload, started=False)
            run.emit(EVENT_OF[status], payload)
        finally:
            run.emitter.close()
        if status == "failed" and not run.quiet:
            print(f"mosaic: error: run {run.run_id} failed: {payload['error']}", file=sys.stderr)
        return CODE_OF[status]

    def _stderr_tail(self) -> str:
        return "\n".join(tail_lines(self.run.run_dir / "slurm" / f"job-{self.job_id}.err", 20))

    # ------------------------------------------------------------------ signals
    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)  # the host's stop signals
        previous = {sig: signal.signal(sig, self._on_signal) for sig in stops}
        held = take_held_signals()
        if held is not None:
            self._on_signal(held, None)
        return previous

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = f"received {signal.Signals(signum).name}"
            self.cancel_signal = signal.Signals(signum)

    @staticmethod
    def _restore(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class EventLines:
    """Complete lines appended to a run's ``events.jsonl`` since the last call (a file the node
    writes; opened without following links, read in bounded pieces)."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, b""

    def new(self) -> list[tuple[str, dict[str, Any]]]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return []
        with os.fdopen(fd, "rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read(4 * 1024 * 1024)
        self.offset += len(chunk)
        data = self.partial + chunk
        *lines, self.partial = data.split(b"\n")
        out = []
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").strip()
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("event"), str):
                out.append((line, record))
        return out
