"""What the page shows of run directories: the run list, and one run's config, manifest,
logs and files. Every reader is defensive: a damaged or vanishing run never raises past here.

The list comes from the runs root's index, which re-reads a run only when its files changed, so
polling it once a second while a page is open costs a few ``stat`` calls per run; a run's files
are read within the caps of :mod:`mosaic_core.runstore.summary` (a line, a file), here too.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from mosaic_core import ConfigError
from mosaic_core.files import check_own_dir, open_private
from mosaic_core.runstore.artifacts import MAX_FILES
from mosaic_core.runstore.summary import MAX_JSON_BYTES
from mosaic_core.toolkit import check_run_id

LOG_TAIL_BYTES = 32 * 1024
CHECKPOINT_POLLS = 16  # per look at a run's checkpoints: at most this many follower reads (4 MiB each)


class UnknownRun(LookupError):
    """No such run (or a run id that cannot name one); the message says which."""


def checked_run_id(run_id: str) -> str:
    """``run_id`` if it can name a run (it becomes a path), else UnknownRun."""
    try:
        return check_run_id(run_id)
    except ConfigError:
        raise UnknownRun(f"{run_id[:80]!r} is not a run id (letters, digits, '-' and '_')") from None


def run_path(root: Path, run_id: str) -> Path:
    """The run's directory, or UnknownRun naming the id and the root."""
    path = root / checked_run_id(run_id)
    if not path.is_dir():
        raise UnknownRun(f"no run {run_id} under {root}")
    try:
        check_own_dir(path, "run directory")
    except OSError as exc:  # a link, another user's directory: not served
        raise UnknownRun(str(exc)) from None
    return path


def read_json(path: Path, limit: int = MAX_JSON_BYTES) -> dict[str, Any] | None:
    """A JSON object file, or None (missing, damaged, not an object, or over ``limit`` bytes)."""
    try:
        with open_private(path) as handle:
            if os.fstat(handle.fileno()).st_size > limit:
                return None
            data = json.loads(handle.read(limit))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class RunsIndex:
    """Summaries of every run under ``root``, from the runs root's index
    (:mod:`mosaic_core.runstore.index`: a run's files are read again only when they changed),
    each run's record kept between calls and made again only when its row changed."""

    def __init__(self, root: Path):
        self.root = root
        self._fastlane: dict[str, bool] = {}  # run -> whether its config asks for live frames (fixed at its start)
        self._tokens: dict[str, str] = {}  # run -> its row's token when its record was made
        self._records: dict[str, dict[str, Any]] = {}

    def snapshot(self) -> list[dict[str, Any]]:
        """Every run's record (its summary, ``live_frames``), in no particular order: never to be
        changed by the caller (they are kept)."""
        from mosaic_core.runstore.index import RunIndex, list_runs
        from mosaic_core.runstore.trust import untrusted_run

        index = RunIndex(self.root)
        try:
            found = index.changed(self._tokens)
        finally:
            index.close()
        if found is None:  # the index cannot answer: every run from its files
            self._tokens, self._records = {}, {}
            return [self._record(summary) for summary in list_runs(self.root)]
        tokens, changed = found
        records = {}
        for run_id in tokens:
            summary = changed.get(run_id)
            record = self._record(summary) if summary is not None else self._records.get(run_id)
            if record is not None:
                records[run_id] = record
        self._tokens = {run_id: token for run_id, token in tokens.items() if token is not None and run_id in records}
        self._records = records
        if untrusted_run(self.root) is not None:  # the whole root lies in an imported run
            return [{**record, "untrusted": True} for record in records.values()]
        return list(records.values())

    def _record(self, summary: Any) -> dict[str, Any]:
        record = summary.to_dict()
        if summary.run_id not in self._fastlane:
            path = Path(summary.path)
            from mosaic_dashboard.frames import frames_wanted

            self._fastlane[summary.run_id] = frames_wanted(path, read_json(path / "config.json"))
        record["live_frames"] = self._fastlane[summary.run_id]
        return record


def log_tails(run_dir: Path, limit: int = LOG_TAIL_BYTES) -> dict[str, str]:
    """The last ``limit`` bytes of each file under ``logs/`` (decoded leniently)."""
    tails: dict[str, str] = {}
    try:
        names = sorted(p.name for p in (run_dir / "logs").iterdir() if p.is_file() and not p.is_symlink())
    except OSError:
        return tails
    for name in names:
        try:
            with open_private(run_dir / "logs" / name) as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - limit))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        tails[name] = text if size <= limit else "…" + text.split("\n", 1)[-1]
    return tails


class SavedCheckpoints:
    """The checkpoints a run announced (its ``checkpoint_saved`` events, e.g. a directory such
    as RLlib's, which no file suffix finds), read from ``events.jsonl`` incrementally: each look
    reads only what was appended since, at most ``CHECKPOINT_POLLS`` chunks."""

    def __init__(self, run_dir: Path):
        from mosaic_core.runstore.follow import EventFollower

        self.run_dir = run_dir
        self.follower = EventFollower(run_dir)
        self.seen: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()  # two requests for the same run: one reads on at a time

    def look(self) -> list[dict[str, Any]]:
        """``{"path", "step"}`` of each announced checkpoint, paths relative to the run dir where
        they can be (RunGone when the run directory went away)."""
        with self.lock:
            for _ in range(CHECKPOINT_POLLS):
                start = self.follower.offset
                for event in self.follower.poll():
                    self._note(event)
                if self.follower.offset == start:
                    break
            return list(self.seen.values())

    def _note(self, event: dict[str, Any]) -> None:
        entry = checkpoint_entry(self.run_dir, event.get("payload")) if event["event"] == "checkpoint_saved" else None
        if entry is not None and (entry["path"] in self.seen or len(self.seen) < MAX_FILES):
            self.seen[entry["path"]] = entry


def checkpoint_entry(run_dir: Path, record: Any) -> dict[str, Any] | None:
    """``{"path", "step"}`` of a checkpoint as a run recorded it (a ``checkpoint_saved`` payload,
    a manifest entry), its path as it is now (:func:`in_run`); None when it names no path."""
    if not isinstance(record, dict) or not isinstance(record.get("path"), str):
        return None
    step = record.get("global_step", record.get("step"))
    return {
        "path": in_run(run_dir, record["path"]),
        "step": step if isinstance(step, int) and not isinstance(step, bool) else None,
    }


def in_run(run_dir: Path, path: str) -> str:
    """A path a run recorded, as it is now: an absolute path under a directory named as the run
    (where it ran before it was moved, imported or copied back from a node) becomes relative to
    ``run_dir``; anything else is returned as given (the scan leaves out what is outside)."""
    parts = Path(path).parts
    if Path(path).is_absolute() and run_dir.name in parts and not Path(path).is_relative_to(run_dir):
        last = len(parts) - 1 - parts[::-1].index(run_dir.name)
        return str(Path(*parts[last + 1 :])) if last + 1 < len(parts) else path
    return path


def artifacts(run_dir: Path, run_id: str, announced: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Checkpoints, TensorBoard event dirs, videos and W&B dirs, found now (also mid-run).
    Checkpoints: the files a scan recognises, those the manifest lists, and ``announced`` (a
    run's ``checkpoint_saved`` events, :class:`SavedCheckpoints`), directories included."""
    from mosaic_core import RunDirectory
    from mosaic_core.runstore.artifacts import scan
    from mosaic_core.toolkit import manifest_of

    section = (read_json(manifest_of(run_dir)) or {}).get("checkpoints")
    listed = section.get("files") if isinstance(section, dict) else None
    seen = [e for e in (checkpoint_entry(run_dir, c) for c in (listed if isinstance(listed, list) else [])) if e]
    found = scan(RunDirectory(run_dir.parent, run_id), seen + list(announced or []))
    try:
        wandb = sorted(
            str(p.relative_to(run_dir))
            for p in (run_dir / "wandb").iterdir()
            if p.is_dir() and p.name.startswith(("offline-run-", "run-"))
        )
    except OSError:
        wandb = []
    return {
        "run_dir": str(run_dir),
        "checkpoints": found["checkpoints"]["files"],
        "tensorboard": found["tensorboard"]["event_dirs"],
        "videos": found["videos"]["files"],
        "wandb": wandb,
        "tensorboard_command": f"mosaic tensorboard {run_id}",
    }
