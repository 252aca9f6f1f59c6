"""The single-agent view of a seat (`mosaic/TicTacToe-vs-random-v0`), made by gymnasium from its registered
ids: gymnasium's own env checker, its rules (the board then the action mask, an illegal move loses, the
seat drawn from the env's seed), and a game played out against the random operator."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
gym = pytest.importorskip("gymnasium")


def seated(env_id: str) -> str:
    """The id as a user gives it: gymnasium 1.x reads no plugin group, so there it names the module that
    registers it (gymnasium's ``MODULE:ID``); 0.29 has it from the ``gymnasium.envs`` group."""
    return env_id if gym.__version__.startswith("0.") else f"mosaic_arena.gym_ids:{env_id}"


@pytest.mark.parametrize("env_id", ["mosaic/TicTacToe-vs-random-v0", "mosaic/ConnectFour-as-player_1-vs-random-v0"])
def test_gymnasium_s_checker_passes(env_id):
    from gymnasium.utils.env_checker import check_env

    env = gym.make(seated(env_id))
    try:
        check_env(env.unwrapped)  # seeding, spaces, reset/step signatures
    finally:
        env.close()


def test_the_observation_is_the_board_then_the_mask_and_an_illegal_move_loses():
    env = gym.make(seated("mosaic/TicTacToe-as-player_2-vs-random-v0"))
    observation, info = env.reset(seed=4)
    assert env.observation_space.shape == (27,) and observation.dtype == np.float32
    assert info["seat"] == "player_2" and (observation[18:] == info["action_mask"]).all()
    assert observation[:18].sum() == 1 and info["action_mask"].sum() == 8  # player_1 (random) has moved
    taken = int(np.flatnonzero(info["action_mask"] == 0)[0])
    observation, reward, terminated, truncated, info = env.step(taken)
    assert (reward, terminated, truncated, info["illegal_action"], info["illegal_actions"]) == (
        -1.0,
        True,
        False,
        True,
        1,
    )
    env.close()


def test_a_game_ends_with_the_game_s_reward_and_the_seat_follows_the_seed():
    env = gym.make(seated("mosaic/TicTacToe-vs-random-v0"))
    seats = [env.reset(seed=seed)[1]["seat"] for seed in range(12)]
    assert set(seats) == {"player_1", "player_2"}
    assert seats == [env.reset(seed=seed)[1]["seat"] for seed in range(12)]
    rewards = []
    for seed in range(30):
        _observation, info = env.reset(seed=seed)
        done, total = False, 0.0
        while not done:
            action = int(np.flatnonzero(info["action_mask"])[0])
            _observation, reward, terminated, truncated, info = env.step(action)
            total, done = total + reward, terminated or truncated
        assert "illegal_action" not in info and total in (-1.0, 0.0, 1.0)
        rewards.append(total)
    assert {-1.0, 1.0} <= set(rewards)  # first-legal against random: it wins some and loses some
    env.close()
