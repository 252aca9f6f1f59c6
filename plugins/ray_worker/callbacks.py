"""The RLlib callbacks of a MOSAIC run: episode results for the driver, frames from an env runner.

RLlib calls ``on_episode_*`` in the env runners (Ray actors: other processes, maybe other
machines) and ``on_train_result`` in the driver. So:

- episodes: each finished episode's return and length go into the env runner's metrics logger
  as lists (``mosaic/episode_returns``, ``mosaic/episode_lengths``), which RLlib gathers into the
  iteration's result; the driver reports them (:mod:`ray_worker.report`), every episode once.
- frames: only the first sampling env runner (index 1; 0 when the driver samples itself) asks
  :func:`mosaic_core.child.frame_wanted` for its env 0 (cheap: a "no" holds 50 ms) and
  renders that env alone when a consumer wants a frame; it publishes it through the public API
  (the env runner arms it when its env is created, before the first iteration: armed on the first
  step instead, its start-up, loading the run's plugins, was counted in the first iteration's
  time, 25 % of it on a busy machine; the run's context reaches it through the environment).
"""

from __future__ import annotations

import time
from typing import Any

from ray.rllib.callbacks.callbacks import RLlibCallback

RETURNS = "mosaic/episode_returns"
LENGTHS = "mosaic/episode_lengths"


class MosaicCallbacks(RLlibCallback):
    def __init__(self) -> None:
        super().__init__()
        self._episodes = 0
        self._steps = 0
        self._started = time.monotonic()

    def on_environment_created(self, *, env_runner: Any, env: Any = None, **kwargs: Any) -> None:
        if env_runner is not None and env_runner.worker_index == _sampling_index(env_runner):
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

    def on_episode_step(
        self, *, episode: Any, env_runner: Any = None, env: Any = None, env_index: int = 0, **kwargs: Any
    ) -> None:
        self._steps += 1
        if env_index != 0 or env_runner is None:
            return
        if env_runner.worker_index != _sampling_index(env_runner):
            return
        from mosaic_core import child

        if not child.frame_wanted(0):
            return
        frame = render_first(env)
        if frame is None:
            return
        rewards = episode.get_rewards()
        rate = self._steps / max(1e-9, time.monotonic() - self._started)
        child.publish_frame(
            frame,
            env_index=0,
            global_step=self._steps,
            reward=float(rewards[-1]) if len(rewards) else 0.0,
            rolling_return=float(episode.get_return()),
            step_rate_hz=rate,
            episode_count=self._episodes,
        )


def _sampling_index(env_runner: Any) -> int:
    """The env runner that renders frames: the first remote one (1), or the driver's (0) without any."""
    return 1 if env_runner.config.num_env_runners > 0 else 0


def render_first(env: Any) -> Any:
    """Env 0 of a gymnasium vector env rendered alone (``rgb_array``), or None."""
    import numpy as np

    singles = getattr(getattr(env, "unwrapped", env), "envs", None)
    if not singles:
        return None
    image = singles[0].render()
    if image is None or getattr(image, "ndim", 0) != 3:
        return None
    return np.ascontiguousarray(image, dtype=np.uint8)
