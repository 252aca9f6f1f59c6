"""Hook implementations of the sweep plugin: only the ``mosaic sweep`` command.

Each trial's seed is a normal ``mosaic run`` subprocess, so nothing of the sweep runs inside
a run; trial metadata reaches the run as ``optuna_*`` extras, which the analytics plugin
validates and records in the manifest's ``optuna`` section.
"""

from __future__ import annotations

from mosaic_core.hookspecs import hookimpl


@hookimpl
def mosaic_cli_commands():
    from mosaic_sweep.cli import COMMANDS

    return list(COMMANDS)
