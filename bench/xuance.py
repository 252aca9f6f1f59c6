"""The XuanCe worker next to XuanCe's own runner, and a short learning row.

Run by hand (after `mosaic workers install xuance`):
    .venv/bin/python bench/xuance.py [--algo mappo --algo qmix ...] [--steps 20000] [--repeats 2]
                                     [--learning-steps 80000] [--window 100]

Speed: for each algorithm, the same training (simple_spread_v3, 4 envs in one process, seed 1,
one torch thread) run alternately by XuanCe's own runner (`xuance.get_runner(...).run(mode="train")`
in the worker's environment) and by `mosaic run --worker xuance` (the callback reporting every
episode per agent, the metric bridge, heartbeats, checkpoints). Each side's rate is env steps per
second of the training loop (the agent built to training done; imports left out, XuanCe's own:
timed around `run`, MOSAIC's: the worker's last charts/SPS), and whole-process wall time; the
best of `--repeats` on each side. Overhead = 1 - mosaic / xuance (goal <= 3 %).

Learning: MAPPO trains `--learning-steps` steps through `mosaic run` with LEARNING's settings
(`--learning-extras` replaces them); the team return (sum over the three agents) averaged over
windows of `--window` episodes, from the run's TensorBoard scalars: the first window, a few in
between, the last (it should rise).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MOSAIC = [sys.executable, "-m", "mosaic_core.cli.main"]
SETTINGS = {"parallels": 4, "vectorize": "DummyVecMultiAgentEnv"}
# The learning run: XuanCe's simple_spread config does one gradient step per 400 env steps (1 epoch,
# 1 minibatch) with continuous actions, for 10 M steps; its starting policy stands still, which
# exploring does not beat in 30 k steps. Here: discrete actions, one shared policy, 10 epochs per
# 1600-step batch from 16 envs (MAPPO's own MPE settings), gamma 0.99, learning rate 3e-4 (at
# XuanCe's 7e-4 the return rose to -74 by 33 k steps and fell back to -91 by 80 k).
LEARNING = {
    "parallels": 16,
    "vectorize": "DummyVecMultiAgentEnv",
    "buffer_size": 1600,
    "n_epochs": 10,
    "continuous_action": False,
    "policy": "Categorical_MAAC_Policy",
    "use_parameter_sharing": True,
    "gamma": 0.99,
    "learning_rate": 0.0003,
}
OWN_RUNNER = """
import json, os, sys, time
from argparse import Namespace
import torch
torch.set_num_threads(1)
import xuance
algo, steps, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
args = Namespace(parallels=4, vectorize="DummyVecMultiAgentEnv", running_steps=steps, seed=1, env_seed=1,
                 log_dir=os.path.join(folder, "logs"), model_dir=os.path.join(folder, "models"), render=False)
runner = xuance.get_runner(algo, "mpe", "simple_spread_v3", parser_args=args)
start = time.perf_counter()
runner.run(mode="train")
print(json.dumps({"seconds": time.perf_counter() - start, "steps": runner.agent.current_step}))
"""


def worker_python(env: dict[str, str]) -> str:
    from mosaic_core.environments import status
    from mosaic_core.workers import find_worker

    item = find_worker("xuance")
    found = status(item.obj, item.distribution)
    if not found.ready:
        sys.exit(f"bench/xuance.py: {found.detail}")
    return found.python


def own_runner(python: str, algo: str, steps: int, env: dict[str, str]) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        done = subprocess.run(
            [python, "-c", OWN_RUNNER, algo, str(steps), folder], env=env, capture_output=True, text=True, cwd=folder
        )
        wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"xuance's runner failed: {done.stderr[-800:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["steps"] / result["seconds"], wall


def metrics_of(run_dir: Path) -> list[dict]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    if events[-1]["event"] != "run_completed":
        sys.exit(f"mosaic run failed: {events[-1]}")
    return [e["payload"] for e in events if e["event"] == "metrics"]


def mosaic_run(
    algo: str, steps: int, env: dict[str, str], runs: Path, run_id: str, settings: dict | None = None
) -> tuple[float, float]:
    start = time.perf_counter()
    subprocess.run(
        [
            *MOSAIC,
            "run",
            "--worker",
            "xuance",
            "--algo",
            algo,
            "--env-id",
            "mpe/simple_spread_v3",
            "--total-timesteps",
            str(steps),
            "--seed",
            "1",
            "--extras",
            json.dumps(settings or SETTINGS),
            "--runs-dir",
            str(runs),
            "--run-id",
            run_id,
            "--json",
            "--quiet",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    return metrics_of(runs / run_id)[-1]["sps"], wall


def team_returns(run_dir: Path) -> list[float]:
    """Every episode's team return, from the run's TensorBoard scalars."""
    from mosaic_analytics.curves import read_scalars

    return read_scalars(run_dir, "charts/episodic_return").values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", action="append", default=[], help="algorithms (default mappo, qmix, iql)")
    parser.add_argument("--steps", type=int, default=20000, help="0 skips the speed rows")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--learning-steps", type=int, default=80000, help="0 skips the learning row")
    parser.add_argument("--learning-extras", type=json.loads, default=LEARNING, help="the learning run's extras (JSON)")
    parser.add_argument("--window", type=int, default=100, help="episodes per window of the learning row")
    ns = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1", "SDL_VIDEODRIVER": "dummy"}
    python = worker_python(env)
    algos = ns.algo or ["mappo", "qmix", "iql"]
    print(
        f"{'algo':8} {'xuance steps/s':>15} {'mosaic steps/s':>15} {'overhead':>9} {'xuance wall s':>14} "
        f"{'mosaic wall s':>14}"
    )
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder)
        for algo in algos if ns.steps else []:
            own, ours = [], []
            for repeat in range(ns.repeats):  # alternate, so a busy moment hits both sides alike
                own.append(own_runner(python, algo, ns.steps, env))
                ours.append(mosaic_run(algo, ns.steps, env, runs, f"{algo}-{repeat}"))
            own_rate, ours_rate = max(r for r, _w in own), max(r for r, _w in ours)
            print(
                f"{algo:8} {own_rate:15.0f} {ours_rate:15.0f} {1 - ours_rate / own_rate:9.1%} "
                f"{min(w for _r, w in own):14.1f} {min(w for _r, w in ours):14.1f}",
                flush=True,
            )
        if ns.learning_steps:
            mosaic_run("mappo", ns.learning_steps, env, runs, "learning", ns.learning_extras)
            print(learning_row(team_returns(runs / "learning"), ns.window, ns.learning_steps, ns.learning_extras))
    return 0


def learning_row(returns: list[float], window: int, steps: int, extras: dict) -> str:
    """The team return's mean over the first window of episodes, four in between and the last."""
    count = len(returns) // window
    if count < 2:
        return f"learning: only {len(returns)} episodes, fewer than two windows of {window}"
    means = [statistics.fmean(returns[i * window : (i + 1) * window]) for i in range(count)]
    picked = sorted({round(i * (count - 1) / 5) for i in range(6)})
    trend = " -> ".join(f"{means[i]:.1f}" for i in picked)
    verdict = "rising" if means[-1] > means[0] else "NOT rising"
    return (
        f"learning: MAPPO simple_spread_v3 {steps} steps {json.dumps(extras)}, {len(returns)} episodes; team "
        f"return, mean per {window} episodes: {trend} (first {means[0]:.1f}, last {means[-1]:.1f}: {verdict})"
    )


if __name__ == "__main__":
    sys.exit(main())
