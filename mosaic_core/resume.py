"""Resume is the same command (docs/run-contract.md): ``mosaic resume RUN`` and re-running
``mosaic run … --run-id X`` on an existing X continue X from its newest checkpoint, in its own
directory, with ``run_resumed {from_step, checkpoint, attempt}`` in its ``events.jsonl``.

A completed run continues only with a larger ``--total-timesteps`` (a new attempt from its final
checkpoint, the same history). Everything is decided before the run directory is touched: a
completed run without a larger budget (refused, naming ``--total-timesteps`` and ``--restart``),
a run of another worker, algorithm or env, a budget shorter than what the run has trained, a run
with no checkpoint, one whose newest checkpoint the worker finds unusable
(:meth:`~mosaic_core.worker.Worker.check_checkpoint`: corrupt, of a newer format, of another
library version), one whose ``events.jsonl`` is cut off or edited (:func:`history_problem`) are
each one line, exit code 2, nothing written.
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
    """A decided resume: the checkpoint it starts from, which attempt it is (1: the first resume)
    and the budget it trains to (None: the config's)."""

    checkpoint: Checkpoint
    attempt: int
    total_timesteps: int | None = None

    def payload(self) -> dict[str, Any]:
        payload = {"from_step": self.checkpoint.step, "checkpoint": str(self.checkpoint.path), "attempt": self.attempt}
        if self.total_timesteps is not None:
            payload["total_timesteps"] = self.total_timesteps
        return payload

    def extras(self) -> dict[str, Any]:
        """What the worker's plan sees: mode ``resume`` from this checkpoint."""
        return {"mode": "resume", "checkpoint_path": str(self.checkpoint.path)}


def existing(run_dir: Path) -> bool:
    return run_dir.exists() or run_dir.is_symlink()


def recorded(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a recorded run (a directory, not a link, with its ``config.json``);
    anything else under a taken id stays refused as it is."""
    return run_dir.is_dir() and not run_dir.is_symlink() and (run_dir / "config.json").is_file()


@dataclass(frozen=True)
class RunState:
    """What a run's ``events.jsonl`` says of it: its last terminal event (None when it has none),
    how many times it was resumed, the training process of its last heartbeat (a pid) and the
    budget of its last attempt (``run_started``'s ``total_timesteps``: an extended run's is its own)."""

    terminal: str | None
    resumes: int
    pid: Any
    budget: int | None


def run_state(run_dir: Path) -> RunState:
    """The log is streamed, and only the lines of the events read here are parsed: a huge one
    costs time, not memory."""
    terminal, resumes, pid, budget = None, 0, None, None
    for event in iter_events(run_dir / "events.jsonl", (*TERMINAL, "run_started", "run_resumed", "heartbeat")):
        name, payload = event["event"], event.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        if name in TERMINAL:
            terminal = name
        elif name == "run_started":
            terminal, pid = None, None  # a later attempt's start: only its own end counts
            total = payload.get("total_timesteps")
            budget = total if isinstance(total, int) and not isinstance(total, bool) else budget
        elif name == "run_resumed":
            resumes += 1
        elif name == "heartbeat":
            pid = payload.get("pid")
    return RunState(terminal, resumes, pid, budget)


def history_problem(events_file: Path) -> str | None:
    """Why ``events_file`` cannot go on as one history (a resume appends to it), or None: its last
    line whole, its events' ``seq`` numbering on by one from 1. A cut-off or edited log is refused:
    appended to, its readers would join attempts that do not follow each other. Streamed (a line
    that is no event, or one too long to be one, is skipped as every reader skips it)."""
    try:
        with open(events_file, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return f"its {events_file.name} is empty"
            handle.seek(size - 1)
            if handle.read(1) != b"\n":
                return f"its {events_file.name} is cut off (its last line is incomplete)"
        expected = 1
        for record in iter_events(events_file):
            seq = record.get("seq")
            if not isinstance(seq, int) or isinstance(seq, bool):
                return f"its {events_file.name} is damaged (event {expected} has no seq)"
            if seq != expected:
                return f"its {events_file.name} is truncated or edited (event {expected} has seq {seq})"
            expected += 1
    except OSError as exc:
        return f"its {events_file.name} cannot be read ({exc})"
    return None if expected > 1 else f"its {events_file.name} holds no event"


def check_recorded(recorded: dict[str, Any], given: dict[str, Any], run_id: str) -> None:
    """The flags typed on a re-run must name the run's own algorithm and env."""
    for field, flag in (("algo", "--algo"), ("env_id", "--env-id")):
        value = given.get(field)
        if value is not None and recorded.get(field) not in (None, value):
            raise UsageError(
                f"run {run_id} has {field} {recorded.get(field)!r}, not {value!r}: it cannot continue as "
                f"another run; leave {flag} out to resume it, or choose another --run-id"
            )


def decide(
    worker_item: LoadedEntryPoint, worker: Worker, config: WorkerConfig, run_dir: Path, asked_total: int | None = None
) -> Resume:
    """How ``config``'s existing run continues, or a UsageError in one line (nothing touched).
    ``asked_total``: the ``--total-timesteps`` given for this attempt (None: the run's own budget,
    its last attempt's). A completed run continues only to a larger budget than it had."""
    run_id = config.run_id
    state = run_state(run_dir)
    if state.terminal is None and isinstance(state.pid, int) and process_alive(state.pid):
        raise UsageError(
            f"run {run_id} is still running (training process {state.pid}); stop it first "
            f"(`mosaic run` ends it with Ctrl-C), then resume it"
        )
    problem = history_problem(run_dir / "events.jsonl")
    if problem:
        raise UsageError(
            f"cannot resume run {run_id}: {problem}; `mosaic run --run-id {run_id} {RESTART_FLAG}` starts it over"
        )
    budget = state.budget if state.budget is not None else config.total_timesteps
    if state.terminal == "run_completed" and (asked_total is None or budget is None or asked_total <= budget):
        more = f" (more than {budget:,})" if budget is not None else ""
        raise UsageError(
            f"run {run_id} completed; `mosaic resume {run_id} --total-timesteps N`{more} trains it further, "
            f"`mosaic run --run-id {run_id} {RESTART_FLAG}` starts it over (its directory is cleared), "
            "or choose another --run-id"
        )
    total = asked_total if asked_total is not None else budget
    checkpoint = _usable_checkpoint(worker_item, worker, config, run_dir, total, asked=asked_total is not None)
    return Resume(checkpoint, state.resumes + 1, total)


def _usable_checkpoint(
    worker_item: LoadedEntryPoint,
    worker: Worker,
    config: WorkerConfig,
    run_dir: Path,
    total: int | None,
    asked: bool = False,
) -> Checkpoint:
    """The run's newest checkpoint if its worker can continue from it to ``total`` steps, else a
    UsageError saying why (``asked``: ``total`` is the --total-timesteps given)."""
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
    if total is not None and checkpoint.step >= total:
        if asked and checkpoint.step > total:
            raise UsageError(
                f"--total-timesteps {total:,} is fewer than the {checkpoint.step:,} steps run {run_id} has trained "
                f"(its checkpoint {checkpoint.path.name}): give more to train it further"
            )
        raise UsageError(
            f"run {run_id}'s newest checkpoint is at step {checkpoint.step:,}, its whole budget "
            f"(total_timesteps {total:,}): nothing is left to train; `mosaic resume {run_id} "
            "--total-timesteps N` with a larger N trains it further"
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
    checkpoint = _usable_checkpoint(worker_item, worker, run.config, run.run_dir, run.config.total_timesteps)
    resume = Resume(checkpoint, run_state(run.run_dir).resumes + 1)
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
    to = f", to step {resume.total_timesteps}" if resume.total_timesteps is not None else ""
    print(
        f"mosaic: resuming run {run_id} from step {resume.checkpoint.step} ({resume.checkpoint.path.name}; "
        f"resume {resume.attempt}{to})",
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
