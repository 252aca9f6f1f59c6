"""Sample-efficiency bands: runs' per-episode returns on one step grid, as each run's ``train``
score as of each step (:mod:`mosaic_core.runstore.score`: the mean return of the episodes in the
last 10 % of the steps it had reached, at least 10), and the IQM over runs at each step with its
bootstrap 95 % CI (runs resampled whole). numpy only, imported inside.

At the grid's last step a run that has ended stands for its whole history, so a group whose runs
have all ended (and are scored from training) ends its band exactly at the IQM of their scores.

The bootstrap is vectorised: a resample is a count per run (multinomial), and the 25 % trimmed
mean of a resample is a weighted sum over each point's sorted values (the weight of a value: how
much of its copies' span of sorted positions lies inside the kept ``[n//4, n - n//4)``), equal to
scipy's ``trim_mean`` of the resampled matrix (a test checks it) at a fraction of the cost.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from mosaic_core.runstore.score import in_step_order, window_slice

__all__ = ["CONFIDENCE", "GRID_POINTS", "REPS", "iqm_band", "score_matrix", "step_grid", "trimmed_mean_of_counts"]

GRID_POINTS = 50
REPS = 200
CONFIDENCE = 0.95


def step_grid(series: Sequence[Sequence[tuple[int, float]]], ended: Sequence[bool], points: int) -> list[float]:
    """The steps every run can speak for: from the first step at which each has an episode to the
    last step of the one that went furthest, or of the live run that is furthest behind (a run
    that has ended holds its score past its last episode; a live one may still change)."""
    start = max(run[0][0] for run in series)
    end = max(run[-1][0] for run in series)
    live = [run[-1][0] for run, done in zip(series, ended) if not done]
    end = min([end, *live])
    if end < start:
        return []
    if end == start or points < 2:
        return [float(end)]
    return [start + (end - start) * i / (points - 1) for i in range(points)]


def score_matrix(
    series: Sequence[Sequence[tuple[int, float]]], ended: Sequence[bool] | None = None, points: int = GRID_POINTS
) -> tuple[Any, Any]:
    """``(grid, runs × points)``: each run's ``train`` score over its episodes that ended by each
    step of :func:`step_grid` (``ended[i]``: run ``i`` has ended, all by default; runs without an
    episode left out by the caller)."""
    import numpy as np

    runs = [in_step_order(run) for run in series]
    grid = step_grid(runs, ended if ended is not None else [True] * len(runs), points)
    rows = []
    for run in runs:
        steps, values = [s for s, _v in run], [v for _s, v in run]
        row = []
        for step in grid:
            first, end = window_slice(steps, bisect_right(steps, step))
            row.append(sum(values[first:end]) / (end - first))  # as training_score sums: the same number
        rows.append(row)
    return np.asarray(grid, dtype=float), np.asarray(rows, dtype=float).reshape(len(runs), len(grid))


def trimmed_mean_of_counts(ordered: Any, counts: Any) -> Any:
    """The 25 % trimmed mean, per row, of the sample holding ``counts[p, i]`` copies of
    ``ordered[p, i]`` (each row sorted ascending)."""
    import numpy as np

    total = counts.sum(axis=1, keepdims=True)
    low = (total * 0.25).astype(counts.dtype)  # scipy: int(proportiontocut * nobs) cut from each end
    high = total - low
    end = np.cumsum(counts, axis=1, dtype=counts.dtype)
    weight = np.minimum(end, high)
    weight -= np.maximum(end - counts, low)
    np.maximum(weight, 0, out=weight)
    return np.einsum("pi,pi->p", weight, ordered) / (high - low)[:, 0]


def iqm_band(values: Any, reps: int = REPS, seed: int = 0) -> tuple[Any, Any, Any]:
    """The IQM over runs at each point of ``values`` (``runs × points``) and its bootstrap 95 % CI:
    ``(iqm, low, high)``."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    runs = values.shape[0]
    order = np.ascontiguousarray(np.argsort(values, axis=0, kind="stable").T)  # points × runs: rows contiguous
    ordered = np.take_along_axis(values.T, order, axis=1)
    iqm = trimmed_mean_of_counts(ordered, np.ones_like(order, dtype=np.int32))
    counts = np.random.RandomState(seed).multinomial(runs, np.full(runs, 1.0 / runs), size=reps).astype(np.int32)
    samples = np.empty((reps, values.shape[1]))
    for rep in range(reps):
        samples[rep] = trimmed_mean_of_counts(ordered, counts[rep][order])
    alpha = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(samples, [alpha, 100 - alpha], axis=0)
    return iqm, low, high
