"""FastLane as a viewer's frame source (:func:`~mosaic_core.hookspecs.mosaic_frame_source`): the
dashboard reads a run's segment through this, without importing FastLane."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic_core import FrameSource, NoFrames
from mosaic_fastlane.settings import is_enabled


class FastLaneSource(FrameSource):
    def __init__(self, run_dir: Path, extras: dict[str, Any]):
        self.run_dir = run_dir
        try:
            self.publishing = bool(is_enabled(extras))
        except Exception:  # an extras value FastLane itself would refuse: the run had no segment
            self.publishing = False

    def open(self) -> Any:
        """The run's segment, read-only; NoFrames saying why when it has none (ended, off, starting)."""
        from mosaic_fastlane.cli import explain_missing
        from mosaic_fastlane.reader import FastLaneReader
        from mosaic_fastlane.segment import SegmentMissing

        try:
            return FastLaneReader(self.run_dir.name)  # an mmap of a small file: quick
        except SegmentMissing:
            raise NoFrames(explain_missing(self.run_dir.name, str(self.run_dir.parent))) from None
