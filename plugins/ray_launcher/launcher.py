"""The Ray launcher's descriptor (its plugin's ``mosaic_launchers`` returns it): options only, no Ray import."""

from __future__ import annotations

from mosaic_core.launchers import LauncherInfo, LauncherOption

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


def get_launcher_info() -> LauncherInfo:
    return LauncherInfo(
        name="ray",
        description="run on a node of an existing Ray cluster (pip install 'mosaic-rl[ray]')",
        options=OPTIONS,
        execute="mosaic_ray.caller:execute",
        capacity="mosaic_ray.cluster:capacity",
        start_early="mosaic_ray.caller:start_early",
        validate="mosaic_ray.cluster:validate",
    )
