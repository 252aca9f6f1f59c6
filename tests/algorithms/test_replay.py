"""replay.ReplayBuffer: circular storage, skipped rows, sample shapes and seeded sampling."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl_worker.replay import ReplayBuffer

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def add_steps(buffer, first, count, num_envs=1, valid=None):
    for step in range(first, first + count):
        obs = np.full((num_envs, 3), step, dtype=np.float32)
        buffer.add(
            obs, obs + 0.5, np.full(num_envs, step % 2), np.full(num_envs, float(step)), np.zeros(num_envs), valid
        )


def test_oldest_transitions_are_overwritten_first():
    buffer = ReplayBuffer(5, OBS, gym.spaces.Discrete(2), seed=0)
    add_steps(buffer, 0, 8)
    assert len(buffer) == 5
    assert sorted(buffer.rewards.tolist()) == [3.0, 4.0, 5.0, 6.0, 7.0]


def test_invalid_rows_are_skipped_and_vector_rows_kept():
    buffer = ReplayBuffer(10, OBS, gym.spaces.Discrete(2), seed=0)
    add_steps(buffer, 0, 2, num_envs=3)
    add_steps(buffer, 2, 1, num_envs=3, valid=np.array([True, False, True]))
    assert len(buffer) == 3 + 3 + 2


def test_samples_have_stable_baselines3_shapes():
    discrete = ReplayBuffer(10, OBS, gym.spaces.Discrete(2), seed=0)
    add_steps(discrete, 0, 4)
    batch = discrete.sample(6)
    assert batch.observations.shape == (6, 3) and batch.observations.dtype == torch.float32
    assert batch.actions.shape == (6, 1) and batch.actions.dtype == torch.long
    assert batch.rewards.shape == (6, 1) and batch.dones.shape == (6, 1)
    assert torch.equal(batch.next_observations, batch.observations + 0.5)
    continuous = ReplayBuffer(10, OBS, gym.spaces.Box(-2.0, 2.0, (2,), np.float32), seed=0)
    continuous.add(np.zeros((1, 3)), np.zeros((1, 3)), np.ones((1, 2)), np.ones(1), np.ones(1))
    assert continuous.sample(4).actions.shape == (4, 2)
    images = ReplayBuffer(4, gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), gym.spaces.Discrete(3), seed=0)
    assert images.observations.dtype == torch.uint8


def test_sampling_is_seeded():
    def batch_rewards(seed):
        buffer = ReplayBuffer(50, OBS, gym.spaces.Discrete(2), seed=seed)
        add_steps(buffer, 0, 50)
        return buffer.sample(20).rewards

    assert torch.equal(batch_rewards(1), batch_rewards(1))
    assert not torch.equal(batch_rewards(1), batch_rewards(2))


def test_empty_and_zero_sized_buffers_are_errors():
    with pytest.raises(ValueError, match="buffer_size"):
        ReplayBuffer(0, OBS, gym.spaces.Discrete(2))
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(3, OBS, gym.spaces.Discrete(2)).sample(1)
