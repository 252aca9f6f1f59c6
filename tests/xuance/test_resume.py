"""The run contract for the XuanCe worker, through `mosaic run` and real MAPPO training on
simple_spread with XuanCe's linear learning-rate decay: SIGTERM near the middle of a run leaves a
checkpoint and a cancelled run; resuming it (``mode: resume`` into a new run) continues the step
counter and the learning-rate schedule, which ends where the uninterrupted run's ends; evaluate
writes ``eval.json`` in the one schema, per agent."""

import json
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import events_of, run_args

pytestmark = pytest.mark.slow  # a minute of training: the main lane runs them, the gymnasium 1.x lane skips them

BUDGET = 8000  # 20 MAPPO updates (400-step rollouts over 4 envs)
DECAY = {"use_linear_lr_decay": True}
AGENTS = {"agent_0", "agent_1", "agent_2"}


def _learning_rates(run_dir):
    """{step: learning rate} of XuanCe's updates, from the run's TensorBoard files."""
    pytest.importorskip("tensorboard")
    from mosaic_analytics.curves import read_scalars

    curve = read_scalars(run_dir, "learning_rate")
    assert len(set(curve.steps)) == len(curve.steps), "a step written twice"
    return dict(zip(curve.steps, curve.values))


def _metric_steps(events):
    return [e["payload"]["global_step"] for e in events if e["event"] == "metrics"]


def _signalled(xuance_env, runs, run_id, total, extras, ready, send):
    """A run given ``send(proc, events)`` once ``ready(metric steps)``; (host's exit code, stderr, events)."""
    proc = subprocess.Popen(
        run_args(run_id, runs, total=total, extras=extras),
        env=xuance_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if (runs / run_id / "events.jsonl").exists() and ready(_metric_steps(events_of(runs / run_id))):
                break
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.2)
        send(proc, events_of(runs / run_id))
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err, events_of(runs / run_id)


def _sigterm_midway(xuance_env, runs, run_id):
    """A run SIGTERMed once its metrics pass half the budget; its events."""
    code, err, events = _signalled(
        xuance_env,
        runs,
        run_id,
        BUDGET,
        DECAY,
        lambda steps: any(s >= BUDGET // 2 for s in steps),
        lambda proc, _events: proc.send_signal(signal.SIGTERM),
    )
    assert code == 130, err
    return events


@pytest.fixture(scope="module")
def interrupted(xuance_env, tmp_path_factory):
    """An uninterrupted run and, beside it, one SIGTERMed midway then resumed into a new run:
    (uninterrupted dir, killed dir, killed events, resumed dir, resumed result)."""
    runs = tmp_path_factory.mktemp("runs")

    def uninterrupted():
        return subprocess.run(
            run_args("whole", runs, total=BUDGET, extras=DECAY),
            env=xuance_env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )

    with ThreadPoolExecutor(1) as pool:
        whole = pool.submit(uninterrupted)
        killed = _sigterm_midway(xuance_env, runs, "killed")
        resumed = subprocess.run(
            run_args(
                "resumed",
                runs,
                total=BUDGET,
                extras={**DECAY, "mode": "resume", "checkpoint_path": str(runs / "killed")},
            ),
            env=xuance_env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        done = whole.result()
    assert done.returncode == 0, done.stderr
    return runs / "whole", runs / "killed", killed, runs / "resumed", resumed


def test_sigterm_saves_a_checkpoint_and_cancels(interrupted):
    _whole, killed_dir, events, _resumed_dir, _resumed = interrupted
    assert events[-1]["event"] == "run_cancelled"
    assert events[-1]["payload"]["returncode"] == -signal.SIGTERM  # ended by the signal, after saving
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert len(saved) == 1 and saved[0]["reason"] == "cancelled" and saved[0]["format"] == "xuance"
    step = saved[0]["step"]
    assert 0 < step < BUDGET and step % 400 == 0, step  # the last update's step: a rollout boundary
    assert saved[0]["path"] == str(killed_dir / "checkpoints" / f"step_{step}")
    meta = json.loads((killed_dir / "checkpoints" / f"step_{step}" / "meta.json").read_text())
    assert meta["global_step"] == step and meta["total_timesteps"] == BUDGET and meta["iterations"] == step // 400


def test_resume_continues_steps_and_the_learning_rate_schedule(interrupted):
    whole_dir, killed_dir, killed, resumed_dir, resumed = interrupted
    assert resumed.returncode == 0, resumed.stderr
    events = events_of(resumed_dir)
    assert events[-1]["event"] == "run_completed"
    step = [e["payload"] for e in killed if e["event"] == "checkpoint_saved"][-1]["step"]
    steps = _metric_steps(events)
    # from the checkpoint on, in order (one step may carry two events: four envs end episodes together)
    assert steps and min(steps) > step and steps == sorted(steps), steps
    assert max(steps) >= BUDGET - 100
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert saved[-1]["step"] == BUDGET and saved[-1]["reason"] == "final"

    whole, before, after = _learning_rates(whole_dir), _learning_rates(killed_dir), _learning_rates(resumed_dir)
    assert len(whole) == BUDGET // 400 and whole[max(whole)] == pytest.approx(3.5e-4)  # 7e-4 decayed by half
    at_kill = json.loads((killed_dir / "checkpoints" / f"step_{step}" / "meta.json").read_text())["learning_rate"]
    assert at_kill == pytest.approx(before[max(s for s in before if s < step)])  # the rate the killed run last used
    assert min(after) > step and sorted(after) == [s for s in sorted(whole) if s > step]  # updates on the same steps
    for s, rate in after.items():  # the schedule goes on as if nothing happened, and ends where it ends
        assert rate == pytest.approx(whole[s], rel=1e-6), (s, rate, whole[s])


def test_evaluate_writes_the_schema_with_per_agent_returns(interrupted, xuance_env, tmp_path):
    whole_dir = interrupted[0]
    done = subprocess.run(
        run_args(
            "eval",
            tmp_path,
            total=1,
            extras={"mode": "evaluate", "checkpoint_path": str(whole_dir), "eval_episodes": 3, "eval_seed": 7},
        ),
        env=xuance_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert result["schema"] == "mosaic.eval/1" and result["worker"] == "xuance" and result["algo"] == "mappo"
    assert result["env_id"] == "mpe/simple_spread_v3" and result["global_step"] == BUDGET
    assert result["checkpoint"] == str(whole_dir / "checkpoints" / f"step_{BUDGET}")
    assert result["protocol"] == {"episodes": 3, "deterministic": False, "first_seed": 7, "normalization": "frozen"}
    assert [e["seed"] for e in result["episodes"]] == [7, 8, 9]
    for episode in result["episodes"]:
        assert set(episode["agents"]) == AGENTS and episode["length"] == 25
        assert episode["return"] == pytest.approx(sum(episode["agents"].values())) and episode["return"] < 0
    again = subprocess.run(
        run_args(
            "again",
            tmp_path,
            total=1,
            extras={"mode": "evaluate", "checkpoint_path": str(whole_dir), "eval_episodes": 3, "eval_seed": 7},
        ),
        env=xuance_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr
    repeated = json.loads((tmp_path / "again" / "eval.json").read_text())
    assert repeated["episodes"] == result["episodes"]  # the protocol is the same every time
    events = events_of(tmp_path / "eval")
    assert not [e for e in events if e["event"] == "metrics" and e["payload"]["losses"]]  # no test scores as losses


def _copy_checkpoint(run_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy" / "checkpoints" / f"step_{BUDGET}"
    shutil.copytree(run_dir / "checkpoints" / f"step_{BUDGET}", copy)
    return copy


def _refused(xuance_env, tmp_path, extras, algo="mappo"):
    done = subprocess.run(
        run_args("bad", tmp_path / "runs", algo, total=BUDGET, extras=extras),
        env=xuance_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("mosaic: note:")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_a_checkpoint_of_another_algorithm_or_a_newer_format_is_refused(interrupted, xuance_env, tmp_path):
    whole_dir = interrupted[0]
    line = _refused(xuance_env, tmp_path, {"mode": "resume", "checkpoint_path": str(whole_dir)}, algo="ippo")
    assert "is a checkpoint of algorithm 'mappo', not 'ippo'" in line
    copy = _copy_checkpoint(whole_dir, tmp_path)
    meta = json.loads((copy / "meta.json").read_text())
    (copy / "meta.json").write_text(json.dumps({**meta, "version": 99}))
    line = _refused(xuance_env, tmp_path, {"mode": "resume", "checkpoint_path": str(copy)})
    assert "format version 99 is newer than this worker's" in line
    assert not (tmp_path / "runs" / "bad").exists()


def test_a_checkpoint_of_another_xuance_is_not_resumed(interrupted, xuance_env, tmp_path):
    copy = _copy_checkpoint(interrupted[0], tmp_path)
    meta = json.loads((copy / "meta.json").read_text())
    assert meta["libraries"]["xuance"] == "1.4.4"  # what saved it
    (copy / "meta.json").write_text(json.dumps({**meta, "libraries": {**meta["libraries"], "xuance": "1.3.0"}}))
    line = _refused(xuance_env, tmp_path, {"mode": "resume", "checkpoint_path": str(copy)})
    assert "was saved by XuanCe 1.3.0, this worker runs 1.4.4" in line
    assert not (tmp_path / "runs" / "bad").exists()


def test_a_truncated_checkpoint_is_refused_in_one_line(interrupted, xuance_env, tmp_path):
    copy = _copy_checkpoint(interrupted[0], tmp_path)
    state = copy / "state.pt"
    state.write_bytes(state.read_bytes()[:2000])
    line = _refused(xuance_env, tmp_path, {"mode": "resume", "checkpoint_path": str(copy.parent.parent)})
    assert "state.pt cannot be loaded" in line and str(copy) in line


def test_sigusr1_to_the_training_process_saves_a_checkpoint_first(xuance_env, tmp_path):
    """What a scheduler sends before a time limit, straight to the training process."""
    import os

    def send(_proc, events):
        os.kill(next(e["payload"]["pid"] for e in events if e["event"] == "heartbeat"), signal.SIGUSR1)

    _code, err, events = _signalled(xuance_env, tmp_path, "usr1", 10**6, {}, bool, send)
    saved = [e["payload"] for e in events if e["event"] == "checkpoint_saved"]
    assert saved and saved[-1]["reason"] == "cancelled" and os.path.isfile(os.path.join(saved[-1]["path"], "state.pt"))
    assert events[-1]["payload"]["returncode"] == -signal.SIGUSR1, err


class _Planted:
    """A pickle that would run a command when unpickled."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def test_a_checkpoint_is_data_a_planted_pickle_does_not_run(interrupted, xuance_env, tmp_path):
    """state.pt is read with torch.load(weights_only=True): a pickle that would run code is refused
    (one line, exit 2) and runs nothing, wherever the checkpoint comes from."""
    import pickle

    copy = _copy_checkpoint(interrupted[0], tmp_path)
    marker = tmp_path / "ran"
    (copy / "state.pt").write_bytes(pickle.dumps({"policy": _Planted(marker)}))
    line = _refused(xuance_env, tmp_path, {"mode": "evaluate", "checkpoint_path": str(copy)})
    assert "state.pt cannot be loaded" in line and "weights" in line.lower()
    assert not marker.exists()


def test_a_resume_in_its_own_run_purges_tensorboard_steps_after_the_checkpoint(interrupted, xuance_env, tmp_path):
    """The training program resumed in the run directory that wrote the checkpoint (as the host's
    `mosaic resume` starts it: the run's own command, mode resume, its newest checkpoint) goes on in
    that run's TensorBoard folder with purge_step: TensorBoard shows each step once."""
    import shutil

    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _whole, killed_dir, killed, _resumed_dir, _resumed = interrupted
    run_dir = tmp_path / "killed"
    shutil.copytree(killed_dir, run_dir)
    step = [e["payload"] for e in killed if e["event"] == "checkpoint_saved"][-1]["step"]
    command = json.loads((run_dir / "launch.json").read_text())["command"]
    command[command.index("--mode") + 1] = "resume"
    command += ["--checkpoint", str(run_dir / "checkpoints" / f"step_{step}")]
    done = subprocess.run(command, cwd=run_dir, env=xuance_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (folder,) = (run_dir / "tensorboard").iterdir()  # the same folder, no second one
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    episodes = [s.step for s in events.Scalars("charts/episodic_return")]
    assert len(episodes) == 4 * (BUDGET // 100) and sorted(episodes) == episodes  # 4 envs, 25-step episodes, once each
    rates = [s.step for s in events.Scalars("learning_rate")]
    assert rates == sorted(set(rates)) and len(rates) == BUDGET // 400
