"""What one run under a runs root is: read from their config, events and manifest.

A run is any directory holding ``config.json`` or ``events.jsonl``. Its status comes from the
terminal event, else the manifest, else ``running`` (``lost`` when the process that ran it is
known and gone). Every file is optional and read defensively: a run still starting, a
truncated event log, a manifest from an older schema or an unreadable one all still list.

Reading is bounded, whatever a run's files hold (an imported run's too): ``config.json`` and
``manifest.json`` are read only up to ``MAX_JSON_BYTES``; of ``events.jsonl`` only the first
line and the last ``TAIL_BYTES``, a line over ``MAX_LINE_BYTES`` skipped without being read whole.
What was parsed is kept per file (device, inode, size, mtime), so a long-lived lister (the
dashboard) does not parse an unchanged log again.
"""

from __future__ import annotations

import functools
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core.events import one_history
from mosaic_core.files import open_private
from mosaic_core.procs import process_alive
from mosaic_core.runs import manifest_of
from mosaic_core.runstore.trust import marked_untrusted

__all__ = [
    "ENDED",
    "MAX_JSON_BYTES",
    "MAX_LINE_BYTES",
    "PARSED_KEPT",
    "Progress",
    "RunSummary",
    "TAIL_BYTES",
    "TERMINAL",
    "disk_usage",
    "format_age",
    "format_bytes",
    "format_number",
    "progress_of",
    "summarize",
]

TERMINAL = {"run_completed": "completed", "run_failed": "failed", "run_cancelled": "cancelled"}
ENDED = tuple(TERMINAL.values())  # statuses whose run has a score (runstore.score)
TAIL_BYTES = 256 * 1024  # of events.jsonl, read for the latest state
MAX_LINE_BYTES = 64 * 1024  # an event line longer than this is skipped (the host's are far shorter)
MAX_JSON_BYTES = 4 * 1024 * 1024  # a config or manifest larger than this is not read
PARSED_KEPT = 4096  # event logs whose parse is kept, in a long-lived process
_parsed: dict[str, tuple[tuple[int, ...], tuple[Any, list[dict[str, Any]]]]] = {}


@dataclass
class RunSummary:
    run_id: str
    path: str
    worker: str | None = None
    algo: str | None = None
    env_id: str | None = None
    status: str = "unknown"
    global_step: int | None = None
    total_timesteps: int | None = None
    last_return: float | None = (
        None  # the live moving average of the last 100 episodes' returns (a policy evaluation run: its mean)
    )
    score: dict[str, Any] | None = None  # the run's one score (runstore.score.Score.to_dict), once it has ended
    unit: str = "steps"  # what global_step / total_timesteps count: "episodes" for a policy evaluation
    started_at: float | None = None
    ended_at: float | None = None
    reason: str | None = None  # why it failed or was cancelled (from its terminal event)
    manifest_schema: str | None = None
    experiment: str | None = None  # the key its worker declares names_experiment (CleanRL's --name)
    experiment_tag: str | None = None  # extras.experiment (the `mosaic experiment` whose seed it is)
    untrusted: bool = False  # imported, its marker in the run directory (runstore.trust), until `mosaic runs trust`
    attempts: int = 1  # 1 + its resumes (run_resumed events; mosaic_core.resume)
    disk_bytes: int | None = None  # every file under the run directory (links not followed)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Its fields, in order (a copy: ``asdict``'s deep walk costs a listing of thousands dearly)."""
        data = dict(vars(self))
        data["score"], data["problems"] = dict(self.score) if self.score else self.score, list(self.problems)
        return data


def _read_json(path: Path, problems: list[str]) -> dict[str, Any] | None:
    try:
        with open_private(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_JSON_BYTES:
                problems.append(
                    f"{path.name}: {format_bytes(size)}, over the {format_bytes(MAX_JSON_BYTES)} "
                    "a listing reads; not read"
                )
                return None
            text = handle.read(MAX_JSON_BYTES).decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(f"{path.name}: {exc.strerror or exc}")
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(f"{path.name}: not valid JSON (line {exc.lineno})")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path.name}: not a JSON object")
        return None
    return data


def _events(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The first event and the events in the last ``TAIL_BYTES`` of the log (bad and over-long
    lines skipped); at most ``MAX_LINE_BYTES + TAIL_BYTES`` read, nothing when unchanged."""
    try:
        with open_private(path) as handle:
            info = os.fstat(handle.fileno())
            mark = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
            kept = _parsed.get(str(path))
            if kept is not None and kept[0] == mark:
                return kept[1]
            first = _parse_event(handle.readline(MAX_LINE_BYTES + 1))
            handle.seek(max(0, info.st_size - TAIL_BYTES))
            tail = handle.read(TAIL_BYTES).split(b"\n")
    except OSError:
        return None, []
    if info.st_size > TAIL_BYTES:
        tail = tail[1:]  # cut by the window
    parsed = first, one_history([r for r in map(_parse_event, tail) if r is not None])
    if len(_parsed) >= PARSED_KEPT:
        _parsed.pop(next(iter(_parsed)))
    _parsed[str(path)] = (mark, parsed)
    return parsed


def _parse_event(line: bytes) -> dict[str, Any] | None:
    """An event from one line, None for a line that is damaged, no event or over ``MAX_LINE_BYTES``
    (an unfinished line read as far as the cap)."""
    if len(line.rstrip(b"\n")) > MAX_LINE_BYTES:
        return None
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("event"), str) else None


def _alive(pid: Any) -> bool | None:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    return process_alive(pid)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _metrics_of(payload: Any) -> dict[str, Any] | None:
    if not isinstance(payload, dict):
        return None
    metrics = payload.get("metrics")
    if isinstance(metrics, dict):  # a heartbeat carries them nested
        return metrics
    return payload if "global_step" in payload else None


@dataclass(frozen=True)
class Progress:
    """What a run's progress counts. ``event``: for a run that counts episodes, the event (its
    worker's) whose payload carries ``episodes_done``, ``episodes_total`` and ``mean_return``."""

    unit: str
    total: int
    event: str | None = None


def progress_of(started: dict[str, Any], total_timesteps: int) -> Progress:
    """A run's progress as its ``run_started`` payload declares it under ``progress``
    (``{"unit": "episodes", "total": N, "event": NAME}``, a worker's ``Launch.started_payload``
    for a run that plays episodes, e.g. a policy evaluation) when it gives a positive total,
    else its steps."""
    declared = started.get("progress") if isinstance(started, dict) else None
    if isinstance(declared, dict) and declared.get("unit") == "episodes":
        total, event = declared.get("total"), declared.get("event")
        if isinstance(total, int) and not isinstance(total, bool) and total > 0:
            return Progress("episodes", total, event if isinstance(event, str) and event else None)
    return Progress("steps", total_timesteps)


def summarize(run_dir: Path, with_score: bool = True) -> RunSummary:
    """One run's summary; never raises for a damaged run directory. ``with_score=False`` leaves
    an ended run's score (its TensorBoard files read back) to the next listing: the host records
    a run as it ends without reading them, so its exit is not delayed."""
    summary = RunSummary(run_id=run_dir.name, path=str(run_dir))
    problems = summary.problems
    config = _read_json(run_dir / "config.json", problems) or {}
    manifest = _read_json(manifest_of(run_dir), problems) or {}
    first, tail = _events(run_dir / "events.jsonl")
    _from_records(summary, config, manifest)
    summary.untrusted = marked_untrusted(run_dir)
    summary.disk_bytes = disk_usage(run_dir)
    progress = _from_start(summary, first, run_dir)
    pids, going_on = _follow_events(summary, tail, progress)
    _from_manifest(summary, manifest)
    if summary.status == "unknown":
        status = None if going_on else _text(manifest.get("status"))
        if status:
            summary.status = status
        elif first is not None or config:
            alive = [a for a in map(_alive, pids) if a is not None]
            summary.status = "lost" if alive and not any(alive) else "running"
    if with_score and summary.status in ENDED and summary.unit == "steps":
        summary.score = _score(run_dir)
    return summary


def _from_records(summary: RunSummary, config: dict[str, Any], manifest: dict[str, Any]) -> None:
    """What the run's ``config.json`` (else its manifest) says: worker, algorithm, env, budget."""
    summary.worker = _text(config.get("worker")) or _text(manifest.get("worker"))
    summary.algo = _text(config.get("algo")) or _text(manifest.get("algo"))
    summary.env_id = _text(config.get("env_id")) or _text(manifest.get("env_id"))
    total = config.get("total_timesteps")
    summary.total_timesteps = total if isinstance(total, int) and not isinstance(total, bool) else None
    summary.manifest_schema = _text(manifest.get("schema")) if manifest else None
    extras = config.get("extras")
    if not isinstance(extras, dict):
        extras = {}
    summary.experiment = next(filter(None, (_text(extras.get(key)) for key in _experiment_keys(summary.worker))), None)
    summary.experiment_tag = next(filter(None, (_text(extras.get(key)) for key in _group_tag_keys())), None)


@functools.lru_cache(maxsize=1)
def _group_tag_keys() -> tuple[str, ...]:
    """The extras keys installed plugins declare as a run's group tag (``ExtrasKey(group_tag=True)``:
    the experiments plugin's); none when plugins cannot load."""
    from mosaic_core.errors import MosaicError
    from mosaic_core.plugins import plugin_host

    try:
        return tuple(key.name for _, key in plugin_host().extras_keys() if key.group_tag and not key.prefix)
    except MosaicError:
        return ()


@functools.lru_cache(maxsize=32)
def _experiment_keys(worker: str | None) -> tuple[str, ...]:
    """The extras keys worker ``worker`` declares as naming the experiment a run continues
    (``ExtrasKey(names_experiment=True)``: CleanRL's ``--name``); none when it cannot load."""
    from mosaic_core.errors import MosaicError
    from mosaic_core.worker import load_worker
    from mosaic_core.workers import find_worker

    if not worker:
        return ()
    try:
        keys = load_worker(find_worker(worker)).extras_keys() or []
    except MosaicError:
        return ()
    return tuple(key.name for key in keys if key.names_experiment and not key.prefix)


def _from_start(summary: RunSummary, first: dict[str, Any] | None, run_dir: Path) -> Progress:
    """What the ``run_started`` event says (when it started, what its progress counts)."""
    progress = Progress("steps", 0)
    if first is not None and first.get("event") == "run_started":
        started = first.get("payload") or {}
        summary.started_at = _number(first.get("timestamp"))
        summary.worker = summary.worker or _text(started.get("worker"))
        summary.algo = summary.algo or _text(started.get("algo"))
        summary.env_id = summary.env_id or _text(started.get("env_id"))
        progress = progress_of(started, summary.total_timesteps or 0)
        summary.unit, summary.total_timesteps = progress.unit, progress.total or summary.total_timesteps
    if summary.started_at is None:
        try:
            summary.started_at = (run_dir / "config.json").stat().st_mtime
        except OSError:
            summary.started_at = None
    return progress


def _follow_events(summary: RunSummary, tail: list[dict[str, Any]], progress: Progress) -> tuple[list[Any], bool]:
    """The last events: progress, attempts, the end. Returns the heartbeats' pids and whether a
    resumed attempt is still going on (then the manifest is the earlier attempt's)."""
    pids: list[Any] = []
    going_on = False
    for record in tail:
        payload = record.get("payload") or {}
        metrics = _metrics_of(payload) if record["event"] in ("metrics", "heartbeat") else None
        if metrics and summary.unit == "steps":
            step = metrics.get("global_step")
            if isinstance(step, int) and not isinstance(step, bool):
                summary.global_step = max(summary.global_step or 0, step)
            ret = _number(metrics.get("episodic_return_smoothed", metrics.get("episodic_return")))
            summary.last_return = ret if ret is not None else summary.last_return
        if record["event"] == progress.event and summary.unit == "episodes":
            done = payload.get("episodes_done")
            summary.global_step = done if isinstance(done, int) and not isinstance(done, bool) else summary.global_step
            summary.last_return = _number(payload.get("mean_return"))
        if record["event"] == "run_resumed":  # the run goes on: an earlier attempt's end is not its end
            summary.attempts += 1
            summary.status, summary.ended_at, summary.reason = "unknown", None, None
            going_on = True
            budget = payload.get("total_timesteps")  # `mosaic resume --total-timesteps N`: the run's budget now
            if summary.unit == "steps" and isinstance(budget, int) and not isinstance(budget, bool):
                summary.total_timesteps = budget
        if record["event"] == "heartbeat" and isinstance(payload, dict):
            pids.append(payload.get("pid"))
        if record["event"] in TERMINAL:
            summary.status = TERMINAL[record["event"]]
            summary.ended_at = _number(record.get("timestamp"))
            summary.reason = _text(payload.get("error") or payload.get("reason"))
            going_on = False
    return pids, going_on


def _from_manifest(summary: RunSummary, manifest: dict[str, Any]) -> None:
    """The final step and return from the manifest, when the events gave none."""
    final = manifest.get("metrics")
    if not isinstance(final, dict):
        final = {}
    if summary.global_step is None and summary.unit == "steps" and isinstance(final.get("global_step"), int):
        summary.global_step = final["global_step"]
    if summary.last_return is None and summary.unit == "steps":
        summary.last_return = _number(final.get("episodic_return_smoothed", final.get("episodic_return")))


def _score(run_dir: Path) -> dict[str, Any] | None:
    """The run's score (runstore.score), None when it has none (or no plugin reads its scalars)."""
    from mosaic_core.runstore.score import run_score

    score = run_score(run_dir)
    return score.to_dict() if score is not None else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def disk_usage(path: Path) -> int:
    """Bytes allocated to the files under ``path`` (links are counted, never followed)."""
    total, todo = 0, [str(path)]
    while todo:
        try:
            with os.scandir(todo.pop()) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
        except OSError:
            continue
    return total


def format_bytes(size: int | None) -> str:
    if size is None:
        return "-"
    scaled = float(size)
    for unit in ("B", "K", "M", "G"):
        if scaled < 1024 or unit == "G":
            return f"{scaled:.0f}{unit}" if unit == "B" else f"{scaled:.1f}{unit}"
        scaled /= 1024
    return "-"


def format_number(value: Any, digits: int = 2) -> str:
    """A metric for people: ``digits`` decimals (returns: -165.34), 4 significant digits for
    a smaller float (a loss of 0.0001234), an int as it is, "-" for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    if isinstance(value, int) or value != value or value in (float("inf"), float("-inf")):
        return str(value)
    return f"{value:.{digits}f}" if value == 0 or abs(value) >= 10**-digits else f"{value:.4g}"


def format_age(started_at: float | None, now: float | None = None) -> str:
    """How long ago a run started, in its largest unit: ``3d``, ``5h``, ``12m``, ``40s``, ``-``."""
    if started_at is None:
        return "-"
    seconds = int((now or time.time()) - started_at)
    if seconds >= 86400:  # one branch each: a table of thousands of runs formats an age per row
        return f"{seconds // 86400}d"
    if seconds >= 3600:
        return f"{seconds // 3600}h"
    if seconds >= 60:
        return f"{seconds // 60}m"
    return f"{max(0, seconds)}s"
