"""Learning curves from ``metrics`` events: one ``(global_step, value)`` series per quantity.

A ``metrics`` payload (see :class:`mosaic_analytics.board.MetricBoard.snapshot`) holds the
latest value of each quantity; each event becomes one point of each series (a multi-agent run's
``agents`` add ``episodic_return@AGENT``, drawn beside the team's return). Series are capped
(every other point dropped when full) so a week-long run stays a small JSON document.
"""

from __future__ import annotations

import math
from typing import Any

MAX_POINTS = 2000
TOP_LEVEL = ("episodic_return", "episodic_return_smoothed", "episodic_length", "sps")


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
