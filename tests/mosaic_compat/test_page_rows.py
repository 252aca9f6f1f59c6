"""Rows of ``docs/coming-from-mosaic.md`` that, checked against the merged product, found the
product short of them: each test makes its row true through the real path
(``python -m cleanrl_worker.cli`` in a subprocess, the run directory read back)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.mosaic_compat.test_cleanrl_worker import files_under, one_line_error, summary_of, worker_cli

TINY_PPO = ["--algo", "ppo", "--env-id", "CartPole-v1"]
TINY_BUDGET = {"algo_params": {"num_envs": 1, "num_steps": 64, "update_epochs": 1}}


def test_a_dry_run_with_grpc_checks_the_daemons_address(workdir):
    """`--grpc-target`: a malformed HOST:PORT is one line naming the flag, at the dry run too
    (it said `dry run ok` and the run then failed on it)."""
    result = worker_cli(*TINY_PPO, "--dry-run", "--grpc", "--grpc-target", "nonsense", cwd=workdir)
    one_line_error(result, "--grpc-target", "HOST:PORT", "'nonsense'")
    assert files_under(workdir) == set()
    without_grpc = worker_cli(*TINY_PPO, "--dry-run", "--grpc-target", "nonsense", cwd=workdir)
    assert without_grpc.returncode == 0, without_grpc.stderr  # unused without --grpc, as in MOSAIC


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A PPO run of 128 steps: its directory (checkpoints/step_128.cleanrl_model)."""
    workdir = tmp_path_factory.mktemp("trained")
    extras = json.dumps(TINY_BUDGET)
    result = worker_cli(*TINY_PPO, "--total-timesteps", "128", "--extras", extras, "--run-id", "first", cwd=workdir)
    assert result.returncode == 0, result.stderr
    run_dir = workdir / "var" / "trainer" / "runs" / "first"
    assert (run_dir / "checkpoints" / "step_128.cleanrl_model").is_file()
    return run_dir


def test_policy_eval_of_a_run_directory_plays_its_newest_checkpoint(trained_run, workdir):
    """`policy_path` / `checkpoint_path`: a run directory names its newest checkpoint (the dry
    run accepted a directory, and the evaluation then failed with `no such file`)."""
    extras = json.dumps({"mode": "policy_eval", "policy_path": str(trained_run), "eval_episodes": 2})
    result = worker_cli(*TINY_PPO, "--extras", extras, "--run-id", "judged", cwd=workdir)
    assert result.returncode == 0, result.stderr
    newest = trained_run / "checkpoints" / "step_128.cleanrl_model"
    assert f"--policy-path={newest}" in result.events[0]["payload"]["argv"]
    summary = json.loads((workdir / "var" / "trainer" / "runs" / "judged" / "eval_summary.json").read_text())
    assert summary["checkpoint"]["path"] == str(newest) and len(summary["returns"]) == 2


def test_resume_training_from_a_run_directory_starts_at_its_newest_checkpoint(trained_run, workdir):
    extras = json.dumps({**TINY_BUDGET, "mode": "resume_training", "checkpoint_path": str(trained_run)})
    result = worker_cli(
        *TINY_PPO, "--total-timesteps", "256", "--extras", extras, "--dry-run", "--emit-summary", cwd=workdir
    )
    newest = trained_run / "checkpoints" / "step_128.cleanrl_model"
    assert f"--resume-from={newest}" in summary_of(result)["argv"]


@pytest.mark.parametrize("mode", ["policy_eval", "resume_training"])
def test_a_directory_without_checkpoints_is_refused_at_the_dry_run(workdir, mode):
    (workdir / "empty").mkdir()
    extras = json.dumps({"mode": mode, "checkpoint_path": str(workdir / "empty")})
    result = worker_cli(*TINY_PPO, "--total-timesteps", "256", "--extras", extras, "--dry-run", cwd=workdir)
    one_line_error(result, "extras.checkpoint_path", "no checkpoint in", "checkpoints/step_N.cleanrl_model")
    assert files_under(workdir) == {"empty"}
