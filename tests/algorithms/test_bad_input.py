"""Bad checkpoints, wrong action spaces and bad evaluation flags: one clear line, exit code 2, nothing written or changed."""

from __future__ import annotations

import hashlib

import pytest

from .conftest import assert_one_line_error, run_parallel


@pytest.fixture(scope="module")
def failures(ppo_checkpoint, dqn_checkpoint, smoke_runs, tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    truncated = root / "truncated.cleanrl_model"
    truncated.write_bytes(ppo_checkpoint.read_bytes()[:2000])
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (ppo_checkpoint, dqn_checkpoint)}
    cartpole = ["--env-id", "CartPole-v1", "--total-timesteps", "4096"]
    jobs = {
        "other_algo": ("ppo", [*cartpole, "--resume-from", str(dqn_checkpoint)]),
        "truncated": ("ppo", [*cartpole, "--resume-from", str(truncated)]),
        "steps_reached": (
            "ppo",
            ["--env-id", "CartPole-v1", "--total-timesteps", "1024", "--resume-from", str(ppo_checkpoint)],
        ),
        "changed_network": (
            "c51",
            [*cartpole, "--n-atoms", "51", "--resume-from", str(smoke_runs["c51"].run_dir / "c51.cleanrl_model")],
        ),
        "dqn_on_pendulum": ("dqn", ["--env-id", "Pendulum-v1", "--total-timesteps", "1000"]),
        "sac_on_cartpole": ("sac_continuous_action", ["--env-id", "CartPole-v1", "--total-timesteps", "1000"]),
        "negative_eval_frequency": ("dqn", [*cartpole, "--eval-frequency", "-5"]),
        "no_eval_episodes": ("ppo", [*cartpole, "--eval-frequency", "512", "--eval-episodes", "0"]),
    }
    runs = run_parallel({key: (algo, flags, root / key) for key, (algo, flags) in jobs.items()})
    for path, sha in before.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha, f"{path} changed"
    return runs


CASES = {
    "other_algo": ("saved by algo 'dqn', not 'ppo'",),
    "truncated": ("truncated.cleanrl_model", "truncated or corrupt"),
    "steps_reached": ("global_step 1024", "--total-timesteps 1024"),
    "changed_network": ("c51.cleanrl_model", "does not fit this model", "size mismatch"),
    "dqn_on_pendulum": ("dqn", "Pendulum-v1", "Box(", "discrete"),
    "sac_on_cartpole": ("sac_continuous_action", "CartPole-v1", "Discrete(2)", "continuous"),
    "negative_eval_frequency": ("--eval-frequency must be >= 0", "-5"),
    "no_eval_episodes": ("--eval-episodes must be >= 1", "got 0"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_and_leaves_nothing(failures, case):
    run = failures[case]
    assert run.returncode == 2
    assert_one_line_error(run, *CASES[case])
    assert run.run_dirs() == [], "a run directory was created for a run that never started"
