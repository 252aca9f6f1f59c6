"""Every bundled algorithm trains for a few hundred steps, logs CleanRL's tags, saves and evaluates."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os

import pytest

from cleanrl_worker.checkpoint import load_checkpoint, load_policy

from .conftest import CHECKPOINT_EVERY, TINY, scalars

LOSS_TAG = {
    "ppo": "losses/value_loss",
    "ppo_continuous_action": "losses/explained_variance",
    "dqn": "losses/td_loss",
    "c51": "losses/loss",
    "sac_continuous_action": "losses/alpha",
    "td3_continuous_action": "losses/qf2_loss",
    "ddpg_continuous_action": "losses/qf1_loss",
}


@pytest.mark.parametrize("algo", sorted(TINY))
def test_algorithm_trains_logs_saves_and_evaluates(algo, smoke_runs):
    every = CHECKPOINT_EVERY.get(algo, 200)
    run = smoke_runs[algo]
    assert run.returncode == 0, run.stderr[-3000:]
    run_dir = run.run_dir
    assert run_dir.name.startswith(f"{TINY[algo][1]}__{algo}__1__")  # CleanRL's run_name

    tags = scalars(run_dir)
    assert tags["charts/episodic_return"], "no episode was logged"
    assert {"charts/episodic_length", "charts/SPS", LOSS_TAG[algo]} <= set(tags)
    assert [step for step, _ in tags["eval/episodic_return"]] == list(range(10))
    assert len(tags["eval/discounted_return"]) == 10

    final = load_checkpoint(run_dir / f"{algo}.cleanrl_model")
    assert final["algo"] == algo and final["env_id"] == TINY[algo][1]
    total = int(TINY[algo][3])
    assert final["global_step"] == total and final["args"]["total_timesteps"] == total
    saved = sorted(smoke_runs[algo].cwd.glob("checkpoints/step_*.cleanrl_model"))  # the run directory's (the cwd)
    assert saved, "--checkpoint-frequency saved nothing"
    for path in saved:
        step = int(path.stem.removeprefix("step_"))
        # every --checkpoint-frequency steps, and the run contract's checkpoint at the end
        assert (step % every == 0 or step == total) and load_checkpoint(path)["global_step"] == step


@pytest.mark.parametrize("algo", sorted(TINY))
def test_algorithm_evaluates_during_training_and_keeps_the_best_model(algo, smoke_runs):
    every, total = CHECKPOINT_EVERY.get(algo, 200), int(TINY[algo][3])
    run_dir = smoke_runs[algo].run_dir
    curve = scalars(run_dir)["eval/mean_return"]
    assert [step for step, _ in curve] == list(range(every, total + 1, every))
    history = json.loads((run_dir / "eval_history.json").read_text())
    assert history["eval_episodes"] == 2 and [len(e["returns"]) for e in history["evaluations"]] == [2] * len(curve)
    best = load_checkpoint(run_dir / "best.cleanrl_model")
    assert best["evaluation"]["mean_return"] == pytest.approx(max(value for _, value in curve))
    policy = load_policy(run_dir / "best.cleanrl_model", deterministic=True)
    env = policy.make_env()
    obs, _ = env.reset(seed=0)
    assert env.action_space.contains(policy.act(obs[None])[0].astype(env.action_space.dtype))
    env.close()


@pytest.mark.parametrize("algo", sorted(TINY))
def test_module_imports_without_side_effects(algo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(f"cleanrl_worker.algorithms.{algo}")
    assert os.listdir(tmp_path) == []
    fields = {f.name: f.default for f in dataclasses.fields(module.Args)}
    assert fields["exp_name"] == algo and fields["seed"] == 1 and fields["cuda"] is True
    assert fields["wandb_project_name"] == "cleanRL" and fields["checkpoint_frequency"] == 0
    assert fields["resume_from"] is None
    assert fields["eval_frequency"] == 0 and fields["eval_episodes"] == 10
    for name in ("policy_models", "policy", "make_eval_env"):
        assert callable(getattr(module, name))
