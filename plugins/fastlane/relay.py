"""FastLane frames of a run executed elsewhere (a launcher's node), relayed to the caller's
machine at a bounded rate: this plugin's :class:`~mosaic_core.types.RunRelay` (hook
``mosaic_run_relay``).

On the node, the run's host writes its segment into a private directory made for it
(``MOSAIC_FASTLANE_SHM_DIR``), so it never meets the caller's segment of the same run id when
caller and node share a machine. :class:`NodeFrames` reads it there and hands out the slots'
frames newer than the caller has, PNG-encoded. The launcher asks at most :data:`FRAMES_PER_S`
times a second, over the channel that carries the run's events, and :class:`CallerFrames`
publishes them into the run's local segment, which this plugin created at ``run_started``:
``mosaic fastlane watch``, the dashboard and any ``FastLaneReader`` here read a remote run as a
local one.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from mosaic_core import RunRelay
from mosaic_core.files import private_dir
from mosaic_fastlane import layout

FRAMES_PER_S = 4.0  # per slot, at most: the relay's bound (a frame is a PNG of at most max_dim px)
FRAMES_PREFIX = "mosaic-relay-fl-"  # the node's frame directories (``mosaic-fl-`` is FastLane's segments)
PNG_LEVEL = 1  # fast: the node encodes while its run trains
_METRICS = ("tick", "global_step", "episode_count", "last_reward", "rolling_return", "step_rate_hz")


class NodeFrames(RunRelay):
    """The node's side: the run's segment, in a private directory made for it."""

    rate_hz = FRAMES_PER_S

    def __init__(self, run_id: str):
        self.segment = layout.segment_name(run_id)
        base = layout.shm_dir()  # the node's shared memory (0700 dir: no other user looks in)
        self.directory = private_dir(FRAMES_PREFIX, base if os.access(base, os.W_OK) else None)
        self.reader: Any = None

    def node_env(self) -> dict[str, str]:
        return {layout.SHM_DIR_VAR: str(self.directory)}

    def collect(self, mark: Any) -> list[Any]:
        return self.newer({int(k): int(v) for k, v in (mark or {}).items()})

    def newer(self, marks: dict[int, int]) -> list[dict[str, Any]]:
        """Each slot's newest frame whose number is above ``marks[slot]``, as a PNG and its metrics."""
        from mosaic_fastlane.frames import encode_png
        from mosaic_fastlane.reader import FastLaneReader
        from mosaic_fastlane.segment import FastLaneError

        if self.reader is None:
            try:
                self.reader = FastLaneReader(name=self.segment, directory=self.directory)
            except FastLaneError:  # not created yet (the run is starting), or FastLane is off there
                return []
        out = []
        try:
            for slot in range(self.reader.header.slot_count):
                frame = self.reader.read_slot(slot)
                if frame is None or frame.frame_number <= marks.get(slot, 0):
                    continue
                out.append(
                    {
                        "slot": slot,
                        "env_index": frame.env_index,
                        "frame_number": frame.frame_number,
                        "png": encode_png(frame.pixels, level=PNG_LEVEL),
                        **{key: getattr(frame, key) for key in _METRICS},
                    }
                )
        except (FastLaneError, OSError, ValueError):  # frames are a view: the run's events go on without them
            return []
        return out

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        shutil.rmtree(self.directory, ignore_errors=True)


class CallerFrames(RunRelay):
    """The caller's side: publishes relayed frames into this run's local segment."""

    rate_hz = FRAMES_PER_S

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.marks: dict[int, int] = {}  # slot -> the node's number of the newest frame relayed
        self.writers: dict[int, Any] = {}  # slot -> its SlotWriter (each maps the segment itself), None: no such slot
        self.header: Any = None
        self.off = False

    def mark(self) -> Any:
        return None if self.off else dict(self.marks)

    def deliver(self, items: list[Any]) -> None:
        self.publish(items)

    def publish(self, frames: list[dict[str, Any]]) -> None:
        if not frames or self.off:
            return
        from mosaic_fastlane.frames import decode_png, downscale
        from mosaic_fastlane.segment import FastLaneError

        try:
            for item in frames:
                writer = self._writer(item["slot"], item["env_index"])
                self.marks[item["slot"]] = item["frame_number"]
                if writer is None:
                    continue
                pixels = downscale(decode_png(item["png"]), self.header.max_dim)
                writer.publish(pixels, **{key: item[key] for key in _METRICS})
        except (FastLaneError, OSError, ValueError):  # our segment is gone (the run ends) or refused
            self.close()
            self.off = True

    def _writer(self, slot: int, env_index: int) -> Any:
        from mosaic_fastlane.segment import open_segment
        from mosaic_fastlane.writer import SlotWriter

        if slot in self.writers:
            return self.writers[slot]
        # Only the segment our own FastLane plugin made for this run (created by this process).
        mapping = open_segment(self.run_id, writable=True, host_pid=os.getpid())
        self.header = mapping.header
        if slot >= self.header.slot_count:  # the node's geometry differs: that slot is not shown here
            mapping.close()
            self.writers[slot] = None
            return None
        try:
            self.writers[slot] = SlotWriter(mapping, slot, env_index)
        except BaseException:
            mapping.close()
            raise
        return self.writers[slot]

    def close(self) -> None:
        """Give the slots up (the plugin removes the segment at ``run_finished``)."""
        for writer in self.writers.values():
            if writer is not None:
                writer.close()  # and its mapping
        self.writers.clear()
