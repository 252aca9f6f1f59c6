"""checkpoint.py in-process: the format's checks and rebuilding an agent from a file alone."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl_worker import checkpoint
from cleanrl_worker.checkpoint import CheckpointError, check_compatible, load_checkpoint, load_policy


def test_file_that_is_not_a_checkpoint_is_named(tmp_path):
    garbage = tmp_path / "garbage.cleanrl_model"
    garbage.write_bytes(b"not a checkpoint\n" * 50)
    with pytest.raises(CheckpointError, match="garbage.cleanrl_model: not a readable .cleanrl_model file"):
        load_checkpoint(garbage)
    with pytest.raises(CheckpointError, match="nowhere.cleanrl_model: no such file"):
        load_checkpoint(tmp_path / "nowhere.cleanrl_model")
    upstream = tmp_path / "upstream.cleanrl_model"
    torch.save({"network.0.weight": torch.zeros(2, 2)}, upstream)  # what CleanRL's --save-model writes
    with pytest.raises(CheckpointError, match="holds only model weights"):
        load_checkpoint(upstream)


def test_newer_format_and_missing_fields_are_refused(ppo_checkpoint, tmp_path):
    ckpt = load_checkpoint(ppo_checkpoint)
    newer = tmp_path / "newer.cleanrl_model"
    torch.save({**ckpt, "format_version": checkpoint.FORMAT_VERSION + 1}, newer)
    with pytest.raises(CheckpointError, match="newer than this code reads"):
        load_checkpoint(newer)
    partial = tmp_path / "partial.cleanrl_model"
    torch.save({k: v for k, v in ckpt.items() if k != "models"}, partial)
    with pytest.raises(CheckpointError, match="missing models"):
        load_checkpoint(partial)


def test_format_records_what_it_promises(ppo_checkpoint):
    ckpt = load_checkpoint(ppo_checkpoint)
    assert ckpt["format"] == "mosaic.cleanrl_model" and ckpt["algo"] == "ppo" and ckpt["env_id"] == "CartPole-v1"
    assert ckpt["observation_space"] == {
        "type": "Box",
        "shape": [4],
        "dtype": "float32",
        "low": ckpt["observation_space"]["low"],
        "high": ckpt["observation_space"]["high"],
    }
    assert ckpt["action_space"] == {"type": "Discrete", "n": 2, "start": 0}
    assert set(ckpt["versions"]) == {"torch", "gymnasium", "numpy", "python"}
    assert ckpt["versions"]["gymnasium"] == gym.__version__
    assert ckpt["args"]["seed"] == 1 and ckpt["optimizers"]["optimizer"]["state"]
    assert ckpt["normalization"] is None


def test_mismatches_are_named(ppo_checkpoint):
    ckpt = load_checkpoint(ppo_checkpoint)
    with pytest.raises(CheckpointError, match="trained on env 'CartPole-v1', not 'Acrobot-v1'"):
        check_compatible(ckpt, ppo_checkpoint, algo="ppo", env_id="Acrobot-v1")
    with pytest.raises(CheckpointError, match="saved by algo 'ppo', not 'dqn'"):
        check_compatible(ckpt, ppo_checkpoint, algo="dqn", env_id="CartPole-v1")
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("Acrobot-v1")])
    with pytest.raises(CheckpointError, match="observation space"):
        check_compatible(ckpt, ppo_checkpoint, algo="ppo", env_id="CartPole-v1", envs=envs)
    envs.close()


def test_spaces_round_trip():
    for space in (
        gym.spaces.Discrete(3, start=1),
        gym.spaces.Box(-1.0, 2.0, (2, 3), np.float32),
        gym.spaces.Box(np.array([0.0, -5.0]), np.array([1.0, 5.0]), dtype=np.float64),
        gym.spaces.Box(0, 255, (7, 7, 3), np.uint8),
    ):
        assert checkpoint.space_from_description(checkpoint.describe_space(space)) == space


def test_policy_rebuilt_from_file_alone_is_deterministic_given_a_seed(ppo_checkpoint):
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    first, second, other = (load_policy(ppo_checkpoint, seed=s) for s in (3, 3, 4))
    assert first.algo == "ppo" and first.global_step == 1024 and first.gamma == 0.99
    assert np.array_equal(first.act(obs), second.act(obs))
    assert not np.array_equal(first.act(obs), other.act(obs))  # sampling: 64 actions differ somewhere
    greedy = load_policy(ppo_checkpoint, seed=3, deterministic=True)
    assert np.array_equal(greedy.act(obs), load_policy(ppo_checkpoint, seed=9, deterministic=True).act(obs))
    env = first.make_env()
    assert env.spec.id == "CartPole-v1"
    env.close()


def test_observation_normalisation_travels_with_the_policy(smoke_runs):
    path = smoke_runs["ppo_continuous_action"].run_dir / "ppo_continuous_action.cleanrl_model"
    ckpt = load_checkpoint(path)
    (stats,) = ckpt["normalization"]["observation"]
    assert stats["count"] > 500 and len(stats["mean"]) == 3
    policy = load_policy(path, deterministic=True)
    obs = np.asarray([stats["mean"]], dtype=np.float32)  # normalises to zeros
    agent = checkpoint.algorithm_module("ppo_continuous_action").policy_models(_spaces(ckpt))["agent"]
    agent.load_state_dict(ckpt["models"]["agent"])
    with torch.no_grad():
        expected = agent.actor_mean(torch.zeros(1, 3)).numpy()
    np.testing.assert_allclose(policy.act(obs), expected, rtol=1e-5, atol=1e-6)


def _spaces(ckpt):
    from types import SimpleNamespace

    return SimpleNamespace(
        single_observation_space=checkpoint.space_from_description(ckpt["observation_space"]),
        single_action_space=checkpoint.space_from_description(ckpt["action_space"]),
    )


def test_unknown_algorithm_is_refused(ppo_checkpoint, tmp_path):
    path = tmp_path / "renamed.cleanrl_model"
    torch.save({**load_checkpoint(ppo_checkpoint), "algo": "../evil"}, path)
    with pytest.raises(CheckpointError, match="not a bundled algorithm"):
        load_policy(path)
