"""The daemon's state: one SQLite file under the state dir (``trainer.sqlite3``).

Every run's record lives in table ``runs``; every change of a record gives it the next
``seq_id`` (one counter for the whole store), which is what WatchRuns' ``since_seq`` refers
to. Telemetry published by training programs (steps, episodes) lives in table ``telemetry`` as
serialized protobuf messages, numbered per run and kind. WAL journaling: a daemon killed with
SIGKILL loses nothing it had committed. The file (and its WAL) is 0600.

A full disk: ``trainer.sqlite3.reserve`` (1 MiB, allocated at start) is given back the moment a
record cannot be written for want of space, so runs in flight are still recorded as they end;
until it can be allocated again the store takes no new run (:meth:`RunStore.room`) and drops
telemetry (counted as dropped by the caller).
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

RESERVE_BYTES = 1 << 20

INIT, HSHK, RDY, EXEC, PAUSE, FAULT, TERM = range(1, 8)
ACTIVE = (HSHK, RDY, EXEC, PAUSE)  # a process exists for the run
FINAL = (FAULT, TERM)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    worker TEXT NOT NULL,
    status INTEGER NOT NULL,
    digest TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    last_heartbeat REAL,
    failure_reason TEXT,
    terminal_event TEXT,
    terminal_payload TEXT,
    config_json TEXT NOT NULL,
    config_path TEXT NOT NULL,
    run_dir TEXT NOT NULL,
    pid INTEGER,
    pgid INTEGER,
    exit_code INTEGER,
    token_hash TEXT,
    worker_id TEXT,
    registration TEXT,
    seq_id INTEGER NOT NULL,
    metadata TEXT
);
CREATE INDEX IF NOT EXISTS runs_seq ON runs (seq_id);
CREATE INDEX IF NOT EXISTS runs_token ON runs (token_hash);
CREATE TABLE IF NOT EXISTS telemetry (
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, kind, seq)
);
"""


@dataclass(frozen=True)
class RunRow:
    """One run as stored. Times are Unix seconds; ``config_json`` is redacted."""

    run_id: str
    worker: str
    status: int
    digest: str
    created_at: float
    updated_at: float
    last_heartbeat: float | None
    failure_reason: str | None
    terminal_event: str | None
    terminal_payload: str | None
    config_json: str
    config_path: str
    run_dir: str
    pid: int | None
    pgid: int | None
    exit_code: int | None
    token_hash: str | None
    worker_id: str | None  # the registered training program's name (config worker_id)
    registration: str | None
    seq_id: int
    metadata: str | None = None  # JSON: what the submission recorded (metadata.ui, agent_id…); never a secret

    @property
    def final(self) -> bool:
        return self.status in FINAL

    @property
    def recorded(self) -> dict[str, Any]:
        """``metadata`` as an object (empty when none was recorded)."""
        found = json.loads(self.metadata) if self.metadata else {}
        return found if isinstance(found, dict) else {}

    @property
    def attached(self) -> bool:
        """A run a training program started by hand registered (the daemon has no process of it)."""
        return bool(self.recorded.get("attached"))


COLUMNS = tuple(f.name for f in fields(RunRow))
ADDED_COLUMNS = ("metadata",)  # TEXT columns a state file written by an older daemon lacks


class DuplicateRun(Exception):
    """A run with this id exists already."""


class UnknownRun(KeyError):
    """No run with this id."""


class RunEnded(Exception):
    """Telemetry for a run that has ended."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(row: RunRow, token: str | None) -> bool:
    return bool(token and row.token_hash and hmac.compare_digest(row.token_hash, hash_token(token)))


class RunStore:
    """Thread-safe access to the state database; ``changed`` wakes WatchRuns streams."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600))  # SQLite's WAL takes its mode
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA wal_autocheckpoint=100")  # a small WAL, reused in place
        self._db.executescript(_SCHEMA)
        self._add_missing_columns()
        self.reserve = self.path.with_name(self.path.name + ".reserve")
        self.disk_full = not self._make_reserve()
        self._lock = threading.RLock()
        self.changed = threading.Condition(self._lock)
        self._seq: int = self._db.execute("SELECT COALESCE(MAX(seq_id), 0) FROM runs").fetchone()[0]
        self._usage: dict[str, list[int]] = {}  # run -> [items, bytes] of telemetry stored

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _add_missing_columns(self) -> None:
        """Columns added since an older daemon made the file (their rows get NULL)."""
        present = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}
        for column in ADDED_COLUMNS:
            if column not in present:
                self._db.execute(f"ALTER TABLE runs ADD COLUMN {column} TEXT")

    # ------------------------------------------------------------------ a full disk
    def _make_reserve(self) -> bool:
        try:
            fd = os.open(self.reserve, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
            return True
        except OSError:
            self._drop_reserve()
            return False

    def _drop_reserve(self) -> bool:
        try:
            os.unlink(self.reserve)
            return True
        except OSError:
            return False

    def room(self) -> bool:
        """Whether a new run may be recorded: false while the disk is full (the reserve is
        allocated again, and true returned, once space came back)."""
        with self._lock:
            if self.disk_full:
                self.disk_full = not self._make_reserve()
            return not self.disk_full

    def _write(self, sql: str, args: Any = ()) -> None:
        """A run record's write; out of space, the reserve is given back and the write retried."""
        try:
            self._db.execute(sql, args)
        except sqlite3.OperationalError as exc:
            if "full" not in str(exc) or not self._drop_reserve():
                raise
            self.disk_full = True
            self._db.execute(sql, args)

    @property
    def seq(self) -> int:
        return self._seq

    # ------------------------------------------------------------------ runs
    def insert(self, **values: Any) -> RunRow:
        now = time.time()
        with self._lock:
            self._seq += 1
            row = {c: None for c in COLUMNS} | {"created_at": now, "updated_at": now} | values | {"seq_id": self._seq}
            try:
                self._write(
                    f"INSERT INTO runs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                    [row[c] for c in COLUMNS],
                )
            except sqlite3.IntegrityError:
                self._seq -= 1
                raise DuplicateRun(values.get("run_id")) from None
            self.changed.notify_all()
            return RunRow(**row)

    def get(self, run_id: str) -> RunRow | None:
        with self._lock:
            cur = self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM runs WHERE run_id = ?", (run_id,))
            found = cur.fetchone()
        return RunRow(*found) if found else None

    def get_by_token(self, token_hash: str) -> RunRow | None:
        """The run whose current training program holds the session token with this hash."""
        with self._lock:
            found = self._db.execute(
                f"SELECT {', '.join(COLUMNS)} FROM runs WHERE token_hash = ?", (token_hash,)
            ).fetchone()
        return RunRow(*found) if found else None

    def update(self, run_id: str, check: Callable[[RunRow], bool] | None = None, **values: Any) -> RunRow | None:
        """Change a run atomically. ``check(current)`` may veto (return False: nothing is
        written, None is returned) or raise; UnknownRun when there is no such run."""
        unknown = set(values) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown run column(s): {', '.join(sorted(unknown))}")
        with self._lock:
            current = self.get(run_id)
            if current is None:
                raise UnknownRun(run_id)
            if check is not None and not check(current):
                return None
            self._seq += 1
            values = {**values, "updated_at": time.time(), "seq_id": self._seq}
            assignments = ", ".join(f"{k} = ?" for k in values)
            self._write(f"UPDATE runs SET {assignments} WHERE run_id = ?", [*values.values(), run_id])
            self.changed.notify_all()
            return RunRow(**{**current.__dict__, **values})

    def delete(self, run_id: str) -> None:
        """Forget a run and its telemetry (``mosaic runs rm``/``gc`` of an ended run)."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM telemetry WHERE run_id = ?", (run_id,))
            self._db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            self._db.execute("COMMIT")
            self._usage.pop(run_id, None)
            self.changed.notify_all()

    def list(self, statuses: Iterable[int] = ()) -> builtins.list[RunRow]:
        return self._select("1 = 1", (), statuses, order="created_at, run_id")

    def changed_since(self, seq: int, statuses: Iterable[int] = ()) -> builtins.list[RunRow]:
        return self._select("seq_id > ?", (seq,), statuses, order="seq_id")

    def _select(self, where: str, args: tuple[Any, ...], statuses: Iterable[int], order: str) -> builtins.list[RunRow]:
        wanted = sorted(set(statuses))
        if wanted:
            where += f" AND status IN ({', '.join('?' * len(wanted))})"
            args = (*args, *wanted)
        with self._lock:
            cur = self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM runs WHERE {where} ORDER BY {order}", args)
            return [RunRow(*r) for r in cur.fetchall()]

    # ------------------------------------------------------------------ telemetry
    def append_telemetry(
        self,
        run_id: str,
        kind: str,
        messages: builtins.list[Any],
        max_items: int | None = None,
        max_bytes: int | None = None,
    ) -> int:
        """Store protobuf messages (with a ``seq_id`` field, set here) for a run that has not
        ended (:class:`RunEnded` otherwise), at most ``max_items`` and ``max_bytes`` per run
        (both kinds together); returns how many were stored (the rest is dropped)."""
        with self._lock:
            row = self.get(run_id)
            if row is None or row.final:
                raise RunEnded(run_id)
            usage = self._usage.get(run_id)
            if usage is None:
                usage = self._usage[run_id] = list(
                    self._db.execute(
                        "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM telemetry WHERE run_id = ?", (run_id,)
                    ).fetchone()
                )
            last = self._db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM telemetry WHERE run_id = ? AND kind = ?", (run_id, kind)
            ).fetchone()[0]
            rows = []
            for message in messages:
                message.seq_id = last + 1
                data = message.SerializeToString()
                if (max_items is not None and usage[0] >= max_items) or (
                    max_bytes is not None and usage[1] + len(data) > max_bytes
                ):
                    break
                last += 1
                usage[0], usage[1] = usage[0] + 1, usage[1] + len(data)
                rows.append((run_id, kind, last, data))
            if not rows or self.disk_full:
                return 0
            try:
                self._db.execute("BEGIN")
                self._db.executemany("INSERT INTO telemetry (run_id, kind, seq, data) VALUES (?, ?, ?, ?)", rows)
                self._db.execute("COMMIT")
            except sqlite3.OperationalError as exc:  # out of space: dropped, the runs' records come first
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                if "full" not in str(exc):
                    raise
                self._usage.pop(run_id, None)
                return 0
            self.changed.notify_all()
            return len(rows)

    def read_telemetry(self, run_id: str, kind: str, since_seq: int, limit: int = 1000) -> builtins.list[bytes]:
        with self._lock:
            cur = self._db.execute(
                "SELECT data FROM telemetry WHERE run_id = ? AND kind = ? AND seq > ? ORDER BY seq LIMIT ?",
                (run_id, kind, since_seq, limit),
            )
            return [r[0] for r in cur.fetchall()]
