"""A live progress bar for ``mosaic run`` at a terminal (on stderr).

Shown only when stderr is a terminal and the run is not ``--quiet``. It is fed by lifecycle
events: ``metrics`` and ``heartbeat`` move it, the terminal event stops it. rich is imported
only when a bar is actually shown. A run that plays episodes rather than training for steps (a
policy evaluation) says so in its ``run_started`` payload, ``"progress": {"unit": "episodes",
"total": N, "event": NAME}`` (a worker puts it in ``Launch.started_payload``); its bar counts the
episodes of its event ``NAME`` then (the CleanRL worker's ``eval_batch``), and step counts do not
move it.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, TextIO

from mosaic_core.files import printable


def wanted(quiet: bool, stream: TextIO | None = None) -> bool:
    """True when a bar should be drawn on ``stream`` (stderr by default)."""
    stream = sys.stderr if stream is None else stream
    if quiet:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a real file
        return False


def _format_eta(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds < 0 or seconds > 99 * 3600:
        return "-:--:--"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _format_number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


class ProgressView:
    """One run's bar: steps/total, SPS, ETA and the moving average of the last 100 episodes' returns."""

    def __init__(self, run_id: str, total: int, unit: str = "steps", stream: TextIO | None = None):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.total, self.unit = total, unit
        self._lock = threading.Lock()
        self._unit_column = TextColumn(unit)  # "episodes" once a policy evaluation counts them
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            self._unit_column,
            TextColumn("{task.fields[sps]} SPS"),
            TextColumn("ETA {task.fields[eta]}"),
            TextColumn("avg return {task.fields[ret]}"),  # the moving average of the last 100 episodes
            console=Console(file=stream or sys.stderr),
            redirect_stdout=False,
            redirect_stderr=False,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task(run_id, total=total, sps="-", eta=_format_eta(None), ret="-")
        self._progress.start()
        self.finished = False

    def update(self, metrics: dict[str, Any]) -> None:
        step = metrics.get("global_step")
        if not isinstance(step, int) or self.unit != "steps":
            return
        sps = metrics.get("sps")
        ret = metrics.get("episodic_return_smoothed")
        eta = (self.total - step) / sps if isinstance(sps, (int, float)) and sps > 0 else None
        with self._lock:
            if not self.finished:
                self._progress.update(
                    self._task,
                    completed=min(step, self.total),
                    sps=_format_number(sps, 0),
                    eta=_format_eta(eta),
                    ret=_format_number(ret, 1),
                )

    def update_episodes(self, done: Any, total: Any) -> None:
        """Count episodes instead of steps (a policy evaluation)."""
        if not isinstance(done, int) or not isinstance(total, int) or total <= 0:
            return
        with self._lock:
            if not self.finished:
                self.unit = "episodes"
                self._progress.update(self._task, completed=min(done, total), total=total, sps="-", eta="-:--:--")
                self._unit_column.text_format = "episodes"

    def print(self, line: str) -> None:
        """A line above the bar (the bar is redrawn below it)."""
        self._progress.console.print(printable(line, keep_newlines=True), markup=False, highlight=False, soft_wrap=True)

    def finish(self, status: str) -> None:
        with self._lock:
            if self.finished:
                return
            self.finished = True
            self._progress.update(self._task, description=f"{self._progress.tasks[0].description} ({status})")
            self._progress.stop()
