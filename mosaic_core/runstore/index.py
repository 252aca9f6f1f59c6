"""The run index: each run's summary kept in one SQLite file per runs root
(``<root>/.mosaic-index.sqlite3``, 0600, never opened through a link), so a listing of
thousands of runs reads no run file: it lists the root and stats each run (:func:`_mark`).

The run directories stay the truth. A row, the run's whole summary with its score (and the
score's source), is trusted while its run directory (inode, mtime: a file replaced or added
in it, such as the manifest, the config or the import marker), ``events.jsonl`` (size, mtime)
and ``evaluations/`` (mtime) are as they were when it was written, the run had ended and its
score was looked for. Anything else (a new, changed, running, resumed, evaluated or vanished
run) is summarized again from its files and the row rewritten: a listing costs the runs that
changed. The first listing makes the file; from then on the host records each run as it starts
and as it ends (:func:`record_run`, the score left to the next listing). A missing,
foreign-schema or corrupt file, or a row that does not read back as a summary, is rebuilt (rows
are JSON, never code); one that cannot be written (a full disk, a read-only root) only costs
speed: listing reads the directories.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from dataclasses import fields
from pathlib import Path
from typing import Any

from mosaic_core.jsontext import dumps, dumps_row, dumps_rows, join_rows
from mosaic_core.runstore.summary import RunSummary, summarize
from mosaic_core.runstore.trust import untrusted_run

__all__ = ["INDEX_NAME", "RunIndex", "SCHEMA_VERSION", "UNSETTLED", "list_runs", "list_runs_json", "record_run"]

INDEX_NAME = ".mosaic-index.sqlite3"
# 2: summaries carry the run's score; 3: a column per field, and whether the score was looked for; 4: the
# summary's JSON line too (what `mosaic runs --json` prints of it: a warm listing encodes nothing)
SCHEMA_VERSION = 4
UNSETTLED = ("running", "lost", "unknown")  # statuses a run's files may still change
_FIELDS = [f.name for f in fields(RunSummary)]  # a row holds each in a column of its name
_AT = {name: at for at, name in enumerate(_FIELDS, 2)}  # where in a row (after mark, scored)
_TEXT_COLUMNS = ("mark", "scored", "status", "started_at", "run_id", "path", "text")  # what a JSON listing reads
_TEXT_AT = {name: at for at, name in enumerate(_TEXT_COLUMNS)}
_FULL = (", ".join(["mark", "scored", *_FIELDS]), _AT)
_TEXT = (", ".join(_TEXT_COLUMNS), _TEXT_AT)
_JSON_FIELDS = ("score", "problems")  # the two that are not one number or string: JSON text
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    mark TEXT NOT NULL,
    scored INTEGER NOT NULL,
    {", ".join(f"{name} PRIMARY KEY" if name == "run_id" else name for name in _FIELDS)},
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_experiment ON runs (experiment);
"""
_Row = tuple[Any, ...]  # mark, scored (its score was looked for: the host records an ending run without), fields


def _mark(run_dir: str, info: os.stat_result, row: _Row | None) -> str:
    """What must stay the same for a stored summary to hold. ``evaluations/`` is looked at only
    when it was there at the row's writing or the run directory changed since (making it does)."""
    head = f"{info.st_ino}:{info.st_mtime_ns}:"
    try:
        events = os.stat(run_dir + "/events.jsonl", follow_symlinks=False)
        head += f"{events.st_size}:{events.st_mtime_ns}:"
    except OSError:
        head += "-:"
    if row is not None and row[0] == head + "-":
        return head + "-"
    try:  # an evaluation added after the run ended changes its score
        return head + str(os.stat(run_dir + "/evaluations", follow_symlinks=False).st_mtime_ns)
    except OSError:
        return head + "-"


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
                if not _current(db):
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
        """Every run under the root, newest first: an unchanged, settled run from its row (no
        file of it read), the others summarized again and their rows rewritten, vanished ones dropped."""
        kept, found = self._scan(_FULL, moved_ok=True)
        for row, path in kept:
            summary = _kept(row, path)
            if summary is None:  # a row that no longer reads back: from the run's files
                summary = _summary(Path(path))
                self._write([(summary, row[0], True)], [])
            found.append(summary)
        found.sort(key=lambda r: (r.started_at or 0.0, r.run_id), reverse=True)
        return found

    def summaries_json(self) -> str:
        """:meth:`summaries` as ``mosaic runs --json`` prints them (:func:`dumps_rows`): an
        unchanged run's line is its row's, neither decoded nor encoded again."""
        kept, fresh = self._scan(_TEXT, moved_ok=False)
        at = _TEXT_AT
        lines = []
        for row, path in kept:
            text = row[at["text"]]
            if isinstance(text, str) and text.startswith('{"run_id": ') and text.endswith("}"):
                lines.append((row[at["started_at"]] or 0.0, row[at["run_id"]], text))
            else:  # a row that no longer reads back: from the run's files
                fresh.append(_summary(Path(path)))
                self._write([(fresh[-1], row[0], True)], [])
        lines += [(s.started_at or 0.0, s.run_id, dumps_row(s.to_dict())) for s in fresh]
        lines.sort(reverse=True)
        return join_rows([line for _, _, line in lines])

    def _scan(
        self, query: tuple[str, dict[str, int]], moved_ok: bool
    ) -> tuple[list[tuple[_Row, str]], list[RunSummary]]:
        """The rows (``query``'s columns) of the unchanged, settled runs, with their paths; and the
        other runs summarized again, their rows rewritten (vanished runs' rows dropped). A row
        whose run's root has moved since is kept only when ``moved_ok`` (its text names the old path)."""
        known = self._rows(query[0])
        at = query[1]
        kept, fresh, writes = [], [], []
        for name, path, info in self._run_dirs():
            row = known.pop(name, None)
            mark = _mark(path, info, row)
            if row is not None and row[0] == mark and row[1] and row[at["status"]] not in UNSETTLED:
                if moved_ok or row[at["path"]] == path:
                    kept.append((row, path))
                    continue
            if not _is_run(path):
                if row is not None:
                    known[name] = row  # no longer a run: its row goes
                continue
            summary = _summary(Path(path))
            fresh.append(summary)
            writes.append((summary, mark, True))
        self._write(writes, list(known))
        return kept, fresh

    def _run_dirs(self) -> list[tuple[str, str, os.stat_result]]:
        """The root's folders that may be runs (name, path, lstat): the owner's, not hidden, not links."""
        root, uid = str(self.root), os.geteuid()
        try:
            names = [n for n in os.listdir(root) if not n.startswith(".")]
        except OSError:
            return []
        found = []
        for name in names:
            path = f"{root}/{name}"
            try:
                info = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode) and info.st_uid == uid:
                found.append((name, path, info))
        return found

    def record(self, run_dir: Path) -> None:
        """Summarize one run now (the host, as it starts and ends) and store it; its score is left
        to the next listing (reading TensorBoard files back would delay the host's exit)."""
        try:
            info = os.stat(run_dir, follow_symlinks=False)
        except OSError:
            return
        if stat.S_ISDIR(info.st_mode):
            self._write([(summarize(run_dir, with_score=False), _mark(str(run_dir), info, None), False)], [])

    def named(self, experiment: str) -> list[str]:
        """The run ids whose config records experiment ``experiment`` (a worker's ``--name``)."""
        return [s.run_id for s in self.summaries() if s.experiment == experiment]

    def _rows(self, columns: str) -> dict[str, _Row]:
        """Each row's ``columns`` (``run_id`` among them, its name last: its key)."""
        if self.db is None:
            return {}
        try:
            return {r[-1]: r for r in self.db.execute(f"SELECT {columns}, run_id FROM runs")}
        except sqlite3.Error:
            return {}

    def _write(self, fresh: list[tuple[RunSummary, str, bool]], gone: list[str]) -> None:
        if self.db is None or not (fresh or gone):
            return
        try:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany(
                f"INSERT OR REPLACE INTO runs VALUES ({', '.join('?' * (len(_FIELDS) + 3))})",
                [
                    (mark, int(scored), *_columns(summary), dumps_row(summary.to_dict()))
                    for summary, mark, scored in fresh
                ],
            )
            self.db.executemany("DELETE FROM runs WHERE run_id = ?", [(g,) for g in gone])
            self.db.execute("COMMIT")
        except sqlite3.Error:  # locked for too long, a full disk: the directories still answer
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass


def _current(db: sqlite3.Connection) -> bool:
    """Whether the file's table is this version's, with a column per summary field."""
    if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        return False
    return [r[1] for r in db.execute("PRAGMA table_info(runs)")] == ["mark", "scored", *_FIELDS, "text"]


def _columns(summary: RunSummary) -> list[Any]:
    values = [getattr(summary, name) for name in _FIELDS]
    for name in _JSON_FIELDS:
        value = values[_AT[name] - 2]
        values[_AT[name] - 2] = None if value is None else dumps(value)
    return values


def _from_json(text: Any) -> Any:
    """A JSON column's value (its two common values without the parser: a listing's many rows)."""
    return None if text is None else [] if text == "[]" else json.loads(text)


def _kept(row: _Row, path: str) -> RunSummary | None:
    """A kept row's summary (its run at ``path``); None for a row that does not read back as a
    summary (a damaged file)."""
    values = list(row[2:-1])  # the fields (the key repeated last)
    values[_AT["path"] - 2] = path  # the root may have moved since
    values[_AT["untrusted"] - 2] = bool(values[_AT["untrusted"] - 2])
    try:
        score, problems = (_from_json(values[_AT[name] - 2]) for name in _JSON_FIELDS)
    except (ValueError, TypeError, RecursionError):
        return None
    if not (score is None or isinstance(score, dict)) or not isinstance(problems, list):
        return None
    values[_AT["score"] - 2], values[_AT["problems"] - 2] = score, problems
    return RunSummary(*values)


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
    """Every run under ``root``, newest first (through its index); a run is ``untrusted`` when it
    or a folder above it was imported (:func:`~mosaic_core.runstore.trust.untrusted_run`)."""
    index = RunIndex(root)
    try:
        runs = index.summaries()
    finally:
        index.close()
    if runs and untrusted_run(root) is not None:  # the whole root lies in an imported run
        for summary in runs:
            summary.untrusted = True
    return runs


def list_runs_json(root: Path) -> str:
    """:func:`list_runs` as ``mosaic runs --json`` prints it (:func:`~mosaic_core.jsontext.dumps_rows`),
    each unchanged run's line read from the index as it is."""
    if untrusted_run(root) is not None:  # every run's line changes: marked untrusted
        return dumps_rows([summary.to_dict() for summary in list_runs(root)])
    index = RunIndex(root)
    try:
        return index.summaries_json()
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
