"""A single-agent gymnasium env made of a turn-based PettingZoo game: the learner takes one seat, the
operators the others (``mosaic/TicTacToe-vs-random-v0``; :mod:`mosaic_arena.gym_ids`).

- observation: the seat's own, flattened to a float32 Box: the board (``observation``) then the legal
  actions (``action_mask``, 1 = legal), in that order; ``info["action_mask"]`` carries the mask too;
- action: the game's (``Discrete(9)`` for Tic-Tac-Toe);
- reward: what the game pays the learner between two of its turns (+1 win, -1 loss, 0 draw);
- an illegal action of the learner loses the game, as in PettingZoo's own rule: reward -1, the episode
  ends, ``info["illegal_action"]`` is true (and ``illegal_actions`` counts them); a match applies the
  same rule to every seat (a forfeit), so a policy trained here plays a match by the rules it learned;
- an illegal action of an operator forfeits the game to the learner (+1).

The learner's seat is fixed (``seat="player_1"``) or drawn for each episode from the env's seed (``"any"``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from mosaic_arena.games import GAMES, legal_mask, seats_of
from mosaic_arena.operators import Operator, Seat

__all__ = ["SeatedEnv", "flat_observation", "flat_space"]


def flat_space(space: Any) -> gym.spaces.Box:
    """The Box :func:`flat_observation` fills for a seat whose observation space is ``space``."""
    parts: list[Any] = [space["observation"], space["action_mask"]] if isinstance(space, gym.spaces.Dict) else [space]
    low = np.concatenate([np.broadcast_to(part.low, part.shape).ravel() for part in parts]).astype(np.float32)
    high = np.concatenate([np.broadcast_to(part.high, part.shape).ravel() for part in parts]).astype(np.float32)
    return gym.spaces.Box(low, high, dtype=np.float32)


def flat_observation(observation: Any) -> np.ndarray:
    """A seat's observation (a dict of board and action mask, or an array) as one float32 vector."""
    if isinstance(observation, dict):
        parts = [observation["observation"], observation["action_mask"]]
        return np.concatenate([np.asarray(part, dtype=np.float32).ravel() for part in parts])
    return np.asarray(observation, dtype=np.float32).ravel()


class SeatedEnv(gym.Env):
    """One seat of ``game`` for a single-agent learner; the other seats are ``opponent`` operators."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self, game: str = "tictactoe_v3", seat: str = "any", opponent: str = "random", render_mode: str | None = None
    ):
        found = GAMES.get(game)
        if found is None or not found.turn_based:
            raise gym.error.Error(
                f"SeatedEnv plays a turn-based game ({', '.join(g for g in GAMES if GAMES[g].turn_based)}), not {game!r}"
            )
        self.game, self.render_mode = found, render_mode
        self.seats: dict[str, Seat] = seats_of(found)
        if seat != "any" and seat not in self.seats:
            raise gym.error.Error(f"{game} has no seat {seat!r} (its seats: {', '.join(self.seats)}, or 'any')")
        self.seat_choice, self.opponent_spec = seat, opponent
        self.env = found.make(render_mode=render_mode)
        first = next(iter(self.seats.values()))
        self.observation_space = flat_space(first.observation_space)
        self.action_space = first.action_space
        self.opponents = {name: self._opponent(seat) for name, seat in self.seats.items()}
        self.learner = first.agent
        self.episodes = 0
        self.illegal_actions = 0

    def _opponent(self, seat: Seat) -> Operator:
        from mosaic_arena.registry import operator_kinds, seat_operator

        return seat_operator(self.opponent_spec, seat, operator_kinds())

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        names = list(self.seats)
        self.learner = (
            names[int(self.np_random.integers(len(names)))] if self.seat_choice == "any" else self.seat_choice
        )
        self.episodes += 1
        self.env.reset(seed=int(self.np_random.integers(2**31)))
        for operator in self.opponents.values():
            operator.reset(int(self.np_random.integers(2**31)))
        self._others()
        return self._observation(), self._info()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        observation, _reward, _terminated, _truncated, info = self.env.last()
        mask = legal_mask(observation, info)
        if not self.action_space.contains(action) or (mask is not None and not mask[int(action)]):
            self.illegal_actions += 1
            return self._observation(), -1.0, True, False, {**self._info(), "illegal_action": True}
        self.env.step(int(action) if isinstance(self.action_space, gym.spaces.Discrete) else action)
        reward = float(self.env.rewards.get(self.learner, 0.0))
        more, over = self._others()
        return self._observation(), reward + more, over, False, self._info()

    def _others(self) -> tuple[float, bool]:
        """Let the other seats move until the learner's turn or the game's end: (the learner's reward
        meanwhile, whether the game is over)."""
        reward = 0.0
        while not self._over() and self.env.agent_selection != self.learner:
            agent = self.env.agent_selection
            observation, _r, _terminated, _truncated, info = self.env.last()
            action = self.opponents[agent].act(observation, info)
            mask = legal_mask(observation, info)
            if not self.seats[agent].action_space.contains(action) or (mask is not None and not mask[int(action)]):
                return reward + 1.0, True  # the operator forfeits
            self.env.step(action)
            reward += float(self.env.rewards.get(self.learner, 0.0))
        return reward, self._over()

    def _over(self) -> bool:
        return bool(self.env.terminations.get(self.learner) or self.env.truncations.get(self.learner))

    def _observation(self) -> np.ndarray:
        return flat_observation(self.env.observe(self.learner))

    def _info(self) -> dict[str, Any]:
        observation = self.env.observe(self.learner)
        mask = legal_mask(observation, {})
        info: dict[str, Any] = {"seat": self.learner, "illegal_actions": self.illegal_actions}
        if mask is not None:
            info["action_mask"] = np.asarray(mask, dtype=np.int8)
        return info

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        for operator in self.opponents.values():
            operator.close()
        self.env.close()
