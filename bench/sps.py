"""Training speed of each bundled algorithm next to a plain loop that only steps the same envs.

Run by hand: .venv/bin/python bench/sps.py [--algo ppo --algo dqn ...] [--scale 1.0]

For each algorithm: the script's own last charts/SPS (env steps per second, as CleanRL
computes it) on its benchmark env with its default hyperparameters (off-policy ones learn
from step `learning_starts` of the run below, so most steps train), next to the env steps per
second of a loop that steps the same SyncVectorEnv (same num_envs, RecordEpisodeStatistics)
with pre-drawn random actions. The ratio is how much of the env's speed the algorithm keeps.
`--scale` multiplies every step budget (at least 4096 steps).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ALGORITHMS = Path(__file__).resolve().parents[1] / "plugins" / "cleanrl_worker" / "algorithms"

# algo: (env_id, num_envs, steps, extra flags)
CASES = {
    "ppo": ("CartPole-v1", 4, 30000, []),
    "ppo_continuous_action": ("Pendulum-v1", 1, 8192, []),
    "dqn": ("CartPole-v1", 1, 20000, ["--learning-starts", "2000"]),
    "c51": ("CartPole-v1", 1, 20000, ["--learning-starts", "2000"]),
    "sac_continuous_action": ("Pendulum-v1", 1, 3000, ["--learning-starts", "500"]),
    "td3_continuous_action": ("Pendulum-v1", 1, 3000, ["--learning-starts", "500"]),
    "ddpg_continuous_action": ("Pendulum-v1", 1, 3000, ["--learning-starts", "500"]),
}


def plain_sps(env_id: str, num_envs: int, steps: int) -> float:
    """Env steps per second of a SyncVectorEnv stepped with random actions and nothing else."""
    import gymnasium as gym
    import numpy as np

    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.RecordEpisodeStatistics(gym.make(env_id)) for _ in range(num_envs)])
    envs.action_space.seed(0)
    vector_steps = max(1, steps // num_envs)
    actions = np.stack([envs.action_space.sample() for _ in range(vector_steps)])
    envs.reset(seed=0)
    started = time.perf_counter()
    for action in actions:
        envs.step(action)
    elapsed = time.perf_counter() - started
    envs.close()
    return vector_steps * num_envs / elapsed


def algo_sps(algo: str, env_id: str, steps: int, flags: list[str]) -> float:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(ALGORITHMS / f"{algo}.py"), "--env-id", env_id, "--total-timesteps",
                        str(steps), "--no-cuda", *flags], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        (events,) = list(Path(tmp).rglob("events.out.tfevents.*"))
        acc = EventAccumulator(str(events.parent), size_guidance={"scalars": 0})
        acc.Reload()
        return acc.Scalars("charts/SPS")[-1].value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", action="append", choices=sorted(CASES), help="algorithms to measure (default all)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every step budget")
    args = parser.parse_args()
    header = f"{'algo':<24}{'env':<14}{'envs':>5}{'steps':>8}{'algo SPS':>10}{'plain SPS':>11}{'ratio':>8}"
    print(header)
    print("-" * len(header))
    for algo in args.algo or CASES:
        env_id, num_envs, steps, flags = CASES[algo]
        steps = max(int(steps * args.scale), 4096)  # at least two PPO rollouts, and past learning_starts
        trained = algo_sps(algo, env_id, steps, flags)
        plain = plain_sps(env_id, num_envs, min(steps, 20000))
        print(f"{algo:<24}{env_id:<14}{num_envs:>5}{steps:>8}{trained:>10.0f}{plain:>11.0f}{trained / plain:>8.3f}",
              flush=True)


if __name__ == "__main__":
    main()
