"""``mosaic runs export|import|trust|rm|gc``: keep a run as one archive, bring it back, free disk.

An imported run is untrusted (:mod:`mosaic_core.runstore.trust`) until ``mosaic runs trust RUN``.

A run that is still running is never touched. A run of a trainer daemon (its runs root is
``STATE_DIR/runs`` and the daemon's database records it) is removed through the daemon
(RemoveRun, with the state dir's client token) when one serves that state dir, else under the
state dir's lock, so record and files go together. ``rm`` and ``gc`` list what they would
delete and delete it only with ``--yes``. Bad input: one line, exit 2, nothing deleted.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from mosaic_core import MosaicError, UsageError
from mosaic_core.files import printable

ENDED = ("completed", "failed", "cancelled", "lost")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def run(ns: argparse.Namespace, action: str, words: list[str]) -> int:
    _refuse_flags(ns, action)
    from mosaic_analytics.roots import runs_root

    if action == "import":
        if len(words) != 1:
            raise UsageError("usage: mosaic runs import FILE.tar.gz")
        from mosaic_core.runstore.unpack import import_run

        root = runs_root(ns.runs_dir, must_exist=False)
        done = import_run(Path(words[0]), root)
        print(
            printable(
                f"imported run {done.run_id} ({done.files} files, {_size(done.bytes)}) into {root}, "
                f"untrusted: its config, scripts and checkpoints that are code run only after "
                f"`mosaic runs trust {done.run_id}`"
            ),
            file=sys.stderr,
        )
        return 0
    root = runs_root(ns.runs_dir)
    if action == "export":
        return _export(ns, root, words)
    if action == "trust":
        return _trust(root, words)
    if action == "rm":
        if not words:
            raise UsageError("usage: mosaic runs rm RUN_ID... [--yes]")
        return _remove(root, _chosen(root, words), ns.yes)
    if words:
        raise UsageError(f"mosaic runs gc takes no run ids (got {' '.join(words)!r}); it chooses by its flags")
    return _remove(root, _collected(root, ns), ns.yes)


def _refuse_flags(ns: argparse.Namespace, action: str) -> None:
    allowed = {
        "export": {"output", "no_checkpoints"},
        "import": set(),
        "trust": set(),
        "rm": {"yes"},
        "gc": {"yes", "keep_last", "older_than", "failed"},
    }[action]
    for flag in (
        "output",
        "no_checkpoints",
        "yes",
        "keep_last",
        "older_than",
        "failed",
        "target",
        "name",
        "json",
        "recheck",
    ):
        value = getattr(ns, flag, None)
        if value not in (None, False) and flag not in allowed:
            raise UsageError(f"--{flag.replace('_', '-')} does not apply to `mosaic runs {action}`")


def _export(ns: argparse.Namespace, root: Path, words: list[str]) -> int:
    from mosaic_core.runstore.archive import export_run
    from mosaic_core.toolkit import find_run_dir

    if len(words) != 1 or not ns.output:
        raise UsageError("usage: mosaic runs export RUN_ID -o FILE.tar.gz [--no-checkpoints]")
    done = export_run(find_run_dir(root, words[0]), Path(ns.output), checkpoints=not ns.no_checkpoints)
    left = f"; left out {len(done.skipped)}: {', '.join(done.skipped[:3])}" if done.skipped else ""
    print(
        printable(f"exported run {done.run_id} ({done.files} files, {_size(done.bytes)}) to {ns.output}{left}"),
        file=sys.stderr,
    )
    return 0


def _trust(root: Path, words: list[str]) -> int:
    """The owner's word that an imported run's config, scripts and checkpoints may run as them."""
    from mosaic_core.runstore import trust
    from mosaic_core.runstore.index import record_run
    from mosaic_core.toolkit import find_run_dir

    if len(words) != 1:
        raise UsageError("usage: mosaic runs trust RUN_ID")
    run_dir = find_run_dir(root, words[0])
    trusted = trust.trust(run_dir)
    record_run(run_dir)  # its listed row says so from now on
    if not trusted:
        print(printable(f"run {run_dir.name} is not marked untrusted; nothing to do"), file=sys.stderr)
        return 0
    print(
        printable(f"trusted run {run_dir.name}: its config, scripts and checkpoints may now run as you"),
        file=sys.stderr,
    )
    return 0


def _chosen(root: Path, refs: list[str]) -> list[Any]:
    """The runs ``rm`` names (ids or unique prefixes); refused whole if any is running."""
    from mosaic_core.runstore.summary import summarize
    from mosaic_core.toolkit import find_run_dir

    summaries = {}
    for ref in refs:
        summary = summarize(find_run_dir(root, ref))
        summaries[summary.run_id] = summary
    running = [s.run_id for s in summaries.values() if s.status not in ENDED]
    if running:
        raise UsageError(
            f"run {', '.join(running)} is {summaries[running[0]].status}, not ended: refusing to remove "
            "it (cancel it first); nothing removed"
        )
    return list(summaries.values())


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` in seconds; UsageError otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text or "")
    if not match:
        raise UsageError(f"--older-than {text!r}: expected a number and a unit, e.g. 30d, 12h, 90m, 2w")
    return float(match.group(1)) * UNITS[match.group(2)]


def _collected(root: Path, ns: argparse.Namespace) -> list[Any]:
    """The ended runs every given gc criterion selects."""
    from mosaic_core.runstore.index import list_runs

    if ns.keep_last is None and ns.older_than is None and not ns.failed:
        raise UsageError("mosaic runs gc needs --keep-last N, --older-than AGE or --failed")
    if ns.keep_last is not None and ns.keep_last < 0:
        raise UsageError(f"--keep-last must be >= 0, got {ns.keep_last}")
    age = parse_age(ns.older_than) if ns.older_than is not None else None
    runs = list_runs(root)  # newest first
    now = time.time()
    chosen = []
    for position, summary in enumerate(runs):
        if summary.status not in ENDED:
            continue
        if ns.keep_last is not None and position < ns.keep_last:
            continue
        if age is not None and now - (summary.ended_at or summary.started_at or now) < age:
            continue
        if ns.failed and summary.status not in ("failed", "lost"):
            continue
        chosen.append(summary)
    return chosen


def _remove(root: Path, runs: list[Any], yes: bool) -> int:
    if not runs:
        print("no runs to remove", file=sys.stderr)
        return 0
    total = sum(r.disk_bytes or 0 for r in runs)
    if not yes:
        for summary in runs:
            print(printable(f"would remove {summary.run_id}  {summary.status}  {_size(summary.disk_bytes)}"))
        print(f"{len(runs)} run(s), {_size(total)}; pass --yes to remove them", file=sys.stderr)
        return 0
    daemon = _DaemonRuns.of(root)
    freed = 0
    for summary in runs:
        freed += (
            daemon.remove(summary.run_id)
            if daemon and daemon.records(summary.run_id)
            else _remove_local(root / summary.run_id, summary)
        )
        print(printable(f"removed {summary.run_id}"))
    print(f"removed {len(runs)} run(s), freed {_size(freed)}", file=sys.stderr)
    return 0


def _remove_local(run_dir: Path, summary: Any) -> int:
    import shutil

    from mosaic_core.files import check_own_dir

    check_own_dir(run_dir, "run directory")
    shutil.rmtree(run_dir)
    return summary.disk_bytes or 0


class _DaemonRuns:
    """The trainer daemon state dir a runs root belongs to (``STATE_DIR/runs``)."""

    def __init__(self, state_dir: Path):
        self.state_dir = state_dir

    @classmethod
    def of(cls, root: Path) -> _DaemonRuns | None:
        state = root.absolute().parent
        return cls(state) if root.name == "runs" and (state / "trainer.sqlite3").is_file() else None

    def records(self, run_id: str) -> bool:
        try:
            db = sqlite3.connect(f"file:{self.state_dir / 'trainer.sqlite3'}?mode=ro", uri=True, timeout=5)
            try:
                return db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None
            finally:
                db.close()
        except sqlite3.Error:
            return False

    def remove(self, run_id: str) -> int:
        lock = os.open(self.state_dir / "daemon.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a daemon serves this state dir: it removes the run
                return self._through_daemon(run_id)
            return self._offline(run_id)
        finally:
            os.close(lock)

    def _through_daemon(self, run_id: str) -> int:
        from mosaic_core.files import read_private_text
        from mosaic_core.toolkit import find_token
        from mosaic_core.trainer.client import remove_run

        try:
            target = json.loads(read_private_text(self.state_dir / "daemon.json"))["listen_address"]
        except (OSError, ValueError, KeyError, TypeError):
            raise UsageError(
                f"a trainer daemon holds {self.state_dir} but its daemon.json is unreadable; "
                "remove its runs once it is up"
            ) from None
        try:
            return remove_run(target, run_id, token=find_token(str(self.state_dir / "client.token")))
        except MosaicError as exc:  # a run the daemon still ends: the user's to wait for
            if "FAILED_PRECONDITION" in str(exc):
                raise UsageError(str(exc)) from None
            raise

    def _offline(self, run_id: str) -> int:
        from mosaic_core.toolkit import RunStillActive, RunStore, remove_recorded_run

        store = RunStore(self.state_dir / "trainer.sqlite3")
        try:
            row = store.get(run_id)
            return remove_recorded_run(store, self.state_dir, row) if row else 0
        except RunStillActive as exc:
            raise UsageError(f"{exc}; nothing more removed") from None
        finally:
            store.close()


def _size(size: int | None) -> str:
    from mosaic_core.runstore.summary import format_bytes

    return format_bytes(size)
