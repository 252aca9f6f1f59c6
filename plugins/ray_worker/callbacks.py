"""The RLlib callbacks of a MOSAIC run: episode results for the driver, frames from an env runner.

RLlib calls ``on_episode_*`` in the env runners (Ray actors: other processes, maybe other
machines) and ``on_train_result`` in the driver. So:

- episodes: each finished episode's return and length go into the env runner's metrics logger
  as lists (``mosaic/episode_returns``, ``mosaic/episode_lengths``), which RLlib gathers into the
  iteration's result; the driver reports them (:mod:`ray_worker.report`), every episode once.
- multi-agent episodes: each agent's return too (``mosaic/agent_returns/AGENT``), and in
  self-play ``main``'s; the pool of past policies is kept by the driver's ``on_algorithm_init``
  and ``on_train_result`` (:mod:`ray_worker.selfplay`).
- frames: only the first sampling env runner renders its env 0, and only when a consumer wants a
  frame (:mod:`ray_worker.fastlane`); it arms the run's context when its env is created, before
  the first iteration (armed on the first step instead, its start-up, loading the run's plugins,
  was counted in the first iteration's time, 25 % of it on a busy machine; the run's context
  reaches it through the environment).
"""

from __future__ import annotations

import time
from typing import Any

from ray.rllib.callbacks.callbacks import RLlibCallback

from ray_worker.fastlane import publish_first_env, renders_frames

RETURNS = "mosaic/episode_returns"
LENGTHS = "mosaic/episode_lengths"
AGENT_RETURNS = "mosaic/agent_returns/"  # + the agent's id: each agent's return in a multi-agent episode
MAIN_RETURNS = "mosaic/main_returns"  # self-play: main's return, whichever seat it took


class MosaicCallbacks(RLlibCallback):
    def __init__(self) -> None:
        super().__init__()
        self._episodes = 0
        self._steps = 0
        self._started = time.monotonic()

    def on_environment_created(self, *, env_runner: Any, env: Any = None, **kwargs: Any) -> None:
        if env_runner is not None and renders_frames(env_runner):
            from mosaic_core import child

            child.frame_wanted(0)  # arms the run's context in this env runner now, not in the first iteration

    def on_episode_end(
        self, *, episode: Any, prev_episode_chunks: Any = None, metrics_logger: Any = None, **kwargs: Any
    ) -> None:
        self._episodes += 1
        if metrics_logger is not None:  # an episode may span several chunks (DQN samples a few steps at a time)
            chunks = [*(prev_episode_chunks or ()), episode]
            ret, length = sum(float(c.get_return()) for c in chunks), sum(len(c) for c in chunks)
            metrics_logger.log_value(RETURNS, ret, reduce="item_series")
            metrics_logger.log_value(LENGTHS, length, reduce="item_series")
            if hasattr(episode, "agent_episodes"):
                log_agent_returns(chunks, metrics_logger)

    def on_algorithm_init(self, *, algorithm: Any, **kwargs: Any) -> None:
        from ray_worker.selfplay import start_pool

        start_pool(algorithm)

    def on_train_result(self, *, algorithm: Any, **kwargs: Any) -> None:
        from ray_worker.selfplay import after_iteration

        after_iteration(algorithm)

    def on_episode_step(
        self, *, episode: Any, env_runner: Any = None, env: Any = None, env_index: int = 0, **kwargs: Any
    ) -> None:
        self._steps += 1
        if env_index != 0 or env_runner is None or not renders_frames(env_runner):
            return
        rate = self._steps / max(1e-9, time.monotonic() - self._started)
        publish_first_env(env, episode, steps=self._steps, episodes=self._episodes, step_rate_hz=rate)


def log_agent_returns(chunks: list[Any], metrics_logger: Any) -> None:
    """Each agent's return over a multi-agent episode's chunks; in self-play, the learner's (``main``'s,
    or in an MPE env its side's ``main_SIDE``'s, under ``MAIN_RETURNS/SIDE``)."""
    from ray_worker.teams import MAIN

    returns: dict[str, float] = {}
    main: dict[str, float] = {}
    for chunk in chunks:
        for agent, single in chunk.agent_episodes.items():
            returns[str(agent)] = returns.get(str(agent), 0.0) + float(single.get_return())
            module = str(chunk.module_for(agent))
            if module == MAIN or module.startswith(f"{MAIN}_"):
                key = MAIN_RETURNS + module[len(MAIN) :].replace("_", "/", 1)
                main[key] = main.get(key, 0.0) + float(single.get_return())
    for agent, value in returns.items():
        metrics_logger.log_value(AGENT_RETURNS + agent, value, reduce="item_series")
    for key, value in main.items():
        metrics_logger.log_value(key, value, reduce="item_series")
