"""``curriculum/stage`` in TensorBoard, written from the training process.

The script's own scalars drive it (hook ``mosaic_on_scalar``): whenever the script writes a
scalar at some ``global_step`` and the stage word differs from the last stage written, the
stage index is written at that step. So the curve shares the script's step axis, and the
TensorBoard writer is the one library the script already imported (``torch.utils.tensorboard``
or ``tensorboardX``): nothing heavy is imported by the host or by this plugin. Events go to
``curriculum/`` beside the folder of the writer that wrote the script's first scalar (``runs/curriculum``
next to the script's ``runs/<run_name>``), inside the run directory.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mosaic_core.files import is_within

TAG = "curriculum/stage"
SUBDIR = "curriculum"
_WRITERS = ("torch.utils.tensorboard.writer", "tensorboardX.writer")


def curve_dir(run_dir: Path, writer_dir: str | None) -> Path:
    """Where the stage curve goes: beside the script's writer's folder (``writer_dir``, relative
    to this process's working directory), else ``runs/``; one outside the run directory is ignored."""
    base = run_dir.resolve()
    root = Path(writer_dir).resolve().parent if writer_dir else base / "runs"
    if root == base or not is_within(base, root):
        root = base / "runs"
    return root / SUBDIR


class StageScalars:
    """Writes the stage index when it changes, at the step of the script's next scalar."""

    def __init__(self, directory: Path, read_stage: Callable[[], int]):
        self.directory = directory
        self._read_stage = read_stage
        self._writer: Any = None
        self.written: int | None = None

    def observe(self, step: int | None) -> None:
        if step is None:
            return
        stage = self._read_stage()
        if stage == self.written:
            return
        writer = self._writer or self._open()
        if writer is None:
            return
        self.written = stage
        writer.add_scalar(TAG, stage, step)
        writer.flush()

    def _open(self) -> Any:
        module = next((sys.modules[name] for name in _WRITERS if name in sys.modules), None)
        if module is None:
            return None
        self._writer = module.SummaryWriter(log_dir=str(self.directory))
        atexit.register(self.close)
        return self._writer

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
