"""The run index: each run's summary kept in one SQLite file per runs root
(``<root>/.mosaic-index.sqlite3``, 0600, never opened through a link), so a listing of
thousands of runs reads no run file and, once they have settled, stats none: it lists the root.

A row holds the run's whole summary with its score (and the score's source). A row is *checked*
while its run directory (inode, mtime: a file replaced or added in it, such as the manifest, the
config or the import marker), ``events.jsonl`` (size, mtime) and ``evaluations/`` (mtime) are as
they were when it was written (:func:`_mark`): anything else (a new, changed, running, resumed,
evaluated or vanished run) is summarized again from its files and the row rewritten. A row checked
after its run had ended and its score was looked for is *sealed* with the run directory's inode: a
listing then trusts it on the root's listing alone (the inode comes with the name), no ``stat``.
What changes an ended run records it (:func:`record_run`), which unseals its row: the host as a run
starts (a resume) and ends, ``mosaic evaluate``, ``mosaic runs trust``. A change made by hand to an
ended run is seen by a listing with ``recheck`` (``mosaic runs --recheck``), which checks every row
as a listing did before sealing. A listing never overwrites a row another process rewrote since it
read it (a resume starting meanwhile): it writes only over the row it checked.

The first listing makes the file. A missing, foreign-schema or corrupt file, or a row that does
not read back as a summary, is rebuilt (rows are JSON, never code); one that cannot be written (a
full disk, a read-only root) only costs speed: listing reads the directories.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from mosaic_core.jsontext import dumps, dumps_row, dumps_rows, join_rows
from mosaic_core.runstore import table
from mosaic_core.runstore.summary import RunSummary, summarize
from mosaic_core.runstore.trust import untrusted_run

__all__ = [
    "INDEX_NAME",
    "RunIndex",
    "SCHEMA_VERSION",
    "UNSETTLED",
    "list_runs",
    "list_runs_json",
    "list_runs_table",
    "record_run",
]

INDEX_NAME = ".mosaic-index.sqlite3"
# 2: summaries carry the run's score; 3: a column per field, and whether the score was looked for; 4: the
# summary's JSON line too (what `mosaic runs --json` prints of it: a warm listing encodes nothing); 5: rows
# sealed, the root's mtime, a run's table cells
SCHEMA_VERSION = 5
UNSETTLED = ("running", "lost", "unknown")  # statuses a run's files may still change
ROOT_SETTLED_NS = 2 * 10**9  # a root's mtime this old is trusted to change with its next entry (not in its tick)
_FIELDS = [f.name for f in fields(RunSummary)]  # a row holds each in a column of its name
_JSON_FIELDS = ("score", "problems")  # the two that are not one number or string: JSON text
_CELL_COLUMNS = [f"cell{at}" for at in range(len(table.HEADER) - 1)]  # a run's `mosaic runs` cells but its age
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    mark TEXT NOT NULL,
    scored INTEGER NOT NULL,
    sealed INTEGER,
    {", ".join(f"{name} PRIMARY KEY" if name == "run_id" else name for name in _FIELDS)},
    text TEXT NOT NULL,
    {", ".join(f"{name} TEXT NOT NULL" for name in _CELL_COLUMNS)}
);
CREATE INDEX IF NOT EXISTS runs_experiment ON runs (experiment);
CREATE TABLE IF NOT EXISTS root (path TEXT NOT NULL, mtime_ns INTEGER NOT NULL, others TEXT NOT NULL);
"""
# A row as read: the listing's columns, the run id (its key) last; a row to check has before them its mark,
# scored (its score was looked for: the host records an ending run without), sealed (the run directory's
# inode: trusted without a stat; NULL: checked at each listing), status and path.
_Row = tuple[Any, ...]
# A row to write: the summary, its mark, scored, the mark of the row it replaces (None: any), sealed.
_Write = tuple[RunSummary, str, bool, Any, Any]


_CHECK = ("mark", "scored", "sealed", "status", "path")  # what a row is checked by (before what it lists)


def _query(*names: str) -> tuple[str, str, dict[str, int]]:
    """A listing's columns: those of a sealed row (``names``), those of a row to check (:data:`_CHECK`
    first), and where each of ``names`` lands in a kept row (the run id, its key, last)."""
    return ", ".join(names), ", ".join([*_CHECK, *names]), {name: at for at, name in enumerate(names)}


_FULL = _query(*_FIELDS)  # every field: summaries
_AT = _FULL[2]
_TEXT = _query("started_at", "run_id", "text")  # `mosaic runs --json`
_IDS = _query("run_id")  # `mosaic runs`: rows brought up to date, then laid out by SQLite
# What changes when a row does (:meth:`RunIndex.changed`): rewritten, it has another mark or was scored
_TOKEN_SQL = f"CASE WHEN status IN {UNSETTLED!r} THEN NULL ELSE mark || ':' || scored END"
# A run's age as table.format_age writes it, from :now (0 or NULL started_at: unknown)
_SECONDS = "CAST(:now - started_at AS INTEGER)"
_AGE_SQL = (
    "CASE WHEN ifnull(started_at, 0.0) = 0.0 THEN '-'"
    f" WHEN {_SECONDS} >= 86400 THEN ({_SECONDS} / 86400) || 'd'"
    f" WHEN {_SECONDS} >= 3600 THEN ({_SECONDS} / 3600) || 'h'"
    f" WHEN {_SECONDS} >= 60 THEN ({_SECONDS} / 60) || 'm'"
    f" ELSE max(0, {_SECONDS}) || 's' END"
)
_TABLE_SQL = [*_CELL_COLUMNS[: table.AGE], _AGE_SQL, *_CELL_COLUMNS[table.AGE :]]  # the table's columns


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
        self.failed = False  # a write did not go through: the rows may be behind the runs

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
                db.execute("PRAGMA journal_mode = PERSIST")  # its journal stays: writing leaves the root's mtime
                if not _current(db):
                    db.executescript(
                        f"DROP TABLE IF EXISTS runs; DROP TABLE IF EXISTS root; {_SCHEMA}"
                        f" PRAGMA user_version = {SCHEMA_VERSION};"
                    )
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

    def summaries(self, recheck: bool = False) -> list[RunSummary]:
        """Every run under the root, newest first: an unchanged, settled run from its row (no
        file of it read), the others summarized again and their rows rewritten, vanished ones
        dropped; ``recheck``: sealed rows are checked too (a change made by hand)."""
        kept, found = self._scan(_FULL, recheck)
        for row in kept:
            summary = _kept(row)
            found.append(summary if summary is not None else self._reread(row))
        found.sort(key=lambda r: (r.started_at or 0.0, r.run_id), reverse=True)
        return found

    def summaries_json(self, recheck: bool = False) -> str:
        """:meth:`summaries` as ``mosaic runs --json`` prints them (:func:`dumps_rows`): an
        unchanged run's line is its row's, neither decoded nor encoded again."""
        kept, fresh = self._scan(_TEXT, recheck)
        at = _TEXT[2]
        lines = []
        for row in kept:
            text = row[at["text"]]
            if isinstance(text, str) and text.startswith('{"run_id": ') and text.endswith("}"):
                lines.append((row[at["started_at"]] or 0.0, row[at["run_id"]], text))
            else:  # a row that no longer reads back: from the run's files
                fresh.append(self._reread(row))
        lines += [(s.started_at or 0.0, s.run_id, dumps_row(s.to_dict())) for s in fresh]
        lines.sort(reverse=True)
        return join_rows([line for _, _, line in lines])

    def table_lines(self, recheck: bool = False) -> tuple[list[str], dict[str, list[str]]] | None:
        """``mosaic runs``'s lines (:func:`~mosaic_core.runstore.table.render`'s, its header
        first) and what could not be read of the runs that have problems: the rows brought up to
        date, then laid out by SQLite from their stored cells (the Python of a row costs more than
        its run's listing). None when the index could not be brought up to date (unusable or not
        writable): the caller lays out the summaries itself."""
        self._scan(_IDS, recheck)
        if self.db is None or self.failed:
            return None
        now = {"now": time.time()}
        try:
            found = self.db.execute(f"SELECT {', '.join(f'max(length({c}))' for c in _TABLE_SQL)} FROM runs", now)
            widths = [max(width or 0, len(name)) for width, name in zip(found.fetchone(), table.HEADER)]
            layout = table.GAP.join(["%!-*s"] * len(widths))
            cells = ", ".join(f"{width}, {column}" for width, column in zip(widths, _TABLE_SQL))
            lines = [table.header(widths)] + [
                line
                for (line,) in self.db.execute(
                    f"SELECT rtrim(printf('{layout}', {cells})) FROM runs"
                    " ORDER BY ifnull(started_at, 0.0) DESC, run_id DESC",
                    now,
                )
            ]
            damaged = self.db.execute(
                "SELECT run_id, problems FROM runs WHERE problems != '[]'"
                " ORDER BY ifnull(started_at, 0.0) DESC, run_id DESC"
            ).fetchall()
        except sqlite3.Error:
            return None
        problems = {}
        for run_id, text in damaged:
            try:
                said = _from_json(text)
            except (ValueError, TypeError, RecursionError):
                said = None
            problems[run_id] = said if isinstance(said, list) else ["its index row is damaged"]
        return lines, problems

    def changed(self, held: Mapping[str, str]) -> tuple[dict[str, str | None], dict[str, RunSummary]] | None:
        """For a lister that keeps what it showed (the dashboard): every run's token, a text that
        changes when its row does (None for a run that may change without its files: a running
        one, whose process may be gone), and the summaries of the runs whose token is not the one
        in ``held``. None when the rows could not be brought up to date: list every run instead."""
        self._scan(_IDS, recheck=False)
        if self.db is None or self.failed:
            return None
        try:
            tokens: dict[str, str | None] = dict(self.db.execute(f"SELECT run_id, {_TOKEN_SQL} FROM runs"))
        except sqlite3.Error:
            return None
        wanted = [run_id for run_id, token in tokens.items() if token is None or held.get(run_id) != token]
        summaries: dict[str, RunSummary] = {}
        for at in range(0, len(wanted), 500):
            chunk = wanted[at : at + 500]
            query = f"SELECT {_FULL[0]}, run_id FROM runs WHERE run_id IN ({', '.join('?' * len(chunk))})"
            try:
                rows = self.db.execute(query, chunk).fetchall()
            except sqlite3.Error:
                return None
            for row in rows:
                summaries[row[-1]] = _kept(row) or self._reread(row)
        return tokens, summaries

    def _scan(self, query: tuple[str, str, dict[str, int]], recheck: bool) -> tuple[list[_Row], list[RunSummary]]:
        """The rows (``query``'s columns, the run id last) of the unchanged, settled runs; and the
        other runs summarized again, their rows rewritten (vanished runs' rows dropped)."""
        listed, checked, _ = query
        mtime, others = self._root_unchanged(recheck)
        if others is not None:  # the same runs as at the last listing: its sealed rows hold
            kept = self._select(listed, "sealed IS NOT NULL")
            known = {row[-1]: row for row in self._select(checked, "sealed IS NULL")}
            entries: list[tuple[str, int | None]] = [(name, None) for name in [*known, *others]]
        else:
            kept, known = [], {row[-1]: row for row in self._select(checked)}
            entries = self._run_dirs()
        fresh, writes, seals, not_runs = [], [], [], []
        root, uid = str(self.root), os.geteuid()
        for name, inode in entries:
            path = f"{root}/{name}"
            row = known.pop(name, None)
            here = row if row is not None and row[4] == path else None  # not a row of a root moved since
            if here is not None and inode is not None and here[2] == inode and not recheck:  # sealed: no stat
                kept.append(here[len(_CHECK) :])
                continue
            try:
                info = os.stat(path, follow_symlinks=False)
            except OSError:  # gone since the root was listed: its row goes
                if row is not None:
                    known[name] = row
                continue
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:  # only the owner's folders are runs
                not_runs.append(name)
                if row is not None:
                    known[name] = row
                continue
            mark = _mark(path, info, row)
            if here is not None and here[0] == mark and here[1] and here[3] not in UNSETTLED:
                kept.append(here[len(_CHECK) :])
                if here[2] != info.st_ino:  # checked, settled: trusted without a stat from now on
                    seals.append((info.st_ino, name, mark))
                continue
            if not _is_run(path):
                not_runs.append(name)
                if row is not None:
                    known[name] = row  # no longer a run: its row goes
                continue
            summary = _summary(Path(path))
            fresh.append(summary)
            sealed = None if summary.status in UNSETTLED else info.st_ino
            writes.append((summary, mark, True, None if row is None else row[0], sealed))
        self._write(writes, [(name, row[0]) for name, row in known.items()], seals)
        self._remember_root(mtime, not_runs)
        return kept, fresh

    def _root_unchanged(self, recheck: bool) -> tuple[int | None, list[str] | None]:
        """The root's mtime now, and when it is the one the last listing stored (no entry of the
        root added, removed or renamed since) the folders that were not runs then; else None."""
        try:
            mtime = os.stat(self.root).st_mtime_ns
        except OSError:
            return None, None
        stored = None if recheck else self._stored_root()
        if stored is None or stored[:2] != (str(self.root), mtime):
            return mtime, None
        return mtime, stored[2]

    def _run_dirs(self) -> list[tuple[str, int | None]]:
        """The root's folders that may be runs (name, inode): not hidden, not links."""
        try:
            with os.scandir(self.root) as entries:
                return [
                    (e.name, e.inode())
                    for e in entries
                    if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
                ]
        except OSError:
            return []

    def _reread(self, row: _Row) -> RunSummary:
        """A kept row that no longer reads back (a damaged file): from its run's files, rewritten."""
        path = self.root / row[-1]
        try:
            mark = _mark(str(path), os.stat(path, follow_symlinks=False), None)
        except OSError:
            mark = "-"  # gone meanwhile: checked again at the next listing
        summary = _summary(path)
        self._write([(summary, mark, True, None, None)], [])
        return summary

    def record(self, run_dir: Path) -> None:
        """Summarize one run now (the host, as it starts and ends) and store it, unsealed; its
        score is left to the next listing (reading TensorBoard files back would delay the host's exit)."""
        try:
            info = os.stat(run_dir, follow_symlinks=False)
        except OSError:
            return
        if stat.S_ISDIR(info.st_mode):
            self._write(
                [(summarize(run_dir, with_score=False), _mark(str(run_dir), info, None), False, None, None)], []
            )

    def named(self, experiment: str) -> list[str]:
        """The run ids whose config records experiment ``experiment`` (a worker's ``--name``)."""
        return [s.run_id for s in self.summaries() if s.experiment == experiment]

    def _select(self, columns: str, where: str = "") -> list[_Row]:
        """Rows of ``columns`` (the run id appended: their key)."""
        if self.db is None:
            return []
        try:
            return self.db.execute(f"SELECT {columns}, run_id FROM runs {'WHERE ' + where if where else ''}").fetchall()
        except sqlite3.Error:
            return []

    def _stored_root(self) -> tuple[str, int, list[str]] | None:
        if self.db is None:
            return None
        try:
            found = self.db.execute("SELECT path, mtime_ns, others FROM root").fetchone()
            others = json.loads(found[2]) if found else None
        except (sqlite3.Error, ValueError):
            return None
        if not isinstance(others, list) or not all(isinstance(name, str) and "/" not in name for name in others):
            return None
        return found[0], found[1], others

    def _remember_root(self, mtime: int | None, not_runs: list[str]) -> None:
        """Store the root's mtime as listed, when it is old enough that its next change is a new
        mtime (a change in the same clock tick would look like none)."""
        if mtime is None or time.time_ns() - mtime < ROOT_SETTLED_NS:
            return
        entry = (str(self.root), mtime, sorted(not_runs))
        if self._stored_root() != entry:
            self._transaction(
                ("DELETE FROM root", [()]), ("INSERT INTO root VALUES (?, ?, ?)", [(*entry[:2], dumps(entry[2]))])
            )

    def _write(
        self, fresh: list[_Write], gone: list[tuple[str, str]], seals: list[tuple[int, str, str]] | None = None
    ) -> None:
        """Store ``fresh`` rows, drop the ``gone`` ones (run id, the mark read), seal rows (inode,
        run id, mark): each only over the row this process read (the host may have recorded the
        run since: its row stands), in one transaction."""
        if not (fresh or gone or seals):
            return
        current = self._marks([f[0].run_id for f in fresh if f[3] is not None])
        self._transaction(
            (
                f"INSERT OR REPLACE INTO runs VALUES ({', '.join('?' * (len(_FIELDS) + 4 + len(_CELL_COLUMNS)))})",
                [
                    (mark, int(scored), sealed, *_columns(s), dumps_row(s.to_dict()), *table.cells(s))
                    for s, mark, scored, replaces, sealed in fresh
                    if replaces is None or current.get(s.run_id) in (None, replaces)
                ],
            ),
            ("DELETE FROM runs WHERE run_id = ? AND mark = ?", gone),
            ("UPDATE runs SET sealed = ? WHERE run_id = ? AND mark = ?", seals or []),
        )

    def _marks(self, run_ids: list[str]) -> dict[str, str]:
        """The stored mark of each of ``run_ids`` that has a row."""
        found: dict[str, str] = {}
        for at in range(0, len(run_ids) if self.db is not None else 0, 500):
            chunk = run_ids[at : at + 500]
            query = f"SELECT run_id, mark FROM runs WHERE run_id IN ({', '.join('?' * len(chunk))})"
            try:
                found.update(self.db.execute(query, chunk))  # type: ignore[union-attr]
            except sqlite3.Error:
                pass
        return found

    def _transaction(self, *statements: tuple[str, list[tuple[Any, ...]]]) -> None:
        """Each statement over its rows, in one transaction; locked for too long or a full disk
        only costs speed (the directories still answer)."""
        if self.db is None:
            return
        try:
            self.db.execute("BEGIN IMMEDIATE")
            for sql, rows in statements:
                self.db.executemany(sql, rows)
            self.db.execute("COMMIT")
        except sqlite3.Error:
            self.failed = True
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass


def _current(db: sqlite3.Connection) -> bool:
    """Whether the file's tables are this version's, with a column per summary field."""
    if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        return False
    columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    return columns == ["mark", "scored", "sealed", *_FIELDS, "text", *_CELL_COLUMNS] and [
        r[1] for r in db.execute("PRAGMA table_info(root)")
    ] == ["path", "mtime_ns", "others"]


def _columns(summary: RunSummary) -> list[Any]:
    values = [getattr(summary, name) for name in _FIELDS]
    for name in _JSON_FIELDS:
        value = values[_AT[name]]
        values[_AT[name]] = None if value is None else dumps(value)
    return values


def _from_json(text: Any) -> Any:
    """A JSON column's value (its two common values without the parser: a listing's many rows)."""
    return None if text is None else [] if text == "[]" else json.loads(text)


def _kept(row: _Row) -> RunSummary | None:
    """A kept row's summary; None for a row that does not read back as a summary (a damaged file)."""
    values = list(row[:-1])  # the fields (the key repeated last)
    values[_AT["untrusted"]] = bool(values[_AT["untrusted"]])
    try:
        score, problems = (_from_json(values[_AT[name]]) for name in _JSON_FIELDS)
    except (ValueError, TypeError, RecursionError):
        return None
    if not (score is None or isinstance(score, dict)) or not isinstance(problems, list):
        return None
    values[_AT["score"]], values[_AT["problems"]] = score, problems
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


def list_runs(root: Path, recheck: bool = False) -> list[RunSummary]:
    """Every run under ``root``, newest first (through its index; ``recheck``: every run's files
    checked, a change made by hand seen); a run is ``untrusted`` when it or a folder above it was
    imported (:func:`~mosaic_core.runstore.trust.untrusted_run`)."""
    index = RunIndex(root)
    try:
        runs = index.summaries(recheck)
    finally:
        index.close()
    if runs and untrusted_run(root) is not None:  # the whole root lies in an imported run
        for summary in runs:
            summary.untrusted = True
    return runs


def list_runs_json(root: Path, recheck: bool = False) -> str:
    """:func:`list_runs` as ``mosaic runs --json`` prints it (:func:`~mosaic_core.jsontext.dumps_rows`),
    each unchanged run's line read from the index as it is."""
    if untrusted_run(root) is not None:  # every run's line changes: marked untrusted
        return dumps_rows([summary.to_dict() for summary in list_runs(root, recheck)])
    index = RunIndex(root)
    try:
        return index.summaries_json(recheck)
    finally:
        index.close()


def list_runs_table(root: Path, recheck: bool = False) -> tuple[list[str], dict[str, list[str]]]:
    """:func:`list_runs` as ``mosaic runs`` prints it: the table's lines (:meth:`RunIndex.table_lines`)
    and the problems of the runs that have any."""
    index = RunIndex(root)
    try:
        laid_out = None if untrusted_run(root) is not None else index.table_lines(recheck)
    finally:
        index.close()
    if laid_out is not None:
        return laid_out
    runs = list_runs(root, recheck)  # an imported root (every status cell changes), an unusable index
    return table.render((s.started_at, table.cells(s)) for s in runs), {
        s.run_id: s.problems for s in runs if s.problems
    }


def record_run(run_dir: Path) -> None:
    """Bring one run's row up to date in its root's index, if the root has one (the first listing
    makes it), unsealed: what changes a run calls it (the host at the run's start and end,
    ``mosaic evaluate``, ``mosaic runs trust``); never raises."""
    try:
        index = RunIndex(run_dir.parent, create=False)
        try:
            index.record(run_dir)
        finally:
            index.close()
    except Exception:
        pass
