"""The Compare page's numbers: the chosen runs in seed groups (:mod:`mosaic_core.runstore.groups`),
each group's IQM return over env steps with its bootstrap 95 % CI band
(:mod:`mosaic_core.runstore.bands`) from the runs' live ``metrics`` events, and the runs'
scores (:mod:`mosaic_core.runstore.score`) as they finish. ``mosaic compare`` gives the full
table (rliable's CIs, probability of improvement)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mosaic_core.runstore.groups import group_by_seed, mixed_budgets

MAX_RUNS = 200
FEW_SEEDS = 5


def group_view(dirs: list[Path], curve_of: Callable[[Path], list[list[float]]]) -> dict[str, Any]:
    """``{"groups": [{label, runs, untrusted, scores, finished, score_iqm, band: [[step, iqm, low, high], …]}],
    "warnings": […]}`` (``untrusted``: the group's imported runs, also named in a warning);
    ``curve_of(run_dir)``: the run's ``[step, return]`` points so far."""
    from mosaic_core.runstore.bands import curve_matrix, iqm_band
    from mosaic_core.runstore.summary import summarize
    from mosaic_core.runstore.trust import untrusted_run

    groups, out = group_by_seed(dirs), []
    for group in groups:
        series = [[(int(s), float(v)) for s, v in curve_of(d)] for d in group.runs]
        series = [s for s in series if len(s) >= 2]
        band: list[list[float]] = []
        if series:
            grid, values = curve_matrix(series)
            iqm, low, high = iqm_band(values)
            band = [[float(x), float(a), float(b), float(c)] for x, a, b, c in zip(grid, iqm, low, high)]
        scores = [s["value"] for s in (summarize(d).score for d in group.runs) if s]
        out.append(
            {
                "label": group.label,
                "runs": [d.name for d in group.runs],
                "untrusted": [d.name for d in group.runs if untrusted_run(d) is not None],
                "scores": scores,
                "finished": len(scores),
                "score_iqm": _iqm(scores),
                "band": band,
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
    return {"groups": out, "warnings": warnings}


def _iqm(scores: list[float]) -> float | None:
    if not scores:
        return None
    import numpy as np

    from mosaic_core.runstore.bands import trimmed_mean_of_counts

    ordered = np.sort(np.asarray(scores, dtype=float))[None, :]
    return float(trimmed_mean_of_counts(ordered, np.ones_like(ordered, dtype=np.int32))[0])
