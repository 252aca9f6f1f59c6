"""Faults a daemon must survive: killed between recording a run's start and learning its pid
(the restart finds and stops its process, never starts it twice), and a full disk under the
state dir (the affected run fails cleanly, the database stays readable) or the runs root (a local
run is refused in one line, leaving nothing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import pytest

from mosaic_core.errors import MosaicError
from mosaic_core.trainer import client
from mosaic_core.trainer import trainer_pb2 as pb
from mosaic_core.trainer.recovery import RESTART_REASON
from mosaic_core.trainer.store import HSHK, RunStore

from .conftest import fake_config, wait_final, wait_for


def test_a_run_recorded_as_launching_without_a_pid_is_found_stopped_and_settled(start_daemon, state_dir):
    (state_dir / "configs").mkdir(parents=True)
    config = state_dir / "configs" / "launching.json"
    config.write_text("{}")
    store = RunStore(state_dir / "trainer.sqlite3")
    store.insert(
        run_id="launching",
        worker="fake",
        status=HSHK,
        digest="-",
        config_json="{}",
        config_path=str(config),
        run_dir=str(state_dir / "runs" / "launching"),
    )
    store.close()
    # What a killed daemon leaves: the run's process (its config path on its command line), no pid recorded.
    orphan = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", str(config)], start_new_session=True
    )
    try:
        daemon = start_daemon()
        final = wait_final(daemon.address, "launching")
        assert (final.status, final.failure_reason) == (pb.RUN_STATUS_FAULT, RESTART_REASON)
        wait_for(lambda: orphan.poll() is not None, timeout=30, what="the launching run's process to be stopped")
        assert not (state_dir / "runs" / "launching").exists()  # never started a second time
    finally:
        if orphan.poll() is None:
            orphan.kill()
        orphan.wait()


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (root only; skipped where mounting is not permitted)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip() or done.returncode}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder) -> object:
    """Write until the filesystem is full; returns the filler's path."""
    path = folder / f"filler-{uuid.uuid4().hex}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                continue
    finally:
        os.close(fd)
    return path


def test_a_full_disk_fails_the_run_cleanly_and_the_database_stays_readable(start_daemon, small_disk):
    state = small_disk / "state"
    daemon = start_daemon(state_dir=state)
    before = client.submit(daemon.address, fake_config({"duration": 0.1})).run_id
    assert wait_final(daemon.address, before).terminal_event == "run_completed"
    live = client.submit(daemon.address, fake_config({"duration": 1.5})).run_id
    wait_for(
        lambda: any(r.run_id == live and r.status == pb.RUN_STATUS_EXEC for r in client.list_runs(daemon.address)),
        what="run_started",
    )
    filler = fill(small_disk)
    # A run ending on a full disk is recorded (or failed) and the daemon goes on answering.
    ended = wait_final(daemon.address, live)
    assert ended.status in (pb.RUN_STATUS_TERM, pb.RUN_STATUS_FAULT)
    configs = sorted((state / "configs").iterdir())
    with pytest.raises(MosaicError, match="RESOURCE_EXHAUSTED: cannot record the run: [Nn]o space left on device"):
        client.submit(daemon.address, fake_config({"duration": 0.1}))
    assert sorted((state / "configs").iterdir()) == configs  # nothing half-recorded
    runs = {r.run_id: r for r in client.list_runs(daemon.address)}  # the database answers
    assert set(runs) == {before, live} and runs[before].terminal_event == "run_completed"
    os.unlink(filler)
    after = client.submit(daemon.address, fake_config({"duration": 0.1})).run_id
    assert wait_final(daemon.address, after).terminal_event == "run_completed"
    daemon.stop()
    store = RunStore(state / "trainer.sqlite3")  # readable, whole
    assert store._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert {before, live, after} <= {r.run_id for r in store.list()}
    store.close()
    shutil.rmtree(state, ignore_errors=True)


def test_a_full_runs_root_refuses_a_local_run_in_one_line_and_leaves_nothing(small_disk, tmp_path):
    from tests.conftest import run_cli

    runs = small_disk / "runs"
    runs.mkdir(mode=0o700)
    filler = fill(small_disk)
    result = run_cli(
        [
            "run",
            "--worker",
            "example",
            "--algo",
            "random",
            "--env-id",
            "CartPole-v1",
            "--total-timesteps",
            "50",
            "--runs-dir",
            str(runs),
            "--quiet",
        ],
        cwd=tmp_path,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("mosaic: error: cannot write run ") and last.endswith("No space left on device"), last
    assert list(runs.iterdir()) == []
    os.unlink(filler)
