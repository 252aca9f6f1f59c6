"""Learning curves: scalars read back from a run's TensorBoard event files, drawn with matplotlib.

Reading uses TensorBoard's own ``EventAccumulator``. It silently stops at a damaged record, so
its log is listened to for the records it had to skip: a truncated or corrupt file is reported
by name (and what could be read before the damage is kept). tensorboard and matplotlib are
imported only here, inside the functions.
"""

from __future__ import annotations

import io
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from mosaic_core import MosaicError
from mosaic_core.files import write_atomic
from mosaic_core.runstore.artifacts import EVENT_FILE, walk_files

DEFAULT_TAG = "charts/episodic_return"


@dataclass
class Curve:
    label: str
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)  # relative event files with a bad record


class _DamageListener(logging.Handler):
    """Collects the files tensorboard's record reader gave up on."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.files: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        message = str(record.msg)
        if message.startswith("Truncated record in") and record.args:
            self.files.add(str(record.args[0]))


def _require(module: str, package: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MosaicError(
            f"this command needs {package}, which is not installed ({exc}); pip install {package}"
        ) from None


def event_files(run_dir: Path) -> list[str]:
    """Relative paths of the TensorBoard event files of a run (the wandb/ copies left out)."""
    return [rel for rel, _info in walk_files(run_dir) if os.path.basename(rel).startswith(EVENT_FILE)]


def _read(run_dir: Path, wanted) -> tuple[dict[str, list[tuple[int, float]]], list[str]]:
    """The finite points of every scalar tag ``wanted(tag)`` accepts, across the run's event
    files, and the files tensorboard gave up on."""
    event_accumulator = _require("tensorboard.backend.event_processing.event_accumulator", "tensorboard")
    tb_logging = _require("tensorboard.util.tb_logging", "tensorboard")
    logger = tb_logging.get_logger()
    listener, level = _DamageListener(), logger.level
    logger.addHandler(listener)
    logger.setLevel(logging.DEBUG)
    points: dict[str, list[tuple[int, float]]] = {}
    try:
        for rel in event_files(run_dir):
            accumulator = event_accumulator.EventAccumulator(
                str(run_dir / rel), size_guidance={event_accumulator.SCALARS: 0}
            )
            try:
                accumulator.Reload()
            except Exception:  # an unreadable file: reported like a damaged one
                listener.files.add(str(run_dir / rel))
                continue
            for name in accumulator.Tags().get("scalars", []):
                if wanted(name):
                    points.setdefault(name, []).extend(
                        (e.step, e.value) for e in accumulator.Scalars(name) if math.isfinite(e.value)
                    )
    finally:
        logger.removeHandler(listener)
        logger.setLevel(level)
    return points, sorted(os.path.relpath(f, run_dir) for f in listener.files)


def _curve(label: str, points: list[tuple[int, float]], damaged: list[str]) -> Curve:
    points = sorted(points, key=lambda p: p[0])
    return Curve(label, [p[0] for p in points], [p[1] for p in points], damaged)


def read_scalars(run_dir: Path, tag: str, label: str | None = None) -> Curve:
    """Every ``tag`` scalar of a run, sorted by step, across all its event files."""
    points, damaged = _read(run_dir, lambda name: name == tag)
    return _curve(label or run_dir.name, points.get(tag, []), damaged)


def read_agent_scalars(run_dir: Path, tag: str, label: str | None = None) -> list[Curve]:
    """One curve per agent of a multi-agent run: its ``TAG/AGENT`` scalars (how multi-agent
    workers write an agent's value of ``TAG``), labelled ``LABEL AGENT``, sorted by agent."""
    prefix = tag + "/"
    points, damaged = _read(run_dir, lambda name: name.startswith(prefix) and "/" not in name[len(prefix) :])
    return [_curve(f"{label or run_dir.name} {name[len(prefix) :]}", points[name], damaged) for name in sorted(points)]


def smooth(values: list[float], window: int) -> list[float]:
    """Trailing moving average over ``window`` points (the first points average what exists)."""
    if window <= 1:
        return list(values)
    out, total = [], 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        out.append(total / min(index + 1, window))
    return out


# TensorBoard tags whose step is not the global step: a policy evaluation's per-episode and
# per-round scalars (training's periodic evaluation logs eval/mean_return at the global step).
X_LABELS = {"eval/episodic_return": "episode", "eval/episodic_length": "episode", "eval/discounted_return": "episode"}


def x_label(tag: str) -> str:
    return X_LABELS.get(tag, "global step")


def plot(curves: list[Curve], output: Path, window: int, tag: str) -> None:
    """Draw ``curves`` overlaid (raw faint, smoothed solid) into the PNG ``output``."""
    matplotlib = _require("matplotlib", "matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 5.5), dpi=100)
    try:
        for index, curve in enumerate(curves):
            color = f"C{index % 10}"
            axes.plot(curve.steps, curve.values, color=color, alpha=0.25, linewidth=0.8)
            axes.plot(curve.steps, smooth(curve.values, window), color=color, linewidth=2, label=curve.label)
        axes.set_xlabel(x_label(tag))
        axes.set_ylabel(tag + (f" (moving average of {window})" if window > 1 else ""))
        axes.grid(True, alpha=0.3)
        axes.legend(loc="best", fontsize="small")
        figure.tight_layout()
        png = io.BytesIO()  # rendered here, written by the one writer of user-named outputs
        figure.savefig(png, format="png")
    finally:
        plt.close(figure)
    write_atomic(output, png.getvalue(), flag="-o")


# ------------------------------------------------------------------ seed aggregation
GRID_POINTS = 200


@dataclass
class Band:
    """A group of runs (usually seeds) on one step axis: mean, std, min and max per step."""

    label: str
    runs: int
    steps: list[float]
    mean: list[float]
    std: list[float]
    low: list[float]
    high: list[float]
    finals: list[float]  # each run's final value: the mean of its last ``window`` points


def aggregate(label: str, runs: list[Curve], window: int) -> Band:
    """Align ``runs`` (smoothed by ``window``) on the steps they all cover, by linear
    interpolation on ``GRID_POINTS`` evenly spaced steps, and take mean/std/min/max per step."""
    import numpy as np

    runs = [c for c in runs if c.steps]
    if not runs:
        raise ValueError("no run with points to aggregate")
    start = max(c.steps[0] for c in runs)
    end = min(c.steps[-1] for c in runs)
    grid = np.linspace(start, end, GRID_POINTS) if end > start else np.array([float(end)])
    values = np.stack([np.interp(grid, c.steps, smooth(c.values, window)) for c in runs])
    finals = [float(np.mean(c.values[-window:])) for c in runs]
    return Band(
        label,
        len(runs),
        grid.tolist(),
        values.mean(0).tolist(),
        values.std(0).tolist(),
        values.min(0).tolist(),
        values.max(0).tolist(),
        finals,
    )


def plot_groups(groups: dict[str, list[Curve]], output: Path, window: int, tag: str, band: str = "std") -> list[Band]:
    """One line (mean) and one shaded band (± std, or min–max) per group, into the PNG ``output``."""
    matplotlib = _require("matplotlib", "matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    bands = [aggregate(label, runs, window) for label, runs in groups.items()]
    figure, axes = plt.subplots(figsize=(9, 5.5), dpi=100)
    try:
        for index, group in enumerate(bands):
            color = f"C{index % 10}"
            mean, std = np.asarray(group.mean), np.asarray(group.std)
            low, high = (mean - std, mean + std) if band == "std" else (group.low, group.high)
            axes.fill_between(group.steps, low, high, color=color, alpha=0.2, linewidth=0)
            axes.plot(group.steps, mean, color=color, linewidth=2, label=f"{group.label} (n={group.runs})")
        axes.set_xlabel(x_label(tag))
        spread = "mean ± std" if band == "std" else "mean, min–max"
        axes.set_ylabel(tag + (f" (moving average of {window})" if window > 1 else "") + f", {spread}")
        axes.grid(True, alpha=0.3)
        axes.legend(loc="best", fontsize="small")
        figure.tight_layout()
        png = io.BytesIO()  # rendered here, written by the one writer of user-named outputs
        figure.savefig(png, format="png")
    finally:
        plt.close(figure)
    write_atomic(output, png.getvalue(), flag="-o")
    return bands
