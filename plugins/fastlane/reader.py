"""The reader API: any process reads the newest frame of a run without slowing its writer.

    from mosaic_fastlane import FastLaneReader
    with FastLaneReader(run_id) as reader:
        frame = reader.wait(timeout=5)          # newest frame (a tiled image in grid mode)
        frame.pixels, frame.global_step, frame.step_rate_hz

Readers map the segment read-only, never write, never lock and never unlink it. A torn copy
(the writer lapped the reader) is detected by the page's sequence lock and retried.

**Only our own segments.** A reader maps a segment only if it is a regular 0600 file owned by
``owner_uid`` (default: the reader's effective uid); a link, a FIFO or another user's file is
refused with :class:`~mosaic_fastlane.segment.UntrustedSegment` (``mosaic fastlane snapshot
--owner USER`` to read another user's run, where permissions allow).

**Never back in time.** :meth:`FastLaneReader.latest` and :meth:`FastLaneReader.read_slot` are
monotonic per reader: each remembers the newest frame it returned (by ``frame_number`` per
slot; by ``tick`` for grid sets) and, when the newest frame it can read now is older (the
writer was caught between settling a page and announcing it, or lapped the copy), returns
that remembered frame again. A repeated frame means "nothing newer yet"; it is the same
object, so ``frame is previous`` tells a caller that cares.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mosaic_fastlane import layout
from mosaic_fastlane.layout import PAGE_HEADER, PAGE_SEQ, SLOT_HEADER, Mode, PixelFormat
from mosaic_fastlane.segment import FastLaneError, Header, Mapping, open_segment

_PUBLISHED = struct.Struct("<Q")
_FRAME_NUMBER = struct.Struct("<Q")
_FRAME_NUMBER_OFFSET = PAGE_HEADER.size - _FRAME_NUMBER.size
GRID = -1  # the key under which a reader remembers the newest grid set it returned


@dataclass(frozen=True)
class Frame:
    """One published frame (or a grid of tiles with one tick) and the metrics it was published with."""

    pixels: np.ndarray
    pixel_format: PixelFormat
    tick: int
    global_step: int
    episode_count: int
    last_reward: float
    rolling_return: float | None
    step_rate_hz: float
    timestamp: float
    env_index: int
    slot: int
    frame_number: int  # this frame's number in its slot: 1, 2, … (grid: summed over tiles)

    def metrics(self) -> dict[str, Any]:
        return {
            "global_step": self.global_step,
            "episode_count": self.episode_count,
            "last_reward": self.last_reward,
            "rolling_return": self.rolling_return,
            "step_rate_hz": self.step_rate_hz,
            "timestamp": self.timestamp,
            "tick": self.tick,
            "env_index": self.env_index,
            "frame_number": self.frame_number,
            "height": int(self.pixels.shape[0]),
            "width": int(self.pixels.shape[1]),
            "pixel_format": self.pixel_format.name,
        }


@dataclass(frozen=True)
class SlotState:
    slot: int
    writer_pid: int
    writer_alive: bool
    env_index: int
    published: int
    render_seconds: float  # time the writer spent rendering and publishing this slot's frames


class FastLaneReader:
    """Read-only view of a run's FastLane segment (by run id, or by segment ``name``)."""

    def __init__(
        self, run_id: str | None = None, *, name: str | None = None, directory=None, owner_uid: int | None = None
    ):
        self._mapping: Mapping | None = open_segment(run_id, name=name, directory=directory, owner_uid=owner_uid)
        self.header: Header = self._mapping.header
        self.name = self._mapping.name
        self._returned: dict[int, Frame] = {}  # slot (or GRID) -> newest frame returned
        self._grid_mark = (0, 0)  # (tick, tiles) of the newest grid set returned

    def __enter__(self) -> FastLaneReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._mapping is not None:
            self._mapping.close()
            self._mapping = None

    @property
    def _buf(self) -> memoryview:
        if self._mapping is None:
            raise FastLaneError("this FastLane reader is closed")
        return self._mapping.buf

    # ------------------------------------------------------------------ state
    def slots(self) -> list[SlotState]:
        states = []
        for slot in range(self.header.slot_count):
            pid, env_index, start, published, busy = SLOT_HEADER.unpack_from(
                self._buf, layout.slot_offset(slot, self.header.slot_size)
            )
            states.append(SlotState(slot, pid, layout.process_alive(pid, start), env_index, published, busy))
        return states

    def frames_published(self) -> int:
        return sum(self._published(slot) for slot in range(self.header.slot_count))

    def ended(self) -> bool:
        """True once the run is over: the host removed the segment, or the host is gone."""
        return self._mapping is None or not self._mapping.still_linked() or not self.header.owner_alive

    @property
    def interval_ms(self) -> float:
        return self.header.interval_ms

    def status(self) -> dict[str, Any]:
        """What a viewer shows beside the frames: counters and the newest frame's metrics."""
        frame = self.latest()
        status: dict[str, Any] = {
            "mode": self.header.mode.name.lower(),
            "slots": self.header.slot_count,
            "interval_ms": self.header.interval_ms,
            "ended": self.ended(),
            "frames_published": self.frames_published(),
        }
        if frame is not None:
            status.update(frame.metrics())
        return status

    def _published(self, slot: int) -> int:
        offset = layout.slot_offset(slot, self.header.slot_size) + layout.SLOT_PUBLISHED_OFFSET
        return _PUBLISHED.unpack_from(self._buf, offset)[0]

    # ------------------------------------------------------------------ frames
    def read_page(self, slot: int, page: int) -> Frame | None:
        """One consistent copy of a page, or None if it is empty or was overwritten while copied."""
        steps = self.read_page_steps(slot, page)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value

    def read_page_steps(self, slot: int, page: int) -> Generator[str, None, Frame | None]:
        """:meth:`read_page` one load at a time (``seq``, ``header``, ``pixels``; the check of
        ``seq`` again ends it and returns the frame or None), so that tests can run the writer
        between any two loads."""
        buf, header = self._buf, self.header
        offset = layout.page_offset(slot, page, header.slot_size, header.page_capacity)
        seq = PAGE_SEQ.unpack_from(buf, offset)[0]
        if seq == 0 or seq % 2:
            return None
        yield "seq"
        (
            _seq,
            tick,
            step,
            episodes,
            height,
            width,
            channels,
            pixel_format,
            last_reward,
            rolling,
            rate,
            stamp,
            env_index,
            number,
        ) = PAGE_HEADER.unpack_from(buf, offset)
        yield "header"
        nbytes = height * width * channels
        valid = channels in (1, 3, 4) and pixel_format == channels and 0 < nbytes <= header.page_capacity
        pixels = (
            np.frombuffer(buf, np.uint8, count=nbytes, offset=offset + layout.PAGE_HEADER_SIZE).copy()
            if valid
            else None
        )
        yield "pixels"
        if PAGE_SEQ.unpack_from(buf, offset)[0] != seq or _seq != seq:
            return None  # torn: the writer came back to this page during the copy
        if pixels is None:
            raise FastLaneError(
                f"segment {self.name} slot {slot} page {page} has an invalid geometry "
                f"{height}x{width}x{channels} (format {pixel_format})"
            )
        return Frame(
            pixels.reshape(height, width, channels),
            PixelFormat(pixel_format),
            tick,
            step,
            episodes,
            last_reward,
            None if math.isnan(rolling) else rolling,
            rate,
            stamp,
            env_index,
            slot,
            number,
        )

    def _newest_page(self, slot: int) -> tuple[int, int] | None:
        """(page, frame number) of the settled page with the highest frame number, if any."""
        best = None
        for page in range(layout.PAGES_PER_SLOT):
            offset = layout.page_offset(slot, page, self.header.slot_size, self.header.page_capacity)
            seq = PAGE_SEQ.unpack_from(self._buf, offset)[0]
            number = _FRAME_NUMBER.unpack_from(self._buf, offset + _FRAME_NUMBER_OFFSET)[0]
            if seq and seq % 2 == 0 and (best is None or number > best[1]):
                best = (page, number)
        return best

    def read_slot(self, slot: int = 0, attempts: int = 1000) -> Frame | None:
        """The newest frame of one slot (None before the first one), never older than one
        this reader returned before (see the module's "never back in time")."""
        previous = self._returned.get(slot)
        for _attempt in range(attempts):
            newest = self._newest_page(slot)
            if newest is None:
                if self._published(slot) == 0:
                    return previous
                continue  # both pages are being written: a writer that died mid-frame, or a lap
            page, number = newest
            if previous is not None and number <= previous.frame_number:
                return previous  # nothing newer: no copy needed
            frame = self.read_page(slot, page)
            if frame is not None:
                if previous is not None and frame.frame_number <= previous.frame_number:
                    return previous
                self._returned[slot] = frame
                return frame
        if previous is not None:
            return previous
        raise FastLaneError(
            f"segment {self.name} slot {slot}: the writer kept overwriting the page for {attempts} tries"
        )

    def tiles(self) -> list[Frame]:
        """Grid mode: the newest set of tiles rendered at one tick (never a mix of ticks).

        Each slot holds its last two frames. The newest tick that every publishing slot holds
        is chosen; if no tick is held by all (an env stopped publishing), the tick held by the
        most slots, newest first. Slots without that tick are left out.
        """
        by_slot: dict[int, dict[int, Frame]] = {}
        for slot in range(self.header.slot_count):
            if self._published(slot) == 0:
                continue
            frames = (self.read_page(slot, page) for page in range(layout.PAGES_PER_SLOT))
            by_slot[slot] = {frame.tick: frame for frame in frames if frame is not None}
        if not by_slot:
            return []
        ticks = sorted({tick for held in by_slot.values() for tick in held}, reverse=True)
        best = max(ticks, key=lambda tick: sum(tick in held for held in by_slot.values()))  # first max = newest
        return [held[best] for slot, held in sorted(by_slot.items()) if best in held]

    def latest(self) -> Frame | None:
        """The newest frame: slot 0 in single mode, the tiled consistent set in grid mode.

        Never older than a frame this reader returned before (same frame again if nothing newer).
        """
        if self.header.mode == Mode.SINGLE:
            return self.read_slot(0)
        previous = self._returned.get(GRID)
        tiles = self.tiles()
        if not tiles or (previous is not None and (tiles[0].tick, len(tiles)) <= self._grid_mark):
            return previous
        from mosaic_fastlane.frames import compose_grid

        lead = tiles[0]
        frame = replace(
            lead,
            pixels=compose_grid([t.pixels for t in tiles]),
            pixel_format=PixelFormat.RGB,
            episode_count=sum(t.episode_count for t in tiles),
            frame_number=sum(t.frame_number for t in tiles),
        )
        self._returned[GRID], self._grid_mark = frame, (lead.tick, len(tiles))
        return frame

    def wait(self, after: int = 0, timeout: float = 10.0, poll_s: float = 0.005) -> Frame | None:
        """Block until more than ``after`` frames were published, then return the newest (or None)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.frames_published() > after:
                frame = self.latest()
                if frame is not None:
                    return frame
            if time.monotonic() >= deadline or self.ended():
                return None
            time.sleep(poll_s)
