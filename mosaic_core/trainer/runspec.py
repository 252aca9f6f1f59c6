"""What the daemon's run manager starts and keeps per run: the command line of a run
(:class:`LaunchSpec`, :func:`mosaic_run_command`), the manager's options, a started run's process."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import procs
from mosaic_core.trainer import processes
from mosaic_core.trainer.store import TERM


@dataclass(frozen=True)
class LaunchSpec:
    """What a worker command needs to know about one run."""

    run_id: str
    worker: str
    config_path: Path
    runs_dir: Path
    target: str
    heartbeat_interval: float
    grace_period: float
    resume: bool = False  # the run's directory holds an earlier attempt: continue it (mosaic_core.resume)
    run_flags: tuple[str, ...] = ()  # the submission's flags for the run's command line (the worker's own…)


def mosaic_run_command(spec: LaunchSpec) -> list[str]:
    return [
        *procs.mosaic_command(),
        "run",
        "--worker",
        spec.worker,
        "--config",
        str(spec.config_path),
        "--runs-dir",
        str(spec.runs_dir),
        "--grpc",
        "--grpc-target",
        spec.target,
        "--quiet",
        "--heartbeat-interval",
        f"{spec.heartbeat_interval:g}",
        "--grace-period",
        f"{spec.grace_period:g}",
        *(["--run-id", spec.run_id] if spec.resume else []),
        *spec.run_flags,
    ]  # an existing --run-id resumes it


@dataclass
class ManagerOptions:
    state_dir: Path
    target: str = ""  # the daemon's own address, given to the runs' training programs
    max_concurrent: int = 4
    heartbeat_timeout: float = 90.0
    grace_period: float = 10.0
    worker_command: Callable[[LaunchSpec], list[str]] = mosaic_run_command
    launcher_argv: tuple[str, ...] = ()  # where runs execute (LauncherChoice.argv()), on each command line
    log: Callable[[str], None] = lambda message: None  # one line per run transition (the CLI: stderr)


@dataclass
class RunProcess:
    run_id: str
    popen: Any
    run_dir: Path
    stderr_path: Path
    stop_reason: str | None = None  # set when the daemon stops the run
    stop_status: int = TERM
    terminal: dict[str, Any] | None = None
    stopper: threading.Thread | None = field(default=None, repr=False)
    tracked: processes.Tracked = field(default_factory=processes.Tracked)
