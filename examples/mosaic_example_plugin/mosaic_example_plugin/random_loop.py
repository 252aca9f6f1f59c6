"""The example worker's training process: a plain gymnasium loop, nothing MOSAIC-specific but
two calls to ``mosaic_core.child.report_scalar`` (no-ops when not run by a host)."""

import argparse
import sys
import time

import gymnasium as gym

from mosaic_core.child import report_scalar


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--total-timesteps", type=int, required=True)
    parser.add_argument("--policy", choices=("random", "first"), default="random")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=200)
    args = parser.parse_args()
    print(f"example worker: gymnasium {gym.__version__} in {sys.prefix}", file=sys.stderr, flush=True)
    env = gym.make(args.env_id)
    env.action_space.seed(args.seed)
    env.reset(seed=args.seed)
    episode_return, started = 0.0, time.perf_counter()
    for step in range(1, args.total_timesteps + 1):
        action = env.action_space.sample() if args.policy == "random" else 0
        _, reward, terminated, truncated, _ = env.step(action)
        episode_return += float(reward)
        if terminated or truncated:
            report_scalar("charts/episodic_return", episode_return, step)
            episode_return = 0.0
            env.reset()
        if step % args.log_every == 0:
            report_scalar("charts/SPS", step / (time.perf_counter() - started), step)
    env.close()


if __name__ == "__main__":
    main()
