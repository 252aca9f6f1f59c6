"""Time to the first metric: from the command to the first ``metrics`` event of ``mosaic run``, next
to the library's own script on the same machine (from its start to its first progress line), per
worker; goal: mosaic within 1.2x of the script.

- cleanrl: PPO on CartPole-v1; the script is the worker's bundled ``algorithms/ppo.py`` run plainly
  (CleanRL's single file: its first ``global_step=..., episodic_return=...`` line).
- rllib (when its environment is built under $MOSAIC_VENVS): PPO on CartPole-v1, RLlib's defaults
  (a 4,000-step first iteration); the script builds the same config in the worker's environment
  and prints after its first ``algo.train()``.
- xuance (when its environment is built under $MOSAIC_VENVS): MAPPO on MPE simple_spread_v3, 4
  environments in one process, XuanCe's own config; the script is XuanCe's runner
  (``xuance.get_runner(...).run(mode="train")``) with a callback of XuanCe's kind that prints at
  the first episode's info (what XuanCe itself logs then).

The two sides run alternately, ``--repeat`` times each; medians. Each run is stopped (SIGINT to its
process group) once its first metric is in. Run by hand:
  MOSAIC_VENVS=/var/cache/mosaic-ci/venvs .venv/bin/python bench/first_metric.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
GOAL = 1.2
RLLIB_SCRIPT = """
import logging, sys, tempfile
import ray
from ray.rllib.algorithms.ppo import PPOConfig
ray.init(address="local", _temp_dir=tempfile.mkdtemp(prefix="rl-"), include_dashboard=False,
         logging_level=logging.WARNING)
algo = PPOConfig().environment("CartPole-v1").debugging(seed=1).build_algo()
result = algo.train()
print("first iteration:", result["env_runners"]["num_env_steps_sampled_lifetime"], flush=True)
"""
XUANCE_SCRIPT = """
import os, sys, tempfile
from argparse import Namespace
import xuance
from xuance.common import MultiAgentBaseCallback

class FirstEpisode(MultiAgentBaseCallback):
    def on_train_episode_info(self, **kwargs):
        print("first episode", flush=True)

folder = tempfile.mkdtemp(prefix="xc-")
args = Namespace(parallels=4, vectorize="DummyVecMultiAgentEnv", running_steps=20000, seed=1, env_seed=1,
                 log_dir=os.path.join(folder, "logs"), model_dir=os.path.join(folder, "models"), render=False)
runner = xuance.get_runner("mappo", "mpe", "simple_spread_v3", parser_args=args)
runner.agent.callback = FirstEpisode()
runner.run(mode="train")
"""
XUANCE_EXTRAS = {"parallels": 4, "vectorize": "DummyVecMultiAgentEnv"}


def until(cmd: list[str], first: Callable[[str], bool], cwd: Path, env: dict[str, str]) -> float:
    """Seconds from starting ``cmd`` to the first line of its stdout ``first`` accepts (then it is stopped)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=cwd, env=env, start_new_session=True
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if first(line):
                return time.perf_counter() - started
        raise SystemExit(f"bench/first_metric.py: {cmd[:4]} ended without a first metric (exit {proc.wait()})")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def is_metrics_event(line: str) -> bool:
    try:
        return json.loads(line).get("event") == "metrics"
    except (ValueError, AttributeError):
        return False


def mosaic_side(worker: str, steps: int, scratch: Path, env: dict[str, str], *run_args: str) -> Callable[[], float]:
    """``mosaic run --worker WORKER`` (PPO on CartPole-v1 unless ``run_args`` say otherwise)."""

    def run() -> float:
        runs = Path(tempfile.mkdtemp(dir=scratch))
        cmd = [
            str(BIN / "mosaic"),
            "run",
            "--worker",
            worker,
            *(run_args or ("--algo", "ppo", "--env-id", "CartPole-v1")),
        ]
        cmd += ["--total-timesteps", str(steps), "--runs-dir", str(runs), "--json"]
        return until(cmd, is_metrics_event, scratch, env)

    return run


def script_side(cmd: list[str], marker: str, scratch: Path, env: dict[str, str]) -> Callable[[], float]:
    return lambda: until(cmd, lambda line: line.startswith(marker), Path(tempfile.mkdtemp(dir=scratch)), env)


def worker_python(worker: str) -> str | None:
    """The Python of ``worker``'s own environment, when it is built."""
    from mosaic_core.environments import status
    from mosaic_core.workers import find_worker

    try:
        item = find_worker(worker)
        found = status(item.obj, item.distribution)
    except Exception:
        return None
    return found.python if found.ready else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", nargs="+", default=["cleanrl", "rllib", "xuance"])
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        cases: dict[str, tuple[Callable[[], float], Callable[[], float]]] = {}
        if "cleanrl" in args.workers:
            script = ROOT / "plugins" / "cleanrl_worker" / "algorithms" / "ppo.py"
            plain = [sys.executable, str(script), "--env-id", "CartPole-v1", "--total-timesteps", "50000"]
            cases["cleanrl ppo"] = (
                mosaic_side("cleanrl", 50_000, scratch, env),
                script_side(plain, "global_step=", scratch, env),
            )
        python = worker_python("rllib") if "rllib" in args.workers else None
        if python:
            plain = [python, "-c", RLLIB_SCRIPT]
            cases["rllib ppo"] = (
                mosaic_side("rllib", 8_000, scratch, env),
                script_side(plain, "first iteration", scratch, env),
            )
        elif "rllib" in args.workers:
            print("rllib: no environment under $MOSAIC_VENVS; left out")
        python = worker_python("xuance") if "xuance" in args.workers else None
        if python:
            run_args = ("--algo", "mappo", "--env-id", "mpe/simple_spread_v3", "--seed", "1")
            cases["xuance mappo"] = (
                mosaic_side("xuance", 20_000, scratch, env, *run_args, "--extras", json.dumps(XUANCE_EXTRAS)),
                script_side([python, "-c", XUANCE_SCRIPT], "first episode", scratch, env),
            )
        elif "xuance" in args.workers:
            print("xuance: no environment under $MOSAIC_VENVS; left out")
        for name, (ours, theirs) in cases.items():
            samples: list[tuple[float, float]] = [(ours(), theirs()) for _ in range(args.repeat)]
            rows.append((name, statistics.median(o for o, _t in samples), statistics.median(t for _o, t in samples)))
    print(
        f"first metric, {len(os.sched_getaffinity(0))} CPUs, load {load:.1f} -> {os.getloadavg()[0]:.1f}, median of {args.repeat}"
    )
    print(f"  {'worker':<12} {'mosaic run':>10} {'own script':>10} {'ratio':>6}  goal <= {GOAL}x")
    for name, ours_s, theirs_s in rows:
        ratio = ours_s / theirs_s
        print(f"  {name:<12} {ours_s:>8.2f} s {theirs_s:>8.2f} s {ratio:>5.2f}x  {'ok' if ratio <= GOAL else 'OVER'}")


if __name__ == "__main__":
    main()
