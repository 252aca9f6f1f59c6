"""A rich console for tables: the terminal's own width at a terminal, and a wide one (or
``$COLUMNS``) when the output is a pipe or a file, so tables never wrap into garbage."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
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


@contextlib.contextmanager
def said_if_slow(what: str, after: float = 2.0) -> Iterator[None]:
    """``mosaic: WHAT…`` on stderr if the block still runs after ``after`` seconds: a step that
    is quick on an idle machine and long on a loaded one (a check in a worker's own environment
    that imports Ray) says what it is doing instead of leaving the terminal silent. Only at a
    terminal: where stderr is a file or a pipe (a script, a test), a refusal stays one line."""
    if not sys.stderr.isatty():
        yield
        return
    timer = threading.Timer(after, lambda: print(f"mosaic: {what}…", file=sys.stderr, flush=True))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
