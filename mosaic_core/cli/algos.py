"""``mosaic algos [VIEW [ALGO]] [--worker NAME] [--json]``: what a worker can run.

The host's command for every worker: ``--worker NAME`` prints that worker's ``algorithms(python)``
(:class:`mosaic_core.worker.Worker`), unless the worker draws its own views (``algos_view``,
with its own flags from ``algos_arguments``: the CleanRL worker's ``presets`` and ``show ALGO``).
Without ``--worker``: ``$MOSAIC_DEFAULT_WORKER``, else the one installed worker with its own view,
else the one installed worker. Only light imports at module level: ``mosaic --help`` loads this file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from mosaic_core.errors import UsageError


def _workers() -> list[tuple[Any, Any]]:
    """(entry point, loaded Worker) of every installed worker that loads."""
    from mosaic_core.worker import load_worker
    from mosaic_core.workers import discover_workers

    loaded = []
    for item in discover_workers():
        if item.status != "active":
            continue
        try:
            loaded.append((item, load_worker(item)))
        except Exception as exc:  # one broken worker never breaks the command
            print(f"mosaic: warning: worker {item.name!r} not loaded: {exc}", file=sys.stderr)
    return loaded


def _has_view(worker: Any) -> bool:
    from mosaic_core.worker import Worker

    return type(worker).algos_view is not Worker.algos_view


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "view",
        nargs="?",
        default="list",
        metavar="VIEW",
        help="list (default), or a view of the worker's own (e.g. presets [ALGO], show ALGO)",
    )
    parser.add_argument("algo", nargs="?", metavar="ALGO", help="the algorithm of a worker's view")
    parser.add_argument(
        "--worker",
        metavar="NAME",
        help="the worker (default: $MOSAIC_DEFAULT_WORKER, else the "
        "installed worker with its own view, else the only one)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    for _item, worker in _workers():
        try:
            worker.algos_arguments(parser)
        except argparse.ArgumentError as exc:
            print(f"mosaic: warning: a flag of worker {_item.name!r} clashes in mosaic algos: {exc}", file=sys.stderr)


def chosen_worker(name: str | None) -> tuple[Any, Any]:
    """(entry point, Worker) that ``mosaic algos`` shows."""
    from mosaic_core.workers import DEFAULT_WORKER_VAR

    workers = _workers()
    name = name or os.environ.get(DEFAULT_WORKER_VAR) or None
    if name is None:
        with_view = [pair for pair in workers if _has_view(pair[1])]
        candidates = with_view if len(with_view) == 1 else workers
        if len(candidates) == 1:
            return candidates[0]
        names = ", ".join(item.name for item, _ in workers) or "none installed"
        raise UsageError(f"mosaic algos: name the worker with --worker NAME (installed: {names})")
    for item, worker in workers:
        if item.name == name:
            return item, worker
    from mosaic_core.workers import find_worker

    find_worker(name)  # its UsageError names the installed workers, or why this one failed
    raise UsageError(f"worker {name!r} did not load")


def run(ns: argparse.Namespace) -> int:
    from mosaic_core.environments import preflight

    item, worker = chosen_worker(ns.worker)
    python = preflight(item.obj, item.distribution).python
    drawn: int | None = worker.algos_view(ns, python)
    if drawn is not None:
        return drawn
    if ns.view != "list" or ns.algo:
        raise UsageError(f"mosaic algos --worker {item.name} lists algorithms only (no view {ns.view!r})")
    entries = worker.algorithms(python)
    if not entries:
        raise UsageError(f"worker {item.name!r} does not list its algorithms (it has no algorithms() method)")
    if ns.json:
        print(json.dumps({"worker": item.name, "algorithms": entries}, indent=2))
        return 0
    rows = [(str(e.get("algo")), str(e.get("description", "")), ", ".join(e.get("envs") or []) or "-") for e in entries]
    table(
        f"{item.name} worker algorithms (mosaic run --worker {item.name} --algo ALGO --env-id ENV)",
        ("algorithm", "description", "envs"),
        rows,
    )
    return 0


def table(title: str, columns: Sequence[str], rows: Sequence[tuple[str, ...]], footer: Sequence[str] = ()) -> None:
    """A rich table of plain-text cells (escaped), then ``footer`` lines."""
    from rich.markup import escape
    from rich.table import Table

    from mosaic_core.cli.console import console as make_console

    drawn = Table(title=title)
    for column in columns:
        drawn.add_column(column, overflow="fold")
    for row in rows:
        drawn.add_row(*(escape(cell) for cell in row))
    console = make_console()
    console.print(drawn)
    for line in footer:
        console.print(escape(line))
