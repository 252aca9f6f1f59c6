"""Helpers of the sweep tests: specs written to a temp dir, `mosaic sweep` run for real.

Every trial seed is a real `mosaic run` of the bundled ppo on CartPole-v1 with a tiny budget
(1024 steps: two PPO iterations), so each seed costs the start of a training process (~5-10 s
on 2 cores); the tests keep trials and seeds few.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, HOST_VARS

optuna = pytest.importorskip("optuna", reason="the [sweep] extra (optuna) is not installed")

TINY = """
algo = "ppo"
env_id = "CartPole-v1"
total_timesteps = 1024
seeds = 1
max_trials = 3
heartbeat_s = 1
{extra}

[objective]
metric = "charts/episodic_return"
last_n = 5

[sampler]
type = "random"
seed = 0

[pruner]
type = "none"

[params.learning_rate]
type = "float"
low = 1e-4
high = 1e-2
log = true
{params}
"""


def write_spec(directory: Path, name: str = "tiny", extra: str = "", params: str = "", text: str | None = None) -> Path:
    path = directory / f"{name}.toml"
    path.write_text(text if text is not None else TINY.format(extra=extra, params=params), encoding="utf-8")
    return path


def sweep_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS and not k.startswith("WANDB_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def sweep(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "mosaic"), "sweep", *args], cwd=cwd, env=sweep_env(), capture_output=True, text=True, timeout=timeout
    )


def start_sweep(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "mosaic"), "sweep", *args],
        cwd=cwd,
        env=sweep_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def load(study: str, storage: str):
    """The study as Optuna itself reads it back (journal path or RDB URL)."""
    if storage.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend

        handle = optuna.storages.JournalStorage(JournalFileBackend(storage.removeprefix("journal:")))
    else:
        handle = storage
    return optuna.load_study(study_name=study, storage=handle)


def manifest(runs_root: Path, run_id: str) -> dict:
    return json.loads((runs_root / run_id / "manifest.json").read_text())


def events(runs_root: Path, run_id: str) -> list[dict]:
    return [json.loads(line) for line in (runs_root / run_id / "events.jsonl").read_text().splitlines()]


def running_trial_of(study_name: str, db: Path, pid: int, timeout: float = 120) -> int:
    """Wait until sweep process ``pid`` has a RUNNING trial whose first seed's run has started and
    whose heartbeat Optuna has recorded (a trial without one is never found stale)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                with sqlite3.connect(db) as conn:
                    rows = conn.execute(
                        "SELECT t.number, a.value_json FROM trials t JOIN trial_user_attributes a "
                        "ON a.trial_id = t.trial_id JOIN trial_heartbeats h ON h.trial_id = t.trial_id "
                        "WHERE t.state = 'RUNNING' AND a.key = 'process'"
                    ).fetchall()
            except sqlite3.OperationalError:
                rows = []
            for number, label in rows:
                if json.loads(label).endswith(f":{pid}"):
                    return number
        time.sleep(0.3)
    raise AssertionError(f"sweep process {pid} never ran a trial")


def processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is inside ``directory`` (the sweeps, their
    `mosaic run` hosts, and the training processes, whose cwd is their run directory)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if (cwd == str(directory) or cwd.startswith(f"{directory}/")) and state != b"Z":
            found.append(int(entry))
    return found
