"""What ``mosaic compare`` writes: ``-o report.png`` (IQM with CIs, performance profiles,
sample-efficiency curves), ``--export rliable.npz`` / ``--export marl-eval.json``.
numpy and matplotlib are imported inside the functions."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from mosaic_core import UsageError
from mosaic_core.files import atomic_output, write_atomic
from mosaic_core.runstore.bands import score_matrix
from mosaic_core.runstore.score import WINDOW_NAME
from mosaic_experiments import stats
from mosaic_experiments.compare import Comparison

MARL_EVAL_STEPS = 20  # points of each run's curve in the marl-eval export
METRIC = "return"


def write_png(comparison: Comparison, sections: dict[str, Any], output: Path, reps: int, seed: int) -> None:
    """One row per env: IQM with its 95 % CI per group, the performance profile (fraction of
    runs scoring above each τ) with its CI band, and the sample-efficiency curve per group: the
    IQM over env steps of the runs' training score so far, with its CI band (the dashboard's
    band, :func:`mosaic_core.runstore.bands.score_matrix`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    envs = comparison.envs
    figure, axes = plt.subplots(len(envs), 3, figsize=(16, 4.5 * len(envs)), dpi=90, squeeze=False)
    try:
        for row, env in zip(axes, envs):
            section = sections[env]
            labels = list(section["groups"])
            colors = {label: f"C{i % 10}" for i, label in enumerate(comparison.scores)}
            for i, label in enumerate(labels):
                iqm = section["groups"][label]["IQM"]
                row[0].errorbar(
                    [iqm.point],
                    [i],
                    xerr=[[iqm.point - iqm.low], [iqm.high - iqm.point]],
                    fmt="o",
                    color=colors[label],
                    capsize=6,
                    linewidth=2,
                )
            row[0].set_yticks(range(len(labels)), labels)
            row[0].set_xlabel(f"IQM of the score, 95% CI ({env})")
            matrices = {label: comparison.matrix(label, env) for label in labels}
            everything = np.concatenate([np.ravel(m) for m in matrices.values()])
            taus = np.linspace(everything.min(), everything.max(), 60)
            profiles, cis = stats.profiles(matrices, taus, reps=min(reps, 1000), seed=seed)
            for label in labels:
                row[1].plot(taus, profiles[label], color=colors[label], label=label)
                row[1].fill_between(taus, cis[label][0], cis[label][1], color=colors[label], alpha=0.2, linewidth=0)
            row[1].set_xlabel("score τ")
            row[1].set_ylabel("fraction of runs with score > τ")
            row[1].legend(fontsize="small")
            for label in labels:
                grid, iqm, low, high = sample_efficiency(comparison, label, env, seed)
                row[2].plot(grid, iqm, color=colors[label], label=label)
                row[2].fill_between(grid, low, high, color=colors[label], alpha=0.2, linewidth=0)
            row[2].set_xlabel("env steps")
            row[2].set_ylabel(f"IQM of the training score so far\n({comparison.tag}, {WINDOW_NAME}; 95% CI)")
            for axis in row:
                axis.grid(True, alpha=0.3)
        figure.tight_layout()
        png = io.BytesIO()  # rendered here, written by the one writer of user-named outputs
        figure.savefig(png, format="png")
    finally:
        plt.close(figure)
    write_atomic(output, png.getvalue(), flag="-o")


def sample_efficiency(comparison: Comparison, label: str, env: str, seed: int = stats.SEED) -> tuple[Any, ...]:
    """``(grid, iqm, low, high)``: a group's sample-efficiency curve on one env, from its runs'
    episodes (the figure's data; empty arrays when its runs share no step)."""
    import numpy as np

    runs = [s for s in comparison.scores[label][env] if s.points]
    if not runs:
        return (np.array([]),) * 4
    grid, values = score_matrix([s.points for s in runs], [s.ended for s in runs])
    if not len(grid):
        return (grid,) * 4
    return (grid, *stats.iqm_curve(values, seed=seed))


def curves_json(comparison: Comparison, seed: int = stats.SEED) -> dict[str, Any]:
    """The figure's sample-efficiency curves: ``{env: {group: {"steps", "iqm", "low", "high"}}}``."""
    out: dict[str, Any] = {}
    for env in comparison.envs:
        for label, by_env in comparison.scores.items():
            if by_env.get(env):
                grid, iqm, low, high = sample_efficiency(comparison, label, env, seed)
                out.setdefault(env, {})[label] = {
                    "steps": [float(x) for x in grid],
                    "iqm": [float(x) for x in iqm],
                    "low": [float(x) for x in low],
                    "high": [float(x) for x in high],
                }
    return out


def export(comparison: Comparison, path: Path) -> None:
    """``.npz``: rliable's layout, one ``runs × envs`` matrix per group (raw scores) and ``__tasks__``;
    ``.json``: marl-eval's raw-data layout (:func:`marl_eval`)."""
    import numpy as np

    if path.suffix == ".npz":
        matrices: dict[str, Any] = {"__tasks__": np.array(comparison.envs)}
        for label, by_env in comparison.scores.items():
            columns = [[s.score.value for s in by_env.get(env, [])] for env in comparison.envs]
            if len({len(c) for c in columns}) != 1:
                raise UsageError(
                    f"--export {path}: group {label!r} has different seed counts per env; "
                    "rliable's matrices need one count"
                )
            matrices[label] = np.array(columns, dtype=float).T
        _write(path, lambda handle: np.savez(handle, **matrices))
    elif path.suffix == ".json":
        data = marl_eval(comparison)
        _write(path, lambda handle: handle.write(json.dumps(data, indent=2).encode()))
    else:
        raise UsageError(f"--export {path}: the file must end in .npz (rliable) or .json (marl-eval)")


def marl_eval(comparison: Comparison, points: int = MARL_EVAL_STEPS) -> dict[str, Any]:
    """marl-eval's raw-data layout: ``{"mosaic": {env: {group: {"run_k": {"step_i": {"step_count": N,
    "return": [v]}, …, "absolute_metrics": {"return": [score]}}}}}}``. The steps are one grid per
    env (every run's training score so far, as the sample-efficiency plot draws it); ``absolute_metrics`` (last,
    as marl-eval reads it) holds the run's score. An env with a run that has no curve (an
    evaluation alone) gets ``absolute_metrics`` only."""
    out: dict[str, Any] = {}
    for env in comparison.envs:
        runs = [(label, s) for label, by_env in comparison.scores.items() for s in by_env.get(env, [])]
        curves = None
        if runs and all(s.points for _label, s in runs):
            curves = score_matrix([s.points for _label, s in runs], [s.ended for _label, s in runs], points=points)
        tables: dict[str, Any] = {label: {} for label, by_env in comparison.scores.items() if by_env.get(env)}
        for row, (label, scored) in enumerate(runs):
            steps = {}
            if curves is not None:
                grid, values = curves
                steps = {
                    f"step_{i + 1}": {"step_count": int(step), METRIC: [float(values[row][i])]}
                    for i, step in enumerate(grid)
                }
            run = f"run_{len(tables[label])}"
            tables[label][run] = {**steps, "absolute_metrics": {METRIC: [scored.score.value]}}
        out[env] = tables
    return {"mosaic": out}


def _write(path: Path, write) -> None:
    with atomic_output(path, flag="--export") as handle:
        write(handle)
