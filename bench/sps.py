"""Training speed of each bundled algorithm next to a plain loop that only steps the same envs.

Run by hand: .venv/bin/python bench/sps.py [--algo ppo --algo dqn ...] [--scale 1.0]
             .venv/bin/python bench/sps.py --suite atari --suite mujoco [--cleanrl-home /path/to/cleanrl]

For each algorithm: the script's own last charts/SPS (env steps per second, as CleanRL
computes it) on its benchmark env with its default hyperparameters (off-policy ones learn
from step `learning_starts` of the run below, so most steps train), next to the env steps per
second of a loop that steps the same SyncVectorEnv (same num_envs, RecordEpisodeStatistics)
with pre-drawn random actions. The ratio is how much of the env's speed the algorithm keeps.
`--scale` multiplies every step budget (at least 4096 steps, or the case's own when smaller). Suites: `classic` (the default),
`atari` (ppo_atari, dqn_atari on Breakout; needs the atari extra), `envpool` (ppo_atari_envpool
on EnvPool's Breakout-v5, with its bfloat16 CNN where the CPU has it and in float32, next to
ppo_atari on BreakoutNoFrameskip-v4, and the ratios; the envpool extra), `mujoco` (the continuous
algorithms on HalfCheetah-v4; the mujoco extra). With `--cleanrl-home DIR` (an upstream CleanRL
checkout) each algorithm of that name also runs from the checkout, both through `mosaic run`
with the same seed, steps and flags, and the table adds the upstream SPS and bundled / upstream.
Upstream scripts leave torch at one thread per core while the bundled MLP algorithms set one
thread: on a shared or small CPU compare with `OMP_NUM_THREADS=1` (without it, upstream SAC ran at
1-2 SPS on this busy 2-core machine, 30x slower than with it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ALGORITHMS = Path(__file__).resolve().parents[1] / "plugins" / "cleanrl_worker" / "algorithms"
MOSAIC = Path(sys.executable).parent / "mosaic"

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
SUITES = {
    "classic": CASES,
    "atari": {
        "ppo_atari": ("BreakoutNoFrameskip-v4", 8, 2048, []),
        "dqn_atari": ("BreakoutNoFrameskip-v4", 1, 2048, ["--learning-starts", "1024", "--buffer-size", "100000"]),
    },
    # bundled vs upstream ppo_atari_envpool (--cleanrl-home), and vs ppo_atari: the envpool extra
    # (a case named ALGO:VARIANT runs ALGO with its flags)
    "envpool": {
        "ppo_atari_envpool": ("Breakout-v5", 8, 16384, []),
        "ppo_atari_envpool:float32": ("Breakout-v5", 8, 16384, ["--no-bf16"]),
        "ppo_atari": ("BreakoutNoFrameskip-v4", 8, 16384, []),
    },
    "mujoco": {
        algo: (
            "HalfCheetah-v4",
            1,
            8192 if algo.startswith("ppo") else 3000,
            [] if algo.startswith("ppo") else ["--learning-starts", "1000"],
        )
        for algo in (
            "ppo_continuous_action",
            "sac_continuous_action",
            "td3_continuous_action",
            "ddpg_continuous_action",
        )
    },
}


def make_plain_env(env_id: str):
    import gymnasium as gym

    if env_id.endswith("NoFrameskip-v4"):  # the Atari algorithms' own preprocessing
        from cleanrl_worker.atari import make_training_env

        return make_training_env(env_id)
    return gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))


def plain_sps(env_id: str, num_envs: int, steps: int) -> float:
    """Env steps per second of a SyncVectorEnv (EnvPool's own for its ids) stepped with random actions."""
    import gymnasium as gym
    import numpy as np

    pool = env_id.endswith("-v5") and "/" not in env_id
    if pool:  # an EnvPool task, made as ppo_atari_envpool makes it
        import envpool

        envs = envpool.make(
            env_id, env_type="gymnasium", num_envs=num_envs, episodic_life=True, reward_clip=True, seed=0
        )
    else:
        envs = gym.vector.SyncVectorEnv([lambda: make_plain_env(env_id) for _ in range(num_envs)])
    vector_steps = max(1, steps // num_envs)
    if pool:  # EnvPool takes int32 actions
        actions = np.random.default_rng(0).integers(
            envs.single_action_space.n, size=(vector_steps, num_envs), dtype=np.int32
        )
        envs.reset()  # seeded by envpool.make
    else:
        envs.action_space.seed(0)
        actions = np.stack([envs.action_space.sample() for _ in range(vector_steps)])
        envs.reset(seed=0)
    started = time.perf_counter()
    for action in actions:
        envs.step(action)
    elapsed = time.perf_counter() - started
    if not pool:  # EnvPool's close() fails on gymnasium 0.29
        envs.close()
    return vector_steps * num_envs / elapsed


def flags_to_extras(flags: list[str]) -> dict:
    """``["--learning-starts", "1000", "--no-bf16"]`` → ``{"learning_starts": 1000, "bf16": False}``."""
    extras, rest = {}, list(flags)
    while rest:
        name = rest.pop(0).removeprefix("--").replace("-", "_")
        if name.startswith("no_") and (not rest or rest[0].startswith("--")):
            extras[name.removeprefix("no_")] = False
        else:
            extras[name] = json.loads(rest.pop(0))
    return extras


def algo_sps(
    algo: str, env_id: str, steps: int, flags: list[str], cleanrl_home: Path | None = None, via_mosaic: bool = False
) -> float:
    """The run's last charts/SPS: the bundled script run directly, or through `mosaic run` (from the
    checkout ``cleanrl_home`` when given, else the bundled one), seed 1."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with tempfile.TemporaryDirectory() as tmp:
        if via_mosaic or cleanrl_home:
            env = {k: v for k, v in os.environ.items() if k != "MOSAIC_CLEANRL_HOME"}
            if cleanrl_home:
                env["MOSAIC_CLEANRL_HOME"] = str(cleanrl_home)
            command = [
                str(MOSAIC),
                "run",
                "--worker",
                "cleanrl",
                "--algo",
                algo,
                "--env-id",
                env_id,
                "--seed",
                "1",
                "--total-timesteps",
                str(steps),
                "--quiet",
                "--runs-dir",
                str(Path(tmp) / "runs-root"),
                "--extras",
                json.dumps({"cuda": False, **flags_to_extras(flags)}),
            ]
            subprocess.run(command, cwd=tmp, env=env, check=True, stdout=subprocess.DEVNULL)
        else:
            subprocess.run(
                [
                    sys.executable,
                    str(ALGORITHMS / f"{algo}.py"),
                    "--env-id",
                    env_id,
                    "--total-timesteps",
                    str(steps),
                    "--no-cuda",
                    *flags,
                ],
                cwd=tmp,
                check=True,
                stdout=subprocess.DEVNULL,
            )
        (events,) = list(Path(tmp).rglob("events.out.tfevents.*"))
        acc = EventAccumulator(str(events.parent), size_guidance={"scalars": 0})
        acc.Reload()
        return acc.Scalars("charts/SPS")[-1].value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", action="append", help="algorithms to measure (default all of the suites)")
    parser.add_argument("--suite", action="append", choices=sorted(SUITES), help="case suites (default classic)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every step budget")
    parser.add_argument("--cleanrl-home", type=Path, help="an upstream CleanRL checkout to compare with")
    args = parser.parse_args()
    cases = {
        f"{name}@{case[0]}": (name, *case)
        for suite in args.suite or ["classic"]
        for name, case in SUITES[suite].items()
        if not args.algo or name.split(":")[0] in args.algo
    }
    upstream = "" if args.cleanrl_home is None else f"{'upstream':>10}{'ratio':>8}"
    header = f"{'algo':<27}{'env':<24}{'envs':>5}{'steps':>8}{'algo SPS':>10}{'plain SPS':>11}{'ratio':>8}{upstream}"
    print(header)
    print("-" * len(header))
    measured = {}
    for name, env_id, num_envs, steps, flags in cases.values():
        algo = name.split(":")[0]
        steps = max(int(steps * args.scale), min(steps, 4096))  # at least two PPO rollouts, past learning_starts
        trained = algo_sps(algo, env_id, steps, flags, via_mosaic=args.cleanrl_home is not None)
        plain = plain_sps(env_id, num_envs, min(steps, 20000))
        line = f"{name:<27}{env_id:<24}{num_envs:>5}{steps:>8}{trained:>10.0f}{plain:>11.0f}{trained / plain:>8.3f}"
        if args.cleanrl_home is not None:
            try:
                theirs = algo_sps(algo, env_id, steps, flags, cleanrl_home=args.cleanrl_home)
                line += f"{theirs:>10.0f}{trained / theirs:>8.3f}"
            except subprocess.CalledProcessError:  # e.g. upstream's EnvPool scripts on envpool 0.8+
                line += f"{'fails':>10}{'-':>8}"
        print(line, flush=True)
        measured[name] = trained
    for fast in ("ppo_atari_envpool", "ppo_atari_envpool:float32"):
        if {fast, "ppo_atari"} <= measured.keys():
            print(f"{fast} / ppo_atari: {measured[fast] / measured['ppo_atari']:.2f}x")


if __name__ == "__main__":
    main()
