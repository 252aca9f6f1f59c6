"""The Ray launcher (its plugin's ``mosaic_launchers`` returns it): its options, and methods that
import Ray only when a run uses it."""

from __future__ import annotations

from typing import Any

from mosaic_core.launchers import Job, Launcher, LauncherOption

ADDRESS = LauncherOption(
    "--ray-address",
    "MOSAIC_RAY_ADDRESS",
    metavar="HOST:PORT",
    selects=True,
    help="run on this Ray cluster (its GCS address, as `ray start --head` prints it; or ray://HOST:PORT)",
)
OPTIONS = (
    ADDRESS,
    LauncherOption(
        "--ray-num-cpus",
        "MOSAIC_RAY_NUM_CPUS",
        metavar="N",
        help="CPUs the run asks of the cluster (default: the run's --num-cpus, else 1); its threads follow",
    ),
    LauncherOption(
        "--ray-resources",
        "MOSAIC_RAY_RESOURCES",
        metavar="JSON",
        help="custom resources the run asks for, e.g. '{\"nodeB\": 1}' to pick a node",
    ),
    LauncherOption(
        "--ray-env",
        "MOSAIC_RAY_ENV",
        metavar="NAME,…",
        help="environment variables of this shell the run gets on the node (e.g. WANDB_API_KEY)",
    ),
    LauncherOption(
        "--ray-shared-runs",
        "MOSAIC_RAY_SHARED_RUNS",
        switch=True,
        help="--runs-dir is storage every node shares: the node writes the run there directly",
    ),
    LauncherOption(
        "--ray-retries",
        "MOSAIC_RAY_RETRIES",
        metavar="N",
        help="times a run whose node died is started again elsewhere (default 1)",
    ),
)


class RayLauncher(Launcher):
    name = "ray"
    description = "run on a node of an existing Ray cluster (pip install 'mosaic-rl[ray]')"
    options = OPTIONS

    def execute(self, job: Job) -> int:
        from mosaic_ray import caller

        return caller.execute(job)

    def validate(self, settings: dict[str, Any], num_cpus: int | None) -> list[str]:
        from mosaic_ray import cluster

        return cluster.validate(settings, num_cpus)

    def capacity(self, settings: dict[str, Any]) -> tuple[int, str] | None:
        from mosaic_ray import cluster

        return cluster.capacity(settings)

    def start_early(self, settings: dict[str, Any], num_cpus: int | None) -> Any:
        from mosaic_ray import caller

        return caller.start_early(settings, num_cpus)
