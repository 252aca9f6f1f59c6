"""The replay buffer's optimize_memory_usage (dqn_atari's, as CleanRL's): one observation store."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from cleanrl_worker.replay import ReplayBuffer

SPACE = gym.spaces.Box(0, 255, (2,), np.uint8)


def fill(buffer: ReplayBuffer, steps: int) -> None:
    """Observation t is [t, t] (mod 256); the transition t -> t+1 has reward t, done every 7th."""
    for t in range(steps):
        obs, next_obs = np.full((1, 2), t % 256), np.full((1, 2), (t + 1) % 256)
        buffer.add(obs, next_obs, np.array([t % 3]), np.array([float(t)]), np.array([t % 7 == 6]))


@pytest.mark.parametrize("steps", [5, 10, 23])  # partly filled, exactly full, wrapped around
def test_each_sample_pairs_an_observation_with_its_own_next_one(steps):
    buffer = ReplayBuffer(10, SPACE, gym.spaces.Discrete(3), seed=0, optimize_memory_usage=True)
    assert buffer.next_observations is None
    fill(buffer, steps)
    batch = buffer.sample(500)
    obs, next_obs, rewards = batch.observations[:, 0], batch.next_observations[:, 0], batch.rewards[:, 0]
    assert (next_obs.long() == (obs.long() + 1) % 256).all()
    assert (rewards.long() % 256 == obs.long()).all()  # the transition's own reward
    oldest_kept = max(0, steps - 10) + (1 if steps >= 10 else 0)  # a full buffer never samples its oldest slot
    assert set(rewards.long().tolist()) == set(range(oldest_kept, steps))


def test_it_takes_one_sub_env_only():
    buffer = ReplayBuffer(10, SPACE, gym.spaces.Discrete(3), optimize_memory_usage=True)
    with pytest.raises(ValueError, match="one sub-env"):
        buffer.add(np.zeros((2, 2)), np.zeros((2, 2)), np.zeros(2), np.zeros(2), np.zeros(2))
