"""A dry run refuses what the run would fail on: each category through the real CLI, one line,
exit 2, no traceback, nothing written."""

from __future__ import annotations

import json

import pytest

PPO = ["run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1", "--total-timesteps", "100"]


def refused(result, *needles):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.mark.parametrize(
    "extras, needles",
    [
        ('{"num_envs": 0}', ("--num-envs must be >= 1, got 0",)),
        ('{"num_envs": 2.5}', ("--num-envs expects an integer",)),
        ('{"learning_rate": NaN}', ("NaN is not a number JSON allows",)),
        ('{"learning_rate": Infinity}', ("Infinity",)),
        ('{"learning_rate": 1e400}', ("--learning-rate must be a finite number",)),
        ('{"gamma": 1.5}', ("--gamma must be from 0 to 1",)),
        ('{"checkpoint_frequency": -3}', ("extras.checkpoint_frequency must be an integer >= 0, got -3",)),
        ('{"total_timesteps": 5}', ("total_timesteps is a worker-config field",)),
        ('{"a": 1, "a": 2}', ("duplicate key 'a'",)),
        ('{"wandb_projekt_name": "x"}', ("extras.wandb_projekt_name", "did you mean wandb_project_name?")),
        ('{"eval_episods": 3}', ("did you mean eval_episodes?",)),
        ('{"fastlane_slot": -1}', ("fastlane_slot",)),
        ('{"fastlane_vidoe_mode": "grid"}', ("extras.fastlane_vidoe_mode", "did you mean fastlane_video_mode?")),
        ('{"thresh_level": "high"}', ("extras.thresh_level: must be a finite number",)),
    ],
)
def test_bad_values_are_refused_naming_the_key(mosaic, workdir, extras, needles):
    refused(mosaic(*PPO, "--dry-run", "--extras", extras), *needles)
    assert not (workdir / "var").exists()


def test_host_values(mosaic):
    refused(mosaic(*PPO, "--seed", "-1", "--dry-run"), "seed must be an integer from 0 to 4294967295")
    refused(mosaic(*PPO[:-1], str(2**64), "--dry-run"), "total_timesteps must be at most")
    refused(mosaic(*PPO, "--heartbeat-interval", "-1", "--dry-run"), "--heartbeat-interval must be a positive")
    refused(mosaic(*PPO, "--grace-period", "nan", "--dry-run"), "--grace-period")
    refused(mosaic(*PPO, "--run-id", "a\nb", "--dry-run"), "run_id must be")


def test_files_and_directories(mosaic, workdir):
    (workdir / "latin1.json").write_bytes(b'{"algo": "\xe9"}')
    refused(mosaic("run", "--worker", "cleanrl", "--config", "latin1.json", "--dry-run"), "not UTF-8", "latin1.json")
    (workdir / "deep.json").write_text("[" * 50000 + "]" * 50000)
    refused(mosaic("run", "--worker", "cleanrl", "--config", "deep.json", "--dry-run"), "nests deeper than")
    (workdir / "dup.json").write_text('{"algo": "ppo", "algo": "dqn"}')
    refused(mosaic("run", "--worker", "cleanrl", "--config", "dup.json", "--dry-run"), "duplicate key 'algo'")
    refused(mosaic("run", "--worker", "cleanrl", "--config", ".", "--dry-run"), "is a directory")
    (workdir / "afile").write_text("x")
    refused(mosaic(*PPO, "--runs-dir", "afile", "--dry-run"), "runs directory", "is not a directory")
    refused(mosaic(*PPO, "--runs-dir", "afile/sub", "--dry-run"), "cannot be created")
    runs = workdir / "runs"
    (runs / "taken").mkdir(parents=True)
    refused(mosaic(*PPO, "--runs-dir", "runs", "--run-id", "taken", "--dry-run"), "run 'taken' already exists")
    (runs / "dangling").symlink_to(workdir / "nowhere")
    refused(mosaic(*PPO, "--runs-dir", "runs", "--run-id", "dangling"), "run 'dangling' already exists")
    assert not (workdir / "nowhere").exists()


def test_the_documented_wandb_spelling_is_accepted(mosaic):
    result = mosaic(
        *PPO, "--dry-run", "--emit-summary", "--extras", json.dumps({"track_wandb": True, "wandb_project": "mosaic"})
    )
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout)["argv"]
    assert "--wandb-project-name=mosaic" in argv and "--track" in argv


def test_evaluation_during_training_reaches_the_script(mosaic):
    result = mosaic(
        *PPO,
        "--dry-run",
        "--emit-summary",
        "--extras",
        json.dumps({"eval_frequency": 500, "eval_episodes": 5, "eval_gamma": 0.9}),
    )
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout)["argv"]
    assert "--eval-frequency=500" in argv and "--eval-episodes=5" in argv and not any("gamma" in a for a in argv)
