"""An env's state saved as data and put back into a new vector env of the same id: the new one goes
on exactly as the old one would have (observations, rewards, ends, episode statistics), for the
envs whose state lives outside Python: Atari's emulator with CleanRL's preprocessing (frame
stack, frame buffers, lives) and MuJoCo's simulator (Hopper: contacts and the solver's warm start;
Ant: what it reads of the simulator before a step). Real envs, no runs: the mechanism under
every bundled algorithm's resume (tests/algorithms/test_run_contract.py runs them end to end)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from cleanrl_worker import gymcompat, resumestate


def atari_envs() -> gym.vector.SyncVectorEnv:
    from cleanrl_worker import atari

    return gym.vector.SyncVectorEnv([lambda: atari.make_training_env("BreakoutNoFrameskip-v4")] * 2)


def mujoco_envs(env_id: str):
    def thunk():
        return gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))

    return lambda: gym.vector.SyncVectorEnv([thunk] * 2)


MAKERS = {
    "atari": ("ale_py", atari_envs),
    "hopper": ("mujoco", mujoco_envs("Hopper-v4")),
    "ant": ("mujoco", mujoco_envs("Ant-v4")),
}


def played(envs, actions) -> list:
    """Every step's observation, reward, ends and finished episodes' returns."""
    trace = []
    for action in actions:
        obs, reward, terminated, truncated, infos = envs.step(action)
        episodes = [(float(r), int(n)) for _, r, n in gymcompat.episodes(infos)]  # not "t": a wall time
        trace.append((np.asarray(obs).copy(), reward, terminated, truncated, episodes))
    return trace


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_restored_env_goes_on_as_the_saved_one_would_have(kind):
    pytest.importorskip(MAKERS[kind][0])
    make = MAKERS[kind][1]
    envs = make()
    envs.reset(seed=3)
    envs.action_space.seed(3)
    warm_up = [envs.action_space.sample() for _ in range(150)]
    played(envs, warm_up)  # mid-episode (and past some episode ends) at the save
    saved = resumestate.env_state(envs)
    assert saved is not None
    actions = [envs.action_space.sample() for _ in range(300)]
    expected = played(envs, actions)

    again = make()
    again.reset(seed=99)  # another start: only the restore can make it match
    resumestate.restore_envs(again, saved)
    got = played(again, actions)
    ends = sum(bool(np.any(t[2] | t[3])) for t in expected)
    assert ends >= 1, f"no episode ended in the compared steps of {kind}"
    for step, (want, have) in enumerate(zip(expected, got)):
        assert np.array_equal(want[0], have[0]), f"{kind}: observation differs at step {step}"
        assert np.array_equal(want[1], have[1]) and np.array_equal(want[2], have[2]), f"{kind}: step {step}"
        assert np.array_equal(want[3], have[3]) and want[4] == have[4], f"{kind}: step {step}"
