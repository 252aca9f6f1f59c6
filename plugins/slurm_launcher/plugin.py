"""The Slurm launcher's plugin module: it provides the launcher
(:class:`mosaic_slurm.launcher.SlurmLauncher`: options, and methods that import the rest when used)."""

from __future__ import annotations

from mosaic_core import hookimpl


@hookimpl
def mosaic_launchers():
    from mosaic_slurm.launcher import SlurmLauncher

    return [SlurmLauncher()]
