"""A rich console for tables: the terminal's own width at a terminal, and a wide one (or
``$COLUMNS``) when the output is a pipe or a file, so tables never wrap into garbage."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from typing import IO, Any

PIPE_WIDTH = 160
# What rich draws a table by, besides its cells: the terminal and the environment variables it reads.
_DRAWN_BY = ("TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES")


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


def print_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """A rich table (cells in rich's markup) on stdout: drawn once for its cells and the terminal,
    then printed from the cache (:func:`~mosaic_core.cli.listcache.cached_text`): importing rich
    and laying the table out cost ``mosaic workers`` more than everything else it does."""
    from mosaic_core import installed
    from mosaic_core.cli import listcache

    key = json.dumps([title, columns, rows, _terminal(), installed.installed_stamp()])
    text = listcache.cached_text(key)
    if text is None:
        from rich.table import Table

        table = Table(title=title)
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        drawing = console()
        with drawing.capture() as captured:
            drawing.print(table)
        text = captured.get()
        listcache.store_text(key, text)
    sys.stdout.write(text)
    sys.stdout.flush()


def _terminal() -> list[Any]:
    """What a table drawn on stdout depends on, besides its cells."""
    try:
        width = os.get_terminal_size(sys.stdout.fileno()).columns if sys.stdout.isatty() else None
    except (AttributeError, ValueError, OSError):
        width = None
    return [width, *(os.environ.get(name) for name in _DRAWN_BY)]


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
