"""`mosaic experiment run … --launcher slurm` on the real one-node Slurm cluster: a tiny 2-seed
spec (the bundled ppo on CartPole), each seed's run a Slurm job followed to its end; a second
`experiment run` runs nothing. Bad launcher settings are refused before anything runs."""

from __future__ import annotations

import json

from tests.conftest import run_cli
from tests.slurm.test_slurm_run import processes_of

SPEC = """
name = "on-slurm"
seeds = [1, 2]
total_timesteps = 512
parallel = 2

[[group]]
worker = "cleanrl"
algo = "ppo"
env = "CartPole-v1"
extras = { num_envs = 1, num_steps = 128 }
"""


def test_an_experiments_seeds_run_as_slurm_jobs(slurm, no_jobs_left, tmp_path):
    (tmp_path / "spec.toml").write_text(SPEC)
    root = tmp_path / "runs"
    done = run_cli(
        ["experiment", "run", "spec.toml", "--runs-dir", str(root), "--launcher", "slurm", "--slurm-time", "10:00"],
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    assert len(runs) == 2, runs
    for run_dir in runs:
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        assert events[0]["payload"]["node"].startswith("slurm job ") and events[-1]["event"] == "run_completed"
        assert list((run_dir / "slurm").glob("job-*.out"))
        assert not processes_of(run_dir.name)
    again = run_cli(["experiment", "run", "spec.toml", "--runs-dir", str(root), "--launcher", "slurm"], cwd=tmp_path)
    assert again.returncode == 0 and "2 of 2 runs completed already" in again.stderr, again.stderr


def test_a_partition_slurm_refuses_starts_nothing(slurm, no_jobs_left, tmp_path):
    (tmp_path / "spec.toml").write_text(SPEC)
    root = tmp_path / "runs"
    done = run_cli(
        ["experiment", "run", "spec.toml", "--runs-dir", str(root), "--launcher", "slurm", "--slurm-partition", "nope"],
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("mosaic: note:")]
    assert len(lines) == 1 and "Invalid partition name specified" in lines[0], done.stderr
    assert not root.exists() or not any(root.iterdir())
