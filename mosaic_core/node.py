"""A prepared run executed where a launcher placed it: ``python -I -m mosaic_core.node RUN_DIR``.

A launcher that runs a job elsewhere (a Slurm job, a Ray actor) prepares it here, where the user
typed the command (config, validation, the worker's plan: ``config.json`` and ``launch.json`` in
the run directory), and on the node this module supervises the command ``launch.json`` records,
as ``mosaic run`` does locally: events (JSON lines on stdout and in ``events.jsonl``), heartbeats,
logs, plugins' hooks, the manifest. The run is not prepared again.

The run's own variables (its plan's and plugins', secrets included) come in this process's
environment, named by ``$MOSAIC_PREPARED_ENV`` (comma-separated): never in a file; plugins set up
their per-run part here (``mosaic_child_env``: e.g. FastLane's segment on this node). The thread
budget is ``--num-cpus`` (the CPUs the launcher got for the run). SIGUSR1 (what schedulers send
before a time limit or a preemption) cancels the run as a stop signal does: the training process
checkpoints at its next safe point and ends keeping the run (the run contract)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from mosaic_core import hostsignals, procs
from mosaic_core.cli.errors import run_cli_command
from mosaic_core.config import SECRET_EXTRAS_ENV, WorkerConfig, extras_for_child, parse_extras_json
from mosaic_core.files import run_umask
from mosaic_core.runs import RunContext, RunDirectory
from mosaic_core.threads import budget

PREPARED_ENV = "MOSAIC_PREPARED_ENV"


def prepared_env(env: dict[str, str], extras: dict[str, Any] | None = None) -> dict[str, str]:
    """``env`` (a job's variables) plus the list of their names, for a node to find them again,
    and the secret ``extras`` that ``config.json`` records redacted (the node's host gets them back)."""
    return {**env, PREPARED_ENV: ",".join(sorted(env)), **extras_for_child(extras or {})[1]}


def supervise(
    run_dir: Path, heartbeat: float, grace: float, num_cpus: int | None, started: dict[str, Any] | None = None
) -> int:
    """Run the prepared run in ``run_dir`` here; its exit code. ``started``: what the launcher
    adds to ``run_started`` (``node``: where it runs)."""
    from mosaic_core.plugins import plugin_host
    from mosaic_core.supervisor import Supervisor, SupervisorOptions

    launch = json.loads((run_dir / "launch.json").read_text(encoding="utf-8"))
    data = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    worker = data.pop("worker")
    secrets = os.environ.pop(SECRET_EXTRAS_ENV, None)  # never passed on to the training process
    if secrets:
        data["extras"] = {**(data.get("extras") or {}), **parse_extras_json(secrets)}
    config = WorkerConfig.from_dict(data, source=str(run_dir / "config.json"))
    host = plugin_host()
    run = RunContext(
        config=config,
        directory=RunDirectory.for_run(run_dir.parent, run_dir.name),
        worker=worker,
        quiet=True,
        dry_run=False,
        settings=tuple(setting for _plugin, setting in host.run_settings(config)),
        checkpoint_layout=_checkpoint_layout(worker, config),
    )
    run.resume = _recorded_resume(launch, run.checkpoint_layout)  # run_resumed, the log numbered on
    names = [name for name in os.environ.get(PREPARED_ENV, "").split(",") if name]
    own = {name: os.environ[name] for name in names if name in os.environ}
    own.update(host.child_env(run))  # plugins' per-run set-up happens where the run does (FastLane's segment)
    env = {**own, **budget(num_cpus).environment(os.environ, own)}  # a user's own OMP_NUM_THREADS wins
    payload = {k: v for k, v in launch.items() if k not in ("command", "cwd", "threads", "worker")}
    options = SupervisorOptions(
        heartbeat_interval=heartbeat,
        grace_period=grace,
        json_stdout=True,
        started_payload={**payload, **(started or {})},
    )
    os.umask(run_umask())
    supervisor = Supervisor(run, host, list(launch["command"]), env, options, cwd=Path(launch.get("cwd") or run_dir))
    hostsignals.hold()  # a stop signal from now on cancels the run, which ends with a terminal event
    return supervisor.execute()


def _recorded_resume(launch: dict[str, Any], layout: Any) -> Any:
    """The resume ``launch.json`` records (a run prepared to go on from a checkpoint), or None."""
    from mosaic_core.contract import Checkpoint
    from mosaic_core.resume import Resume

    recorded = launch.get("resume")
    if not isinstance(recorded, dict):
        return None
    checkpoint = Checkpoint(Path(recorded["checkpoint"]), int(recorded["from_step"]), getattr(layout, "format", ""))
    return Resume(checkpoint, int(recorded["attempt"]), recorded.get("total_timesteps"))


def _checkpoint_layout(worker: str, config: WorkerConfig) -> Any:
    """How the worker's checkpoints look (a stopped run's end says whether it can resume), or None."""
    from mosaic_core.worker import load_worker
    from mosaic_core.workers import find_worker

    return load_worker(find_worker(worker)).checkpoint_layout(config)


def main(argv: list[str] | None = None, started: dict[str, Any] | None = None, prog: str = "mosaic_core.node") -> int:
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--heartbeat-interval", type=float, default=30.0)
    parser.add_argument("--grace-period", type=float, default=10.0)
    parser.add_argument("--num-cpus", type=int, default=None)
    ns = parser.parse_args(argv)
    procs.keep_cwd_off_child_paths()
    with hostsignals.guarded():
        return run_cli_command(
            lambda: supervise(
                ns.run_dir.absolute(),
                ns.heartbeat_interval,
                ns.grace_period,
                ns.num_cpus if ns.num_cpus and ns.num_cpus > 0 else None,
                started,
            )
        )


if __name__ == "__main__":
    sys.exit(main())
