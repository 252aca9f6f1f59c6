"""The curriculum in a training process (and its env processes): the stage the host chose, read
from the run's stage file, and the run's schedule; one state per process, shared by every env it
wraps and by :class:`~mosaic_curriculum.client.StageClient`."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic_curriculum.schedule import SCHEDULE_KEY, Schedule, load_schedule
from mosaic_curriculum.stagefile import StageFile, stage_path

if TYPE_CHECKING:
    from mosaic_core import ChildContext


def enabled(extras: dict[str, Any]) -> bool:
    """Curriculum mode: a schedule is given and the run trains (an evaluation plays env_id)."""
    return SCHEDULE_KEY in extras and extras.get("mode") != "policy_eval"


class StageReader:
    """Reads the stage word; maps the file on first use (once per process, shared by envs)."""

    def __init__(self, run_dir: Path):
        self.path = stage_path(run_dir)
        self._file: StageFile | None = None
        self._warned = False

    def __call__(self) -> int:
        if self._file is None:
            try:
                self._file = StageFile.open(self.path)
            except (OSError, ValueError) as exc:
                if not self._warned:
                    print(f"mosaic curriculum: cannot read the stage file, staying on stage 0: {exc}", file=sys.stderr)
                    self._warned = True
                return 0
        return self._file.read()


@dataclass
class ChildState:
    """One process's curriculum state for one run: shared by every env it wraps."""

    run_dir: Path
    schedule: Schedule
    read_stage: StageReader
    scalars: Any = None  # mosaic_curriculum.scalars.StageScalars once the script writes a scalar


_child: list[ChildState] = []  # at most one: a process belongs to one run


def child_state(child: ChildContext) -> ChildState | None:
    """This process's state for ``child``'s run, or None when curriculum mode is off."""
    if not enabled(child.extras):
        return None
    if not _child or _child[0].run_dir != child.run_dir:
        _child[:] = [ChildState(child.run_dir, load_schedule(child.extras[SCHEDULE_KEY]), StageReader(child.run_dir))]
    return _child[0]
