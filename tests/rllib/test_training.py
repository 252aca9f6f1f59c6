"""The RLlib worker through `mosaic run`: PPO and DQN train a few tiny iterations on a local Ray
cluster in the worker's own environment, with metrics, TensorBoard files, a FastLane frame from the
env runner, checkpoints, resume, policy evaluation (`mosaic enjoy`) and cancellation that leaves
no Ray process behind."""

import json
import os
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.rllib.conftest import MOSAIC, alive, events_of, ray_pids, run_args, run_mosaic

pytestmark = pytest.mark.slow  # tens of seconds each: the main lane runs them, the gymnasium 1.x lane skips them

# metrics_interval_s: the first iteration's values get an event of their own, not merged into the
# next one's by the 1 s interval after the first episode's return (sent at once)
PPO_EXTRAS = {"fastlane_record": 1, "checkpoint_frequency": 500, "metrics_interval_s": 0.05}
# DQN updates once per sampled fragment: 25 steps a fragment makes 32 updates of the 800 steps past
# learning_starts (one step a fragment made 800: three quarters of the run's CPU)
DQN_PARAMS = {
    "num_steps_sampled_before_learning_starts": 200,
    "min_sample_timesteps_per_iteration": 500,
    "rollout_fragment_length": 25,
}


@pytest.fixture(scope="module")
def trained(rllib_env, tmp_path_factory):
    """{algo: (returncode, stderr, run directory)}, one run after the other (2 cores in CI)."""
    runs = tmp_path_factory.mktemp("runs")
    found = {}
    for algo, extras, params in (("PPO", PPO_EXTRAS, None), ("DQN", None, DQN_PARAMS)):
        done = run_mosaic(run_args(algo, runs, algo, extras=extras, params=params), rllib_env)
        found[algo] = (done.returncode, done.stderr, runs / algo)
    return found


def _no_ray_left(run_dir, events):
    pids = {e["payload"]["pid"] for e in events if e["event"] == "heartbeat"}
    assert len(pids) == 1
    left = [pid for pid in ray_pids(run_dir, pids.pop()) if alive(pid)]
    assert not left, f"processes of the run's Ray cluster outlived it: {left}"


@pytest.mark.parametrize("algo", ("PPO", "DQN"))
def test_trains_with_metrics_tensorboard_and_checkpoints(trained, algo):
    code, err, run_dir = trained[algo]
    assert code == 0, err
    events = events_of(run_dir)
    assert events[-1]["event"] == "run_completed"
    last = [e["payload"] for e in events if e["event"] == "metrics"][-1]
    assert last["global_step"] >= 1000 and last["episodes"] >= 10 and last["episodic_return"] > 0
    assert last["sps"] > 0 and any("loss" in name for name in last["losses"])
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert saved[-1]["reason"] == "final" and saved[-1]["global_step"] >= 1000
    assert (run_dir / "checkpoints" / os.path.basename(saved[-1]["path"]) / "rllib_checkpoint.json").is_file()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["tensorboard"]["event_dirs"], manifest["tensorboard"]
    if algo == "PPO":
        assert [s["reason"] for s in saved] == ["periodic", "final"]
        # The first episode's return reaches the host at once (a metrics event before the first
        # iteration ends); the first iteration's values as it ends (mosaic_core.child.scalars_reported),
        # not with the second, last iteration's (at step 1000; the env runner's returns of the second
        # iteration may come in the same event: its step lies between)
        metrics = [e["payload"] for e in events if e["event"] == "metrics"]
        assert metrics[0]["global_step"] < 500 and metrics[0]["episodic_return"] is not None, metrics[0]
        first_learned = next(m for m in metrics if m["losses"])
        assert 500 <= first_learned["global_step"] < 1000, [(m["global_step"], bool(m["losses"])) for m in metrics]
    pytest.importorskip("tensorboard")
    from mosaic_analytics.curves import read_scalars

    assert len(read_scalars(run_dir, "charts/episodic_return").steps) == last["episodes"]
    _no_ray_left(run_dir, events)


def test_a_frame_from_the_env_runner_reaches_fastlane(trained):
    from PIL import Image

    _code, _err, run_dir = trained["PPO"]
    section = json.loads((run_dir / "manifest.json").read_text())["fastlane"]
    assert section["frames_published"] >= 1 and section["errors"] == []
    pngs = sorted((run_dir / "videos" / "fastlane").glob("*.png"))
    assert pngs
    with Image.open(pngs[-1]) as image:
        assert image.size == (600, 400)  # CartPole's rgb_array
        low, high = image.convert("L").getextrema()
        assert low < high  # a cart and a pole on the background


def test_resume_continues_from_the_checkpoint(trained, rllib_env, tmp_path):
    _code, _err, first = trained["PPO"]
    done = subprocess.run(
        run_args("resumed", tmp_path, total=2000, extras={"mode": "resume_training", "checkpoint_path": str(first)}),
        env=rllib_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    events = events_of(tmp_path / "resumed")
    steps = [e["payload"]["global_step"] for e in events if e["event"] == "metrics"]
    assert steps and min(steps) > 1000 and max(steps) >= 2000
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert saved[-1]["global_step"] >= 2000 and saved[-1]["iteration"] >= 4  # RLlib kept its iteration count


def test_enjoy_evaluates_the_policy(trained, rllib_env):
    _code, _err, first = trained["PPO"]
    done = subprocess.run(
        [*MOSAIC, "enjoy", str(first), "--episodes", "3", "--json"],
        env=rllib_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # the evaluation's eval.json, recorded under its run
    assert result["worker"] == "rllib" and len(result["episodes"]) == 3 and result["mean"] > 0
    assert result["checkpoint"].startswith(str(first / "checkpoints"))
    assert [p.name for p in (first / "evaluations").glob("eval-*/eval.json")] == ["eval.json"]


@pytest.mark.parametrize("grace", ("10", "0.5"))
def test_cancel_leaves_no_ray_process(rllib_env, tmp_path, grace):
    """SIGTERM reaches the driver and the local cluster's processes (the run's process group): the
    run ends cancelled, not failed; with a grace period too short for that, the host SIGKILLs the
    group, and Ray's workers (in groups of their own) still go with their raylet."""
    events, folders = _cancelled(rllib_env, tmp_path, grace, timeout=120)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in folders), folders
    if grace == "10":
        assert folders == [], f"the run's Ray temp folder outlived it: {folders}"


@pytest.mark.alone  # judged against its grace period, under load of its own making
def test_sigterm_stops_a_run_within_its_grace_period_under_load(rllib_env, tmp_path, busy_cores):
    """The goal: any run stops within 5 s of SIGTERM with every core busy. The driver ends by itself
    (128 + SIGTERM, or 1 when Ray's core worker ends it as its raylet dies), not by the host's
    SIGKILL when the grace period is over; no time is asserted."""
    grace = 5
    events, folders = _cancelled(rllib_env, tmp_path, str(grace), timeout=grace + 25, load=busy_cores)
    assert events[-1]["payload"]["returncode"] in (128 + signal.SIGTERM, 1), "the driver outlived its grace period"
    assert folders == [], f"the run's Ray temp folder outlived it: {folders}"


@pytest.mark.alone  # its env runner's first samples are late only on a busy machine
def test_an_async_run_whose_first_samples_come_late_is_not_lost_under_load(rllib_env, tmp_path, busy_cores):
    """IMPALA's iterations end at their minimum time, samples or not: on a busy machine its env
    runner's first samples come seconds late, many short iterations after the first. Five empty
    iterations in a row are not enough to call the env runners lost: a minute without samples is."""
    busy_cores()
    params = {"num_env_runners": 1, "train_batch_size_per_learner": 500, "min_time_s_per_iteration": 0.2}
    done = run_mosaic(run_args("late", tmp_path, "IMPALA", params=params), rllib_env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert events_of(tmp_path / "late")[-1]["event"] == "run_completed"
    said = (tmp_path / "late" / "logs" / "rllib.stderr.log").read_text()
    assert "iteration sampled nothing (5 in a row" in said, said[-3000:]  # the case this test is for


def _cancelled(rllib_env, tmp_path, grace, timeout, load=None):
    """SIGTERM to a run's host once it reports metrics (``load()`` first, if given); then its
    events (the last one ``run_cancelled``, no Ray process left) and the Ray temp folders left."""
    proc = subprocess.Popen(
        run_args("cancel", tmp_path, total=10**6, more=("--grace-period", grace)),
        env=rllib_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if (tmp_path / "cancel" / "events.jsonl").exists() and any(
                e["event"] == "metrics" for e in events_of(tmp_path / "cancel")
            ):
                break
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.5)
        if load is not None:
            load()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=timeout)  # a host still alive then fails the test
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    events = events_of(tmp_path / "cancel")
    assert events[-1]["event"] == "run_cancelled"
    assert "Traceback" not in (tmp_path / "cancel" / "logs" / "rllib.stderr.log").read_text()
    deadline = time.monotonic() + 10  # workers notice their raylet is gone within a second or two
    while time.monotonic() < deadline:
        try:
            _no_ray_left(tmp_path / "cancel", events)
            break
        except AssertionError:
            time.sleep(0.5)
    _no_ray_left(tmp_path / "cancel", events)
    # Ray's temp dir (world-writable, Ray's choice) lay in a 0700 folder of the run; a folder left by
    # the host's SIGKILL is removed by the next local cluster's start (mosaic_core.files.private_dir).
    [pid] = {e["payload"]["pid"] for e in events if e["event"] == "heartbeat"}
    return events, [p for p in Path(tempfile.gettempdir()).glob(f"rllib-{pid}.*") if p.is_dir()]
