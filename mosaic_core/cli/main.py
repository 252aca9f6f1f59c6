"""``mosaic``: the host's command line.

Built-in commands: ``workers``, ``plugins``, ``run --worker NAME ...`` (handed to the worker
found by entry point), the trainer daemon's commands, and whatever plugins add through
``mosaic_cli_commands``. Start-up imports nothing heavy: commands import what they need
when they run.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mosaic_core import __version__
from mosaic_core.cli.commands import CliCommand
from mosaic_core.cli.errors import run_cli_command
from mosaic_core.errors import UsageError


# ------------------------------------------------------------------------------ workers
def _configure_workers(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _run_worker(argv: list[str], verbose: bool) -> int:
    from mosaic_core.pipeline import run_worker
    from mosaic_core.workers import discover_workers

    worker, rest = None, []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--worker" and i + 1 < len(argv):
            worker = argv[i + 1]
            i += 2
            continue
        if arg.startswith("--worker="):
            worker = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    if worker is None:
        if any(a in ("-h", "--help") for a in rest):
            names = ", ".join(i.name for i in discover_workers() if i.status == "active") or "none"
            print(f"usage: mosaic run --worker NAME [worker flags...]\n\ninstalled workers: {names}\n"
                  "worker flags: mosaic run --worker NAME --help")
            return 0
        raise UsageError("mosaic run needs --worker NAME (see `mosaic workers`)")
    return run_worker(worker, rest, prog=f"mosaic run --worker {worker}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv
    if argv[:1] == ["run"] or (argv[:1] == ["--verbose"] and argv[1:2] == ["run"]):
        rest = argv[argv.index("run") + 1:]
        return run_cli_command(lambda: _run_worker(rest, verbose), verbose=verbose)
    commands = _commands()
    parser = build_parser(commands)
    ns = parser.parse_args(argv)
    if ns.command is None:
        parser.print_help()
        return 2
    command = next(c for c in commands if c.name == ns.command)
    return run_cli_command(lambda: command.run(ns), verbose=ns.verbose)


if __name__ == "__main__":
    sys.exit(main())
