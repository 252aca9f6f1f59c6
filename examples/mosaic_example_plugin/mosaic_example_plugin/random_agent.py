"""A CleanRL-style script shipped by a third party: a random agent that logs returns."""

import os
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import tyro


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    seed: int = 1
    env_id: str = "CartPole-v1"
    total_timesteps: int = 2000
    num_envs: int = 2
    track: bool = False


if __name__ == "__main__":
    args = tyro.cli(Args)
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(f"runs/{run_name}")
    envs = gym.vector.SyncVectorEnv(
        # gymnasium 0.29's wrappers package imports the wrapper without an __all__: mypy sees no re-export
        [lambda: gym.wrappers.RecordEpisodeStatistics(gym.make(args.env_id)) for _ in range(args.num_envs)]  # type: ignore[attr-defined]
    )
    envs.reset(seed=args.seed)
    returns = np.zeros(args.num_envs)
    for global_step in range(0, args.total_timesteps, args.num_envs):
        _, reward, terminated, truncated, _ = envs.step(envs.action_space.sample())
        returns += reward
        for i in np.flatnonzero(terminated | truncated):
            writer.add_scalar("charts/episodic_return", returns[i], global_step)
            returns[i] = 0
    envs.close()
    writer.close()
