"""The Slurm launcher (its plugin's ``mosaic_launchers`` returns it): its options, and methods that
import its modules only when a run uses it."""

from __future__ import annotations

from typing import Any

from mosaic_core.launchers import Batch, Job, Launcher, LauncherOption

OPTIONS = (
    LauncherOption(
        "--slurm-partition",
        "MOSAIC_SLURM_PARTITION",
        metavar="P",
        help="the partition the job goes to (default: the cluster's default partition)",
    ),
    LauncherOption(
        "--slurm-time",
        "MOSAIC_SLURM_TIME",
        metavar="LIMIT",
        help="the job's time limit, as sbatch --time takes it (4:00:00, 1-00:00, 30)",
    ),
    LauncherOption("--slurm-mem", "MOSAIC_SLURM_MEM", metavar="SIZE", help="memory per node (sbatch --mem: 8G)"),
    LauncherOption(
        "--slurm-account", "MOSAIC_SLURM_ACCOUNT", metavar="A", help="the account charged (sbatch --account)"
    ),
    LauncherOption("--slurm-qos", "MOSAIC_SLURM_QOS", metavar="Q", help="quality of service (sbatch --qos)"),
    LauncherOption(
        "--slurm-extra",
        "MOSAIC_SLURM_EXTRA",
        metavar="'ARGS'",
        help="more sbatch options, as a shell would split them (e.g. '--constraint=a100 --nice=10')",
    ),
    LauncherOption(
        "--slurm-grace",
        "MOSAIC_SLURM_GRACE",
        metavar="SECONDS",
        help="SIGUSR1 this long before the time limit or a preemption: the run checkpoints and the "
        "requeued job resumes it (default 120)",
    ),
    LauncherOption(
        "--slurm-array-limit",
        "MOSAIC_SLURM_ARRAY_LIMIT",
        metavar="N",
        help="a batch (a sweep's trials) runs as one job array, at most N jobs at a time (default: all)",
    ),
    LauncherOption(
        "--detach",
        "MOSAIC_SLURM_DETACH",
        switch=True,
        run_only=True,
        help="submit, print the job id and return; `mosaic logs -f RUN` follows the run later",
    ),
)


class SlurmLauncher(Launcher):
    name = "slurm"
    description = "run as a Slurm job (sbatch; the runs root on storage the nodes share)"
    options = OPTIONS

    def execute(self, job: Job) -> int:
        from mosaic_slurm import caller

        return caller.execute(job)

    def validate(self, settings: dict[str, Any], num_cpus: int | None) -> list[str]:
        from mosaic_slurm import sbatch

        return sbatch.validate(settings, num_cpus)

    def launch_many(self, settings: dict[str, Any], batch: Batch) -> int:
        from mosaic_slurm import batch as array

        return array.launch_many(settings, batch)
