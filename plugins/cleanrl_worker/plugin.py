"""Hook implementations of the cleanrl_worker plugin.

``mosaic algos [--json] [--cleanrl-home DIR]``: every algorithm the CleanRL worker knows,
each source it is available from, the one that wins, and the resolution order.
"""

from __future__ import annotations

import argparse
import json

from mosaic_core.cli.commands import CliCommand
from mosaic_core.hookspecs import hookimpl
from mosaic_core.types import ChildEvent


def _configure_algos(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--cleanrl-home", metavar="DIR",
                        help="a CleanRL checkout to include (default: $MOSAIC_CLEANRL_HOME)")
    parser.add_argument("--all", action="store_true",
                        help="also list upstream CleanRL names that are not available here")


def _run_algos(ns: argparse.Namespace) -> int:
    from cleanrl_worker.registry import ORDER_TEXT, RESOLUTION_ORDER, list_algorithms

    entries = list_algorithms(ns.cleanrl_home, origin="--cleanrl-home")
    if ns.json:
        print(json.dumps({"resolution_order": list(RESOLUTION_ORDER), "algorithms": [e.to_dict() for e in entries]},
                         indent=2))
        return 0
    from mosaic_core.cli.console import console as make_console
    from rich.table import Table

    shown = [e for e in entries if e.sources or e.error or ns.all]
    table = Table(title="CleanRL worker algorithms (* = used for --algo NAME)")
    for column in ("algorithm", "sources", "script"):
        table.add_column(column, overflow="fold")
    for entry in shown:
        sources = ", ".join(("*" if entry.winner is s else "") + s.source for s in entry.sources)
        if entry.error:
            sources, script = f"[red]error[/red] {sources}".strip(), entry.error
        elif not entry.sources:
            sources, script = "-", "upstream CleanRL: needs a checkout (MOSAIC_CLEANRL_HOME)"
        else:
            script = str(entry.winner.script)
        table.add_row(entry.name, sources, script)
    console = make_console()
    console.print(table)
    hidden = len(entries) - len(shown)
    if hidden:
        console.print(f"{hidden} more upstream CleanRL names need a checkout: mosaic algos --all lists them")
    console.print(f"resolution order: {ORDER_TEXT}")
    return 0


@hookimpl
def mosaic_child_events() -> list[ChildEvent]:
    return [ChildEvent("checkpoint_saved", "a bundled algorithm wrote a checkpoint"),
            ChildEvent("eval_batch", "policy_eval finished a batch of episodes")]


@hookimpl
def mosaic_cli_commands() -> list[CliCommand]:
    return [CliCommand("algos", "list the CleanRL worker's algorithms, where each comes from and which one wins",
                       _configure_algos, _run_algos)]


@hookimpl
def mosaic_build_manifest(run, status):
    """An ``evaluation`` section when the run wrote ``eval_summary.json`` (policy_eval mode)."""
    path = run.run_dir / "eval_summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    stats = summary.get("return") if isinstance(summary.get("return"), dict) else {}
    discounted = summary.get("discounted_return") if isinstance(summary.get("discounted_return"), dict) else {}
    return {"evaluation": {"summary": "eval_summary.json", "status": summary.get("status"),
                           "episodes": summary.get("episodes"), "mean_return": stats.get("mean"),
                           "std_return": stats.get("std"), "mean_discounted_return": discounted.get("mean"),
                           "gamma": summary.get("gamma")}}
