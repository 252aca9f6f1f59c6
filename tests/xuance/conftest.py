"""The XuanCe worker's environment, built once per test session by ``mosaic workers install xuance``
(under the session's private ``$MOSAIC_VENVS``, tests/conftest.py: CI's shared ``$MOSAIC_TEST_VENVS``, else a temp
dir), and helpers to run it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MOSAIC = [sys.executable, "-m", "mosaic_core.cli.main"]
SPREAD = "mpe/simple_spread_v3"
SMALL = {"parallels": 4, "vectorize": "DummyVecMultiAgentEnv"}  # four envs in the training process


@pytest.fixture(scope="session")
def xuance_env():
    """The environment variables under which `mosaic` finds the built XuanCe environment."""
    env = dict(os.environ)  # $MOSAIC_VENVS: the session's (tests/conftest.py private_user_state)
    env.pop("MOSAIC_RUNS_DIR", None)
    done = subprocess.run(
        [*MOSAIC, "workers", "install", "xuance"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"mosaic workers install xuance failed: {done.stderr[-2000:]}"
    return env


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
