"""Resume, measured: per case, an uninterrupted `mosaic run` next to the same run SIGTERMed near
its middle and continued with `mosaic resume` (CleanRL's bundled PPO and DQN on CartPole).

Run by hand: .venv/bin/python bench/resume.py [--case ppo --case dqn] [--scale 1.0]

Prints, per case: wall time of the whole run and of the two attempts together (process start-up
counted twice), the steps the stop landed at, the cost of the stop's save (from SIGTERM to the
run's end) and of the restore (from `mosaic resume` to the first metric), the checkpoint's size,
and the mean episodic return of the last 20 episodes of both runs (equal when the resume is
exact). Nothing is mocked: real runs under a temporary runs root, removed at the end.
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
# case: (algo, steps, extras)
CASES = {
    "ppo": ("ppo", 40_000, {"num_envs": 4, "num_steps": 128, "cuda": False}),
    "dqn": (
        "dqn",
        20_000,
        {"learning_starts": 2000, "target_network_frequency": 200, "save_replay_buffer": True, "cuda": False},
    ),
}


def events(root: Path, run_id: str) -> list[dict]:
    try:
        lines = (root / run_id / "events.jsonl").read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def argv(root: Path, run_id: str, algo: str, steps: int, extras: dict) -> list[str]:
    return [
        str(MOSAIC),
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        algo,
        "--env-id",
        "CartPole-v1",
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


def last_returns(root: Path, run_id: str, count: int = 20) -> float:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (folder,) = {p.parent for p in (root / run_id / "runs").rglob("events.out.tfevents.*")}
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    values = [e.value for e in accumulator.Scalars("charts/episodic_return")][-count:]
    return sum(values) / len(values)


def case(root: Path, name: str, scale: float) -> dict:
    algo, steps, extras = CASES[name]
    steps = max(4096, int(steps * scale))
    started = time.perf_counter()
    subprocess.run(argv(root, "whole", algo, steps, extras), check=True, capture_output=True)
    whole = time.perf_counter() - started

    started = time.perf_counter()
    process = subprocess.Popen(
        argv(root, "cut", algo, steps, extras), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
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
        "checkpoint_mb": round(Path(cancelled["checkpoint"]).stat().st_size / 1e6, 2),
        "return_whole": round(last_returns(root, "whole"), 2),
        "return_resumed": round(last_returns(root, "cut"), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--scale", type=float, default=1.0)
    ns = parser.parse_args()
    rows = []
    for name in ns.case or sorted(CASES):
        root = Path(tempfile.mkdtemp(prefix="mosaic-bench-resume-"))
        try:
            rows.append(case(root, name, ns.scale))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(json.dumps(rows[-1]), file=sys.stderr)
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    print(f"(cpu: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
