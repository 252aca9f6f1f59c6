# Fixture: Procgen's vector env through old gym's wrappers, as upstream's Procgen scripts use it; random actions.
import os
import time
from dataclasses import dataclass

import gym
import numpy as np
import tyro
from procgen import ProcgenEnv
from torch.utils.tensorboard import SummaryWriter


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    seed: int = 1
    env_id: str = "starpilot"
    total_timesteps: int = 512
    num_envs: int = 4


if __name__ == "__main__":
    args = tyro.cli(Args)
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    writer = SummaryWriter(f"runs/{run_name}")
    envs = ProcgenEnv(
        num_envs=args.num_envs, env_name=args.env_id, num_levels=0, start_level=0, distribution_mode="easy"
    )
    envs = gym.wrappers.TransformObservation(envs, lambda obs: obs["rgb"])
    envs.single_action_space = envs.action_space
    envs.reset()
    returns = np.zeros(args.num_envs)
    for step in range(args.total_timesteps // args.num_envs):
        _obs, reward, done, _info = envs.step(np.random.randint(15, size=args.num_envs))
        returns += reward
        for i in np.flatnonzero(done):
            writer.add_scalar("charts/episodic_return", returns[i], step * args.num_envs)
            returns[i] = 0
    writer.add_scalar("charts/steps", args.total_timesteps, args.total_timesteps)
    writer.close()
