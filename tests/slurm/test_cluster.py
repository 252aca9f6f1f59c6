"""The test cluster itself: a job runs on it with the CPUs it asked for."""

from __future__ import annotations

import subprocess
import time


def test_a_job_runs_with_its_cpus(slurm, tmp_path):
    out = tmp_path / "job.out"
    job = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-c",
            "2",
            "-o",
            str(out),
            "--wrap",
            "echo cpus=$SLURM_CPUS_PER_TASK restarts=${SLURM_RESTART_COUNT:-0}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deadline = time.monotonic() + 60
    while any(line.startswith(job + " ") for line in slurm.jobs()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.read_text().strip() == "cpus=2 restarts=0"
    assert slurm.idle()
