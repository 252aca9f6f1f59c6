"""A run's line in ``mosaic runs``: its cells, printable (a run's files drive no terminal), kept in
the run index beside its summary (:func:`cells`), so a listing of thousands of runs formats only
their ages (:func:`render`)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from mosaic_core.files import printable
from mosaic_core.runstore.score import format_score
from mosaic_core.runstore.summary import RunSummary, format_age, format_bytes

__all__ = ["HEADER", "SEPARATOR", "cells", "render", "status", "steps"]

HEADER = ("RUN ID", "WORKER", "ALGO", "ENV", "STATUS", "STEPS", "SCORE", "AGE", "DISK")
_AGE = HEADER.index("AGE")
SEPARATOR = "\x1f"  # between stored cells: a control character, so never inside a printable one


def cells(summary: RunSummary) -> str:
    """The run's cells but its age (which changes as time goes), printable, as one stored text."""
    return SEPARATOR.join(
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


def render(runs: Iterable[tuple[float | None, str]], now: float | None = None) -> list[str]:
    """The table's lines, its header first, from each run's start time (0 or None: unknown) and
    stored :func:`cells`."""
    now = time.time() if now is None else now
    table: list[Any] = [HEADER]
    for started_at, stored in runs:
        row = stored.split(SEPARATOR)
        row.insert(_AGE, format_age(started_at or None, now))
        table.append(row)
    widths = [max(map(len, column)) for column in zip(*table)]
    return ["  ".join(map(str.ljust, row, widths)).rstrip() for row in table]


def status(summary: Any) -> str:
    """A run's status, with its attempts when it was resumed (one run, not one per attempt)."""
    return summary.status if summary.attempts <= 1 else f"{summary.status} ({summary.attempts} attempts)"


def steps(step: int | None, total: int | None, unit: str = "steps") -> str:
    """A run's progress for a table cell: ``1,024/50,000``, ``12/20 episodes``, ``-``."""
    if step is None:
        return "-"
    counted = f"{step:,}/{total:,}" if total else f"{step:,}"
    return counted if unit == "steps" else f"{counted} {unit}"
