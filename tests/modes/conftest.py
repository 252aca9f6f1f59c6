"""Checkpoints made for real: the bundled algorithms trained briefly with ``--save-model``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ALGORITHMS = Path(__file__).resolve().parents[2] / "plugins" / "cleanrl_worker" / "algorithms"


def train(workdir: Path, algo: str, *flags: str) -> Path:
    """Run a bundled algorithm script with ``--save-model`` in ``workdir``; its checkpoint's path."""
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(ALGORITHMS / f"{algo}.py"), "--save-model", "--no-cuda", *flags],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (path,) = workdir.glob(f"runs/*/{algo}.cleanrl_model")
    return path


@pytest.fixture(scope="session")
def ppo_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PPO (MLP agent) on CartPole-v1 after 2,048 steps."""
    return train(tmp_path_factory.mktemp("ppo"), "ppo", "--env-id", "CartPole-v1", "--total-timesteps", "2048")


@pytest.fixture(scope="session")
def minigrid_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PPO (MiniGrid CNN agent) on MiniGrid-Empty-5x5-v0 after 256 steps."""
    return train(
        tmp_path_factory.mktemp("minigrid"),
        "ppo",
        "--env-id",
        "MiniGrid-Empty-5x5-v0",
        "--total-timesteps",
        "256",
        "--num-envs",
        "2",
        "--num-steps",
        "128",
    )


@pytest.fixture(scope="session")
def continuous_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ppo_continuous_action on Pendulum-v1 (observation normalisation saved) after 256 steps."""
    return train(
        tmp_path_factory.mktemp("continuous"),
        "ppo_continuous_action",
        "--env-id",
        "Pendulum-v1",
        "--total-timesteps",
        "256",
        "--num-steps",
        "128",
    )
