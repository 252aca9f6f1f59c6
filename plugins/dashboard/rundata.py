"""What the page shows of run directories: the run list, and one run's config, manifest,
logs and files. Every reader is defensive: a damaged or vanishing run never raises past here.

The list comes from the runs root's index, which re-reads a run only when its files changed, so
polling it once a second while a page is open costs a few ``stat`` calls per run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mosaic_core.config import check_run_id
from mosaic_core.errors import ConfigError
from mosaic_core.files import check_own_dir, open_private, read_private_text

LOG_TAIL_BYTES = 32 * 1024


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


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(read_private_text(path))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def fastlane_enabled(config: dict[str, Any] | None) -> bool:
    extras = (config or {}).get("extras") or {}
    try:
        from mosaic_fastlane.settings import is_enabled

        return bool(is_enabled(extras))
    except Exception:  # an extras value FastLane itself would refuse: the run had no segment
        return False


class RunsIndex:
    """Summaries of every run under ``root``, newest first, from the runs root's index
    (:mod:`mosaic_core.runstore.index`: a run's files are read again only when they changed)."""

    def __init__(self, root: Path):
        self.root = root
        self._fastlane: dict[str, bool] = {}  # run -> whether its config enables FastLane (fixed at its start)

    def snapshot(self) -> list[dict[str, Any]]:
        from mosaic_core.runstore.index import list_runs

        runs = []
        for summary in list_runs(self.root):
            record = summary.to_dict()
            if summary.run_id not in self._fastlane:
                self._fastlane[summary.run_id] = fastlane_enabled(read_json(Path(summary.path) / "config.json"))
            record["fastlane"] = self._fastlane[summary.run_id]
            runs.append(record)
        return runs


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


def artifacts(run_dir: Path, run_id: str) -> dict[str, Any]:
    """Checkpoints, TensorBoard event dirs, videos and W&B dirs, found now (also mid-run)."""
    from mosaic_core.runstore.artifacts import scan
    from mosaic_core.runs import RunDirectory

    found = scan(RunDirectory(run_dir.parent, run_id), [])
    try:
        wandb = sorted(str(p.relative_to(run_dir)) for p in (run_dir / "wandb").iterdir()
                       if p.is_dir() and p.name.startswith(("offline-run-", "run-")))
    except OSError:
        wandb = []
    return {"run_dir": str(run_dir), "checkpoints": found["checkpoints"]["files"],
            "tensorboard": found["tensorboard"]["event_dirs"], "videos": found["videos"]["files"],
            "wandb": wandb, "tensorboard_command": f"mosaic tensorboard {run_id}"}
