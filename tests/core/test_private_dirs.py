"""Private directories named for the process that made them (a Ray actor's work dir, a relayed
run's FastLane directory on a node) that outlive it (killed before it could remove them) are
removed by the next one made there: only real directories of ours named for a process that is gone."""

from __future__ import annotations

import os
import subprocess
import sys

from mosaic_core.files import private_dir
from mosaic_core.procs import process_start

WORK_PREFIX = "mosaic-test-"


def test_the_next_private_dir_removes_those_of_processes_that_are_gone(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    stale = tmp_path / f"{WORK_PREFIX}{dead_pid}.1-abcd"
    (stale / "runs").mkdir(parents=True)
    (stale / "runs" / "config.json").write_text("{}")
    live = tmp_path / f"{WORK_PREFIX}{os.getpid()}.{process_start(os.getpid())}-efgh"
    live.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("x")
    planted = tmp_path / f"{WORK_PREFIX}{dead_pid}.1-link"
    planted.symlink_to(elsewhere)
    unrelated = tmp_path / f"{WORK_PREFIX}fl-12.1-other"  # another kind's directory
    unrelated.mkdir()

    made = private_dir(WORK_PREFIX, tmp_path)

    assert not stale.exists()
    assert live.is_dir() and unrelated.is_dir() and planted.is_symlink() and (elsewhere / "keep").exists()
    assert made.parent == tmp_path and made.name.startswith(f"{WORK_PREFIX}{os.getpid()}.")
    assert (made.stat().st_mode & 0o777) == 0o700
