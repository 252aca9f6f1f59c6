"""Time to the first metric: from the command to the first ``metrics`` event of ``mosaic run``, next
to the library's own script on the same machine (from its start to its first progress line), per
worker; goal: mosaic within 1.2x of the script.

- cleanrl: PPO on CartPole-v1; the script is the worker's bundled ``algorithms/ppo.py`` run plainly
  (CleanRL's single file: its first ``global_step=..., episodic_return=...`` line).
- rllib (when its environment is built under $MOSAIC_VENVS): PPO on CartPole-v1, RLlib's defaults
  (a 4,000-step first iteration); the script builds the same config in the worker's environment
  and prints after its first ``algo.train()``.
- xuance: not measured here yet (its own script needs a config file of XuanCe's).

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


def mosaic_side(worker: str, steps: int, scratch: Path, env: dict[str, str]) -> Callable[[], float]:
    def run() -> float:
        runs = Path(tempfile.mkdtemp(dir=scratch))
        cmd = [str(BIN / "mosaic"), "run", "--worker", worker, "--algo", "ppo", "--env-id", "CartPole-v1"]
        cmd += ["--total-timesteps", str(steps), "--runs-dir", str(runs), "--json"]
        return until(cmd, is_metrics_event, scratch, env)

    return run


def script_side(cmd: list[str], marker: str, scratch: Path, env: dict[str, str]) -> Callable[[], float]:
    return lambda: until(cmd, lambda line: line.startswith(marker), Path(tempfile.mkdtemp(dir=scratch)), env)


def rllib_python() -> str | None:
    from mosaic_core.environments import status
    from mosaic_core.workers import find_worker

    try:
        item = find_worker("rllib")
        found = status(item.obj, item.distribution)
    except Exception:
        return None
    return found.python if found.ready else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", nargs="+", default=["cleanrl", "rllib"])
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
        python = rllib_python() if "rllib" in args.workers else None
        if python:
            plain = [python, "-c", RLLIB_SCRIPT]
            cases["rllib ppo"] = (
                mosaic_side("rllib", 8_000, scratch, env),
                script_side(plain, "first iteration", scratch, env),
            )
        elif "rllib" in args.workers:
            print("rllib: no environment under $MOSAIC_VENVS; left out")
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
