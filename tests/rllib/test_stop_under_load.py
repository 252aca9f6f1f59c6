"""A stop always ends an RLlib run resumable (issue 48), with both cores busy and the host's default
grace period: Ctrl-C half-way saves the last completed iteration at once (never the iteration under
way, which outlasted the grace period on a busy 2-core machine) and `mosaic resume` completes the
run; a SIGTERM after the last iteration ends the run completed (or resumable, and resumed to its
end), never cancelled with nothing left to resume."""

import os
import signal
import subprocess
import time

import pytest

from mosaic_core.events import metric_steps, one_history
from tests.conftest import worker_bin
from tests.rllib.conftest import MOSAIC, alive, events_of, ray_pids, run_args, run_mosaic

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # judged under load of their own making

ITERATION = 2000  # env steps per PPO iteration: seconds each on a busy 2-core machine
PARAMS = {"train_batch_size_per_learner": ITERATION}
# MOSAIC_STOP_REPEAT=20 runs each case 20 times in a row (issue 48's bar before a stop path is called done).
repeated = pytest.mark.parametrize("attempt", range(int(os.environ.get("MOSAIC_STOP_REPEAT", "1"))))


def _started(rllib_env, runs, run_id, total):
    return subprocess.Popen(
        run_args(run_id, runs, total=total, params=PARAMS, more=("--seed", "5")),
        env=rllib_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as at a terminal: Ctrl-C signals the group
    )


def _wait_for_step(proc, run_dir, step, on_first_metric):
    """The newest metric step once the run reports ``step`` or more (``on_first_metric()`` at its first)."""
    loaded, deadline = False, time.monotonic() + 600
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended before its stop: {proc.communicate()[1][-2000:]}"
        steps = metric_steps(events_of(run_dir)) if (run_dir / "events.jsonl").exists() else []
        if steps and not loaded:
            on_first_metric()
            loaded = True
        if steps and max(steps) >= step:
            return max(steps)
        time.sleep(0.2)
    raise AssertionError(f"the run never reported step {step}")


def _resumed_to_the_end(rllib_env, runs, run_id, total):
    done = run_mosaic([*MOSAIC, "resume", run_id, "--runs-dir", str(runs), "--json", "--quiet"], rllib_env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    events = events_of(runs / run_id)
    assert events[-1]["event"] == "run_completed", events[-1]
    steps = metric_steps(one_history(events))
    assert all(a <= b for a, b in zip(steps, steps[1:])) and max(steps) >= total, steps


@repeated
def test_ctrl_c_half_way_under_load_saves_at_once_and_resume_completes_the_run(
    rllib_env, tmp_path, busy_cores, attempt
):
    total = 5 * ITERATION
    proc = _started(rllib_env, tmp_path, "halt", total)
    try:
        seen = _wait_for_step(proc, tmp_path / "halt", total // 2, busy_cores)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
        _out, err = proc.communicate(timeout=60)  # the host's default grace period is 10 s
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    events = events_of(tmp_path / "halt")
    end = events[-1]["payload"]
    assert events[-1]["event"] == "run_cancelled" and end["resumable"] is True, end
    # The last completed iteration at the signal: at or before the step the run had reached (the host's
    # metric events trail the driver by at most the iteration that finished as the signal came).
    assert 0 < end["from_step"] <= seen + ITERATION and end["from_step"] < total, (end, seen)
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert [(s["step"], s["reason"]) for s in saved] == [(end["from_step"], "cancelled")], saved
    notes = [e["payload"]["text"] for e in events if e["event"] == "note"]
    assert any(f"saved the last completed iteration (step {end['from_step']})" in n for n in notes), notes
    log = (tmp_path / "halt" / "logs" / "rllib.stderr.log").read_text()
    assert "Traceback" not in log, log[-3000:]
    [pid] = {e["payload"]["pid"] for e in events if e["event"] == "heartbeat"}
    deadline = time.monotonic() + 10  # Ray's workers notice their raylet is gone within a second or two
    while (left := [p for p in ray_pids(tmp_path / "halt", pid) if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"processes of the run's Ray cluster outlived it: {left}"

    _resumed_to_the_end(rllib_env, tmp_path, "halt", total)


@repeated
def test_a_sigterm_after_the_last_iteration_never_leaves_a_run_stuck(rllib_env, tmp_path, busy_cores, attempt):
    total = 2 * ITERATION
    proc = _started(rllib_env, tmp_path, "late", total)
    try:
        _wait_for_step(proc, tmp_path / "late", total, busy_cores)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    end = events_of(tmp_path / "late")[-1]
    if end["event"] == "run_completed":  # the stop came after its final checkpoint, or during it
        assert proc.returncode == 0, err[-3000:]
        saved = [e["payload"] for e in events_of(tmp_path / "late") if e["event"] == "checkpoint_saved"]
        assert saved and saved[-1]["step"] >= total, saved
        return
    # The signal came in the last iteration: the one before it is kept, and a resume completes the run.
    assert end["event"] == "run_cancelled" and end["payload"]["resumable"] is True, end
    assert end["payload"]["from_step"] < total
    _resumed_to_the_end(rllib_env, tmp_path, "late", total)


@repeated
def test_a_stop_on_an_existing_cluster_saves_at_once_and_leaves_the_cluster(rllib_env, tmp_path, busy_cores, attempt):
    """Joined to a cluster it does not own, a stopped run saves its last completed iteration at once
    too, ends after the iteration under way, and leaves the cluster answering."""

    from tests.ray_launcher.loopback import LoopbackCluster

    cluster = LoopbackCluster(cpus_per_node=2, bin_dir=worker_bin(rllib_env, "rllib"))
    try:
        cluster.start_node("nodeA")
        cluster.wait_nodes(1)
        total = 5 * ITERATION
        proc = subprocess.Popen(
            run_args("joined", tmp_path, total=total, params=PARAMS, extras={"ray_address": cluster.address}),
            env={**rllib_env, **cluster.client_env()},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            seen = _wait_for_step(proc, tmp_path / "joined", total // 2, busy_cores)
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err[-3000:]
        events = events_of(tmp_path / "joined")
        end = events[-1]["payload"]
        assert events[-1]["event"] == "run_cancelled" and end["resumable"] is True, end
        assert 0 < end["from_step"] <= seen + 2 * ITERATION and end["from_step"] < total, (end, seen)
        notes = [e["payload"]["text"] for e in events if e["event"] == "note"]
        assert any("saved the last completed iteration" in n for n in notes), notes
        cluster.wait_nodes(1)  # the cluster still answers, its node alive
    finally:
        left = cluster.stop()
    assert not left, f"Ray processes left after the cluster stopped: {left}"
