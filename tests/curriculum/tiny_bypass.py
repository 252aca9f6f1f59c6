# A tiny script whose envs bypass gym.make (as EnvPool's do): it follows the run's env switches
# through mosaic_core.child.env_switch(), reports each rollout, and prints per rollout, as one JSON
# line, the stage it played and the env id its envs really are.
import json
from dataclasses import dataclass

import gymnasium as gym
import tyro

from mosaic_core import child


@dataclass
class Args:
    seed: int = 1
    env_id: str = "CartPole-v1"
    total_timesteps: int = 2000
    num_envs: int = 2
    num_steps: int = 50


def make(env_id):
    spec = gym.spec(env_id)  # the env's own class, not gym.make: no patch point sees it
    return [
        gym.wrappers.TimeLimit(gym.envs.registration.load_env_creator(spec.entry_point)(), spec.max_episode_steps)
        for _ in range(Args.num_envs)
    ]


if __name__ == "__main__":
    args = tyro.cli(Args)
    switch = child.env_switch()
    stage = switch.stage() if switch else 0
    env_id = switch.env_id(stage) if switch else args.env_id
    envs, returns = make(env_id), [0.0] * args.num_envs
    for index, env in enumerate(envs):
        env.reset(seed=args.seed + index)
    global_step = 0
    while global_step < args.total_timesteps:
        finished = []
        for _ in range(args.num_steps):
            for index, env in enumerate(envs):
                _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                returns[index] += float(reward)
                if terminated or truncated:
                    finished.append(returns[index])
                    returns[index] = 0.0
                    env.reset()
            global_step += args.num_envs
        print(
            json.dumps(
                {
                    "global_step": global_step,
                    "stage": stage,
                    "env_ids": sorted({env.spec.id if env.spec else env_id for env in envs}),
                    "max_steps": envs[0]._max_episode_steps,
                }
            ),
            flush=True,
        )
        if switch:
            switch.report(stage, steps=args.num_steps * args.num_envs, returns=finished)
            if switch.stage() != stage:  # a new stage starts in fresh envs
                stage = switch.stage()
                env_id = switch.env_id(stage)
                envs, returns = make(env_id), [0.0] * args.num_envs
                for env in envs:
                    env.reset()
