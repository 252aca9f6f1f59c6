"""One batched evaluation loop for every bundled algorithm (and for policy evaluation mode).

:func:`evaluate` runs a policy (observation batch → action batch) on ``num_envs`` copies of
an env in a ``SyncVectorEnv`` until ``episodes`` episodes have ended, and reports each
episode's raw return, length and discounted return. Episodes are shared out to the envs in
advance (env ``i`` runs episodes ``i, i + num_envs, …``), so short episodes are not
over-represented, and results come in that episode order. Env ``i`` is seeded with
``seed + i``: the same seed and a deterministic policy give the same results.

The env factory is called as ``make_env(render_mode=None)`` (``"rgb_array"`` for the env
that records video) and returns a single env that gives raw rewards: put observation
normalisation in the policy, not in the env.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from cleanrl_worker.gymcompat import Autoreset

Policy = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class EvaluationResult:
    returns: list[float]
    lengths: list[int]
    discounted_returns: list[float]

    def summary(self) -> dict[str, Any]:
        """Mean, std, min and max of the returns, mean length and mean discounted return."""
        returns = np.asarray(self.returns, dtype=np.float64)
        return {
            "episodes": len(self.returns),
            "mean_return": float(returns.mean()),
            "std_return": float(returns.std()),
            "min_return": float(returns.min()),
            "max_return": float(returns.max()),
            "mean_length": float(np.mean(self.lengths)),
            "mean_discounted_return": float(np.mean(self.discounted_returns)),
        }


def evaluate(policy: Policy, make_env: Callable[..., gym.Env], *, episodes: int = 10, num_envs: int = 10,
             seed: int = 0, gamma: float = 0.99, max_episode_steps: int | None = None,
             capture_video: bool = False, video_dir: str | Path | None = None) -> EvaluationResult:
    """Run ``policy`` for ``episodes`` episodes on a vector env of ``num_envs`` envs."""
    if episodes <= 0 or num_envs <= 0:
        raise ValueError(f"episodes and num_envs must be > 0, got {episodes} and {num_envs}")
    if capture_video and video_dir is None:
        raise ValueError("capture_video needs a video_dir")
    num_envs = min(num_envs, episodes)
    quota = np.array([episodes // num_envs + (i < episodes % num_envs) for i in range(num_envs)])

    def thunk(index: int) -> Callable[[], gym.Env]:
        def make() -> gym.Env:
            record = capture_video and index == 0
            env = make_env(render_mode="rgb_array" if record else None)
            if max_episode_steps is not None:
                env = gym.wrappers.TimeLimit(env, max_episode_steps)
            if record:
                try:
                    env = gym.wrappers.RecordVideo(env, video_folder=str(video_dir), episode_trigger=lambda _: True)
                except gym.error.DependencyNotInstalled as exc:
                    raise RuntimeError(f"capture_video needs moviepy (pip install moviepy): {exc}") from None
            return env

        return make

    envs = gym.vector.SyncVectorEnv([thunk(i) for i in range(num_envs)])
    try:
        obs, _ = envs.reset(seed=seed)
        autoreset = Autoreset(num_envs)
        finished = np.zeros(num_envs, dtype=np.int64)
        ret, disc, discount = np.zeros(num_envs), np.zeros(num_envs), np.ones(num_envs)
        length = np.zeros(num_envs, dtype=np.int64)
        results: dict[tuple[int, int], tuple[float, int, float]] = {}
        while (finished < quota).any():
            obs, rewards, terminations, truncations, _ = envs.step(policy(obs))
            active = autoreset.step(terminations, truncations) & (finished < quota)
            rewards = np.where(active, rewards, 0.0)
            ret += rewards
            disc += discount * rewards
            discount = np.where(active, discount * gamma, discount)
            length += active
            for index in np.flatnonzero(active & (terminations | truncations)):
                results[(int(finished[index]), int(index))] = (float(ret[index]), int(length[index]), float(disc[index]))
                finished[index] += 1
                ret[index] = disc[index] = length[index] = 0
                discount[index] = 1.0
    finally:
        envs.close()
    ordered = [results[key] for key in sorted(results)]
    return EvaluationResult(returns=[r for r, _, _ in ordered], lengths=[n for _, n, _ in ordered],
                            discounted_returns=[d for _, _, d in ordered])


def write_scalars(writer: Any, result: EvaluationResult) -> None:
    """CleanRL's ``eval/episodic_return`` per episode index, plus ``eval/discounted_return``."""
    for index, (raw, discounted) in enumerate(zip(result.returns, result.discounted_returns)):
        writer.add_scalar("eval/episodic_return", raw, index)
        writer.add_scalar("eval/discounted_return", discounted, index)
