"""The RLlib worker's FastLane frames (the original's ``ray_worker.fastlane``): one env runner
renders its env 0, only when a consumer wants a frame, and publishes it through the host's
training-process API (:func:`mosaic_core.child.frame_wanted`, :func:`mosaic_core.child.publish_frame`),
so FastLane's readers, ``mosaic frames`` and the dashboard see an RLlib run as any other.

Called by :class:`ray_worker.callbacks.MosaicCallbacks` in the env runners; importing this module
imports neither Ray nor numpy.
"""

from __future__ import annotations

from typing import Any

__all__ = ["renders_frames", "render_first", "publish_first_env"]


def renders_frames(env_runner: Any) -> bool:
    """Whether ``env_runner`` is the one that renders: the first remote env runner (index 1),
    or the driver's own (0) when there is none."""
    sampling = 1 if env_runner.config.num_env_runners > 0 else 0
    return bool(env_runner.worker_index == sampling)


def render_first(env: Any) -> Any:
    """Env 0 of a gymnasium vector env rendered alone (``rgb_array``; a multi-agent env runner's
    one env itself), or None."""
    import numpy as np

    bare = getattr(env, "unwrapped", env)
    singles = getattr(bare, "envs", None) or ([bare] if hasattr(bare, "possible_agents") else None)
    if not singles:
        return None
    image = singles[0].render()
    if image is None or getattr(image, "ndim", 0) != 3:
        return None
    return np.ascontiguousarray(image, dtype=np.uint8)


def publish_first_env(env: Any, episode: Any, *, steps: int, episodes: int, step_rate_hz: float) -> None:
    """Render env 0 and publish it with the episode's last reward and return, when a consumer
    wants a frame (a "no" holds 50 ms: asking costs nothing per step)."""
    from mosaic_core import child

    if not child.frame_wanted(0):
        return
    frame = render_first(env)
    if frame is None:
        return
    child.publish_frame(
        frame,
        env_index=0,
        global_step=steps,
        reward=last_reward(episode),
        rolling_return=float(episode.get_return()),
        step_rate_hz=step_rate_hz,
        episode_count=episodes,
    )


def last_reward(episode: Any) -> float:
    """The episode's last reward (a multi-agent episode's: its agents' last step's, summed)."""
    rewards = episode.get_rewards(-1) if hasattr(episode, "agent_episodes") else episode.get_rewards()
    if isinstance(rewards, dict):
        return float(sum(float(v) for v in rewards.values()))
    return float(rewards[-1]) if len(rewards) else 0.0
