"""What the bundled algorithms need from a vector env, on gymnasium 0.29.1 and 1.x alike.

The two versions differ where an episode ends:

- 0.29 resets a finished sub-env in the same ``step``: the returned observation is already
  the next episode's first, the finished episode's statistics are in
  ``infos["final_info"][i]["episode"]`` and its last observation in
  ``infos["final_observation"][i]``.
- 1.x (default next-step autoreset) returns the last observation itself, with the
  statistics in ``infos["episode"]`` under the ``infos["_episode"]`` mask; the *next* call
  to ``step`` resets that sub-env, ignores its action and returns reward 0. That transition
  is not part of any episode: :class:`Autoreset` marks it so learners can skip it.

Also here: wrappers whose signature changed between versions, the running statistics of
``NormalizeObservation`` / ``NormalizeReward`` (to checkpoint and restore them) and the
action-space check every algorithm makes before it trains.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np

NEXT_STEP_AUTORESET = int(gym.__version__.split(".")[0]) >= 1


def episodes(infos: dict[str, Any]) -> Iterator[tuple[int, float, int]]:
    """``(env_index, episodic_return, episodic_length)`` of each episode that ended this step.

    Needs ``gym.wrappers.RecordEpisodeStatistics`` around each sub-env.
    """
    if "final_info" in infos:  # 0.29
        for index, info in enumerate(infos["final_info"]):
            if info and "episode" in info:
                episode = info["episode"]  # 0.29 keeps "r" and "l" as 1-element arrays
                yield index, float(np.ravel(episode["r"])[0]), int(np.ravel(episode["l"])[0])
    elif "episode" in infos:  # 1.x
        stats, mask = infos["episode"], infos["_episode"]
        for index in np.flatnonzero(mask):
            yield int(index), float(stats["r"][index]), int(stats["l"][index])


def real_next_obs(next_obs: np.ndarray, dones: np.ndarray, infos: dict[str, Any]) -> np.ndarray:
    """The observation each sub-env actually reached (its last one where an episode ended)."""
    if NEXT_STEP_AUTORESET or "final_observation" not in infos:
        return next_obs
    real = next_obs.copy()
    for index in np.flatnonzero(dones):
        if infos["_final_observation"][index]:
            real[index] = infos["final_observation"][index]
    return real


class Autoreset:
    """Tells which sub-envs' transitions of a step are real.

    On 1.x the step after an episode's end only resets the sub-env: its transition is
    not real. On 0.29 every transition is.
    """

    def __init__(self, num_envs: int):
        self._resetting = np.zeros(num_envs, dtype=bool)

    def step(self, terminations: np.ndarray, truncations: np.ndarray) -> np.ndarray:
        """Call after each ``envs.step``; returns the mask of real transitions."""
        valid = ~self._resetting
        if NEXT_STEP_AUTORESET:
            self._resetting = np.logical_or(terminations, truncations)
        return valid


def transform_observation(env: gym.Env, fn: Callable[[Any], Any]) -> gym.Env:
    """``TransformObservation`` for both versions (1.x wants the observation space)."""
    wrapper: Any = gym.wrappers.TransformObservation  # its signature differs between 0.29 and 1.x
    if NEXT_STEP_AUTORESET:
        return wrapper(env, fn, env.observation_space)
    return wrapper(env, fn)


SpaceT = TypeVar("SpaceT", bound=gym.Space)


def require_action_space(envs: Any, expected: type[SpaceT], algo: str, env_id: str) -> SpaceT:
    """The env's action space; exit (code 2, one line on stderr) unless it is ``expected``."""
    space = envs.single_action_space
    if not isinstance(space, expected):
        kind = "discrete (Discrete)" if expected is gym.spaces.Discrete else "continuous (Box)"
        from mosaic_core.child import refuse_config

        refuse_config(f"{algo} needs a {kind} action space, but {env_id} has {space}")
    return space


def shape_of(space: gym.Space) -> tuple[int, ...]:
    """An array space's shape (``Space.shape`` is None only for spaces such as ``Dict``)."""
    if space.shape is None:
        raise ValueError(f"{type(space).__name__} has no array shape")
    return space.shape


# Normalisation statistics -------------------------------------------------------------------


def _find_wrapper(env: Any, cls: type) -> Any:
    while env is not None:
        if isinstance(env, cls):
            return env
        env = getattr(env, "env", None)
    return None


def normalization_state(envs: gym.vector.SyncVectorEnv) -> dict[str, Any] | None:
    """Running statistics of each sub-env's ``NormalizeObservation`` / ``NormalizeReward``.

    ``{"observation": [{"mean", "var", "count"}, ...], "reward": [...]}``, one entry per
    sub-env, as plain lists (safe to ``torch.load(weights_only=True)``); None without them.
    """
    state: dict[str, Any] = {}
    for key, cls, attr in (
        ("observation", gym.wrappers.NormalizeObservation, "obs_rms"),
        ("reward", gym.wrappers.NormalizeReward, "return_rms"),
    ):
        stats = []
        for env in envs.envs:
            wrapper = _find_wrapper(env, cls)
            if wrapper is not None:
                rms = getattr(wrapper, attr)
                stats.append(
                    {
                        "mean": np.asarray(rms.mean, dtype=np.float64).tolist(),
                        "var": np.asarray(rms.var, dtype=np.float64).tolist(),
                        "count": float(rms.count),
                    }
                )
        if stats:
            state[key] = stats
    return state or None


def restore_normalization_state(envs: gym.vector.SyncVectorEnv, state: dict[str, Any] | None) -> None:
    """Load :func:`normalization_state` into the sub-envs' wrappers.

    With another number of sub-envs than were saved, every sub-env gets the merged statistics.
    """
    if not state:
        return
    for key, cls, attr in (
        ("observation", gym.wrappers.NormalizeObservation, "obs_rms"),
        ("reward", gym.wrappers.NormalizeReward, "return_rms"),
    ):
        saved = state.get(key)
        if not saved:
            continue
        for index, env in enumerate(envs.envs):
            wrapper = _find_wrapper(env, cls)
            if wrapper is None:
                continue
            stats = saved[index] if len(saved) == len(envs.envs) else merge_stats(saved)
            rms = getattr(wrapper, attr)
            # in the wrapper's own dtype (1.x keeps an observation's statistics in float32): the
            # updates after a resume round as they would have
            rms.mean = np.asarray(stats["mean"], dtype=np.asarray(rms.mean).dtype).reshape(np.shape(rms.mean))
            rms.var = np.asarray(stats["var"], dtype=np.asarray(rms.var).dtype).reshape(np.shape(rms.var))
            rms.count = float(stats["count"])


def merge_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine running mean/var/count entries into one (parallel variance formula)."""
    mean = np.asarray(stats[0]["mean"], dtype=np.float64)
    var = np.asarray(stats[0]["var"], dtype=np.float64)
    count = float(stats[0]["count"])
    for other in stats[1:]:
        o_mean, o_var, o_count = np.asarray(other["mean"]), np.asarray(other["var"]), float(other["count"])
        total = count + o_count
        delta = o_mean - mean
        mean = mean + delta * o_count / total
        var = (var * count + o_var * o_count + delta**2 * count * o_count / total) / total
        count = total
    return {"mean": mean.tolist(), "var": var.tolist(), "count": count}
