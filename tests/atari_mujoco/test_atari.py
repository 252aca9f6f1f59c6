"""ppo_atari and dqn_atari on ALE envs through `mosaic run`: returns in TensorBoard, a live FastLane
frame, checkpoints, resume and policy evaluation (a few thousand steps each)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import completed, finish, mosaic_command, needs_atari, scalars, start, wait_for_frame

pytestmark = needs_atari

# Small budgets: a Nature-CNN forward pass takes tens of ms on a busy 2-core CPU. DQN acts at random
# (end_e 1: no forward pass per step) and trains from step 1850; Pong games last ~800 random steps.
PPO_FLAGS = {"num_envs": 4, "num_steps": 64, "update_epochs": 1, "checkpoint_frequency": 512}
DQN_FLAGS = {
    "learning_starts": 1850,
    "buffer_size": 5000,
    "train_frequency": 4,
    "target_network_frequency": 500,
    "checkpoint_frequency": 1000,
    "end_e": 1.0,
}


@pytest.fixture(scope="module")
def atari_runs(tmp_path_factory):
    """ppo_atari on Breakout (FastLane on, a frame read while it trains) and dqn_atari on Pong, side by side."""
    workdir = tmp_path_factory.mktemp("atari")
    ppo = start(
        workdir,
        *mosaic_command("ppo-atari", "ppo_atari", "BreakoutNoFrameskip-v4", 1024, {**PPO_FLAGS, "fastlane": True}),
    )
    dqn = start(workdir, *mosaic_command("dqn-atari", "dqn_atari", "PongNoFrameskip-v4", 2000, DQN_FLAGS))
    try:
        frame = wait_for_frame("ppo-atari", ppo)
        return workdir, workdir / "var/trainer/runs", frame, completed(ppo), completed(dqn)
    finally:
        for proc in (ppo, dqn):
            if proc.poll() is None:
                proc.kill()
                finish(proc)


def test_ppo_atari_trains_on_breakout_and_logs_cleanrl_tags(atari_runs):
    _, runs_root, _, ppo_events, _ = atari_runs
    bridged = [e["payload"] for e in ppo_events if e["event"] == "metrics"]  # the live metric bridge
    assert bridged and max(p["global_step"] for p in bridged) <= 1024 and max(p["episodes"] for p in bridged) >= 1
    values = scalars(runs_root / "ppo-atari")
    for tag in (
        "charts/episodic_return",
        "charts/episodic_length",
        "charts/SPS",
        "charts/learning_rate",
        "losses/value_loss",
        "losses/policy_loss",
        "losses/entropy",
        "losses/approx_kl",
        "losses/clipfrac",
        "losses/explained_variance",
    ):
        assert tag in values, sorted(values)
    returns = [value for _, value in values["charts/episodic_return"]]
    assert returns and all(r >= 0 and r == int(r) for r in returns)  # whole Breakout scores, not clipped per life
    assert max(step for step, _ in values["losses/value_loss"]) == 1024


def test_a_fastlane_frame_of_an_atari_run_is_read_while_it_trains(atari_runs):
    _, _, frame, _, _ = atari_runs
    assert frame.pixels.shape == (210, 160, 3) and frame.pixel_format.name == "RGB"
    assert 0 < float(np.mean(frame.pixels)) < 255


def test_dqn_atari_trains_on_pong_and_logs_cleanrl_tags(atari_runs):
    _, runs_root, _, _, dqn_events = atari_runs
    values = scalars(runs_root / "dqn-atari")
    assert {"charts/episodic_return", "losses/td_loss", "losses/q_values", "charts/SPS"} <= set(values)
    assert all(-21 <= r <= 21 for _, r in values["charts/episodic_return"])
    assert min(step for step, _ in values["losses/td_loss"]) > DQN_FLAGS["learning_starts"]
    saved = [e["payload"] for e in dqn_events if e["event"] == "checkpoint_saved"]
    assert [p["global_step"] for p in saved] == [1000, 2000, 2000] and saved[0]["algo"] == "dqn_atari"
    assert saved[-1]["path"].endswith("/dqn_atari.cleanrl_model")  # the final model, kept by default


@pytest.mark.slow  # the gymnasium 1.x lane (-m "not slow") keeps to the training runs above
def test_dqn_atari_resumes_from_its_checkpoint(atari_runs):
    workdir, runs_root, _, _, dqn_events = atari_runs
    (first,) = [
        e["payload"]["path"]
        for e in dqn_events
        if e["event"] == "checkpoint_saved" and e["payload"]["global_step"] == 1000
    ]
    resumed = start(
        workdir,
        *mosaic_command(
            "dqn-atari-resumed",
            "dqn_atari",
            "PongNoFrameskip-v4",
            1200,
            {
                **DQN_FLAGS,
                "save_model": False,  # its closing evaluation: 10 Pong games, longer than this run's training
                "learning_starts": 50,
                "mode": "resume_training",
                "checkpoint_path": str(runs_root / "dqn-atari" / first),
            },
        ),
    )
    completed(resumed)
    steps = [
        step
        for tag, values in scalars(runs_root / "dqn-atari-resumed").items()
        if not tag.startswith("eval/")
        for step, _ in values
    ]  # the final model's closing evaluation logs by episode (CleanRL's eval/ tags)
    assert min(steps) >= 1000 and max(steps) < 1200


@pytest.mark.slow
def test_policy_eval_rebuilds_the_ppo_atari_agent_from_its_checkpoint(atari_runs):
    workdir, runs_root, _, ppo_events, _ = atari_runs
    path = [e["payload"]["path"] for e in ppo_events if e["event"] == "checkpoint_saved"][-1]
    proc = start(
        workdir,
        *mosaic_command(
            "ppo-atari-eval",
            "ppo_atari",
            "BreakoutNoFrameskip-v4",
            1,
            {
                "mode": "policy_eval",
                "policy_path": str(runs_root / "ppo-atari" / path),
                "eval_episodes": 2,
                "eval_batch_size": 2,
                "eval_max_episode_steps": 300,
            },
        ),
    )
    completed(proc)
    summary = json.loads((runs_root / "ppo-atari-eval" / "eval_summary.json").read_text())
    assert summary["status"] == "completed" and summary["checkpoint"]["algo"] == "ppo_atari"
    assert len(summary["returns"]) == 2 and all(0 < n <= 300 for n in summary["lengths"])


@pytest.mark.parametrize("algo", ["ppo_atari", "dqn_atari"])
def test_a_non_atari_env_is_refused_with_one_line(tmp_path, algo):
    script = Path(__file__).resolve().parents[2] / "plugins" / "cleanrl_worker" / "algorithms" / f"{algo}.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--env-id", "CartPole-v1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0] == (
        f"error: {algo} trains on Atari (ALE) envs such as BreakoutNoFrameskip-v4; CartPole-v1 is a Classic control env"
    )
    assert list(tmp_path.iterdir()) == []
