"""PettingZoo envs as RLlib multi-agent envs, in the worker's environment (our own wrappers: RLlib's,
``ray.rllib.env.wrappers.pettingzoo_env``, render with a mode PettingZoo 1.24 does not take and keep
board observations 3-D, which RLlib's default encoder reads as an image).

- :class:`ParallelEnv`: every agent acts each step (MPE).
- :class:`TurnBasedEnv`: an AEC env, one agent at a time; its observation is
  ``{"observations": flat float32, "action_mask": float32}`` (RLlib's action-masking module's
  layout), so the policy never picks an illegal move; each step's rewards go to every agent they
  are for (RLlib keeps a waiting agent's until its next observation).

:func:`make_env` is the creator Ray's env registry ships to every env runner (:data:`CREATOR`,
:func:`rllib_env`).
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium
import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from ray_worker.envs import ENV_ID_KEY

CREATOR = "mosaic_pettingzoo"
OBS, MASK = "observations", "action_mask"


def module_of(env_id: str) -> Any:
    """``pettingzoo.FAMILY.NAME``, imported; ImportError when there is none."""
    family, _, name = env_id.partition("/")
    return importlib.import_module(f"pettingzoo.{family}.{name}")


def is_turn_based(env_id: str) -> bool:
    """Turn-based (AEC, one agent at a time): PettingZoo's classic board and card games."""
    return env_id.startswith("classic/")


def flat(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.float32).reshape(-1)


def flat_space(space: Any) -> gymnasium.spaces.Box:
    """A Box space (PettingZoo's boards are 3-D) as one flat float32 vector."""
    low, high = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
    return gymnasium.spaces.Box(flat(low), flat(high), dtype=np.float32)


def masked_space(space: gymnasium.spaces.Dict, actions: gymnasium.spaces.Discrete) -> gymnasium.spaces.Dict:
    return gymnasium.spaces.Dict(
        {OBS: flat_space(space["observation"]), MASK: gymnasium.spaces.Box(0.0, 1.0, (int(actions.n),), np.float32)}
    )


def masked_observation(raw: dict[str, Any]) -> dict[str, np.ndarray]:
    """A turn-based env's observation as the policy reads it."""
    return {OBS: flat(raw["observation"]), MASK: flat(raw["action_mask"])}


class ParallelEnv(MultiAgentEnv):
    """A PettingZoo parallel env."""

    def __init__(self, env: Any):
        super().__init__()
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.agents = list(self.possible_agents)
        self.observation_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        observations, infos = self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        return observations, infos or {}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:  # type: ignore[override]  # RLlib's multi-agent step: per-agent dicts
        observations, rewards, terminated, truncated, infos = self.env.step(actions)
        self.agents = list(self.env.agents)
        terminated["__all__"] = all(terminated.values()) or not self.agents
        truncated["__all__"] = all(truncated.values()) and bool(truncated)
        return observations, rewards, terminated, truncated, infos

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


class TurnBasedEnv(MultiAgentEnv):
    """A PettingZoo AEC env with action masks (every classic game)."""

    def __init__(self, env: Any):
        super().__init__()
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.agents = list(self.possible_agents)
        self.observation_spaces = {
            a: masked_space(env.observation_space(a), env.action_space(a)) for a in self.possible_agents
        }
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        mover = self.env.agent_selection
        return {mover: masked_observation(self.env.observe(mover))}, {}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:  # type: ignore[override]  # RLlib's multi-agent step: per-agent dicts
        self.env.step(int(actions[self.env.agent_selection]))
        env = self.env
        if all(env.terminations[a] or env.truncations[a] for a in env.agents):  # the game is over
            ended = list(env.agents)
            observations = {a: masked_observation(env.observe(a)) for a in ended}
            rewards = {a: float(env.rewards[a]) for a in ended}
            terminated = {a: bool(env.terminations[a]) for a in ended}
            truncated = {a: bool(env.truncations[a]) and not terminated[a] for a in ended}
            terminated["__all__"], truncated["__all__"] = all(terminated.values()), not all(terminated.values())
            self.agents = []
            return observations, rewards, terminated, truncated, {}
        mover = env.agent_selection
        rewards = {a: float(env.rewards[a]) for a in env.agents if env.rewards[a]}
        return (
            {mover: masked_observation(env.observe(mover))},
            rewards,
            {"__all__": False},
            {"__all__": False},
            {},
        )

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def pettingzoo_env(env_id: str, options: dict[str, Any] | None = None) -> Any:
    """The PettingZoo env itself (AEC for turn-based ids, parallel otherwise)."""
    module = module_of(env_id)
    options = dict(options or {})
    return module.env(**options) if is_turn_based(env_id) else module.parallel_env(**options)


def make_env(env_config: dict[str, Any]) -> MultiAgentEnv:
    """An env runner's env (Ray's env registry calls it with the run's env config)."""
    options = {k: v for k, v in dict(env_config).items() if not k.startswith("mosaic_")}
    env_id = env_config[ENV_ID_KEY]
    raw = pettingzoo_env(env_id, options)
    return TurnBasedEnv(raw) if is_turn_based(env_id) else ParallelEnv(raw)


def rllib_env(env_id: str) -> tuple[str, dict[str, Any]]:
    """(RLlib's ``env``, its env config) for a PettingZoo ``env_id``: :func:`make_env`, registered."""
    from ray.tune.registry import register_env

    register_env(CREATOR, make_env)
    return CREATOR, {ENV_ID_KEY: env_id}


def agents_of(env_id: str) -> list[str]:
    """The env's agent ids."""
    env = pettingzoo_env(env_id)
    try:
        return [str(a) for a in env.possible_agents]
    finally:
        env.close()
