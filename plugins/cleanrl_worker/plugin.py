"""The CleanRL worker's plugin module (its one ``mosaic.plugins`` entry point, ``cleanrl``).

The worker itself registers through ``mosaic.workers`` (:func:`cleanrl_worker.get_worker_metadata`
returns :data:`cleanrl_worker.metadata.METADATA`, whose ``run_hooks`` module,
:mod:`cleanrl_worker.run_hooks`, the host calls for CleanRL runs only). This module provides
the hook algorithm packages implement (``mosaic_hookspecs``: :mod:`cleanrl_worker.hookspecs`)
and one command: ``mosaic envs [--json] [--family F] [--all]``, the env catalog
(:mod:`cleanrl_worker.catalog`). The worker's views of the host's ``mosaic algos`` (list,
presets, ``show ALGO``) are in :mod:`cleanrl_worker.algos_cli`.
"""

from __future__ import annotations

import argparse
import json

from mosaic_core import CliCommand, hookimpl


@hookimpl
def mosaic_hookspecs():
    from cleanrl_worker import hookspecs

    return [hookspecs]


def _configure_envs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--family",
        action="append",
        default=[],
        metavar="FAMILY",
        help="only this family (repeatable): classic_control, box2d, mujoco, atari, minigrid, other",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="also every Atari id variant (v0, Deterministic, -ram) and ids that fail to make",
    )


def _run_envs(ns: argparse.Namespace) -> int:
    from cleanrl_worker.catalog import ALGORITHM_SPACES, catalog, family_summary, is_main_variant

    entries = catalog(tuple(ns.family))
    if ns.json:
        print(
            json.dumps(
                {
                    "families": family_summary(),
                    "algorithms": {algo: fit.describe() for algo, fit in ALGORITHM_SPACES.items()},
                    "envs": [e.to_dict() for e in entries],
                },
                indent=2,
            )
        )
        return 0
    from rich.markup import escape
    from rich.table import Table

    from mosaic_core.toolkit import make_console

    console = make_console()
    shown = [e for e in entries if ns.all or is_main_variant(e)]
    for family in family_summary():
        rows = [e for e in shown if e.family == family["family"]]
        if not rows:
            continue
        state = "installed" if family["installed"] else f"[yellow]not installed[/yellow]: {escape(family['install'])}"
        table = Table(title=f"{family['title']} ({state})", title_justify="left")
        for column in ("env id", "observation", "action", "bundled algorithms"):
            table.add_column(column, overflow="fold")
        for entry in rows:
            shape = f" {tuple(entry.observation_shape)}" if entry.observation_shape else ""
            size = f" ({entry.action_size})" if entry.action_size else ""
            table.add_row(
                escape(entry.env_id),
                entry.observation + shape,
                entry.action + size,
                ", ".join(entry.algorithms) or (f"[red]{escape(entry.error)}[/red]" if entry.error else "-"),
            )
        console.print(table)
    others = [e for e in shown if e.family == "other"]
    if others:
        console.print("other registered ids: " + ", ".join(e.env_id for e in others))
    hidden = len(entries) - len(shown)
    if hidden:
        console.print(f"{hidden} more ids (Atari variants, ids that fail to make): mosaic envs --all lists them")
    return 0


@hookimpl
def mosaic_cli_commands() -> list[CliCommand]:
    return [
        CliCommand(
            "envs",
            "list environments by family: installed or not, spaces, which bundled algorithms fit",
            _configure_envs,
            _run_envs,
        )
    ]
