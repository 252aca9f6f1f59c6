"""The run index: each run's summary kept in one SQLite file per runs root
(``<root>/.mosaic-index.sqlite3``, 0600), so listing thousands of runs reads no run files.

The run directories stay the truth. A row is trusted while its run directory (inode, mtime)
and ``events.jsonl`` (size, mtime) are as they were when it was written and the run had
ended; anything else (a new, changed, running, imported or vanished run) is summarized again
from its files and the row rewritten. The first listing makes the file; from then on the host
records each run as it starts and as it ends (:func:`record_run`). A missing, foreign-schema or corrupt file is rebuilt; one that cannot be
written (a full disk, a read-only root) only costs speed: listing reads the directories.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

from mosaic_core.jsontext import dumps
from mosaic_core.runstore.summary import ENDED, RunSummary, summarize

__all__ = ["INDEX_NAME", "RunIndex", "SCHEMA_VERSION", "UNSETTLED", "list_runs", "record_run"]

INDEX_NAME = ".mosaic-index.sqlite3"
SCHEMA_VERSION = 2  # 2: summaries carry the run's score
UNSETTLED = ("running", "lost", "unknown")  # statuses a run's files may still change
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    mark TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at REAL,
    experiment TEXT,
    summary TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_experiment ON runs (experiment);
"""


def _mark(run_dir: str, info: os.stat_result) -> str:
    """What must stay the same for a stored summary to hold."""
    try:
        events = os.stat(os.path.join(run_dir, "events.jsonl"), follow_symlinks=False)
        tail = f"{events.st_size}:{events.st_mtime_ns}"
    except OSError:
        tail = "-"
    try:  # an evaluation added after the run ended changes its score
        evaluations = str(os.stat(os.path.join(run_dir, "evaluations"), follow_symlinks=False).st_mtime_ns)
    except OSError:
        evaluations = "-"
    return f"{info.st_ino}:{info.st_mtime_ns}:{tail}:{evaluations}"


def _is_run(run_dir: str) -> bool:
    return os.path.lexists(os.path.join(run_dir, "config.json")) or os.path.lexists(
        os.path.join(run_dir, "events.jsonl")
    )


class RunIndex:
    """The index of one runs root; every method works (slower) when the file cannot be used."""

    def __init__(self, root: Path | str, create: bool = True):
        self.root = Path(root)
        self.db = self._open(create)

    def _open(self, create: bool) -> sqlite3.Connection | None:
        path = self.root / INDEX_NAME
        for attempt in (1, 2):
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if create else 0), 0o600)
                try:
                    info = os.fstat(fd)
                finally:
                    os.close(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                    return None
                db = sqlite3.connect(path, timeout=5, isolation_level=None)
                if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    db.executescript(f"DROP TABLE IF EXISTS runs; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION};")
                db.execute("SELECT COUNT(*) FROM runs").fetchone()
                return db
            except sqlite3.DatabaseError:  # not a database, or a damaged one: rebuild it from the runs
                if attempt == 2 or not _unlink(path):
                    return None
            except (sqlite3.Error, OSError):
                return None
        return None

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def summaries(self) -> list[RunSummary]:
        """Every run under the root, newest first; changed rows rewritten, vanished ones dropped."""
        known = self._rows()
        found, fresh = [], []
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            entries = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
            mark = _mark(entry.path, info)
            row = known.pop(entry.name, None)
            if row is not None and row[0] == mark and row[1] not in UNSETTLED:
                kept = RunSummary(**json.loads(row[2]))
                if kept.score is not None or kept.unit != "steps" or row[1] not in ENDED:
                    found.append(kept)
                    continue  # else recorded by the host as it ended, without its score: scored now
            if not _is_run(entry.path):
                if row is not None:
                    known[entry.name] = row  # no longer a run: its row goes
                continue
            summary = _summary(Path(entry.path))
            found.append(summary)
            fresh.append((summary, mark))
        self._write(fresh, list(known))
        found.sort(key=lambda r: (r.started_at or 0.0, r.run_id), reverse=True)
        return found

    def record(self, run_dir: Path) -> None:
        """Summarize one run now (the host, as it starts and ends) and store it; its score is left
        to the next listing (reading TensorBoard files back would delay the host's exit)."""
        try:
            info = os.stat(run_dir, follow_symlinks=False)
        except OSError:
            return
        if stat.S_ISDIR(info.st_mode):
            self._write([(summarize(run_dir, with_score=False), _mark(str(run_dir), info))], [])

    def named(self, experiment: str) -> list[str]:
        """The run ids whose config records experiment ``experiment`` (a worker's ``--name``)."""
        return [s.run_id for s in self.summaries() if s.experiment == experiment]

    def _rows(self) -> dict[str, tuple[str, str, str]]:
        if self.db is None:
            return {}
        try:
            return {r[0]: (r[1], r[2], r[3]) for r in self.db.execute("SELECT run_id, mark, status, summary FROM runs")}
        except sqlite3.Error:
            return {}

    def _write(self, fresh: list[tuple[RunSummary, str]], gone: list[str]) -> None:
        if self.db is None or not (fresh or gone):
            return
        try:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?)",
                [(s.run_id, mark, s.status, s.started_at, s.experiment, dumps(s.to_dict())) for s, mark in fresh],
            )
            self.db.executemany("DELETE FROM runs WHERE run_id = ?", [(g,) for g in gone])
            self.db.execute("COMMIT")
        except sqlite3.Error:  # locked for too long, a full disk: the directories still answer
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass


def _unlink(path: Path) -> bool:
    try:
        for suffix in ("", "-journal"):
            if os.path.lexists(f"{path}{suffix}"):
                os.unlink(f"{path}{suffix}")
        return True
    except OSError:
        return False


def _summary(run_dir: Path) -> RunSummary:
    """:func:`summarize`, and should a run's files still break it, a summary naming why: one
    damaged run never hides the others."""
    try:
        return summarize(run_dir)
    except Exception as exc:
        return RunSummary(run_id=run_dir.name, path=str(run_dir), problems=[f"not read: {type(exc).__name__}: {exc}"])


def list_runs(root: Path) -> list[RunSummary]:
    """Every run under ``root``, newest first (through its index)."""
    index = RunIndex(root)
    try:
        return index.summaries()
    finally:
        index.close()


def record_run(run_dir: Path) -> None:
    """Bring one run's row up to date in its root's index, if the root has one (the host, at
    the run's start and end; the first listing makes it); never raises."""
    try:
        index = RunIndex(run_dir.parent, create=False)
        try:
            index.record(run_dir)
        finally:
            index.close()
    except Exception:
        pass
