"""Hook implementations of the experiments plugin: ``mosaic experiment`` and ``mosaic compare``, and
the extras keys that tag each run of an experiment (``experiment``, ``experiment_group``)."""

from __future__ import annotations

from mosaic_core import hookimpl


@hookimpl
def mosaic_cli_commands():
    from mosaic_experiments.cli import COMMANDS

    return list(COMMANDS)


@hookimpl
def mosaic_extras_keys():
    from mosaic_core import ExtrasKey

    return [
        ExtrasKey(
            "experiment", "the experiment a run belongs to (mosaic experiment run)", bookkeeping=True, group_tag=True
        ),
        ExtrasKey("experiment_group", "its group in the experiment: worker, algo, env and overrides", bookkeeping=True),
    ]
