"""Procgen games as gymnasium envs: ``gymnasium.make("procgen-coinrun-v0")``.

Procgen (``procgen-mirror``, the build with a Python 3.11 wheel) speaks gym3 and registers old-gym
ids only; shimmy's compatibility wrapper cannot take it (it has no ``render_mode``). This adapter
drives one gym3 env directly: gym3 resets by itself, so the step that ends an episode returns
``terminated`` with the next episode's first observation already there, and ``reset()`` after it
just hands that observation back (procgen's time limit is part of the game: every end is
``terminated``). ``render_mode="rgb_array"`` renders procgen's 512x512 view.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

GAMES = (
    "bigfish",
    "bossfight",
    "caveflyer",
    "chaser",
    "climber",
    "coinrun",
    "dodgeball",
    "fruitbot",
    "heist",
    "jumper",
    "leaper",
    "maze",
    "miner",
    "ninja",
    "plunder",
    "starpilot",
)
PREFIX = "procgen-"


class ProcgenEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(self, game: str, render_mode: str | None = None, **options):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"procgen renders only rgb_array, not {render_mode!r}")
        self.game, self.render_mode, self.options = game, render_mode, options
        self.observation_space = gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(15)
        self._env = None
        self._obs = None

    def _make(self, seed: int | None) -> None:
        from procgen import ProcgenGym3Env

        if self._env is not None:
            self._env.close()
        seed_option = {} if seed is None else {"rand_seed": int(seed) % 2**31}
        env = ProcgenGym3Env(num=1, env_name=self.game, render_mode=self.render_mode, **seed_option, **self.options)
        self._env, self._obs = env, env.observe()[1]["rgb"][0]

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        if self._env is None or seed is not None:
            self._make(seed)
        return self._obs, {}

    def step(self, action):
        self._env.act(np.asarray([action], dtype=np.int32))
        reward, observation, first = self._env.observe()
        self._obs = observation["rgb"][0]
        info = self._env.get_info()[0]
        return (
            self._obs,
            float(reward[0]),
            bool(first[0]),
            False,
            {"level_complete": bool(info.get("prev_level_complete", 0))},
        )

    def render(self):
        return None if self._env is None else self._env.get_info()[0].get("rgb")

    def close(self):
        if self._env is not None:
            self._env.close()
            self._env = None


def register() -> None:
    """Register ``procgen-<game>-v0`` for every game (idempotent)."""
    for game in GAMES:
        env_id = f"{PREFIX}{game}-v0"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=f"{__name__}:ProcgenEnv", kwargs={"game": game}, max_episode_steps=None)
