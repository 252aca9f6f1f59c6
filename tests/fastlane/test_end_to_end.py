"""FastLane through the real path: `mosaic run` trains while other processes read its frames."""

import json
import os
import resource
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from fastlane_helpers import (
    MOSAIC,
    SCRIPTS,
    clean_environ,
    finish,
    run_command,
    shm_leftovers,
    start_run,
    wait_for_frames,
)

from mosaic_fastlane import layout

GYMNASIUM_0 = __import__("gymnasium").__version__.startswith("0.")


@pytest.fixture
def launched():
    """Start runs through this; any still running when the test ends are cancelled."""
    procs = []

    def start(*args, **kwargs):
        procs.append(start_run(*args, **kwargs))
        return procs[-1]

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            finish(proc)


def manifest_of(workdir, run_id):
    return json.loads((workdir / "var/trainer/runs" / run_id / "manifest.json").read_text())


def terminal(events):
    ends = [e for e in events if e["event"] in ("run_completed", "run_failed", "run_cancelled")]
    assert len(ends) == 1 and ends[0] is events[-1]
    return ends[0]


def test_a_ppo_run_is_read_live_by_another_process(workdir, launched):
    run_id = f"e2e-ppo-{os.getpid()}"
    proc = launched(workdir, run_id, {"fastlane": True}, algo="ppo", total=6144)
    reader = subprocess.run(
        [sys.executable, str(SCRIPTS / "read_frames.py"), run_id, "4"], capture_output=True, text=True, timeout=120
    )
    events, err = finish(proc)
    assert terminal(events)["event"] == "run_completed", err
    section = manifest_of(workdir, run_id)["fastlane"]
    assert reader.returncode == 0, reader.stderr
    frames = json.loads(reader.stdout)
    assert len(frames) == 4, (frames, err)
    numbers = [f["frame_number"] for f in frames]
    steps = [f["global_step"] for f in frames]
    assert numbers == sorted(set(numbers)) and steps == sorted(steps) and steps[-1] > steps[0]
    last = frames[-1]
    assert (last["height"], last["width"], last["pixel_format"]) == (341, 512, "RGB")  # 400x600 -> max dim 512
    assert last["step_rate_hz"] > 0 and last["last_reward"] == 1.0 and last["episode_count"] >= 1
    assert last["rolling_return"] is None or 5 <= last["rolling_return"] <= 500
    assert 0 < last["mean_pixel"] < 255  # a real picture, neither blank nor empty
    assert section["segment"] == layout.segment_name(run_id) and section["frames_published"] >= 4
    assert section["errors"] == [] and shm_leftovers(run_id) == []


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory):
    """A grid run with AsyncVectorEnv (an env per process) and tiles of four sizes, kept training."""
    workdir = tmp_path_factory.mktemp("grid")
    run_id = f"e2e-grid-{os.getpid()}"
    proc = start_run(
        workdir,
        run_id,
        {"fastlane_video_mode": "grid", "num_envs": 4, "async_envs": True, "step_delay": 0.004},
        env_id="FastLaneSized-v0",
        total=10**7,
        more=("--heartbeat-interval", "1"),
        env={"CLEANRL_FASTLANE_INTERVAL_MS": "50"},
    )
    reader = None
    try:
        reader = wait_for_frames(run_id, proc, frames=8)
        yield workdir, run_id, proc, reader
    finally:
        if reader is not None:
            reader.close()
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        finish(proc)


def test_grid_tiles_come_from_four_processes_and_never_mix_steps(grid_run):
    _workdir, run_id, proc, reader = grid_run
    sizes = {(200, 300, 3), (266, 400, 3), (333, 500, 3), (341, 512, 3)}
    complete = 0
    last_tick = 0
    for _ in range(30):
        tiles = reader.tiles()
        assert len({t.tick for t in tiles}) == 1  # one moment: the same vector step
        if GYMNASIUM_0:  # (gymnasium 1.x autoresets in place of a step, so env step counts differ)
            assert len({t.global_step for t in tiles}) == 1
        if len(tiles) == 4:
            complete += 1
            assert {t.pixels.shape for t in tiles} == sizes and [t.env_index for t in tiles] == [0, 1, 2, 3]
        assert tiles[0].tick >= last_tick
        last_tick = tiles[0].tick
        time.sleep(0.02)
    assert complete > 0
    writers = {s.writer_pid for s in reader.slots()}
    assert len(writers) == 4 and proc.pid not in writers and all(s.writer_alive for s in reader.slots())
    grid = reader.latest()
    assert grid.pixels.shape == (2 * 341 + 2, 2 * 512 + 2, 3) and grid.global_step % 4 == 0
    assert sum(t.episode_count for t in reader.tiles()) >= 1


def test_snapshot_saves_the_current_frame(grid_run, tmp_path):
    workdir, run_id, _proc, _reader = grid_run
    out = subprocess.run(
        [str(MOSAIC), "fastlane", "snapshot", run_id, "-o", str(tmp_path / "f.png"), "--slot", "2"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=clean_environ(),
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    from PIL import Image

    image = np.asarray(Image.open(tmp_path / "f.png"))
    assert image.shape == (333, 500, 3) == (summary["height"], summary["width"], 3) and summary["env_index"] == 2
    whole = subprocess.run(
        [str(MOSAIC), "fastlane", "snapshot", run_id, "-o", str(tmp_path / "grid.png")],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=clean_environ(),
    )
    assert whole.returncode == 0 and np.asarray(Image.open(tmp_path / "grid.png")).shape == (684, 1026, 3)


def test_watch_in_the_terminal(grid_run):
    workdir, run_id, _proc, _reader = grid_run
    out = subprocess.run(
        [str(MOSAIC), "fastlane", "watch", run_id, "--terminal", "--frames", "2", "--columns", "40"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=clean_environ(),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("steps/s") == 2 and "\u2580" in out.stdout


def test_watch_serves_a_live_page_on_loopback(grid_run):
    import urllib.error
    import urllib.request

    workdir, run_id, _proc, _reader = grid_run
    watch = subprocess.Popen(
        [str(MOSAIC), "fastlane", "watch", run_id, "--port", "0"],
        cwd=workdir,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_environ(),
    )
    try:
        line = watch.stderr.readline()
        url, token = line.split(" at ")[1].split()[0].split("?token=")
        assert url.startswith("http://127.0.0.1:")
        with pytest.raises(urllib.error.HTTPError, match="401"):  # every request needs the token
            urllib.request.urlopen(url + "metrics.json", timeout=10)

        def get(path: str) -> bytes:
            request = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
            return urllib.request.urlopen(request, timeout=10).read()

        page = urllib.request.urlopen(f"{url}?token={token}", timeout=10).read().decode()
        metrics = json.loads(get("metrics.json"))
        png = get("frame.png")
        assert "FastLane" in page and "frame.png" in page
        assert metrics["run_id"] == run_id and metrics["ended"] is False and metrics["global_step"] > 0
        assert png.startswith(b"\x89PNG")
    finally:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=10) == 0


def test_heartbeats_carry_fastlane_status(grid_run):
    workdir, run_id, _proc, reader = grid_run
    deadline = time.monotonic() + 30
    beats = []
    while not beats and time.monotonic() < deadline:
        events = [
            json.loads(l) for l in (workdir / "var/trainer/runs" / run_id / "events.jsonl").read_text().splitlines()
        ]
        beats = [
            e["payload"]["fastlane"]
            for e in events
            if e["event"] == "heartbeat" and e["payload"].get("fastlane", {}).get("frames_published")
        ]
        time.sleep(0.2)
    assert beats and beats[-1]["mode"] == "grid" and beats[-1]["step_rate_hz"] > 0


def test_cancelling_the_grid_run_removes_its_segment(grid_run):
    workdir, run_id, proc, reader = grid_run
    os.kill(proc.pid, signal.SIGTERM)
    events, err = finish(proc)
    assert terminal(events)["event"] == "run_cancelled", err
    assert shm_leftovers(run_id) == [] and reader.ended()
    section = manifest_of(workdir, run_id)["fastlane"]
    assert section["mode"] == "grid" and len(section["slots"]) == 4 and section["errors"] == []
    assert min(s["published"] for s in section["slots"]) > 0
    ended = subprocess.run(
        [str(MOSAIC), "fastlane", "snapshot", run_id], cwd=workdir, capture_output=True, text=True, env=clean_environ()
    )
    assert ended.returncode == 1 and f"run {run_id} has ended (cancelled)" in ended.stderr
    assert "Traceback" not in ended.stderr


@pytest.mark.parametrize("ending", ["completed", "crash", "sigkill"])
def test_no_segment_is_left_however_the_run_ends(workdir, launched, ending):
    run_id = f"e2e-{ending}-{os.getpid()}"
    extras = {"fastlane": True, "num_envs": 1, "step_delay": 0.002}
    if ending == "crash":
        extras["crash_at"] = 150
    proc = launched(workdir, run_id, extras, total=300 if ending != "sigkill" else 10**7)
    if ending == "sigkill":
        reader = wait_for_frames(run_id, proc, frames=2)
        os.kill(reader.slots()[0].writer_pid, signal.SIGKILL)  # the training process itself
        reader.close()
    events, err = finish(proc)
    end = terminal(events)
    expected = {"completed": "run_completed", "crash": "run_failed", "sigkill": "run_failed"}[ending]
    assert end["event"] == expected, err
    if ending == "sigkill":
        assert "SIGKILL" in end["payload"]["error"]
    assert shm_leftovers(run_id) == []
    section = manifest_of(workdir, run_id)["fastlane"]
    assert section["frames_published"] >= 1 and section["render_seconds"] > 0


def test_recorder_consumer_writes_every_nth_frame(workdir, launched):
    run_id = f"e2e-record-{os.getpid()}"
    proc = launched(
        workdir,
        run_id,
        {"fastlane_record": 2, "num_envs": 1, "step_delay": 0.002},
        total=300,
        env={"CLEANRL_FASTLANE_INTERVAL_MS": "20", "CLEANRL_FASTLANE_RENDER_BUDGET": "1"},
    )
    events, err = finish(proc)
    assert terminal(events)["event"] == "run_completed", err
    section = manifest_of(workdir, run_id)["fastlane"]
    files = sorted((workdir / "var/trainer/runs" / run_id / "videos/fastlane").glob("env0-step*.png"))
    assert section["recorded_dir"] == "videos/fastlane" and len(files) == section["frames_published"] // 2 >= 1


def test_bad_input_is_refused_at_dry_run_time(workdir):
    def dry(extras, **env):
        out = subprocess.run(
            run_command("dry", extras, more=("--dry-run",)),
            cwd=workdir,
            capture_output=True,
            text=True,
            env=clean_environ(**env),
        )
        return out.returncode, out.stderr

    code, err = dry({"fastlane_video_mode": "movie", "fastlane_grid_limit": 0})
    assert code == 2 and "extras.fastlane_video_mode: 'movie' is not one of single, grid, off" in err
    assert "extras.fastlane_grid_limit" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, err = dry({"fastlane_slot": 3, "num_envs": 2})
    assert code == 2 and "extras.fastlane_slot: 3 is outside the run's 2 env(s)" in err
    code, err = dry({"fastlane": True}, CLEANRL_FASTLANE_INTERVAL_MS="fast", CLEANRL_FASTLANE_MAX_DIM="x")
    assert code == 2 and "CLEANRL_FASTLANE_INTERVAL_MS: 'fast'" in err and "CLEANRL_FASTLANE_MAX_DIM: 'x'" in err
    code, err = dry({"fastlane": True})
    assert code == 0 and shm_leftovers("dry") == []  # a dry run creates no segment


@pytest.mark.parametrize("failure", ["no-shm-dir", "no-space"])
def test_a_shared_memory_failure_disables_fastlane_with_one_warning(workdir, tmp_path, failure):
    run_id = f"e2e-{failure}-{os.getpid()}"
    env = clean_environ()
    limit = None
    if failure == "no-shm-dir":
        env[layout.SHM_DIR_VAR] = str(tmp_path / "missing")
    else:

        def limit():  # segments are reserved with fallocate: over the file-size limit fails like a full disk
            resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))

    out = subprocess.run(
        run_command(run_id, {"fastlane_video_mode": "grid", "num_envs": 2}, total=200),
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=limit,
        timeout=120,
    )
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert terminal(events)["event"] == "run_completed", out.stderr
    warnings = [l for l in out.stderr.splitlines() if "fastlane" in l.lower()]
    assert len(warnings) == 1 and "FastLane is disabled" in warnings[0], out.stderr
    assert ("does not exist" if failure == "no-shm-dir" else "File too large") in warnings[0]
    child_log = (workdir / "var/trainer/runs" / run_id / "logs/cleanrl.stderr.log").read_text()
    assert "fastlane" not in child_log.lower()
    section = manifest_of(workdir, run_id)["fastlane"]
    assert section["enabled"] is False and len(section["errors"]) == 1 and shm_leftovers(run_id) == []


def test_cli_explains_why_there_is_no_frame(workdir):
    def snapshot(run_id):
        out = subprocess.run(
            [str(MOSAIC), "fastlane", "snapshot", run_id],
            cwd=workdir,
            capture_output=True,
            text=True,
            env=clean_environ(),
        )
        assert "Traceback" not in out.stderr
        return out.returncode, out.stderr.strip()

    code, err = snapshot("nosuchrun")
    assert code == 1 and "no run nosuchrun under" in err
    code, err = snapshot("../etc")
    assert code == 2 and "run_id" in err
    run_dir = workdir / "var/trainer/runs/plain"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"extras": {}}))
    code, err = snapshot("plain")
    assert code == 1 and "runs without FastLane" in err
