# A tiny CleanRL-style script for curriculum tests: a random policy over a vector env.
# Each iteration prints, as one JSON line, the global step and the env id every sub-env is
# actually playing (read from the envs themselves), and writes TensorBoard scalars.
import json
import os
import time
from dataclasses import dataclass

import gymnasium as gym
import tyro


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    env_id: str = "CartPole-v1"
    """the id of the environment"""
    total_timesteps: int = 4000
    """total timesteps of the experiments"""
    num_envs: int = 4
    """the number of parallel game environments"""
    num_steps: int = 32
    """the number of steps to run in each environment per rollout"""
    async_envs: bool = False
    """use AsyncVectorEnv (one process per env) instead of SyncVectorEnv"""
    spawn: bool = False
    """start AsyncVectorEnv env processes with `spawn` instead of the platform default"""
    tensorboardx: bool = False
    """write TensorBoard events with tensorboardX instead of torch.utils.tensorboard"""


def make_env(env_id):
    def thunk():
        env = gym.make(env_id)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        return env

    return thunk


if __name__ == "__main__":
    args = tyro.cli(Args)
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.tensorboardx:
        from tensorboardX import SummaryWriter
    else:
        from torch.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(f"runs/{run_name}")

    env_fns = [make_env(args.env_id) for _ in range(args.num_envs)]
    if args.async_envs:
        envs = gym.vector.AsyncVectorEnv(env_fns, context="spawn" if args.spawn else None)
    else:
        envs = gym.vector.SyncVectorEnv(env_fns)
    envs.reset(seed=args.seed)
    envs.action_space.seed(args.seed)

    global_step = 0
    for iteration in range(args.total_timesteps // (args.num_envs * args.num_steps)):
        for _ in range(args.num_steps):
            global_step += args.num_envs
            envs.step(envs.action_space.sample())
        env_ids = [env.spec.id for env in envs.get_attr("unwrapped")]
        print(json.dumps({"global_step": global_step, "env_ids": env_ids}), flush=True)
        writer.add_scalar("charts/iteration", iteration, global_step)

    envs.close()
    writer.close()
