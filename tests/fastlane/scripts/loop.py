"""A CleanRL-shaped training loop without the learning: random actions in a vector env.

python loop.py --env-id CartPole-v1 --num-envs 4 --steps 400 [--vector async|sync] [--crash-at N]
"""

import argparse
import time

import gymnasium as gym


def make_env(env_id):
    def thunk():
        env = gym.make(env_id)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return thunk


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--num-envs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--vector", choices=("sync", "async"), default="sync")
    parser.add_argument("--crash-at", type=int, default=-1)
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds per vector step")
    args = parser.parse_args()
    vector = gym.vector.AsyncVectorEnv if args.vector == "async" else gym.vector.SyncVectorEnv
    envs = vector([make_env(args.env_id) for _ in range(args.num_envs)])
    envs.reset(seed=1)
    for step in range(args.steps):
        if step == args.crash_at:
            raise RuntimeError(f"crash requested at step {step}")
        envs.step(envs.action_space.sample())
        if args.sleep:
            time.sleep(args.sleep)
    envs.close()
    print("loop finished", flush=True)
