"""A CleanRL-style script for FastLane's end-to-end tests: CleanRL's Args, run_name and env
factory, with random actions instead of learning. ``--async-envs`` puts every env in its own
process (gym.vector.AsyncVectorEnv); ``--env-id FastLaneSized-v0`` gives env i a frame
width of 300 + 100 * i pixels, so grid tiles differ in size."""

import os
import time
from dataclasses import dataclass

import gymnasium as gym
import tyro
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    seed: int = 1
    env_id: str = "CartPole-v1"
    total_timesteps: int = 2000
    num_envs: int = 2
    async_envs: bool = False
    """AsyncVectorEnv (one process per env) instead of SyncVectorEnv"""
    step_delay: float = 0.0
    """seconds to sleep per vector step, to make a run last"""
    crash_at: int = -1
    """raise at this global step (-1: never)"""


class SizedCartPole(CartPoleEnv):
    """CartPole whose rendered frame is ``width`` x ``2 * width / 3`` pixels."""

    def __init__(self, render_mode=None, width=600):
        super().__init__(render_mode=render_mode)
        self.screen_width, self.screen_height = width, width * 2 // 3


def make_env(env_id, idx):
    def thunk():
        if env_id == "FastLaneSized-v0":
            if env_id not in gym.registry:
                gym.register(env_id, entry_point=SizedCartPole, max_episode_steps=500)
            env = gym.make(env_id, width=300 + 100 * idx)
        else:
            env = gym.make(env_id)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return thunk


if __name__ == "__main__":
    args = tyro.cli(Args)
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    vector = gym.vector.AsyncVectorEnv if args.async_envs else gym.vector.SyncVectorEnv
    envs = vector([make_env(args.env_id, i) for i in range(args.num_envs)])
    envs.reset(seed=args.seed)
    envs.action_space.seed(args.seed)
    for global_step in range(0, args.total_timesteps, args.num_envs):
        if global_step >= args.crash_at >= 0:
            raise RuntimeError(f"crash requested at step {global_step}")
        envs.step(envs.action_space.sample())
        if args.step_delay:
            time.sleep(args.step_delay)
    envs.close()
    print(f"{run_name}: done", flush=True)
