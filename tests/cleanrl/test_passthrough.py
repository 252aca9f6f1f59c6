"""Script flags typed after the host's (RL Zoo style): validated against the script's Args at
dry run like extras, never given twice, and the budget defaults to the script's own."""

from __future__ import annotations

import json

PPO = ["run", "--worker", "cleanrl", "--algo", "ppo", "--env-id", "CartPole-v1"]


def test_flags_after_the_hosts_are_the_scripts(mosaic):
    result = mosaic(*PPO, "--learning-rate", "1e-3", "--num-envs", "8", "--no-anneal-lr", "--dry-run", "--emit-summary")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["argv"][2:] == ["--learning-rate", "1e-3", "--num-envs", "8", "--no-anneal-lr", "--save-model"]
    assert summary["config"]["total_timesteps"] == 500000  # the script's own default


def test_a_flag_given_twice_or_unknown_or_out_of_range_is_refused(mosaic):
    twice = mosaic(*PPO, "--learning-rate", "1e-3", "--extras", '{"learning_rate": 0.1}', "--dry-run")
    assert twice.returncode == 2 and "--learning-rate is given on the command line and in extras" in twice.stderr
    typo = mosaic(*PPO, "--lerning-rate", "1e-3", "--dry-run")
    assert typo.returncode == 2 and "unknown flag --lerning-rate (did you mean --learning-rate?)" in typo.stderr
    zero = mosaic(*PPO, "--num-envs", "0", "--dry-run")
    assert zero.returncode == 2 and "--num-envs must be >= 1, got 0" in zero.stderr


def test_a_worker_without_script_flags_still_refuses_them(mosaic):
    result = mosaic("run", "--worker", "example", "--env-id", "CartPole-v1", "--total-timesteps", "10", "--lr", "1")
    assert result.returncode == 2 and "unrecognized arguments: --lr 1" in result.stderr
