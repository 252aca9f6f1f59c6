"""``analytics.json``: MOSAIC's analytics manifest, in the shape its GUI and tools read, written
beside ``manifest.json`` at the end of every run (completed, failed or cancelled) and carried by
the terminal event.

It is a view of the run's ``manifest.json`` (this plugin's ``tensorboard``, ``checkpoints``,
``wandb`` and ``notes`` sections, the sweep plugin's ``optuna`` section) in MOSAIC's names:
``artifacts.tensorboard`` and ``artifacts.wandb`` as MOSAIC's analytics tabs read them, plus
``artifacts.optuna`` and ``artifacts.checkpoints`` (its artifact manifest schema), and MOSAIC's flat
fields. Paths are absolute, under the run directory, as MOSAIC wrote them (``relative_path`` beside
them, relative to the run directory); a path from the config that resolves outside the run
directory is left out with one line saying so (``error``), never followed. No secret: the
document is scrubbed of the run's secret values and key-redacted before it is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mosaic_analytics.manifest import scrub
from mosaic_core import STATUS_OF
from mosaic_core.files import read_private_text, write_json_atomic
from mosaic_core.runstore.artifacts import CHECKPOINT_DIR
from mosaic_core.toolkit import events_backwards, redact

FILE = "analytics.json"
ARTIFACTS = ("tensorboard", "wandb", "optuna", "checkpoints")
FLAT = ("tensorboard_dir", "wandb_run_path", "optuna_db_path", "checkpoints_dir", "notes")
EVENT_LIST_LIMIT = 20  # in the terminal event: the newest checkpoints, the first event dirs (the file has all)
EVENT_NOTES_LIMIT = 2000  # characters of notes in the terminal event
OUTSIDE = "resolves outside the run directory: left out"


def document(
    run_dir: Path, run_id: str, status: str, extras: dict[str, Any], manifest: dict[str, Any]
) -> dict[str, Any]:
    """The ``analytics.json`` of a run from its ``manifest.json`` document and config extras."""
    artifacts = {
        "tensorboard": _tensorboard(run_dir, extras, _section(manifest, "tensorboard")),
        "wandb": _wandb(run_dir, extras, _section(manifest, "wandb")),
        "optuna": _optuna(run_dir, _section(manifest, "optuna")),
        "checkpoints": _checkpoints(run_dir, extras, _section(manifest, "checkpoints")),
    }
    notes = manifest.get("notes")
    return {
        "run_id": run_id,
        "status": status,
        "artifacts": artifacts,
        "tensorboard_dir": artifacts["tensorboard"]["log_dir"],
        "wandb_run_path": artifacts["wandb"]["run_path"],
        "optuna_db_path": artifacts["optuna"]["db_path"],
        "checkpoints_dir": artifacts["checkpoints"]["dir"],
        "notes": notes if isinstance(notes, str) else None,
    }


def _section(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    section = manifest.get(name)
    return section if isinstance(section, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _absolute(run_dir: Path, relative: str | None) -> str | None:
    return None if relative is None else str(run_dir if relative == "." else run_dir / relative)


def _common_dir(paths: list[str]) -> str | None:
    """The folder holding every one of ``paths`` (relative to the run dir), "." when none is shared."""
    return (os.path.commonpath(paths) or ".") if paths else None


def _configured(key: str, section: dict[str, Any]) -> tuple[str | None, str | None]:
    """(relative dir, error) of a directory the config names (the section's ``dir``: None when it
    resolved outside the run directory)."""
    relative = _text(section.get("dir"))
    return relative, None if relative else f"extras.{key} {OUTSIDE}"


def _tensorboard(run_dir: Path, extras: dict[str, Any], section: dict[str, Any]) -> dict[str, Any]:
    event_dirs = [d for d in section.get("event_dirs") or [] if isinstance(d, str)]
    error = None
    if _text(extras.get("tensorboard_dir")):
        relative, error = _configured("tensorboard_dir", section)
    else:
        relative = _common_dir(event_dirs)
    found = {
        "enabled": relative is not None,
        "log_dir": _absolute(run_dir, relative),
        "relative_path": relative,
        "event_dirs": event_dirs,
        "event_files": section.get("event_files", 0),
    }
    return {**found, "error": error} if error else found


def _wandb(run_dir: Path, extras: dict[str, Any], section: dict[str, Any]) -> dict[str, Any]:
    run_path = _text(extras.get("wandb_run_path")) or _text(section.get("run_path"))
    run_id = _text(section.get("run_id")) or (run_path.rsplit("/", 1)[-1] if run_path else None)
    offline = section.get("mode") == "offline"
    folder = _text(section.get("dir"))
    used = bool(section.get("enabled") or folder)  # tracked, or W&B wrote its folder
    return {
        "enabled": bool(run_path or used),
        "run_path": run_path,
        "run_id": run_id,
        "entity": _text(extras.get("wandb_entity")) or _text(section.get("entity")),
        "project": _text(extras.get("wandb_project_name"))
        or _text(extras.get("wandb_project"))
        or _text(section.get("project")),
        "mode": section.get("mode") if used else None,
        "offline_dir": _absolute(run_dir, folder) if offline else None,
    }


def _optuna(run_dir: Path, section: dict[str, Any]) -> dict[str, Any]:
    relative = _text(section.get("db"))
    found = {
        "enabled": relative is not None,
        "db_path": _absolute(run_dir, relative),
        "relative_path": relative,
        "exists": bool(section.get("exists")),
    }
    return {**found, "error": section["error"]} if section.get("error") else found


def _checkpoints(run_dir: Path, extras: dict[str, Any], section: dict[str, Any]) -> dict[str, Any]:
    listed = [f for f in section.get("files") or [] if isinstance(f, dict) and isinstance(f.get("path"), str)]
    error = None
    if _text(extras.get("checkpoints_dir")):
        relative, error = _configured("checkpoints_dir", section)
    elif (run_dir / CHECKPOINT_DIR).is_dir() and not (run_dir / CHECKPOINT_DIR).is_symlink():
        relative = CHECKPOINT_DIR  # where workers' checkpoint layouts put theirs
    else:
        relative = _common_dir([os.path.dirname(f["path"]) or "." for f in listed])
    found = {
        "enabled": relative is not None or bool(listed),
        "dir": _absolute(run_dir, relative),
        "relative_path": relative,
        "files": [{"path": _absolute(run_dir, f["path"]), "step": f.get("step")} for f in listed],
        "files_total": len(listed),
    }
    return {**found, "error": error} if error else found


def scrubbed(value: Any, secrets: list[str]) -> Any:
    """``value`` with every secret string replaced by ``***`` and every secret-named key redacted."""
    return redact(scrub(value, secrets))


def write(run_dir: Path, analytics: dict[str, Any]) -> None:
    """``<run_dir>/analytics.json``, atomically (a link planted at its name is replaced, never followed)."""
    write_json_atomic(run_dir / FILE, analytics)


def for_event(analytics: dict[str, Any]) -> dict[str, Any]:
    """The document for the terminal event's payload: the same, its long lists and notes cut to
    stay well under a reader's line limit (``files_total`` says how many the file lists)."""
    artifacts = dict(analytics["artifacts"])
    checkpoints = dict(artifacts["checkpoints"])
    checkpoints["files"] = checkpoints["files"][-EVENT_LIST_LIMIT:]
    tensorboard = dict(artifacts["tensorboard"])
    tensorboard["event_dirs"] = tensorboard["event_dirs"][:EVENT_LIST_LIMIT]
    artifacts.update(checkpoints=checkpoints, tensorboard=tensorboard)
    notes = analytics.get("notes")
    if isinstance(notes, str) and len(notes) > EVENT_NOTES_LIMIT:
        notes = notes[:EVENT_NOTES_LIMIT] + f"… ({len(notes)} characters in {FILE})"
    return {**analytics, "artifacts": artifacts, "notes": notes}


# ------------------------------------------------------------------ checking a finished run
def check(run_dir: Path) -> list[str]:
    """Problems with a finished run's ``analytics.json``: present, in MOSAIC's shape, its status the
    terminal event's, and the same document in that event's payload."""
    terminal = next(events_backwards(run_dir / "events.jsonl", STATUS_OF), None)
    if terminal is None:
        return []  # not finished: nothing promised yet
    try:
        analytics = json.loads(read_private_text(run_dir / FILE))
    except (OSError, ValueError) as exc:
        return [f"{FILE}: not readable JSON ({exc})"]
    problems = shape_problems(analytics)
    if problems:
        return problems
    status = STATUS_OF[terminal["event"]]
    if analytics["status"] != status or analytics["run_id"] != run_dir.name:
        problems.append(f"{FILE}: status {analytics['status']!r} of run {analytics['run_id']!r}; the run {status}")
    payload = terminal.get("payload") or {}
    if payload.get("artifacts") != for_event(analytics)["artifacts"]:
        problems.append(f"{terminal['event']}'s payload does not carry {FILE}'s artifacts")
    return problems


def shape_problems(analytics: Any) -> list[str]:
    """What keeps ``analytics`` from MOSAIC's shape (an object with ``artifacts``…)."""
    if not isinstance(analytics, dict):
        return [f"{FILE}: not a JSON object"]
    missing = [key for key in ("run_id", "status", "artifacts", *FLAT) if key not in analytics]
    if missing:
        return [f"{FILE}: missing {', '.join(missing)}"]
    artifacts = analytics["artifacts"]
    if not isinstance(artifacts, dict):
        return [f"{FILE}: 'artifacts' is not an object"]
    return [
        f"{FILE}: artifacts.{name} is not an object with 'enabled'"
        for name in ARTIFACTS
        if not isinstance(artifacts.get(name), dict) or not isinstance(artifacts[name].get("enabled"), bool)
    ]
