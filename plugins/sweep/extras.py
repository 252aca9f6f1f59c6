"""The ``optuna_*`` extras keys, owned by the sweep plugin: their declaration, validation and
the manifest's ``optuna`` section.

``optuna_db`` (a study database inside the run directory: ``sqlite:///relative.db`` or a
path) and the trial keys ``mosaic sweep`` gives each seed's run: ``optuna_study``,
``optuna_trial``, ``optuna_params``, ``optuna_storage`` (its password redacted) and
``optuna_seed``. Paths are checked before the run directory exists, with the semantics of
:meth:`mosaic_core.runs.RunDirectory.inside`, and again, resolved, in the manifest.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from mosaic_core import ConfigError, ExtrasKey, RunDirectory
from mosaic_core.toolkit import read_cancel_note

SQLITE_PREFIX = "sqlite:///"
TRIAL_KEYS = ("optuna_study", "optuna_trial", "optuna_params", "optuna_storage", "optuna_seed")
_URL_PASSWORD = re.compile(r"^([a-z][a-z0-9+.\-]*://[^:/@]*:)([^@]*)(@)", re.IGNORECASE)
OWNED = [
    # A trial's bookkeeping: runs that differ only in it are seeds of one group (mosaic_core.runstore.groups).
    ExtrasKey("optuna_", "the Optuna study this run belongs to (the keys below)", prefix=True, bookkeeping=True),
    ExtrasKey("optuna_db", "the Optuna storage file (sqlite:///relative.db or a path)"),
    ExtrasKey("optuna_study", "mosaic sweep: the study this run belongs to"),
    ExtrasKey("optuna_trial", "mosaic sweep: the trial number"),
    ExtrasKey("optuna_params", "mosaic sweep: the trial's parameters"),
    ExtrasKey("optuna_storage", "mosaic sweep: the study's storage URL (password redacted)"),
    ExtrasKey("optuna_seed", "mosaic sweep: which of the trial's seeds this run is"),
]


def redact_url(url: str) -> str:
    """``postgresql://user:***@host/db``: a storage URL's password never reaches a manifest."""
    return _URL_PASSWORD.sub(r"\1***\3", url)


def optuna_db_path(value: str) -> str:
    """The file of an ``optuna_db`` given as a path or a ``sqlite:///relative.db`` URL."""
    return value[len(SQLITE_PREFIX) :] if value.startswith(SQLITE_PREFIX) else value


def _escapes(path: str) -> bool:
    if path.startswith(("/", "\\", "~")):
        return True
    normal = posixpath.normpath(path.replace("\\", "/"))
    return normal == ".." or normal.startswith("../")


def validate(extras: dict[str, Any]) -> list[str]:
    """Problems with the ``optuna_*`` keys of ``extras``, each naming its key."""
    problems = []
    db = extras.get("optuna_db")
    if db is not None:
        path = optuna_db_path(db) if isinstance(db, str) else db
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            problems.append(
                f"extras.optuna_db: must be a non-empty relative path, got {db!r} "
                "(a file path or sqlite:///relative/path.db)"
            )
        elif _escapes(path):
            problems.append(
                f"extras.optuna_db: {path!r} points outside the run directory; give a path relative to "
                "the run directory, without '..' (a file path or sqlite:///relative/path.db)"
            )
    for key, kind, label in (
        ("optuna_study", str, "a string"),
        ("optuna_storage", str, "a string"),
        ("optuna_trial", int, "an integer >= 0"),
        ("optuna_seed", int, "an integer"),
        ("optuna_params", dict, "an object"),
    ):
        value = extras.get(key)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, kind)
            or (key == "optuna_trial" and isinstance(value, int) and value < 0)
        ):
            problems.append(f"extras.{key}: must be {label}, got {value!r}")
    return problems


def _inside(directory: RunDirectory, path: str) -> str | None:
    try:
        return directory.relative(directory.inside(path))
    except (ConfigError, OSError, ValueError):
        return None


def manifest_section(
    directory: RunDirectory, extras: dict[str, Any], status: str | None = None
) -> dict[str, Any] | None:
    """The ``optuna`` section: a study database inside the run (``optuna_db``) and/or the
    sweep trial this run is a seed of, and for a cancelled run the reason from the cancel
    note (e.g. the pruner's decision)."""
    section: dict[str, Any] = {}
    value = extras.get("optuna_db")
    if isinstance(value, str) and value:
        rel = _inside(directory, optuna_db_path(value))
        if rel is None:
            section.update({"db": None, "error": "extras.optuna_db resolves outside the run directory"})
        else:
            section.update({"db": rel, "storage": f"sqlite:///{rel}", "exists": (directory.path / rel).is_file()})
    for key in TRIAL_KEYS:
        if key in extras:
            section[key.removeprefix("optuna_")] = redact_url(extras[key]) if key == "optuna_storage" else extras[key]
    if "study" in section and status == "cancelled":
        note = read_cancel_note(directory)
        if note:
            section["cancel_reason"] = note
            section["pruned"] = note.startswith("pruned")
    return section or None
