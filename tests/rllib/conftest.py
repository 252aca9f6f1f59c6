"""Helpers to run the RLlib worker; its environment is the session's ``rllib_env`` (tests/conftest.py:
built once per test session by ``mosaic workers install rllib --extras atari,mujoco``)."""

import json
import os
import subprocess
import sys
from pathlib import Path

MOSAIC = [sys.executable, "-m", "mosaic_core.cli.main"]
# Tiny iterations: 500 env steps each, one env runner (a test checks the plumbing, not the learning).
SMALL = {"num_env_runners": 1, "train_batch_size_per_learner": 500, "minibatch_size": 128, "num_epochs": 2}


def run_args(run_id, runs_dir, algo="PPO", total=1000, extras=None, env_id="CartPole-v1", params=None, more=()):
    extras = {"algo_params": {**(SMALL if algo == "PPO" else {}), **(params or {})}, **(extras or {})}
    return [
        *MOSAIC,
        "run",
        "--worker",
        "rllib",
        "--algo",
        algo,
        "--env-id",
        env_id,
        "--total-timesteps",
        str(total),
        "--extras",
        json.dumps(extras),
        "--runs-dir",
        str(runs_dir),
        "--run-id",
        run_id,
        "--json",
        "--heartbeat-interval",
        "1",
        *more,
    ]


def run_mosaic(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The command line ``args`` run to its end under ``env`` (the RLlib worker's environment found):
    its output captured, no stdin."""
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def refuse(args: list[str], env: dict[str, str], words: str, run_dir: Path) -> None:
    """``mosaic run ARGS`` in the RLlib worker's environment is refused: exit 2, one line on stderr
    with ``words`` in it, no traceback, and no ``run_dir`` made."""
    done = run_mosaic(args, env, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in done.stderr, done.stderr
    assert not run_dir.exists()


def events_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


def ray_pids(run_dir: Path, training_pid: int) -> set[int]:
    """Every process of the run's local Ray cluster: the training process's process group, the
    processes that carry the run's context in their environment (GCS, raylet, agents: in process
    groups of their own, and still found once orphaned) and the workers Ray started (their pids end
    the names of their log files)."""
    pids = {training_pid}
    for log in (run_dir / "ray").glob("session_*/logs/*"):
        tail = log.stem.rsplit("-", 1)[-1].rsplit("_", 1)[-1]
        if tail.isdigit() and (log.name.startswith("worker-") or log.name.startswith("python-core-worker-")):
            pids.add(int(tail))
    context = f'"run_dir": {json.dumps(str(run_dir))}'.encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if int(fields[2]) == training_pid or any(
                item.startswith(b"MOSAIC_CHILD=") and context in item for item in environ.split(b"\0")
            ):
                pids.add(int(entry))
    return pids


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")
