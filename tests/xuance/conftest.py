"""Helpers to run the XuanCe worker; its environment is the session's ``xuance_env`` (tests/conftest.py:
built once per test session by ``mosaic workers install xuance``)."""

import json
import sys
from pathlib import Path

MOSAIC = [sys.executable, "-m", "mosaic_core.cli.main"]
SPREAD = "mpe/simple_spread_v3"
SMALL = {"parallels": 4, "vectorize": "DummyVecMultiAgentEnv"}  # four envs in the training process


def run_args(run_id, runs_dir, algo="mappo", total=2000, extras=None, env_id=SPREAD, more=()):
    return [
        *MOSAIC,
        "run",
        "--worker",
        "xuance",
        "--algo",
        algo,
        "--env-id",
        env_id,
        "--total-timesteps",
        str(total),
        "--extras",
        json.dumps({**SMALL, **(extras or {})}),
        "--runs-dir",
        str(runs_dir),
        "--run-id",
        run_id,
        "--json",
        "--heartbeat-interval",
        "1",
        *more,
    ]


def events_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
