"""A run's learning curves: one ``(global_step, value)`` series per quantity.

Each quantity the run recorded comes from its records, every point once: its TensorBoard files,
read through :func:`mosaic_core.runstore.score.run_series` (the reader its score comes from), so
``episodic_return``, ``episodic_length`` and a multi-agent run's ``episodic_return@AGENT`` have
one point per episode, ``sps`` and ``losses/*`` one per iteration (:func:`recorded_series`).
The rest, and everything of a run that recorded nothing (no TensorBoard files), come from
``metrics`` events: a payload (see :class:`mosaic_analytics.board.MetricBoard.snapshot`) holds the
latest value of each quantity, and each event becomes one point of each series (:class:`Curves`,
capped: every other point dropped when full, so a week-long run stays a small JSON document).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MAX_POINTS = 2000
MAX_RECORDED = 50_000  # per series; a longer one is thinned to every k-th point (and its last)
TOP_LEVEL = ("episodic_return", "episodic_return_smoothed", "episodic_length", "sps")
TAGS = {"episodic_return": "charts/episodic_return", "episodic_length": "charts/episodic_length", "sps": "charts/SPS"}
AGENT_RETURN = "episodic_return@"
SMOOTHED = "episodic_return_smoothed"  # the host's moving average: the recorded episodes replace it


def tag_of(name: str) -> str | None:
    """The TensorBoard tag a series is recorded under (None: the events' only)."""
    from mosaic_core.runstore.score import return_tag

    if name.startswith(AGENT_RETURN):
        return return_tag(name[len(AGENT_RETURN) :])
    return name if name.startswith("losses/") else TAGS.get(name)


def recorded_series(run_dir: Path, names: Iterable[str] = ()) -> tuple[dict[str, list[list[float]]], dict[str, int]]:
    """``({name: [[step, value], …]}, {name: k})``: each of the returns, lengths and ``names``
    that the run recorded, every point in step order; ``k``: a series thinned to every k-th point
    (over :data:`MAX_RECORDED`). ``({}, {})`` when the run recorded none."""
    from mosaic_core.runstore.score import run_series

    series, thinned = {}, {}
    for name in dict.fromkeys([*TAGS, *names]):
        tag = tag_of(name)
        points = run_series(run_dir, tag) if tag else None
        if not points:
            continue
        step = -(-len(points) // MAX_RECORDED)
        if step > 1:
            points = points[::step] + ([points[-1]] if (len(points) - 1) % step else [])
            thinned[name] = step
        series[name] = [[s, v] for s, v in points]
    return series, thinned


def replaced(name: str, recorded: Iterable[str]) -> bool:
    """Whether the recorded series replace the events' series ``name``."""
    return name in recorded or (name == SMOOTHED and "episodic_return" in recorded)


def points_of(payload: Any) -> tuple[int, dict[str, float]] | None:
    """(global_step, {series name: value}) of one metrics payload, or None when it has no step."""
    if not isinstance(payload, dict):
        return None
    step = payload.get("global_step")
    if not isinstance(step, int) or isinstance(step, bool):
        return None
    values = {name: payload.get(name) for name in TOP_LEVEL}
    losses = payload.get("losses")
    if isinstance(losses, dict):
        values.update({f"losses/{name}": value for name, value in losses.items()})
    agents = payload.get("agents")
    if isinstance(agents, dict):
        values.update(
            {
                f"episodic_return@{agent}": figures.get("charts/episodic_return")
                for agent, figures in agents.items()
                if isinstance(figures, dict)
            }
        )
    return step, {
        name: float(v)
        for name, v in values.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


class Curves:
    """Series built up from metrics events, in arrival order."""

    def __init__(self, max_points: int = MAX_POINTS):
        self.max_points = max_points
        self.series: dict[str, list[list[float]]] = {}

    def add(self, payload: Any) -> dict[str, list[float]]:
        """Add one payload; returns the new points ({name: [step, value]}) for a live client."""
        found = points_of(payload)
        if found is None:
            return {}
        step, values = found
        for name, value in values.items():
            points = self.series.setdefault(name, [])
            if points and points[-1][0] == step:
                points[-1][1] = value
            else:
                points.append([step, value])
            if len(points) > self.max_points:
                del points[1:-1:2]
        return {name: [step, value] for name, value in values.items()}

    def to_dict(self) -> dict[str, list[list[float]]]:
        return {name: [list(p) for p in points] for name, points in self.series.items()}


def merged(events: dict[str, list[list[float]]], recorded: dict[str, list[list[float]]]) -> dict[str, Any]:
    """The series to draw: the recorded ones, the events' for the rest."""
    return {**{name: points for name, points in events.items() if not replaced(name, recorded)}, **recorded}


def run_curves(run_dir: Path) -> dict[str, Any]:
    """``{"curves": {name: [[step, value], …]}, "recorded": [names], "thinned": {name: k}}``: every
    series of the run now; ``recorded``: those from its records (every episode, every iteration),
    the rest from its ``metrics`` events."""
    from mosaic_core.runstore.follow import EventFollower  # RunGone from here is answered 404

    curves, follower = Curves(), EventFollower(run_dir)
    while batch := follower.poll():
        for event in batch:
            if event["event"] == "metrics":
                curves.add(event.get("payload"))
    recorded, thinned = recorded_series(run_dir, curves.series)
    return {"curves": merged(curves.to_dict(), recorded), "recorded": sorted(recorded), "thinned": thinned}
