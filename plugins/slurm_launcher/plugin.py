"""The Slurm launcher's plugin module: it provides the launcher (its descriptor,
:func:`mosaic_slurm.launcher.get_launcher_info`: options only, no subprocess)."""

from __future__ import annotations

from mosaic_core import hookimpl


@hookimpl
def mosaic_launchers():
    from mosaic_slurm.launcher import get_launcher_info

    return [get_launcher_info()]
