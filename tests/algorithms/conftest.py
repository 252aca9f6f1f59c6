"""Run the bundled algorithm scripts for real (subprocesses, tiny budgets) and read what they wrote."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import once_per_session

ALGORITHMS = Path(__file__).resolve().parents[2] / "plugins" / "cleanrl_worker" / "algorithms"

# Flags that keep each algorithm's run to a few seconds on a busy CPU.
TINY = {
    "ppo": ["--env-id", "CartPole-v1", "--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "128"],
    "ppo_continuous_action": [
        "--env-id",
        "Pendulum-v1",
        "--total-timesteps",
        "512",
        "--num-steps",
        "256",
        "--num-minibatches",
        "4",
        "--update-epochs",
        "2",
    ],
    "dqn": [
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1000",
        "--learning-starts",
        "200",
        "--target-network-frequency",
        "100",
    ],
    "c51": [
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1000",
        "--learning-starts",
        "200",
        "--target-network-frequency",
        "100",
    ],
    "sac_continuous_action": [
        "--env-id",
        "Pendulum-v1",
        "--total-timesteps",
        "450",
        "--learning-starts",
        "300",
        "--batch-size",
        "32",
        "--buffer-size",
        "1000",
    ],
    "td3_continuous_action": [
        "--env-id",
        "Pendulum-v1",
        "--total-timesteps",
        "450",
        "--learning-starts",
        "300",
        "--batch-size",
        "32",
        "--buffer-size",
        "1000",
    ],
    "ddpg_continuous_action": [
        "--env-id",
        "Pendulum-v1",
        "--total-timesteps",
        "450",
        "--learning-starts",
        "300",
        "--batch-size",
        "32",
        "--buffer-size",
        "1000",
    ],
}


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    cwd: Path

    def run_dirs(self) -> list[Path]:
        return sorted(p for p in (self.cwd / "runs").glob("*") if p.is_dir()) if (self.cwd / "runs").exists() else []

    @property
    def run_dir(self) -> Path:
        (only,) = self.run_dirs()
        return only


def run_algo(algo: str, *flags: str, cwd: Path, timeout: float = 240) -> Run:
    """``python <bundled algo>.py --no-cuda FLAGS`` in ``cwd`` with this interpreter (so its gymnasium)."""
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(ALGORITHMS / f"{algo}.py"), "--no-cuda", *flags],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr, cwd)


def run_ok(algo: str, *flags: str, cwd: Path) -> Run:
    run = run_algo(algo, *flags, cwd=cwd)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of a run's TensorBoard files, read back with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def assert_one_line_error(run: Run, *words: str) -> None:
    assert run.returncode != 0
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), run.stderr
    assert "Traceback" not in run.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def run_parallel(jobs: dict[str, tuple], workers: int = 4) -> dict[str, Run]:
    """Run ``{key: (algo, flags, cwd)}`` a few at a time (the scripts are mostly start-up and waiting)."""
    with ThreadPoolExecutor(workers) as pool:
        futures = {key: pool.submit(run_algo, algo, *flags, cwd=cwd) for key, (algo, flags, cwd) in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


CHECKPOINT_EVERY = {"ppo": 512, "ppo_continuous_action": 256, "dqn": 500, "c51": 500}


@pytest.fixture(scope="session")
def smoke_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every bundled algorithm run once with TINY flags, --save-model, --checkpoint-frequency and
    --eval-frequency (the same period, 2 episodes per evaluation); once per test session, whichever
    pytest-xdist process asks first."""
    return once_per_session(
        tmp_path_factory,
        "smoke_runs",
        lambda: _smoke_runs(tmp_path_factory),
        lambda runs: {key: [run.returncode, run.stdout, run.stderr, str(run.cwd)] for key, run in runs.items()},
        lambda kept: {key: Run(code, out, err, Path(cwd)) for key, (code, out, err, cwd) in kept.items()},
    )


def _smoke_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("smoke")
    jobs = {
        algo: (
            algo,
            [
                *flags,
                "--save-model",
                "--checkpoint-frequency",
                str(CHECKPOINT_EVERY.get(algo, 200)),
                "--eval-frequency",
                str(CHECKPOINT_EVERY.get(algo, 200)),
                "--eval-episodes",
                "2",
            ],
            root / algo,
        )
        for algo, flags in TINY.items()
    }
    return run_parallel(jobs)


@pytest.fixture(scope="session")
def ppo_checkpoint(smoke_runs: dict[str, Run]) -> Path:
    """A PPO CartPole-v1 checkpoint saved by --save-model (global_step 1024)."""
    return smoke_runs["ppo"].run_dir / "ppo.cleanrl_model"


@pytest.fixture(scope="session")
def dqn_checkpoint(smoke_runs: dict[str, Run]) -> Path:
    """A DQN CartPole-v1 checkpoint saved by --save-model (global_step 1000)."""
    return smoke_runs["dqn"].run_dir / "dqn.cleanrl_model"
