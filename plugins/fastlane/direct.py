"""Frames a training program publishes itself (``mosaic_core.child.publish_frame``), for envs that
bypass ``gym.make`` and so FastLane's wrapper: PettingZoo, EnvPool, a Ray env runner.

The program asks :func:`wanted` (through ``mosaic_core.child.frame_wanted``) before rendering:
each env index is throttled by ``interval_ms`` like a wrapped env. A frame is downscaled and
written into the env's slot; in grid mode its tile carries the frame's global step as its tick,
so the frames of one vector step tile together. Imports no gymnasium.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mosaic_fastlane.frames import as_frame, downscale
from mosaic_fastlane.segment import FastLaneError, SegmentMissing, UntrustedSegment, open_segment
from mosaic_fastlane.writer import SlotWriter

if TYPE_CHECKING:
    from mosaic_core import ChildContext, FrameInfo
    from mosaic_fastlane.settings import Settings

_next_due: dict[int, float] = {}  # env index -> monotonic time its next frame is due
_writers: dict[int, SlotWriter | None] = {}  # env index -> its slot writer (None: disabled)


def wanted(settings: Settings, env_index: int) -> bool:
    """Whether env ``env_index`` publishes and its next frame is due (one clock read)."""
    if not settings.publishes(env_index) or _writers.get(env_index, True) is None:
        return False
    return time.monotonic() >= _next_due.get(env_index, 0.0)


def write(child: ChildContext, settings: Settings, frame: np.ndarray, info: FrameInfo) -> None:
    """Write ``frame`` into env ``info.env_index``'s slot (a frame not due yet is dropped)."""
    index = info.env_index
    if not wanted(settings, index):
        return
    _next_due[index] = time.monotonic() + settings.interval_ms / 1000.0
    writer = _writers[index] if index in _writers else _attach(child, settings, index)
    if writer is None:
        return
    try:
        writer.publish(
            downscale(as_frame(np.asarray(frame)), settings.max_dim),
            tick=info.global_step,
            global_step=info.global_step,
            episode_count=info.episode_count,
            last_reward=info.last_reward,
            rolling_return=info.rolling_return,
            step_rate_hz=info.step_rate_hz,
        )
    except (OSError, ValueError, FastLaneError) as exc:
        _disable(child, index, f"publishing a frame of env {index} failed ({exc}); FastLane is off for it")


def _attach(child: ChildContext, settings: Settings, index: int) -> SlotWriter | None:
    try:
        mapping = open_segment(
            name=settings.segment, directory=Path(settings.shm_dir), writable=True, host_pid=settings.host_pid
        )
        try:
            _writers[index] = SlotWriter(mapping, settings.slot_of(index), index)
        except BaseException:
            mapping.close()
            raise
    except (SegmentMissing, UntrustedSegment, FastLaneError, OSError) as exc:
        _disable(child, index, f"{exc}; no frames from env {index} (training goes on)")
    return _writers.get(index)


def _disable(child: ChildContext, index: int, message: str) -> None:
    _writers[index] = None
    child.publish("fastlane", {"error": message})


def close() -> None:
    """Release every slot this process writes (at exit; the host removes the segment)."""
    for index, writer in list(_writers.items()):
        if writer is not None:
            writer.close()
        _writers.pop(index, None)
