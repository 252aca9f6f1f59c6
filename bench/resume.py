"""Resume, measured: per case, an uninterrupted `mosaic run` next to the same run SIGTERMed near
its middle and continued with `mosaic resume`, per worker: CleanRL's bundled PPO, DQN and C51 on
CartPole (DQN with its defaults, and without its replay buffer), its PPO (continuous), SAC, TD3 and
DDPG on Pendulum, RLlib's PPO, APPO, IMPALA and DQN on CartPole and its SAC on Pendulum, XuanCe's
MAPPO on MPE simple_spread (RLlib's and XuanCe's need their worker environments: `mosaic workers
install rllib|xuance`; a case whose worker is not ready is skipped, saying so).

Run by hand: .venv/bin/python bench/resume.py [--case ppo --case rllib-ppo …] [--scale 1.0]

Prints, per case: wall time of the whole run and of the two attempts together (process start-up
counted twice), the steps the stop landed at, the cost of the stop's save (from SIGTERM to the
run's end) and of the restore (from `mosaic resume` to the first metric), the checkpoint's size,
the episodes each run ended, the mean episodic return of the last 20 episodes of both runs, and
whether every episode's return is equal (the resume is exact) or the first episode where they
part. Where sampling is asynchronous (RLlib's APPO and IMPALA), and for every case with
`--whole-twice`, the whole run is made twice, and `whole_twice_equal` says whether two
uninterrupted runs give the same episodes (elsewhere: null, not run). Nothing is mocked: real runs under a temporary runs root, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MOSAIC = Path(sys.executable).parent / "mosaic"
ASYNCHRONOUS = ("APPO", "IMPALA")  # RLlib's: which runner's batch the learner takes first depends on timing
# case: (worker, algo, env, steps, extras)
CASES = {
    "ppo": ("cleanrl", "ppo", "CartPole-v1", 40_000, {"num_envs": 4, "num_steps": 128, "cuda": False}),
    "dqn": (  # its defaults: the replay buffer is kept
        "cleanrl",
        "dqn",
        "CartPole-v1",
        20_000,
        {"learning_starts": 2000, "target_network_frequency": 200, "cuda": False},
    ),
    "dqn-no-buffer": (  # opted out: the resume refills the buffer for learning_starts steps first
        "cleanrl",
        "dqn",
        "CartPole-v1",
        20_000,
        {"learning_starts": 2000, "target_network_frequency": 200, "save_replay_buffer": False, "cuda": False},
    ),
    "c51": (
        "cleanrl",
        "c51",
        "CartPole-v1",
        20_000,
        {"learning_starts": 2000, "target_network_frequency": 200, "cuda": False},
    ),
    "ppo_continuous_action": (
        "cleanrl",
        "ppo_continuous_action",
        "Pendulum-v1",
        20_480,
        {"num_steps": 512, "cuda": False},
    ),
    **{
        algo: ("cleanrl", algo, "Pendulum-v1", 8_000, {"learning_starts": 1000, "cuda": False})
        for algo in ("sac_continuous_action", "td3_continuous_action", "ddpg_continuous_action")
    },
    "rllib-ppo": (
        "rllib",
        "PPO",
        "CartPole-v1",
        20_000,
        {"algo_params": {"num_env_runners": 1, "train_batch_size_per_learner": 1000, "minibatch_size": 128}},
    ),
    **{
        f"rllib-{algo.lower()}": (
            "rllib",
            algo,
            "CartPole-v1",
            20_000,
            {"algo_params": {"num_env_runners": 1, "train_batch_size_per_learner": 500}},
        )
        for algo in ASYNCHRONOUS
    },
    "rllib-dqn": (
        "rllib",
        "DQN",
        "CartPole-v1",
        20_000,
        {"algo_params": {"num_steps_sampled_before_learning_starts": 1000, "min_sample_timesteps_per_iteration": 1000}},
    ),
    "rllib-sac": (
        "rllib",
        "SAC",
        "Pendulum-v1",
        4_096,  # 20 episodes: an update per env step makes RLlib's SAC the slowest case by far
        {"algo_params": {"num_steps_sampled_before_learning_starts": 512, "min_sample_timesteps_per_iteration": 256}},
    ),
    "xuance-mappo": ("xuance", "mappo", "mpe/simple_spread_v3", 20_000, {"parallels": 4}),
}


def events(root: Path, run_id: str) -> list[dict]:
    try:
        lines = (root / run_id / "events.jsonl").read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def argv(root: Path, run_id: str, worker: str, algo: str, env: str, steps: int, extras: dict) -> list[str]:
    return [
        str(MOSAIC),
        "run",
        "--worker",
        worker,
        "--algo",
        algo,
        "--env-id",
        env,
        "--total-timesteps",
        str(steps),
        "--seed",
        "1",
        "--run-id",
        run_id,
        "--runs-dir",
        str(root),
        "--json",
        "--quiet",
        "--extras",
        json.dumps(extras),
    ]


def episode_returns(root: Path, run_id: str) -> list[float]:
    """Every episode's return in step order, through the core's one per-episode reader (a resumed
    run's attempts as one history; the team return for XuanCe)."""
    from mosaic_core.runstore.score import episode_returns as read

    returns = [value for _step, value in read(root / run_id)]
    if not returns:
        raise SystemExit(f"no charts/episodic_return in {root / run_id}'s TensorBoard files")
    return returns


def compared(whole: list[float], resumed: list[float], last: int = 20) -> dict:
    """The mean of the last ``last`` episodes of both runs, whether every episode's return is equal,
    and the first episode where they part (None: none)."""
    parted = next((i for i, (a, b) in enumerate(zip(whole, resumed)) if a != b), None)
    if parted is None and len(whole) != len(resumed):
        parted = min(len(whole), len(resumed))
    return {
        "episodes": f"{len(whole)}/{len(resumed)}",
        "return_whole": round(sum(whole[-last:]) / len(whole[-last:]), 2),
        "return_resumed": round(sum(resumed[-last:]) / len(resumed[-last:]), 2),
        "equal": parted is None,
        "first_unequal_episode": parted,
    }


def size_mb(path: Path) -> float:
    """A checkpoint's size: a file, or a directory's files (RLlib's)."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6


def worker_ready(worker: str) -> bool:
    listed = subprocess.run([str(MOSAIC), "workers", "--json"], capture_output=True, text=True, check=True)
    found = [w for w in json.loads(listed.stdout) if w["name"] == worker]
    return bool(found) and (found[0].get("environment_status") or {"state": "host"})["state"] in ("ready", "host")


def case(root: Path, name: str, scale: float, whole_twice: bool = False) -> dict:
    worker, algo, env, steps, extras = CASES[name]
    steps = max(4096, int(steps * scale))
    started = time.perf_counter()
    subprocess.run(argv(root, "whole", worker, algo, env, steps, extras), check=True, capture_output=True)
    whole = time.perf_counter() - started
    twice = None
    if whole_twice or (algo in ASYNCHRONOUS and worker == "rllib"):
        subprocess.run(argv(root, "whole-2", worker, algo, env, steps, extras), check=True, capture_output=True)
        twice = episode_returns(root, "whole") == episode_returns(root, "whole-2")

    started = time.perf_counter()
    process = subprocess.Popen(
        argv(root, "cut", worker, algo, env, steps, extras), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    while process.poll() is None:
        reported = [e["payload"].get("global_step") for e in events(root, "cut") if e["event"] == "metrics"]
        if any(isinstance(s, int) and s >= steps // 2 for s in reported):
            break
        time.sleep(0.1)
    signalled = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    process.wait()
    save_s = time.perf_counter() - signalled
    first = time.perf_counter() - started
    cancelled = events(root, "cut")[-1]["payload"]
    resumed_at = time.perf_counter()
    resume = subprocess.Popen(
        [str(MOSAIC), "resume", "cut", "--runs-dir", str(root), "--json", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    restore_s = None
    seen = len(events(root, "cut"))
    while resume.poll() is None:
        if restore_s is None and any(e["event"] == "metrics" for e in events(root, "cut")[seen:]):
            restore_s = time.perf_counter() - resumed_at
        time.sleep(0.05)
    second = time.perf_counter() - resumed_at
    return {
        "case": name,
        "steps": steps,
        "whole_s": round(whole, 1),
        "stopped_plus_resumed_s": round(first + second, 1),
        "stopped_at": cancelled.get("from_step"),
        "save_on_stop_s": round(save_s, 2),
        "resume_to_first_metric_s": None if restore_s is None else round(restore_s, 1),
        "checkpoint_mb": round(size_mb(Path(cancelled["checkpoint"])), 2),
        **compared(episode_returns(root, "whole"), episode_returns(root, "cut")),
        "whole_twice_equal": twice,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--whole-twice", action="store_true", help="run each whole run twice (is it repeatable?)")
    ns = parser.parse_args()
    rows = []
    for name in ns.case or list(CASES):
        if not worker_ready(CASES[name][0]):
            print(f"{name}: skipped, the {CASES[name][0]} worker is not ready (mosaic workers)", file=sys.stderr)
            continue
        root = Path(tempfile.mkdtemp(prefix="mosaic-bench-resume-"))
        try:
            rows.append(case(root, name, ns.scale, ns.whole_twice))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(json.dumps(rows[-1]), file=sys.stderr)
    if not rows:
        raise SystemExit("no case ran: each one's worker is not ready (mosaic workers)")
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    print(f"(cpu: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
