"""`mosaic fastlane list` / `clean`, and the training-side failure path (one warning, training goes on)."""

import json
import os
import subprocess
import sys

from fastlane_helpers import MOSAIC, clean_environ, plugin_host, run_context, shm_leftovers, start_training

from mosaic_fastlane import layout
from mosaic_fastlane.segment import open_segment
from mosaic_fastlane.writer import SlotWriter


def test_list_shows_segments_and_clean_removes_only_dead_hosts(tmp_path):
    env = clean_environ(**{layout.SHM_DIR_VAR: str(tmp_path)})
    dead = (
        "import os; from mosaic_fastlane.segment import SegmentOwner; from mosaic_fastlane.layout import Mode; "
        "SegmentOwner('deadhost', mode=Mode.GRID, slot_count=2, max_dim=16, interval_ms=10); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", dead], env=env, check=True)
    live = subprocess.Popen(
        [
            sys.executable,
            "-c",
            dead.replace("deadhost", "livehost").replace("os._exit(0)", "print('ready', flush=True); input()"),
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert live.stdout.readline().strip() == "ready"
        (tmp_path / "mosaic-fl-junk").write_bytes(b"junk")
        (tmp_path / ".mosaic-fl-halfmade.999999999.tmp").write_bytes(b"")  # a host died while building it
        listed = subprocess.run([str(MOSAIC), "fastlane", "list"], env=env, capture_output=True, text=True)
        rows = {row["segment"]: row for row in map(json.loads, listed.stdout.splitlines())}
        assert rows["mosaic-fl-deadhost"]["host_alive"] is False and rows["mosaic-fl-deadhost"]["mode"] == "grid"
        assert rows["mosaic-fl-livehost"]["host_alive"] is True and "mode 0644" in rows["mosaic-fl-junk"]["skipped"]
        os.chmod(tmp_path / "mosaic-fl-junk", 0o600)
        listed = subprocess.run([str(MOSAIC), "fastlane", "list"], env=env, capture_output=True, text=True)
        assert "too small" in [json.loads(line) for line in listed.stdout.splitlines()][1]["error"]
        cleaned = subprocess.run([str(MOSAIC), "fastlane", "clean"], env=env, capture_output=True, text=True)
        assert json.loads(cleaned.stdout) == {"removed": 2, "skipped": 1}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["mosaic-fl-junk", "mosaic-fl-livehost"]
    finally:
        live.communicate("\n")


def test_a_refused_writer_warns_once_and_training_goes_on(tmp_path):
    host = plugin_host()
    run = run_context(tmp_path, f"taken-{os.getpid()}", {"fastlane": True})
    host.run_started(run)
    squatter = SlotWriter(open_segment(run.run_id, writable=True), 0, 0)  # slot 0 already has a live writer
    try:
        proc = start_training(run, host, "loop.py", "--steps", "300", "--num-envs", "2")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "loop finished" in out
        lines = [l for l in err.splitlines() if l.startswith("mosaic fastlane:")]
        assert len(lines) == 1 and "already has a writer" in lines[0] and "training goes on" in lines[0], err
    finally:
        squatter.close()
        host.run_finished(run, "completed")
    assert shm_leftovers(run.run_id) == []


def test_each_evaluation_batch_starts_again_at_env_0_which_single_mode_shows(tmp_path):
    """``evaluation_envs()`` makes a fresh set: policy evaluation's every batch shows its first env
    (single mode publishes env 0) once the batch before is closed; training's count then goes on."""
    host = plugin_host()
    run = run_context(tmp_path, f"evalbatches-{os.getpid()}", {"fastlane": True})
    host.run_started(run)
    try:
        proc = start_training(run, host, "eval_batches.py")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        seen = json.loads(out.strip().splitlines()[-1])
    finally:
        host.run_finished(run, "completed")
    assert seen == {"batches": [[True, False], [True, False]], "after": False}, err
    assert shm_leftovers(run.run_id) == []
