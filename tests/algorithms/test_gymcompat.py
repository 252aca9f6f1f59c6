"""gymcompat on the installed gymnasium (CI runs this folder on 0.29.1 and on 1.x)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from cleanrl_worker import gymcompat


def cartpole_envs(n: int, max_steps: int = 15):
    def make():
        env = gym.make("CartPole-v1", max_episode_steps=max_steps)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return gym.vector.SyncVectorEnv([make for _ in range(n)])


def test_episodes_final_observations_and_autoreset_agree():
    """Push right until each episode ends: returns, lengths and last observations are seen once each."""
    envs = cartpole_envs(2)
    envs.reset(seed=0)
    autoreset = gymcompat.Autoreset(2)
    seen, transitions, steps = [], 0, np.zeros(2, dtype=int)
    for _ in range(60):
        next_obs, _, terminations, truncations, infos = envs.step(np.ones(2, dtype=np.int64))
        valid = autoreset.step(terminations, truncations)
        dones = terminations | truncations
        real = gymcompat.real_next_obs(next_obs, dones, infos)
        transitions += int(valid.sum())
        steps += valid
        for index in np.flatnonzero(dones):
            # pushing right for ever: the episode ends with the pole fallen or the cart out
            assert abs(real[index][2]) > 0.2 or abs(real[index][0]) > 2.4 or steps[index] == 15
            steps[index] = 0
        for index, episodic_return, length in gymcompat.episodes(infos):
            assert dones[index] and episodic_return == length
            seen.append(length)
    envs.close()
    assert seen and sum(seen) <= transitions <= sum(seen) + 2 * 15
    if gymcompat.NEXT_STEP_AUTORESET:
        assert transitions < 120  # the reset steps were marked not real


def test_normalization_state_round_trips_and_merges():
    def make():
        env = gym.make("Pendulum-v1")
        env = gym.wrappers.NormalizeObservation(env)
        return gym.wrappers.NormalizeReward(env)

    envs = gym.vector.SyncVectorEnv([make, make])
    envs.reset(seed=1)
    for _ in range(50):
        envs.step(envs.action_space.sample())
    state = gymcompat.normalization_state(envs)
    assert len(state["observation"]) == 2 and len(state["reward"]) == 2
    fresh = gym.vector.SyncVectorEnv([make, make])
    gymcompat.restore_normalization_state(fresh, state)
    assert gymcompat.normalization_state(fresh) == state
    single = gym.vector.SyncVectorEnv([make])
    gymcompat.restore_normalization_state(single, state)  # another count of envs: merged statistics
    merged = gymcompat.normalization_state(single)["observation"][0]
    assert merged["count"] == pytest.approx(sum(s["count"] for s in state["observation"]))
    for closing in (envs, fresh, single):
        closing.close()


def test_merge_stats_equals_statistics_of_all_data():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 2.0, size=(30, 3)), rng.normal(-1.0, 0.5, size=(70, 3))
    parts = [{"mean": x.mean(0).tolist(), "var": x.var(0).tolist(), "count": len(x)} for x in (a, b)]
    merged = gymcompat.merge_stats(parts)
    both = np.concatenate([a, b])
    np.testing.assert_allclose(merged["mean"], both.mean(0))
    np.testing.assert_allclose(merged["var"], both.var(0))
    assert merged["count"] == 100


def test_wrong_action_space_exits_with_one_line(capsys):
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1")])
    with pytest.raises(SystemExit) as exit_info:
        gymcompat.require_action_space(envs, gym.spaces.Discrete, "dqn", "Pendulum-v1")
    envs.close()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "dqn" in err and "Pendulum-v1" in err and "Box(" in err


def test_transform_observation_works_on_this_version():
    env = gymcompat.transform_observation(gym.make("CartPole-v1"), lambda obs: obs * 0)
    obs, _ = env.reset(seed=0)
    assert not obs.any()
    env.close()
