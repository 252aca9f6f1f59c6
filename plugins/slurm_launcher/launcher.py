"""The Slurm launcher's descriptor (its plugin's ``mosaic_launchers`` returns it): options only, no subprocess."""

from __future__ import annotations

from mosaic_core.launchers import LauncherInfo, LauncherOption

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


def get_launcher_info() -> LauncherInfo:
    return LauncherInfo(
        name="slurm",
        description="run as a Slurm job (sbatch; the runs root on storage the nodes share)",
        options=OPTIONS,
        execute="mosaic_slurm.caller:execute",
        validate="mosaic_slurm.sbatch:validate",
        launch_many="mosaic_slurm.batch:launch_many",
    )
