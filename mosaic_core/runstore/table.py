"""``mosaic runs``'s table: a run's cells, printable (a run's files drive no terminal), kept in the
run index beside its summary (:func:`cells`: all but the age, which changes as time goes), and
the table laid out from them (:func:`render`; the index lays out its stored cells the same way in
SQLite, :meth:`~mosaic_core.runstore.index.RunIndex.table_lines`)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

from mosaic_core.files import printable
from mosaic_core.runstore.score import format_score
from mosaic_core.runstore.summary import RunSummary, format_age, format_bytes

__all__ = ["AGE", "GAP", "HEADER", "cells", "header", "render", "status", "steps"]

HEADER = ("RUN ID", "WORKER", "ALGO", "ENV", "STATUS", "STEPS", "SCORE", "AGE", "DISK")
AGE = HEADER.index("AGE")  # the one column not stored: where it goes among the stored cells
GAP = "  "  # between columns


def cells(summary: RunSummary) -> tuple[str, ...]:
    """The run's cells but its age, printable."""
    return tuple(
        printable(cell)
        for cell in (
            summary.run_id,
            summary.worker or "-",
            os.path.basename(summary.algo) if summary.algo else "-",
            summary.env_id or "-",
            f"{summary.status} (imported, untrusted)" if summary.untrusted else status(summary),
            steps(summary.global_step, summary.total_timesteps, summary.unit),
            format_score(summary.score),
            format_bytes(summary.disk_bytes),
        )
    )


def render(runs: Iterable[tuple[float | None, Sequence[str]]], now: float | None = None) -> list[str]:
    """The table's lines, its header first, from each run's start time (None or 0: unknown) and
    :func:`cells`, in the order given: each column as wide as its widest cell."""
    now = time.time() if now is None else now
    table: list[Any] = [HEADER]
    for started_at, stored in runs:
        row = list(stored)
        row.insert(AGE, format_age(started_at or None, now))
        table.append(row)
    widths = [max(map(len, column)) for column in zip(*table)]
    return [GAP.join(map(str.ljust, row, widths)).rstrip() for row in table]


def header(widths: Sequence[int]) -> str:
    """The header line of a table whose columns are ``widths`` wide."""
    return GAP.join(map(str.ljust, HEADER, widths)).rstrip()


def status(summary: Any) -> str:
    """A run's status, with its attempts when it was resumed (one run, not one per attempt)."""
    return summary.status if summary.attempts <= 1 else f"{summary.status} ({summary.attempts} attempts)"


def steps(step: int | None, total: int | None, unit: str = "steps") -> str:
    """A run's progress for a table cell: ``1,024/50,000``, ``12/20 episodes``, ``-``."""
    if step is None:
        return "-"
    counted = f"{step:,}/{total:,}" if total else f"{step:,}"
    return counted if unit == "steps" else f"{counted} {unit}"
