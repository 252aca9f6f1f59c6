"""The Compare page's numbers: the chosen runs in seed groups (:mod:`mosaic_core.runstore.groups`),
each group's IQM over env steps with its bootstrap 95 % CI band (:mod:`mosaic_core.runstore.bands`)
and the runs' scores (:mod:`mosaic_core.runstore.score`) as they finish. Both come from every
episode of the runs, read once through :func:`~mosaic_core.runstore.score.episode_returns` (live
while they train): the band's value at a step is the IQM of the runs' ``train`` scores as of that
step, so a group whose runs have ended and are scored from training ends its band at the IQM of
its scores. ``mosaic compare`` gives the full table (rliable's CIs, probability of improvement)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic_core.runstore.groups import group_by_seed, mixed_budgets

MAX_RUNS = 200
FEW_SEEDS = 5


def group_view(dirs: list[Path]) -> dict[str, Any]:
    """``{"groups": [{label, runs, untrusted, scores, sources, finished, score_iqm, band: [[step,
    iqm, low, high], …], band_runs}], "warnings": […]}`` (``untrusted``: the group's imported runs,
    also named in a warning)."""
    from mosaic_core.runstore.score import episode_returns
    from mosaic_core.runstore.summary import ENDED, summarize
    from mosaic_core.runstore.trust import untrusted_run

    groups = group_by_seed(dirs)
    out: list[dict[str, Any]] = []
    for group in groups:
        summaries = [summarize(d) for d in group.runs]
        series = [(episode_returns(d), s.status in ENDED) for d, s in zip(group.runs, summaries)]
        series = [(points, ended) for points, ended in series if points]
        scores = [s.score for s in summaries if s.score]
        out.append(
            {
                "label": group.label,
                "runs": [d.name for d in group.runs],
                "untrusted": [d.name for d in group.runs if untrusted_run(d) is not None],
                "scores": [s["value"] for s in scores],
                "sources": sorted(s["source"] for s in scores),
                "finished": len(scores),
                "score_iqm": _iqm([s["value"] for s in scores]),
                "band": _band(series),
                "band_runs": len(series),
            }
        )
    warnings = [w for w in [mixed_budgets(groups)] if w]
    imported = [name for g in out for name in g["untrusted"]]
    if imported:  # the user chose them; they stay in, marked (the run list badges them too)
        warnings.append(
            f"imported, untrusted run(s) {', '.join(imported[:5])}{'…' if len(imported) > 5 else ''}: "
            "their curves and scores are what their archives say"
        )
    few = [g["label"] for g in out if len(g["runs"]) < FEW_SEEDS]
    if few:
        warnings.append(f"fewer than {FEW_SEEDS} seeds in {', '.join(few)}: the CIs are wide")
    evaluated = [g["label"] for g in out if "eval" in g["sources"]]
    if evaluated:
        warnings.append(
            f"scores from final evaluations in {', '.join(evaluated)}: the band is the training return, "
            "the table's IQM is of the evaluations' mean returns"
        )
    return {"groups": out, "warnings": warnings}


def _band(series: list[tuple[list[tuple[int, float]], bool]]) -> list[list[float]]:
    """``[[step, iqm, low, high], …]`` of runs' ``(episodes, ended)``; [] when they share no step."""
    from mosaic_core.runstore.bands import iqm_band, score_matrix

    if not series:
        return []
    grid, values = score_matrix([points for points, _ended in series], [ended for _points, ended in series])
    if not len(grid):
        return []
    iqm, low, high = iqm_band(values)
    return [[float(x), float(a), float(b), float(c)] for x, a, b, c in zip(grid, iqm, low, high)]


def _iqm(scores: list[float]) -> float | None:
    if not scores:
        return None
    import numpy as np

    from mosaic_core.runstore.bands import trimmed_mean_of_counts

    ordered = np.sort(np.asarray(scores, dtype=float))[None, :]
    return float(trimmed_mean_of_counts(ordered, np.ones_like(ordered, dtype=np.int32))[0])
