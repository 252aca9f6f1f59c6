"""A run's score, defined once: the number every listing, table, sweep and comparison shows.

- ``eval``: the mean return of the run's final evaluation (``evaluations/*/eval.json``,
  schema ``mosaic.eval/1``: ``mosaic evaluate``'s, or a worker's own at its final save, e.g.
  CleanRL's after ``--save-model``): of the evaluations on record, the one of the highest
  ``global_step`` (the newest written of that step), when that step lies in the run's final window (below).
- ``train``: else a named window of training returns, :data:`WINDOW_NAME`: the mean of the
  per-episode returns (``charts/episodic_return``, the team return for multi-agent runs) of
  the episodes that ended in the last :data:`WINDOW_FRACTION` of the env steps the run
  reached (step ≥ 0.9 × its last step); when fewer than :data:`MIN_EPISODES` ended there,
  its last :data:`MIN_EPISODES` episodes.
- one agent of a multi-agent run (on request): the same, from that agent's returns
  (``episodes[i].agents`` in the evaluation, ``charts/episodic_return/AGENT`` in training).

Both come from the run's own files; a reader that cannot run code and reads a bounded size.
Every episode of a run is read once, through one reader (:func:`episode_returns`): the score,
the dashboard's curves and bands, ``mosaic compare``'s figure and ``mosaic plot`` all draw on it,
and a band's point at a step is the ``train`` score of the episodes ended by then
(:func:`window_slice`), so a band and a table of scores can never disagree.
"""

from __future__ import annotations

import json
import math
import os
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeGuard

from mosaic_core.contract import EVAL_FILE, EVAL_SCHEMA
from mosaic_core.files import open_private

__all__ = [
    "EVALUATIONS",
    "MAX_EVALUATIONS",
    "MAX_EVAL_BYTES",
    "MIN_EPISODES",
    "RETURN_TAG",
    "Score",
    "WINDOW_FRACTION",
    "WINDOW_NAME",
    "episode_returns",
    "evaluation_score",
    "final_evaluation",
    "format_score",
    "in_step_order",
    "read_evaluation",
    "return_tag",
    "run_score",
    "run_series",
    "training_score",
    "window_slice",
    "window_start",
]

RETURN_TAG = "charts/episodic_return"
WINDOW_FRACTION = 0.1
MIN_EPISODES = 10
WINDOW_NAME = "last 10% of steps"
EVALUATIONS = "evaluations"
MAX_EVAL_BYTES = 4 * 1024 * 1024
MAX_EVALUATIONS = 256  # evaluation folders one run's score looks at


@dataclass(frozen=True)
class Score:
    value: float
    source: str  # "eval" | "train"
    episodes: int  # how many episodes the value averages
    step: int | None  # the env step it stands for (the evaluated checkpoint's, or the run's last)

    def describe(self) -> str:
        """What the number is, in words: ``eval (10 episodes at step 50000)``."""
        what = "eval" if self.source == "eval" else f"train, {WINDOW_NAME}"
        at = f" at step {self.step}" if self.step is not None else ""
        return f"{what} ({self.episodes} episodes{at})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Score | None:
        if not isinstance(data, dict):
            return None
        value, episodes, step = data.get("value"), data.get("episodes"), data.get("step")
        if not _finite(value) or data.get("source") not in ("eval", "train") or not isinstance(episodes, int):
            return None
        return cls(float(value), data["source"], episodes, step if isinstance(step, int) else None)


def _finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def window_start(last_step: int) -> float:
    """The first env step of the final window of a run whose last step is ``last_step``."""
    return (1.0 - WINDOW_FRACTION) * last_step


def window_slice(steps: Sequence[int], end: int) -> tuple[int, int]:
    """``(first, end)``: the final window of the episodes ``[0, end)`` of a run (``steps`` sorted):
    those that ended at or after :func:`window_start` of the last one's step, at least
    :data:`MIN_EPISODES` (all, when fewer ended)."""
    first = bisect_left(steps, window_start(steps[end - 1]), 0, end)
    return min(first, max(0, end - MIN_EPISODES)), end


def in_step_order(points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """The finite points, sorted by step only: episodes that ended at one step (parallel envs)
    keep their logged order, so a window's cut never picks among them by value."""
    return sorted(((int(s), float(v)) for s, v in points if _finite(v)), key=lambda point: point[0])


def training_score(points: Sequence[tuple[int, float]]) -> Score | None:
    """The ``train`` score of per-episode ``(step, return)`` points (any order); None without points."""
    ordered = in_step_order(points)
    if not ordered:
        return None
    first, end = window_slice([s for s, _v in ordered], len(ordered))
    window = [v for _s, v in ordered[first:end]]
    return Score(sum(window) / len(window), "train", len(window), ordered[-1][0])


def return_tag(agent: str | None = None) -> str:
    """The tag of a run's per-episode returns: the team's, or ``agent``'s."""
    return f"{RETURN_TAG}/{agent}" if agent else RETURN_TAG


def episode_returns(run_dir: Path, agent: str | None = None) -> list[tuple[int, float]]:
    """Every episode of a run, once: its ``(step, return)`` in step order (a resumed run's one
    history), a live run's so far; ``agent``: that agent's. [] when none."""
    return run_series(run_dir, return_tag(agent)) or []


def run_series(run_dir: Path, tag: str) -> list[tuple[int, float]] | None:
    """A run's finite ``(step, value)`` points of ``tag`` in step order, read through the
    ``mosaic_run_scalars`` hook (the analytics plugin's TensorBoard reader, which reads on from
    its last look at a live run); None when no plugin reads the run's scalars."""
    from mosaic_core.plugins import plugin_host

    found = plugin_host().run_scalars(run_dir, tag)
    return None if found is None else in_step_order(found)


def read_evaluation(path: Path) -> dict[str, Any] | None:
    """One ``eval.json`` (bounded, never through a link), None when it is not a valid ``mosaic.eval/1``."""
    try:
        with open_private(path) as handle:
            if os.fstat(handle.fileno()).st_size > MAX_EVAL_BYTES:
                return None
            data = json.loads(handle.read(MAX_EVAL_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != EVAL_SCHEMA or not _finite(data.get("mean")):
        return None
    if not isinstance(data.get("global_step"), int) or not isinstance(data.get("episodes"), list):
        return None
    return data


def final_evaluation(run_dir: Path, last_step: int | None = None) -> dict[str, Any] | None:
    """The evaluation of the highest ``global_step`` under ``run_dir/evaluations`` (the newest
    written of that step), when it is of the run's final window (``last_step``: the run's last
    training step, if known)."""
    best: dict[str, Any] | None = None
    try:
        with os.scandir(run_dir / EVALUATIONS) as entries:
            names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))[:MAX_EVALUATIONS]
    except OSError:
        return None
    for name in names:
        data = read_evaluation(run_dir / EVALUATIONS / name / EVAL_FILE)
        if data is not None and (best is None or _order(data) > _order(best)):
            best = data
    if best is None or (last_step is not None and best["global_step"] < window_start(last_step)):
        return None
    return best


def _order(evaluation: dict[str, Any]) -> tuple[int, float]:
    """Later is better: the higher step, then (of one checkpoint evaluated twice) the newer."""
    written = evaluation.get("written")
    return evaluation["global_step"], float(written) if _finite(written) else 0.0


def evaluation_score(evaluation: dict[str, Any], agent: str | None = None) -> Score | None:
    """The evaluation's mean return; ``agent``: that agent's mean (``episodes[i].agents``), None
    when an episode lacks it."""
    if agent is None:
        return Score(float(evaluation["mean"]), "eval", len(evaluation["episodes"]), evaluation["global_step"])
    values: list[float] = []
    for episode in evaluation["episodes"]:
        agents = episode.get("agents") if isinstance(episode, dict) else None
        value = agents.get(agent) if isinstance(agents, dict) else None
        if not _finite(value):
            return None
        values.append(float(value))
    if not values:
        return None
    return Score(sum(values) / len(values), "eval", len(values), evaluation["global_step"])


def run_score(
    run_dir: Path, points: Sequence[tuple[int, float]] | None = None, agent: str | None = None
) -> Score | None:
    """A run's score: its final evaluation's, else the ``train`` window of ``points``
    (:func:`episode_returns` when not given). ``agent``: a multi-agent run's agent instead of the
    team (``charts/episodic_return/AGENT``)."""
    if points is None:
        points = episode_returns(run_dir, agent)
    trained = training_score(points)
    evaluation = final_evaluation(run_dir, trained.step if trained else None)
    scored = evaluation_score(evaluation, agent) if evaluation is not None else None
    return scored if scored is not None else trained


def format_score(score: dict[str, Any] | Score | None, digits: int = 2) -> str:
    """A score for a table cell: ``487.20 eval``, ``93.25 train``, ``-`` for none."""
    if isinstance(score, dict):
        score = Score.from_dict(score)
    return "-" if score is None else f"{score.value:.{digits}f} {score.source}"
