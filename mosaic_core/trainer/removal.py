"""Removing an ended run of a daemon: its record and telemetry, its config file, its stderr log
and its run directory. The daemon does it for RemoveRun (:meth:`RunManager.remove`); ``mosaic
runs rm``/``gc`` do it themselves, holding the state dir's lock, when no daemon runs there."""

from __future__ import annotations

import shutil
from pathlib import Path

from mosaic_core.files import check_own_dir, is_within
from mosaic_core.runstore.summary import disk_usage
from mosaic_core.trainer.store import RunRow, RunStore


class RunStillActive(Exception):
    """The run has not ended: it is not removed."""


def remove_recorded_run(store: RunStore, state_dir: Path, row: RunRow) -> int:
    """Delete an ended run's files and record; returns the bytes its files took."""
    if not row.final:
        raise RunStillActive(f"run {row.run_id!r} has not ended; cancel it first (mosaic cancel {row.run_id})")
    freed = 0
    run_dir = Path(row.run_dir)
    if is_within(state_dir / "runs", run_dir) and run_dir != state_dir / "runs" and run_dir.is_dir():
        check_own_dir(run_dir, "run directory")  # never a link: rmtree would not follow it, but say so
        freed = disk_usage(run_dir)
        shutil.rmtree(run_dir)
    for path in (Path(row.config_path), state_dir / "logs" / f"{row.run_id}.stderr.log"):
        if is_within(state_dir, path) and path.is_file() and not path.is_symlink():
            freed += path.stat().st_blocks * 512
            path.unlink()
    store.delete(row.run_id)
    return freed
