"""A rich console for tables: the terminal's own width at a terminal, and a wide one (or
``$COLUMNS``) when the output is a pipe or a file, so tables never wrap into garbage."""

from __future__ import annotations

import os
import sys
from typing import IO, Any

PIPE_WIDTH = 160


def console(file: IO[str] | None = None) -> Any:
    from rich.console import Console

    file = file or sys.stdout
    try:
        tty = file.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return Console(file=file)
    columns = os.environ.get("COLUMNS", "")
    return Console(file=file, width=int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH)
