"""Hook implementations of the sweep plugin: the ``mosaic sweep`` command and the ``optuna_*``
extras keys it owns.

Each trial's seed is a normal ``mosaic run`` subprocess, so nothing of the sweep runs inside
a run; trial metadata reaches the run as ``optuna_*`` extras, which this plugin declares,
validates and records in the manifest's ``optuna`` section (:mod:`mosaic_sweep.extras`).
"""

from __future__ import annotations

from mosaic_core import hookimpl


@hookimpl
def mosaic_cli_commands():
    from mosaic_sweep.cli import COMMANDS

    return list(COMMANDS)


@hookimpl
def mosaic_extras_keys():
    from mosaic_sweep.extras import OWNED

    return OWNED


@hookimpl
def mosaic_validate_config(config):
    from mosaic_sweep.extras import validate

    return validate(config.extras) or None


@hookimpl
def mosaic_build_manifest(run, status):
    from mosaic_sweep.extras import manifest_section

    section = manifest_section(run.directory, run.config.extras, status)
    return {"optuna": section} if section else None
