"""The Slurm launcher meets the launcher contract (mosaic_core.testing.launcher_suite) on the real
one-node Slurm cluster (tests/slurm/conftest.py): a run as a job, a stop and its resume, bad
options (sbatch --test-only's words), a sweep's trials as one job array. What is Slurm's own:
test_slurm_run.py, test_slurm_preemption.py, test_slurm_batches.py."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from mosaic_core.testing.launcher_suite import LauncherContractSuite


class TestSlurmLauncherContract(LauncherContractSuite):
    launcher = "slurm"
    bad_options = [
        (("--slurm-partition", "nope"), "Invalid partition name specified"),
        (("--num-cpus", "64"), "Requested node configuration is not available"),
        (("--slurm-time", "1:00"), "--slurm-time 1:00 is not longer than the grace period (120 s, --slurm-grace)"),
        (("--slurm-extra=--constraint='a100",), "--slurm-extra"),  # a quote left open
    ]
    sweep_trials = 4
    sweep_flags = ("--slurm-array-limit", "2")
    timeout = 600.0

    @pytest.fixture
    def launcher_flags(self, slurm, no_jobs_left) -> list[str]:
        self.slurm = slurm
        return ["--launcher", "slurm", "--slurm-time", "10:00"]

    def left_at_place(self, run_id: str) -> list[str]:
        return [job for job in self.slurm.jobs() if run_id in job]  # its job is named mosaic-RUN_ID

    def check_sweep(self, done: subprocess.CompletedProcess[str], run_dirs: list[Path]) -> None:
        found = re.search(r"4 commands as Slurm job array (\d+) \(0-3%2\)", done.stderr)
        assert found, done.stderr[-3000:]
        (folder,) = (self.runs_root / ".jobs").iterdir()
        assert sorted(p.name for p in folder.glob("task-*.rc")) == [f"task-{i}.rc" for i in range(4)]
        assert len(list(folder.glob(f"task-{found.group(1)}_*.out"))) == 4  # each trial a task of the one array
        assert (folder / "spec.toml").read_text() == (self.folder / "spec.toml").read_text()  # the tasks' own copy
