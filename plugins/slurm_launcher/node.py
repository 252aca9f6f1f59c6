"""The job's side: ``python -m mosaic_slurm.node RUN_DIR`` supervises the prepared run on the
node, as ``mosaic run`` does locally: it runs the command ``launch.json`` records (the run is
not prepared again) with the run's ``config.json``, writing the run's events, logs and manifest
into its directory on the shared runs root. The thread budget is the job's CPUs
(``SLURM_CPUS_PER_TASK``); GPUs are the job's (``CUDA_VISIBLE_DEVICES``, set by Slurm).

SIGUSR1 (``--signal=B:USR1@grace``: a time limit or a preemption near) cancels the run as a
stop signal does: the training process is asked to stop (SIGTERM), checkpoints at its next safe
point and ends keeping the run (the run contract); the requeued job then re-runs the same
``mosaic run … --run-id X``."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
from pathlib import Path

from mosaic_core import hostsignals, procs
from mosaic_core.cli.errors import run_cli_command
from mosaic_core.config import WorkerConfig
from mosaic_core.files import run_umask
from mosaic_core.plugins import plugin_host
from mosaic_core.runs import RunContext, RunDirectory
from mosaic_core.supervisor import Supervisor, SupervisorOptions
from mosaic_core.threads import budget

PREPARED_VARS = "MOSAIC_SLURM_PREPARED_ENV"  # the names of the run's own variables (its plan's, plugins')
NEAR_END = "received SIGUSR1 (Slurm: the job's time limit or a preemption is near)"


def job_env(run_env: dict[str, str]) -> dict[str, str]:
    """The run's variables for the training process, with the thread budget of the job's CPUs."""
    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    threads = budget(int(cpus) if cpus and cpus.isdigit() else None)  # the user's own OMP_NUM_THREADS wins
    return {**run_env, **threads.environment(os.environ, run_env)}


def supervise(run_dir: Path, heartbeat: float, grace: float) -> int:
    launch = json.loads((run_dir / "launch.json").read_text(encoding="utf-8"))
    data = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    worker = data.pop("worker")
    config = WorkerConfig.from_dict(data, source=str(run_dir / "config.json"))
    host = plugin_host()
    directory = RunDirectory.for_run(run_dir.parent, run_dir.name)
    run = RunContext(config=config, directory=directory, worker=worker, quiet=True, dry_run=False,
                     settings=tuple(setting for _plugin, setting in host.run_settings(config)))
    names = [n for n in os.environ.get(PREPARED_VARS, "").split(",") if n]
    env = job_env({name: os.environ[name] for name in names if name in os.environ})
    where = f"slurm job {os.environ.get('SLURM_JOB_ID', '?')} on {socket.gethostname()}"
    started = {k: v for k, v in launch.items() if k not in ("command", "cwd", "threads", "worker")}
    started.update(node=where, slurm={"job_id": os.environ.get("SLURM_JOB_ID"),
                                      "restart_count": int(os.environ.get("SLURM_RESTART_COUNT") or 0),
                                      "cpus": os.environ.get("SLURM_CPUS_PER_TASK"),
                                      "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")})
    options = SupervisorOptions(heartbeat_interval=heartbeat, grace_period=grace, started_payload=started,
                                json_stdout=True)
    os.umask(run_umask())
    supervisor = Supervisor(run, host, list(launch["command"]), env, options, cwd=Path(launch.get("cwd") or run_dir))
    signal.signal(signal.SIGUSR1, lambda _s, _f: supervisor.cancel(NEAR_END))
    hostsignals.hold()  # a stop signal from now on cancels the run, which ends with a terminal event
    return supervisor.execute()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mosaic_slurm.node")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--heartbeat-interval", type=float, default=30.0)
    parser.add_argument("--grace-period", type=float, default=10.0)
    ns = parser.parse_args(argv)
    procs.keep_cwd_off_child_paths()
    with hostsignals.guarded():
        return run_cli_command(lambda: supervise(ns.run_dir.absolute(), ns.heartbeat_interval, ns.grace_period),
                               verbose=False)


if __name__ == "__main__":
    sys.exit(main())
