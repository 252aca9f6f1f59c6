"""Where a study lives: the only setting that changes from one machine to many.

* default: an SQLite file per study, ``var/sweeps/<study>.db`` (one machine; never on NFS);
* ``journal:PATH`` (or a path ending ``.journal``): Optuna's journal file, safe on a shared
  file system;
* ``postgresql://user:password@host/db``: many machines.

:func:`open_storage` checks the location first and cleans up what it created when opening
fails, so a bad URL leaves nothing behind. Optuna and SQLAlchemy are imported inside functions.
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import UsageError
from mosaic_core.files import UntrustedPath, check_own_dir, open_private, owner_name
from mosaic_sweep.extras import redact_url

DEFAULT_DIR = Path("var/sweeps")
SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class StorageURL:
    kind: str  # sqlite | journal | postgresql
    url: str  # what Optuna is given (journal: the file path)
    path: Path | None = None  # the file, for sqlite and journal

    @property
    def shown(self) -> str:
        return redact_url(self.url if self.kind != "journal" else f"journal:{self.path}")


def resolve(value: str | None, study_name: str) -> StorageURL:
    """The storage named by ``--storage`` / the spec, or the default SQLite file for the study."""
    if not value:
        path = DEFAULT_DIR / f"{study_name}.db"
        return StorageURL("sqlite", f"sqlite:///{path}", path)
    if value.startswith("sqlite:///"):
        path = Path(value[len("sqlite:///") :])
        if not str(path):
            raise UsageError(f"storage {value}: no file after sqlite:///")
        return StorageURL("sqlite", value, path)
    if value.startswith("journal:"):
        path = Path(value[len("journal:") :].removeprefix("//"))
        if not str(path) or str(path) == ".":
            raise UsageError(f"storage {value}: no file after journal:")
        return StorageURL("journal", str(path), path)
    if re.match(r"^postgres(ql)?(\+\w+)?://", value):
        return StorageURL("postgresql", re.sub(r"^postgres(ql)?", "postgresql", value, count=1))
    if value.endswith((".journal", ".log")):
        return StorageURL("journal", value, Path(value))
    if value.endswith((".db", ".sqlite", ".sqlite3")):
        return StorageURL("sqlite", f"sqlite:///{value}", Path(value))
    raise UsageError(f"storage {redact_url(value)}: use sqlite:///FILE, journal:FILE or postgresql://…")


@dataclass
class _Created:
    dirs: list[Path] = field(default_factory=list)
    file: Path | None = None

    def undo(self) -> None:
        if self.file is not None:
            for suffix in ("", "-journal", "-wal", "-shm", ".sweep-lock"):
                Path(f"{self.file}{suffix}").unlink(missing_ok=True)
        for directory in reversed(self.dirs):
            try:
                directory.rmdir()
            except OSError:
                pass


def _prepare_file(location: StorageURL) -> _Created:
    """Check a file storage's path before Optuna touches it; make its directory."""
    path, shown, created = location.path, location.shown, _Created()
    assert path is not None
    if path.parent.exists():
        check_private(path.parent, shown)
    if path.exists() or path.is_symlink():
        check_private(path, shown)
        if location.kind == "sqlite":
            with open_private(path) as handle:
                head = handle.read(len(SQLITE_MAGIC))
            if head and head != SQLITE_MAGIC:
                raise UsageError(f"storage {shown}: {path} is not an SQLite database")
        if not os.access(path, os.R_OK | os.W_OK):
            raise UsageError(f"storage {shown}: {path} is not writable")
        return created
    missing = [p for p in [path.parent, *path.parent.parents] if not p.exists()]
    try:
        for directory in reversed(missing):
            try:
                directory.mkdir(mode=0o700)
            except FileExistsError:  # another sweep process made it just now
                continue
            created.dirs.append(directory)
    except OSError as exc:
        created.undo()
        raise UsageError(f"storage {shown}: cannot create {path.parent}: {exc.strerror or exc}") from None
    if not os.access(path.parent, os.W_OK):
        created.undo()
        raise UsageError(f"storage {shown}: {path.parent} is read-only")
    created.file = path
    return created


def open_storage(
    location: StorageURL, heartbeat_s: int | None = None, max_retries: int = 2, create: bool = True
) -> Any:
    """An Optuna storage; RDB storages get heartbeats and a retry callback for dead sweep processes' trials.

    With ``create=False`` a missing file is an error instead of a new, empty study.
    """
    import optuna

    quiet_optuna()
    if location.path is not None and not location.path.exists() and not create:
        raise UsageError(f"storage {location.shown}: {location.path} does not exist (no sweep has run there)")
    created = _prepare_file(location) if location.path is not None else _Created()
    try:
        if location.kind == "journal":
            from optuna.storages.journal import JournalFileBackend

            return optuna.storages.JournalStorage(JournalFileBackend(str(location.path)))
        kwargs: dict[str, Any] = {}
        if heartbeat_s:
            kwargs = {
                "heartbeat_interval": heartbeat_s,
                "grace_period": 2 * heartbeat_s + 1,
                "heartbeat_stale_trial_callback": retry_callback(max_retries),
            }
        engine: dict[str, Any] = {}
        if location.kind == "postgresql":
            engine = {"connect_args": {"connect_timeout": 5}, "pool_pre_ping": True}
        elif location.kind == "sqlite":
            engine = {"connect_args": {"timeout": 30}}
        with FileLock(location):  # two sweep processes creating the tables of a fresh SQLite file at once corrupt it
            return _rdb_storage(location.url, engine, kwargs)
    except UsageError:
        created.undo()
        raise
    except Exception as exc:
        created.undo()
        raise UsageError(f"storage {location.shown}: cannot open: {_first_line(exc)}") from None


def check_private(path: Path, shown: str) -> None:
    """Refuse a study file or its directory that is not ours, is a link, or that others can
    write (they could plant trials, a forged best trial, or a link for us to write through):
    one line naming the path and its owner."""
    try:
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode):
            check_own_dir(path, "study directory")
            return
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedPath(f"study file {path} is not a regular file (owner {owner_name(info.st_uid)}); refused")
        if info.st_uid != os.geteuid():
            raise UntrustedPath(f"study file {path} belongs to {owner_name(info.st_uid)}, not to you; refused")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UntrustedPath(
                f"study file {path} (owner {owner_name(info.st_uid)}) is writable by others "
                f"(mode {stat.S_IMODE(info.st_mode):o}); refused"
            )
    except UntrustedPath as exc:
        raise UsageError(f"storage {shown}: {exc}") from None


class FileLock:
    """An exclusive ``flock`` on ``<storage file>.sweep-lock`` (no-op for PostgreSQL): held while
    a sweep process creates the tables of a fresh SQLite file, and from the budget count until Optuna
    has created a trial (:mod:`mosaic_sweep.loop`). Safe to release twice."""

    def __init__(self, location: StorageURL):
        self.path = Path(f"{location.path}.sweep-lock") if location.path is not None else None
        self._handle: Any = None

    def acquire(self) -> None:
        if self.path is not None and self._handle is None:
            # Never through a link (a planted one would make us create a file where it points),
            # and only our own regular file.
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise UsageError(
                    f"sweep lock {self.path}: {exc.strerror} (a link there is never followed); refused"
                ) from None
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                os.close(fd)
                raise UsageError(
                    f"sweep lock {self.path} is not a regular file of yours (owner {owner_name(info.st_uid)}); refused"
                )
            self._handle = os.fdopen(fd, "r+b")
            fcntl.flock(self._handle, fcntl.LOCK_EX)

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.release()


def _rdb_storage(url: str, engine: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """``RDBStorage``, retried when another sweep process is creating the same tables right now
    (SQLite: ``table studies already exists``; PostgreSQL: a duplicate key in pg_type)."""
    import optuna

    for attempt in range(6):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=dict(engine), **kwargs)
        except Exception as exc:
            text = str(exc)
            if attempt == 5 or not ("already exists" in text or "duplicate key" in text):
                raise
            time.sleep(0.2 + random.random() * 0.5)
    raise AssertionError("unreachable")


def quiet_optuna() -> None:
    """Our own one line per trial instead of Optuna's INFO logs and experimental-API warnings."""
    import warnings

    import optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def retry_callback(max_retries: int) -> Any:
    """Optuna's callback that re-queues a dead sweep process's trial with the same parameters."""
    import optuna

    cls = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or optuna.storages.RetryFailedTrialCallback
    return cls(max_retry=max_retries)


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return redact_url(text[0] if text else type(exc).__name__)
