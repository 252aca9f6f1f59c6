"""The RLlib worker next to the same PPO config as a plain RLlib script, and a learning row.

Run by hand (after `mosaic workers install rllib`):
    .venv/bin/python bench/rllib.py [--steps 20000] [--repeats 2] [--learning-steps 100000]
        [--env-runners 1] [--sample-timeout 600] [--loops 0] [--params '{"train_batch_size_per_learner": 1000}']

Under load: ``--loops N`` runs N busy loops beside both sides (started here, stopped by pid), and
both sides get the same ``--env-runners`` and ``--sample-timeout`` (RLlib's ``sample_timeout_s``,
60 s by default: on a busy machine an iteration's sampling outlasted it, and RLlib's
``algo.train()`` then failed with "No samples returned from remote workers"). Each speed row says
the 1-minute load average before and after it.

Speed: PPO on CartPole-v1 (RLlib's defaults: 4,000-step iterations; one env runner; one torch
thread in the learner and the env runner; seed 1; a local Ray cluster of its own), run alternately
as a plain script in the worker's environment (`algo.train()` until the steps are done) and by
`mosaic run --worker rllib` (the callbacks, the metric bridge, heartbeats, TensorBoard files, a
final checkpoint). Each side's rate is env steps per second of its training iterations (RLlib's
`time_this_iter_s`; start-up left out), its wall time is the whole process (Ray's start-up
included), its memory the peak total RSS of every process of the run (the driver, Ray's GCS,
raylet and agents, the env runner). Best of `--repeats`. Overhead = 1 - mosaic / plain (goal <= 3 %).

Learning: PPO trains `--learning-steps` env steps through `mosaic run`; the env steps at which
RLlib's `episode_return_mean` first reached 500 (the run's `rllib/episode_return_mean` scalars).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from load import busy_loops  # bench/load.py (this script's folder is on sys.path)

MOSAIC = [sys.executable, "-m", "mosaic_core.cli.main"]
PLAIN = """
import json, logging, sys, time
import torch
torch.set_num_threads(1)
import ray
from ray.rllib.algorithms.ppo import PPOConfig
steps, folder = int(sys.argv[1]), sys.argv[2]
ray.init(address="local", _temp_dir=folder, include_dashboard=False, logging_level=logging.WARNING)
params = json.loads(sys.argv[3])
config = PPOConfig().environment("CartPole-v1").debugging(seed=1)
config.update_from_dict(params)
algo = config.build_algo()
done, seconds = 0, 0.0
while done < steps:
    result = algo.train()
    done = result["env_runners"]["num_env_steps_sampled_lifetime"]
    seconds += result["time_this_iter_s"]
algo.stop()
ray.shutdown()
print(json.dumps({"steps": done, "seconds": seconds}))
"""


def worker_python() -> str:
    from mosaic_core.environments import status
    from mosaic_core.workers import find_worker

    item = find_worker("rllib")
    found = status(item.obj, item.distribution)
    if not found.ready:
        sys.exit(f"bench/rllib.py: {found.detail}")
    return found.python


class PeakMemory:
    """The peak total RSS (MiB) of every process whose environment holds ``BENCH_TAG=<tag>``
    (Ray's processes of a local cluster inherit the driver's environment)."""

    def __init__(self, tag: str):
        self.marker = f"BENCH_TAG={tag}".encode()
        self.peak = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(0.5):
            total = 0
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    if self.marker not in Path(f"/proc/{entry}/environ").read_bytes():
                        continue
                    for line in Path(f"/proc/{entry}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
                except OSError:
                    continue
            self.peak = max(self.peak, total / 1024)


def plain(python: str, steps: int, env: dict[str, str], params: dict) -> tuple[float, float, float]:
    tag = uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="rl-") as folder, PeakMemory(tag) as memory:
        start = time.perf_counter()
        done = subprocess.run(
            [python, "-c", PLAIN, str(steps), folder, json.dumps(params)],
            env={**env, "BENCH_TAG": tag},
            capture_output=True,
            text=True,
            cwd=folder,
            start_new_session=True,
        )  # a session of its own, as mosaic run's training (bench/load.py)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"the plain RLlib script failed: {done.stderr[-800:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["steps"] / result["seconds"], wall, memory.peak


def events_of(run_dir: Path) -> list[dict]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    if events[-1]["event"] != "run_completed":
        sys.exit(f"mosaic run failed: {events[-1]}")
    return events


def mosaic_run(steps: int, env: dict[str, str], runs: Path, run_id: str, params: dict) -> tuple[float, float, float]:
    tag = uuid.uuid4().hex
    with PeakMemory(tag) as memory:
        start = time.perf_counter()
        subprocess.run(
            [
                *MOSAIC,
                "run",
                "--worker",
                "rllib",
                "--algo",
                "PPO",
                "--env-id",
                "CartPole-v1",
                "--total-timesteps",
                str(steps),
                "--seed",
                "1",
                "--extras",
                json.dumps({"algo_params": params}),
                "--runs-dir",
                str(runs),
                "--run-id",
                run_id,
                "--json",
                "--quiet",
            ],
            env={**env, "BENCH_TAG": tag},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - start
    events_of(runs / run_id)
    from mosaic_analytics.curves import read_scalars

    rates = read_scalars(runs / run_id, "charts/SPS")
    steps_at = [0] + list(rates.steps)
    seconds = sum((b - a) / rate for a, b, rate in zip(steps_at, rates.steps, rates.values))
    return rates.steps[-1] / seconds, wall, memory.peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20000, help="0 skips the speed rows")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--learning-steps", type=int, default=100000, help="0 skips the learning row")
    parser.add_argument("--env-runners", type=int, default=1, help="RLlib's num_env_runners, both sides")
    parser.add_argument("--sample-timeout", type=float, default=600.0, help="RLlib's sample_timeout_s, both sides")
    parser.add_argument("--loops", type=int, default=0, help="busy loops beside the speed rows (load)")
    parser.add_argument(
        "--params",
        type=json.loads,
        default={},
        help="more of PPOConfig, both sides (e.g. '{\"train_batch_size_per_learner\": 1000}')",
    )
    ns = parser.parse_args()
    params = {"num_env_runners": ns.env_runners, "sample_timeout_s": ns.sample_timeout, **ns.params}
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    python = worker_python()
    with tempfile.TemporaryDirectory(prefix="rl-") as folder:
        runs = Path(folder)
        if ns.steps:
            own, ours = [], []
            with busy_loops(ns.loops):
                before = os.getloadavg()[0]
                for repeat in range(ns.repeats):  # alternate, so a busy moment hits both sides alike
                    own.append(plain(python, ns.steps, env, params))
                    ours.append(mosaic_run(ns.steps, env, runs, f"speed-{repeat}", params))
                after = os.getloadavg()[0]
            own_rate, ours_rate = max(r[0] for r in own), max(r[0] for r in ours)
            own_wall, ours_wall = min(r[1] for r in own), min(r[1] for r in ours)
            print(
                f"load average {before:.1f} -> {after:.1f} ({ns.loops} busy loops of ours); PPOConfig: "
                f"{json.dumps(params)}"
            )
            print(
                f"{'PPO CartPole-v1, ' + str(ns.steps) + ' steps':34} {'env steps/s':>11} {'wall s':>8} {'peak MiB':>9}"
            )
            print(f"{'plain RLlib script':34} {own_rate:11.0f} {own_wall:8.1f} {max(r[2] for r in own):9.0f}")
            print(f"{'mosaic run --worker rllib':34} {ours_rate:11.0f} {ours_wall:8.1f} {max(r[2] for r in ours):9.0f}")
            print(
                f"overhead (env steps/s) {1 - ours_rate / own_rate:.1%}; wall ratio {ours_wall / own_wall:.2f}",
                flush=True,
            )
        if ns.learning_steps:
            from mosaic_analytics.curves import read_scalars

            mosaic_run(ns.learning_steps, env, runs, "learning", params)
            means = read_scalars(runs / "learning", "rllib/episode_return_mean")
            reached = next((step for step, value in zip(means.steps, means.values) if value >= 500), None)
            best = max(means.values)
            print(
                f"learning: PPO CartPole-v1 {ns.learning_steps} steps: episode_return_mean "
                + (f"reached 500 at {reached} env steps" if reached else f"peaked at {best:.1f} (NOT 500)")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
