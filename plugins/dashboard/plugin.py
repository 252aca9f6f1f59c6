"""Hook implementations of the dashboard plugin: it contributes one CLI command, ``mosaic serve``."""

from __future__ import annotations

from mosaic_core import hookimpl


@hookimpl
def mosaic_cli_commands():
    from mosaic_dashboard.cli import command

    return [command()]
