# A tiny CleanRL-style script for curriculum tests: a random policy over a vector env.
# Each iteration prints, as one JSON line, the global step and the env id every sub-env is
# actually playing (read from the envs themselves), and writes TensorBoard scalars.
# With --hold-steps / --hold-episodes (a schedule's first two conditions) it waits, once a condition
# holds and every env has reported it, for its envs to play the next stage, resetting them (a reset
# is where a stage is switched) without stepping: the host decides a switch on a heartbeat, which
# a loaded machine may delay past the whole budget; this way the budget is never spent first.
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
    hold_steps: int = 0
    """the first stage's `steps>=N`: past it, wait for the second stage (0: never wait)"""
    hold_episodes: int = 0
    """the second stage's `episodes>=N`: past it, wait for the third stage (0: never wait)"""


# Iterations past a condition before waiting: every env has then reported its steps and episodes
# (the curriculum wrapper reports every 64 steps of an env; an iteration is 32 of each env's).
REPORTED = 3
HOLD_S = 120


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

    def playing():
        return [env.spec.id for env in envs.get_attr("unwrapped")]

    def wait_for_stage(stage_ids):
        """Reset the envs until none plays ``stage_ids``' last env (a stage's env differs from the one before)."""
        deadline = time.monotonic() + HOLD_S
        while set(playing()) & {stage_ids[-1]} and time.monotonic() < deadline:
            time.sleep(0.05)
            envs.reset()
        stage_ids.append(playing()[0])

    global_step, episodes, past = 0, 0, 0  # episodes: of the current stage
    stage_ids = [args.env_id]
    for iteration in range(args.total_timesteps // (args.num_envs * args.num_steps)):
        for _ in range(args.num_steps):
            global_step += args.num_envs
            _, _, terminated, truncated, _ = envs.step(envs.action_space.sample())
            episodes += int((terminated | truncated).sum())
        env_ids = playing()
        print(json.dumps({"global_step": global_step, "env_ids": env_ids}), flush=True)
        writer.add_scalar("charts/iteration", iteration, global_step)
        if len(set(env_ids)) == 1 and env_ids[0] != stage_ids[-1]:  # switched without waiting
            stage_ids.append(env_ids[0])
            episodes, past = 0, 0
        held = (len(stage_ids) == 1 and args.hold_steps and global_step >= args.hold_steps) or (
            len(stage_ids) == 2 and args.hold_episodes and episodes >= args.hold_episodes
        )
        past = past + 1 if held else 0
        if past == REPORTED:
            wait_for_stage(stage_ids)
            episodes, past = 0, 0

    envs.close()
    writer.close()
