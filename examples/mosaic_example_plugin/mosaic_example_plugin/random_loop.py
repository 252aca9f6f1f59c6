"""The example worker's training process: a plain gymnasium loop, nothing MOSAIC-specific but
calls to ``mosaic_core.child.report_scalar`` and one ``emit_event("checkpoint_saved", ...)``
(no-ops when not run by a host). ``--policy`` is random, first, or a Python file defining
``act(observation, action_space)``."""

import argparse
import json
import runpy
import sys
import time

import gymnasium as gym

from mosaic_core.child import emit_event, report_scalar


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--total-timesteps", type=int, required=True)
    parser.add_argument("--policy", default="random", help="random, first, or a .py file defining act(obs, space)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=200)
    args = parser.parse_args()
    print(f"example worker: gymnasium {gym.__version__} in {sys.prefix}", file=sys.stderr, flush=True)
    env = gym.make(args.env_id)
    env.action_space.seed(args.seed)
    act = runpy.run_path(args.policy)["act"] if args.policy.endswith(".py") else None
    observation, _ = env.reset(seed=args.seed)
    episode_return, started = 0.0, time.perf_counter()
    for step in range(1, args.total_timesteps + 1):
        action = act(observation, env.action_space) if act else env.action_space.sample() if args.policy == "random" else 0
        observation, reward, terminated, truncated, _ = env.step(action)
        episode_return += float(reward)
        if terminated or truncated:
            report_scalar("charts/episodic_return", episode_return, step)
            episode_return = 0.0
            observation, _ = env.reset()
        if step % args.log_every == 0:
            report_scalar("charts/SPS", step / (time.perf_counter() - started), step)
    env.close()
    # The policy is its own checkpoint: what was played, for how long (checkpoint_saved is a host event).
    with open("policy.json", "w", encoding="utf-8") as handle:
        json.dump({"policy": args.policy, "global_step": args.total_timesteps}, handle)
    emit_event("checkpoint_saved", {"path": "policy.json", "global_step": args.total_timesteps})


if __name__ == "__main__":
    main()
