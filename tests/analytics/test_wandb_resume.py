"""W&B offline across `mosaic resume` (the run contract's one history): a tracked CleanRL PPO run
SIGTERMed near its middle and resumed goes on in the same W&B run (one id for both attempts'
offline folders), and no training step is logged twice or lost: the stopped attempt finishes its
W&B run at the stop, its rows ending at the checkpoint; the resumed attempt's start after it. Read back from the offline .wandb files."""

from __future__ import annotations

import json

import pytest

from mosaic_core.testing.contract_suite import WorkerContractSuite

from .wandb_offline import offline_runs

pytest.importorskip("wandb")


class Tracked(WorkerContractSuite):
    worker, algo, env_id, seed = "cleanrl", "ppo", "CartPole-v1", 3
    total_timesteps = 20_000
    extras = {
        "track_wandb": True,
        "wandb_mode": "offline",
        "num_envs": 2,
        "num_steps": 128,
        "cuda": False,
        "metrics_interval_s": 0.1,
    }
    env = {"WANDB_SILENT": "true"}


def training_steps(rows):
    """The global steps of the training rows (CleanRL's final evaluation logs episode numbers)."""
    return [row["global_step"] for row in rows if "global_step" in row and not any(k.startswith("eval/") for k in row)]


def test_a_resumed_tracked_run_goes_on_in_the_same_wandb_run_without_a_step_twice(tmp_path):
    suite = Tracked()
    suite.folder, suite.runs_root = tmp_path, tmp_path / "runs"
    code, err = suite.stop_at(suite.start(*suite.run_args("cut")), "cut", suite.total_timesteps // 2)
    cancelled = suite.events("cut")[-1]
    assert code == 130 and cancelled["payload"]["resumable"], (cancelled, err[-2000:])
    from_step = cancelled["payload"]["from_step"]
    first = offline_runs(suite.run_dir("cut"))
    assert len(first) == 1, first

    resumed = suite.cli("resume", "cut", "--runs-dir", str(suite.runs_root), "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (before_id, before), (after_id, after) = offline_runs(suite.run_dir("cut"))
    assert before_id == first[0][0] and after_id == before_id  # one W&B run, two offline attempts
    before_steps, after_steps = training_steps(before), training_steps(after)
    assert before_steps and after_steps
    # the stopped attempt's W&B run was finished at the stop (its rows reach the checkpoint's step,
    # the iteration's last), the resumed one starts after it: never a step twice, none lost
    assert max(before_steps) == from_step < min(after_steps)
    assert max(after_steps) <= suite.total_timesteps
    manifest = json.loads((suite.run_dir("cut") / "manifest.json").read_text())
    assert manifest["wandb"]["run_id"] == before_id and manifest["wandb"]["mode"] == "offline"
