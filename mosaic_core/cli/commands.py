"""The descriptor a plugin returns from ``mosaic_cli_commands`` to add a subcommand."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class CliCommand:
    """A ``mosaic NAME`` subcommand.

    ``configure(parser)`` adds its arguments; ``run(args)`` does the work and returns the
    exit code. Import heavy modules inside ``run`` only, so ``mosaic --help`` stays fast.
    Raise :class:`mosaic_core.errors.MosaicError` for errors the user can fix.
    """

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]

    def __post_init__(self) -> None:
        if not re.match(r"^[a-z][a-z0-9\-]*$", self.name or ""):
            raise ValueError(f"CliCommand.name must be a lower-case word, got {self.name!r}")
        if not self.help:
            raise ValueError(f"CliCommand {self.name!r} needs a help line")
        if not callable(self.configure) or not callable(self.run):
            raise ValueError(f"CliCommand {self.name!r}: configure and run must be callables")
