"""What a run directory holds besides its own records: TensorBoard event files, checkpoints
and videos, found by looking (the analytics manifest, the dashboard and export read them here).

Every path is relative to the run directory and checked with
:meth:`mosaic_core.runs.RunDirectory.inside` (symlinks resolved): anything outside is left out.
Scanning skips symbolic links, ``__pycache__``/``.git`` and the folders plugins keep for themselves
(``mosaic_private_run_folders``: a tracker's copies of the event files),
and stops after ``MAX_FILES`` entries per section.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mosaic_core.errors import ConfigError
from mosaic_core.runs import RunDirectory

__all__ = [
    "CHECKPOINT_DIR",
    "CHECKPOINT_SUFFIXES",
    "EVENT_FILE",
    "MAX_FILES",
    "MAX_WALK",
    "SKIP_DIRS",
    "STEP_IN_NAME",
    "VIDEO_SUFFIXES",
    "inside",
    "is_checkpoint",
    "scan",
    "skipped_dirs",
    "step_from_name",
    "walk_files",
]

EVENT_FILE = "events.out.tfevents."
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors")
CHECKPOINT_DIR = "checkpoints"  # a worker's checkpoint layout (mosaic_core.contract) puts them here
VIDEO_SUFFIXES = (".mp4", ".gif", ".webm")
SKIP_DIRS = frozenset({"__pycache__", ".git"})
MAX_FILES = 2000
MAX_WALK = 50_000
STEP_IN_NAME = re.compile(r"(?:global_step|step|steps|iter|update)[_\-=]?(\d+)|_(\d+)\.[A-Za-z_]+$")


def inside(directory: RunDirectory, path: str | Path) -> str | None:
    """``path`` relative to the run dir, or None when it resolves outside it."""
    try:
        return directory.relative(directory.inside(path))
    except (ConfigError, OSError, ValueError):
        return None


@functools.cache
def skipped_dirs() -> frozenset[str]:
    """``SKIP_DIRS`` and the folders the installed plugins keep for themselves (asked once)."""
    from mosaic_core.plugins import plugin_host

    try:
        return SKIP_DIRS | plugin_host().private_run_folders()
    except Exception:  # a broken plugin set: scan everything but the fixed folders
        return SKIP_DIRS


def walk_files(run_dir: Path) -> Iterable[tuple[str, os.stat_result]]:
    """(relative path, stat) of the regular files under ``run_dir``, links and skipped dirs left out."""
    seen = 0
    skipped = skipped_dirs()
    for root, dirs, files in os.walk(run_dir):
        dirs[:] = sorted(d for d in dirs if d not in skipped and not os.path.islink(os.path.join(root, d)))
        for name in sorted(files):
            seen += 1
            if seen > MAX_WALK:
                return
            path = os.path.join(root, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if not os.path.islink(path) and os.path.isfile(path):
                yield os.path.relpath(path, run_dir), info


def is_checkpoint(rel: str) -> bool:
    """A file a scan counts as a checkpoint: one with a common weights suffix, or any file in the
    run's ``checkpoints/`` folder (where workers' layouts put theirs; the core names no worker's
    suffix, and ``checkpoint_saved`` events name the rest)."""
    return rel.endswith(CHECKPOINT_SUFFIXES) or Path(rel).parts[0] == CHECKPOINT_DIR


def step_from_name(name: str) -> int | None:
    match = STEP_IN_NAME.search(Path(name).name)
    if not match:
        return None
    return int(match.group(1) or match.group(2))


def scan(directory: RunDirectory, seen_checkpoints: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``tensorboard``, ``checkpoints`` and ``videos`` sections."""
    run_dir = directory.path
    event_dirs: dict[str, int] = {}
    checkpoints: dict[str, dict[str, Any]] = {}
    videos: list[dict[str, Any]] = []
    if run_dir.is_dir():
        for rel, info in walk_files(run_dir):
            name = os.path.basename(rel)
            if name.startswith(EVENT_FILE):
                parent = os.path.dirname(rel) or "."
                event_dirs[parent] = event_dirs.get(parent, 0) + 1
            elif is_checkpoint(rel):
                parts = Path(rel).parts
                if parts[0] == CHECKPOINT_DIR and len(parts) > 2:  # a directory checkpoint (checkpoints/step_N/…)
                    rel = f"{parts[0]}/{parts[1]}"
                entry = checkpoints.get(rel)
                if entry is not None:
                    entry["size_bytes"] += info.st_size
                elif len(checkpoints) < MAX_FILES:
                    checkpoints[rel] = {
                        "path": rel,
                        "step": step_from_name(os.path.basename(rel)),
                        "size_bytes": info.st_size,
                    }
            elif name.endswith(VIDEO_SUFFIXES) and len(videos) < MAX_FILES:
                videos.append({"path": rel, "size_bytes": info.st_size})
    for event in seen_checkpoints:  # checkpoint_saved events name files the scan may not recognise
        named = inside(directory, event["path"])
        if named is None:
            continue
        entry = checkpoints.setdefault(named, {"path": named, "step": None, "size_bytes": None})
        if event.get("step") is not None:
            entry["step"] = event["step"]
        full = run_dir / named
        if entry["size_bytes"] is None:
            entry["size_bytes"] = full.stat().st_size if full.is_file() else None
        if not full.exists():
            entry["missing"] = True
    ordered = sorted(checkpoints.values(), key=lambda c: (c["step"] is None, c["step"] or 0, c["path"]))
    return {
        "tensorboard": {"logdir": ".", "event_dirs": sorted(event_dirs), "event_files": sum(event_dirs.values())},
        "checkpoints": {"files": ordered[:MAX_FILES]},
        "videos": {"files": videos},
    }
