"""Learning curves: scalars read back from a run's TensorBoard event files, drawn with matplotlib.

:class:`RunScalars` is the one reader of a run's scalars (the ``mosaic_run_scalars`` hook, hence
every score, band and curve of :mod:`mosaic_core.runstore.score`, and ``mosaic plot``): TensorBoard's
own ``EventAccumulator``, one per folder of event files, as TensorBoard shows them. A folder's files
are read in order, so a resumed run's later file purges what an earlier attempt wrote past its
checkpoint (``purge_step``): one history. A reader is kept per run and reads only what was
appended since its last look, so a live run (a dashboard polling it) costs a ``stat`` per file.

``EventAccumulator`` silently stops at a damaged record, so its log is listened to for the records
it had to skip: a truncated or corrupt file is reported by name (and what could be read before
the damage is kept). tensorboard and matplotlib are imported only here, inside the functions.
"""

from __future__ import annotations

import io
import logging
import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import MosaicError
from mosaic_core.files import write_atomic
from mosaic_core.runstore.artifacts import EVENT_FILE, walk_files

DEFAULT_TAG = "charts/episodic_return"
OWN_RUNS = ("evaluations",)  # folders of a run holding runs of their own (`mosaic evaluate`'s)
READERS_KEPT = 64  # runs whose reader is kept between looks (a dashboard's)
# what an accumulator keeps: every scalar, one of anything else (a run's images, histograms)
KEEP = {"scalars": 0, "images": 1, "audio": 1, "histograms": 1, "compressedHistograms": 1, "tensors": 1}
_lock = threading.Lock()  # tensorboard's logger is process-wide: one read at a time
_readers: OrderedDict[str, RunScalars] = OrderedDict()


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
        if message.startswith("Truncated record in") and isinstance(record.args, tuple) and record.args:
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
    """Relative paths of the TensorBoard event files of a run (the wandb/ copies and the runs of
    its own under ``evaluations/`` left out)."""
    return list(_event_files(run_dir))


def _event_files(run_dir: Path) -> dict[str, tuple[int, int, int]]:
    """``{relative event file: (inode, size, mtime_ns)}`` of a run."""
    return {
        rel: (info.st_ino, info.st_size, info.st_mtime_ns)
        for rel, info in walk_files(run_dir)
        if os.path.basename(rel).startswith(EVENT_FILE) and Path(rel).parts[0] not in OWN_RUNS
    }


class RunScalars:
    """Every scalar of one run, read incrementally (see the module's docstring)."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.folders: dict[str, Any] = {}  # relative folder -> its EventAccumulator
        self.files: dict[str, tuple[int, int, int]] = {}  # relative event file -> (inode, size, mtime_ns) when read
        self.damaged: set[str] = set()  # relative event files tensorboard gave up on

    def refresh(self) -> bool:
        """Read what was appended since the last look; False when a file went away, shrank or is
        another file now (what was read no longer holds: read the run afresh)."""
        files = _event_files(self.run_dir)
        for rel, (inode, size, _mtime) in self.files.items():
            if rel not in files or files[rel][0] != inode or files[rel][1] < size:
                return False
        changed = sorted({os.path.dirname(rel) for rel, mark in files.items() if self.files.get(rel) != mark})
        if changed:
            self._reload(changed)
        self.files = files
        return True

    def _reload(self, folders: list[str]) -> None:
        event_accumulator = _require("tensorboard.backend.event_processing.event_accumulator", "tensorboard")
        logger = _require("tensorboard.util.tb_logging", "tensorboard").get_logger()
        listener, level, propagate = _DamageListener(), logger.level, logger.propagate
        logger.addHandler(listener)
        logger.setLevel(logging.DEBUG)  # its damage notes are debug records: heard here, shown nowhere
        logger.propagate = False
        try:
            for folder in folders:
                accumulator = self.folders.get(folder)
                if accumulator is None:
                    path = str(self.run_dir / folder)
                    accumulator = self.folders[folder] = event_accumulator.EventAccumulator(path, size_guidance=KEEP)
                try:
                    accumulator.Reload()
                except Exception:  # an unreadable folder: reported like a damaged file
                    self.damaged.update(rel for rel in _event_files(self.run_dir) if os.path.dirname(rel) == folder)
        finally:
            logger.removeHandler(listener)
            logger.setLevel(level)
            logger.propagate = propagate
        self.damaged.update(os.path.relpath(path, self.run_dir) for path in listener.files)

    def points(self, wanted) -> dict[str, list[tuple[int, float]]]:
        """The finite ``(step, value)`` points of every tag ``wanted(tag)`` accepts, in step order
        (points of one step in the order they were written)."""
        found: dict[str, list[tuple[int, float]]] = {}
        for folder in sorted(self.folders):
            accumulator = self.folders[folder]
            for tag in accumulator.Tags().get("scalars", []):
                if wanted(tag):
                    found.setdefault(tag, []).extend(
                        (e.step, e.value) for e in accumulator.Scalars(tag) if math.isfinite(e.value)
                    )
        return {tag: sorted(points, key=lambda p: p[0]) for tag, points in found.items()}


def run_scalars(run_dir: Path) -> RunScalars:
    """The run's reader, up to date (kept for the next look; a run whose files shrank is read afresh)."""
    key = str(run_dir.absolute())
    reader = _readers.pop(key, None)
    if reader is None or not reader.refresh():
        reader = RunScalars(run_dir)
        reader.refresh()
    _readers[key] = reader  # the newest looked at last
    while len(_readers) > READERS_KEPT:
        _readers.popitem(last=False)
    return reader


def _read(run_dir: Path, wanted) -> tuple[dict[str, list[tuple[int, float]]], list[str]]:
    """The finite points of every scalar tag ``wanted(tag)`` accepts and the files tensorboard
    gave up on."""
    with _lock:
        reader = run_scalars(run_dir)
        return reader.points(wanted), sorted(reader.damaged)


def scalar_points(run_dir: Path, tag: str) -> list[tuple[int, float]] | None:
    """The ``(step, value)`` points of ``tag`` in step order; None when the run has no event files."""
    with _lock:
        reader = run_scalars(run_dir)
        return reader.points(lambda name: name == tag).get(tag, []) if reader.files else None


def read_scalars(run_dir: Path, tag: str, label: str | None = None) -> Curve:
    """Every ``tag`` scalar of a run, in step order, across all its event files."""
    points, damaged = _read(run_dir, lambda name: name == tag)
    found = points.get(tag, [])
    return Curve(label or run_dir.name, [p[0] for p in found], [p[1] for p in found], damaged)


def read_agent_scalars(run_dir: Path, tag: str, label: str | None = None) -> list[Curve]:
    """One curve per agent of a multi-agent run: its ``TAG/AGENT`` scalars (how multi-agent
    workers write an agent's value of ``TAG``), labelled ``LABEL AGENT``, sorted by agent."""
    prefix = tag + "/"
    points, damaged = _read(run_dir, lambda name: name.startswith(prefix) and "/" not in name[len(prefix) :])
    return [
        Curve(f"{label or run_dir.name} {name[len(prefix) :]}", [p[0] for p in found], [p[1] for p in found], damaged)
        for name, found in sorted(points.items())
    ]


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
