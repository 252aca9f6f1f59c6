"""PettingZoo's turn-based board games as XuanCe multi-agent envs (the env family ``classic``:
``classic/tictactoe_v3``, ``classic/connect_four_v3``), in the worker's environment.

XuanCe's multi-agent agents give every agent an action at each step; a turn-based (AEC) game moves
one seat at a time. :class:`TurnBasedEnv` is the parallel view of it: at each step the seat to move
has its action played and the others' are no-ops. With XuanCe's ``use_actions_mask`` (the worker's
configs for these games turn it on: :data:`xuance_worker.configs.OWN_CONFIGS`) the seat to move may
pick only a legal move and a waiting seat only action 0, so its no-op is certain and carries no
gradient. Every seat learns: self-play by construction (one network with the seat's id as input under
``use_parameter_sharing``, or one per seat).

- observation: each seat's own view flattened to float32: the board, then its legal actions (1 =
  legal; all 0 while it waits). That is the arena's seated view (``mosaic/TicTacToe-vs-random-v0``),
  so a policy trained here takes a seat of ``mosaic match`` as it is;
- reward: what the game pays each seat on the step it pays it (+1 win, -1 loss, 0 draw);
- an illegal move (possible only without the mask) loses the game, PettingZoo's own rule;
- state (MAPPO's centralised critic with ``use_global_state``): the seats' observations, concatenated.

:func:`register` adds the family to XuanCe's env registry (the training process and the policy server
call it before they build envs).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
from gymnasium import spaces
from xuance.environment import RawMultiAgentEnv

FAMILY = "classic"
GAMES = ("tictactoe_v3", "connect_four_v3")
NO_OP = 0  # the action a waiting seat may take (ignored)


def register() -> None:
    """Make ``env_name: classic`` a XuanCe multi-agent env family."""
    from xuance.environment import REGISTRY_MULTI_AGENT_ENV

    REGISTRY_MULTI_AGENT_ENV[FAMILY] = TurnBasedEnv


def flat_space(space: spaces.Dict) -> spaces.Box:
    """The Box :func:`flat_observation` fills: the board's cells, then the action mask."""
    parts: list[spaces.Box] = [space["observation"], space["action_mask"]]  # type: ignore[list-item]  # both Boxes in every board game
    low = np.concatenate([part.low.ravel() for part in parts])
    high = np.concatenate([part.high.ravel() for part in parts])
    return spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)


def flat_observation(observation: dict[str, Any]) -> np.ndarray:
    parts = [observation["observation"], observation["action_mask"]]
    return np.concatenate([np.asarray(part, dtype=np.float32).ravel() for part in parts])


class TurnBasedEnv(RawMultiAgentEnv):
    """One PettingZoo AEC board game (``config.env_id``), every seat stepping each step."""

    def __init__(self, config: Any):
        super().__init__()
        if config.env_id not in GAMES:
            raise ValueError(f"classic/{config.env_id}: the xuance worker plays {', '.join(GAMES)}")
        module = importlib.import_module(f"pettingzoo.classic.{config.env_id}")
        self.render_mode = config.render_mode
        self.env = module.env(render_mode=config.render_mode)
        self.env.reset(seed=config.env_seed)
        self.agents = list(self.env.possible_agents)
        self.num_agents = len(self.agents)
        self.observation_space = {a: flat_space(self.env.observation_space(a)) for a in self.agents}
        self.action_space = {a: self.env.action_space(a) for a in self.agents}
        first = self.observation_space[self.agents[0]]
        size = int(first.shape[0]) * self.num_agents
        self.state_space = spaces.Box(0.0, 1.0, (size,), dtype=np.float32)
        board = self.env.observation_space(self.agents[0])["observation"].shape
        self.max_episode_steps = int(np.prod(board[:-1]))  # one mark per cell at most
        self.metadata = self.env.metadata
        self._scores = dict.fromkeys(self.agents, 0.0)
        self._steps = 0

    def reset(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        self.env.reset()
        self._scores = dict.fromkeys(self.agents, 0.0)
        self._steps = 0
        return self._observations(), {"infos": {}, "individual_episode_rewards": dict(self._scores)}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, bool, dict]:
        mover = self.env.agent_selection
        self.env.step(int(np.asarray(actions[mover]).reshape(())))
        self._steps += 1
        rewards = {a: float(self.env.rewards.get(a, 0.0)) for a in self.agents}
        for agent, reward in rewards.items():
            self._scores[agent] += reward
        over = self._over()
        terminated = dict.fromkeys(self.agents, over)
        truncated = not over and self._steps >= self.max_episode_steps
        info = {"infos": {"moved": mover}, "individual_episode_rewards": dict(self._scores)}
        return self._observations(), rewards, terminated, truncated, info

    def _over(self) -> bool:
        return all(self.env.terminations.get(a) or self.env.truncations.get(a) for a in self.agents)

    def _observations(self) -> dict[str, np.ndarray]:
        return {agent: flat_observation(self.env.observe(agent)) for agent in self.agents}

    def state(self) -> np.ndarray:
        return np.concatenate(list(self._observations().values()))

    def avail_actions(self) -> dict[str, np.ndarray]:
        """The seat to move: its legal moves; every other seat (and every seat once the game is
        over): the no-op alone."""
        masks = {}
        mover = None if self._over() else self.env.agent_selection
        for agent in self.agents:
            if agent == mover:
                masks[agent] = np.asarray(self.env.observe(agent)["action_mask"], dtype=np.bool_)
            else:
                masks[agent] = np.zeros(self.action_space[agent].n, np.bool_)
                masks[agent][NO_OP] = True
        return masks

    def agent_mask(self) -> dict[str, bool]:
        return dict.fromkeys(self.agents, True)

    def render(self, *args: Any) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()
