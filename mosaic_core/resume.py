"""Resume is the same command (docs/run-contract.md): ``mosaic resume RUN`` and re-running
``mosaic run … --run-id X`` on an existing X continue X from its newest checkpoint, in its own
directory, with ``run_resumed {from_step, checkpoint, attempt}`` in its ``events.jsonl``.

Everything is decided before the run directory is touched: a completed run (refused, naming
``--restart``), a run of another worker, algorithm or env, a run with no checkpoint, one whose
newest checkpoint the worker finds unusable (:meth:`~mosaic_core.worker.Worker.check_checkpoint`)
are each one line, exit code 2, nothing written.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic_core.contract import Checkpoint, newest_checkpoint
from mosaic_core.errors import UsageError
from mosaic_core.events import TERMINAL, iter_events
from mosaic_core.procs import process_alive

if TYPE_CHECKING:
    from mosaic_core.config import WorkerConfig
    from mosaic_core.entrypoints import LoadedEntryPoint
    from mosaic_core.runs import RunContext
    from mosaic_core.types import Launch
    from mosaic_core.worker import Worker

RESTART_FLAG = "--restart"


@dataclass(frozen=True)
class Resume:
    """A decided resume: the checkpoint it starts from and which attempt it is (1: the first resume)."""

    checkpoint: Checkpoint
    attempt: int

    def payload(self) -> dict[str, Any]:
        return {"from_step": self.checkpoint.step, "checkpoint": str(self.checkpoint.path), "attempt": self.attempt}

    def extras(self) -> dict[str, Any]:
        """What the worker's plan sees: mode ``resume`` from this checkpoint."""
        return {"mode": "resume", "checkpoint_path": str(self.checkpoint.path)}


def existing(run_dir: Path) -> bool:
    return run_dir.exists() or run_dir.is_symlink()


def recorded(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a recorded run (a directory, not a link, with its ``config.json``);
    anything else under a taken id stays refused as it is."""
    return run_dir.is_dir() and not run_dir.is_symlink() and (run_dir / "config.json").is_file()


def run_state(run_dir: Path) -> tuple[str | None, int, Any]:
    """The run's last terminal event (``run_completed``…, None when it has none), how many
    times it was resumed so far, and the training process of its last heartbeat (a pid). The log
    is streamed, and only the lines of those events are parsed: a huge one costs time, not memory."""
    terminal, resumes, pid = None, 0, None
    for event in iter_events(run_dir / "events.jsonl", (*TERMINAL, "run_started", "run_resumed", "heartbeat")):
        name = event["event"]
        if name in TERMINAL:
            terminal = name
        elif name == "run_started":
            terminal, pid = None, None  # a later attempt's start: only its own end counts
        elif name == "run_resumed":
            resumes += 1
        elif name == "heartbeat" and isinstance(event.get("payload"), dict):
            pid = event["payload"].get("pid")
    return terminal, resumes, pid


def check_recorded(recorded: dict[str, Any], given: dict[str, Any], run_id: str) -> None:
    """The flags typed on a re-run must name the run's own algorithm and env."""
    for field, flag in (("algo", "--algo"), ("env_id", "--env-id")):
        value = given.get(field)
        if value is not None and recorded.get(field) not in (None, value):
            raise UsageError(
                f"run {run_id} has {field} {recorded.get(field)!r}, not {value!r}: it cannot continue as "
                f"another run; leave {flag} out to resume it, or choose another --run-id"
            )


def decide(worker_item: LoadedEntryPoint, worker: Worker, config: WorkerConfig, run_dir: Path) -> Resume:
    """How ``config``'s existing run continues, or a UsageError in one line (nothing touched)."""
    run_id = config.run_id
    terminal, resumes, pid = run_state(run_dir)
    if terminal is None and isinstance(pid, int) and process_alive(pid):
        raise UsageError(
            f"run {run_id} is still running (training process {pid}); stop it first "
            f"(`mosaic run` ends it with Ctrl-C), then resume it"
        )
    if terminal == "run_completed":
        raise UsageError(
            f"run {run_id} completed; `mosaic run --run-id {run_id} {RESTART_FLAG}` starts it over "
            "(its directory is cleared), or choose another --run-id"
        )
    return Resume(_usable_checkpoint(worker_item, worker, config, run_dir), resumes + 1)


def _usable_checkpoint(
    worker_item: LoadedEntryPoint, worker: Worker, config: WorkerConfig, run_dir: Path
) -> Checkpoint:
    """The run's newest checkpoint if its worker can continue from it, else a UsageError saying why."""
    run_id = config.run_id
    layout = worker.checkpoint_layout(config)
    if layout is None:
        raise UsageError(
            f"worker {worker_item.name!r} does not say how its checkpoints look "
            f"(Worker.checkpoint_layout) for algo {config.algo!r}: run {run_id} cannot be resumed; "
            f"{RESTART_FLAG} starts it over"
        )
    checkpoint = newest_checkpoint(run_dir, layout, run_id)
    if checkpoint is None:
        raise UsageError(
            f"run {run_id} has no checkpoint ({layout.pattern}) in {run_dir} to resume from; "
            f"{RESTART_FLAG} starts it over"
        )
    problem = worker.check_checkpoint(checkpoint, config)
    if problem:
        raise UsageError(f"cannot resume run {run_id}: {problem}")
    if config.total_timesteps is not None and checkpoint.step >= config.total_timesteps:
        raise UsageError(
            f"run {run_id}'s newest checkpoint is at step {checkpoint.step}, at or past its "
            f"total_timesteps {config.total_timesteps}: give a larger --total-timesteps to train further"
        )
    return checkpoint


def continue_in_place(run: RunContext) -> Launch:
    """For a launcher that runs ``run`` again after losing it (its node died): the run continues
    from the newest checkpoint its directory holds (one copied back from the node), as ``mosaic
    resume`` would, without asking whether its last process is alive (that was on the node).
    ``run`` becomes the resume (``run.resume``, ``run.config`` in mode ``resume``), ``launch.json``
    records the attempt, and the worker's plan for it is returned. A UsageError saying why when
    it cannot continue (no checkpoint, an unusable one): the launcher then starts it over."""
    from mosaic_core.config import redact
    from mosaic_core.files import write_json_atomic
    from mosaic_core.types import Launch
    from mosaic_core.worker import load_worker
    from mosaic_core.workers import find_worker

    worker_item = find_worker(run.worker)
    worker = load_worker(worker_item)
    checkpoint = _usable_checkpoint(worker_item, worker, run.config, run.run_dir)
    resume = Resume(checkpoint, run_state(run.run_dir)[1] + 1)
    config = run.config.with_overrides(extras=resume.extras())
    before = run.config, run.resume
    run.config, run.resume = config, resume  # what the plan sees, as for `mosaic resume`
    try:
        launch = worker.plan(config, run)
        if not isinstance(launch, Launch):
            raise UsageError(f"worker {worker_item.name!r} returned {type(launch).__name__} from plan(), not a Launch")
    except BaseException:
        run.config, run.resume = before  # not continued: the run is as it was
        raise
    try:
        record = json.loads(run.directory.launch.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    record = record if isinstance(record, dict) else {}
    record.update(
        command=list(launch.command), resume=resume.payload(), attempts=attempts(run.directory.launch, resume)
    )
    write_json_atomic(run.directory.launch, redact(record))
    return launch


def announce(run_id: str, resume: Resume) -> None:
    print(
        f"mosaic: resuming run {run_id} from step {resume.checkpoint.step} ({resume.checkpoint.path.name}; "
        f"resume {resume.attempt})",
        file=sys.stderr,
    )


def clear(run_dir: Path) -> None:
    """``--restart``: remove the run's directory (ours, not a link) so the run starts over."""
    from mosaic_core.files import check_own_dir

    info = os.lstat(run_dir)
    if stat.S_ISLNK(info.st_mode):
        raise UsageError(f"run directory {run_dir} is a symbolic link; refused")
    check_own_dir(run_dir, "run directory")
    shutil.rmtree(run_dir)


def attempts(launch_file: Path, resume: Resume) -> list[dict[str, Any]]:
    """Every resume of the run so far, this one last (``launch.json`` keeps them)."""
    try:
        earlier = json.loads(launch_file.read_text(encoding="utf-8")).get("attempts", [])
    except (OSError, ValueError, AttributeError):
        earlier = []
    earlier = [a for a in earlier if isinstance(a, dict)] if isinstance(earlier, list) else []
    return [*earlier, resume.payload()]
