"""evaluation.evaluate on real CartPole envs, with simple policies whose returns can be checked."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from cleanrl_worker.evaluation import evaluate


def make_cartpole(render_mode=None):
    return gym.make("CartPole-v1", render_mode=render_mode)


def push_right(obs):
    return np.ones(len(obs), dtype=np.int64)


def lean_policy(obs):
    """A decent CartPole controller: push towards the side the pole leans to."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def test_counts_orders_and_discounts_episodes():
    result = evaluate(push_right, make_cartpole, episodes=7, num_envs=3, seed=5, gamma=0.9)
    assert len(result.returns) == len(result.lengths) == len(result.discounted_returns) == 7
    # CartPole pays 1 per step: return == length, discounted == sum of gamma^t
    assert result.returns == [float(n) for n in result.lengths]
    for length, discounted in zip(result.lengths, result.discounted_returns):
        assert discounted == pytest.approx((1 - 0.9**length) / (1 - 0.9))
    summary = result.summary()
    assert summary["episodes"] == 7 and summary["mean_return"] == pytest.approx(np.mean(result.returns))


def test_same_seed_same_results_any_batch_of_envs():
    a = evaluate(lean_policy, make_cartpole, episodes=4, num_envs=4, seed=11)
    b = evaluate(lean_policy, make_cartpole, episodes=4, num_envs=4, seed=11)
    assert a == b
    one_at_a_time = [
        evaluate(lean_policy, make_cartpole, episodes=1, num_envs=1, seed=11 + k).returns[0] for k in range(4)
    ]
    assert a.returns == one_at_a_time  # env i of a batch starts from seed + i


def test_episodes_are_not_biased_towards_short_ones():
    # 2 envs, 4 episodes: each env plays exactly 2, so the long episodes are waited for
    result = evaluate(lean_policy, make_cartpole, episodes=4, num_envs=2, seed=0, max_episode_steps=60)
    assert result.lengths == [60, 60, 60, 60]


def test_max_episode_steps_and_more_envs_than_episodes():
    result = evaluate(lean_policy, make_cartpole, episodes=2, num_envs=8, seed=0, max_episode_steps=25)
    assert result.lengths == [25, 25]


def test_bad_arguments():
    with pytest.raises(ValueError, match="episodes and num_envs"):
        evaluate(push_right, make_cartpole, episodes=0)
    with pytest.raises(ValueError, match="video_dir"):
        evaluate(push_right, make_cartpole, episodes=1, capture_video=True)
