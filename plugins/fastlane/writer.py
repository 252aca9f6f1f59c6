"""The writer side: one process publishes frames into one slot of a run's segment.

A slot has exactly one writer. Claiming it is atomic (a POSIX record lock on the slot header
held only while the claim is checked and written); a slot whose writer is alive refuses a
second one with a clear error, and a slot whose writer died is taken over.

Publishing is a fixed sequence of stores (the sequence lock of :mod:`.layout`), written as a
generator, :meth:`SlotWriter.publish_steps`, with one store per step: :meth:`publish` runs it
to the end, and tests stop the writer between any two stores to read the page there.
"""

from __future__ import annotations

import fcntl
import math
import os
import struct
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from mosaic_fastlane import layout, trust
from mosaic_fastlane.layout import PAGE_HEADER, PAGE_SEQ, SLOT_HEADER, PixelFormat
from mosaic_fastlane.segment import FastLaneError, Mapping

_RENDER_AT = struct.Struct("<Q")
_claimed_here: set[tuple[str, int]] = set()  # (segment, slot) held by a live writer of this process


class SlotWriter:
    """Publishes frames and their metrics into ``slot`` of a writable mapping."""

    def __init__(self, mapping: Mapping, slot: int, env_index: int):
        header = mapping.header
        if not 0 <= slot < header.slot_count:
            raise FastLaneError(f"segment {mapping.name} has {header.slot_count} slot(s); slot {slot} does not exist")
        self.mapping, self.slot, self.env_index = mapping, slot, env_index
        self.capacity = header.page_capacity
        self._pid = os.getpid()
        self._slot_offset = layout.slot_offset(slot, header.slot_size)
        self._page_offsets = [
            layout.page_offset(slot, page, header.slot_size, self.capacity) for page in range(layout.PAGES_PER_SLOT)
        ]
        self._claim()
        buf = mapping.buf
        self.published = struct.unpack_from("<Q", buf, self._slot_offset + layout.SLOT_PUBLISHED_OFFSET)[0]
        self.busy_seconds = struct.unpack_from("<d", buf, self._slot_offset + layout.SLOT_BUSY_OFFSET)[0]
        self._seqs = [PAGE_SEQ.unpack_from(buf, offset)[0] for offset in self._page_offsets]
        self._pixels = [
            np.frombuffer(buf, np.uint8, count=self.capacity, offset=offset + layout.PAGE_HEADER_SIZE)
            for offset in self._page_offsets
        ]
        self.closed = False

    # ------------------------------------------------------------------ ownership
    def _locked(self, operation: Any) -> Any:
        try:
            fd, info = trust.open_trusted(self.mapping.path, os.O_RDWR, os.geteuid())
        except trust.UntrustedFile as exc:
            raise FastLaneError(f"refusing FastLane segment {exc}") from None
        try:
            if (info.st_dev, info.st_ino) != self.mapping.identity:
                raise FastLaneError(f"FastLane segment {self.mapping.name} was replaced by another file")
            fcntl.lockf(fd, fcntl.LOCK_EX, layout.SLOT_HEADER_SIZE, self._slot_offset)
            return operation()
        finally:
            os.close(fd)  # closing releases the record lock

    def _claim(self) -> None:
        key = (self.mapping.name, self.slot)

        def claim() -> None:
            pid, _index, start, _published, _busy = SLOT_HEADER.unpack_from(self.mapping.buf, self._slot_offset)
            taken_here = pid == self._pid and key in _claimed_here
            if pid and (taken_here or (pid != self._pid and layout.process_alive(pid, start))):
                raise FastLaneError(
                    f"slot {self.slot} of FastLane segment {self.mapping.name} already has a writer (pid {pid}); "
                    "one writer per slot"
                )
            struct.pack_into(
                "<IiQ", self.mapping.buf, self._slot_offset, self._pid, self.env_index, layout.process_start(self._pid)
            )

        try:
            self._locked(claim)
        except FileNotFoundError:
            raise FastLaneError(f"FastLane segment {self.mapping.name} was removed") from None
        _claimed_here.add(key)

    def close(self) -> None:
        """Give the slot up (frames stay readable); safe to call twice or after fork."""
        if self.closed:
            return
        self.closed = True
        self._pixels = []
        if os.getpid() != self._pid:
            return
        _claimed_here.discard((self.mapping.name, self.slot))

        def release() -> None:
            pid = struct.unpack_from("<I", self.mapping.buf, self._slot_offset)[0]
            if pid == self._pid:
                struct.pack_into("<IiQ", self.mapping.buf, self._slot_offset, 0, self.env_index, 0)

        try:
            self._locked(release)
        except OSError:
            pass  # the host removed the segment already
        self.mapping.close()

    # ------------------------------------------------------------------ publishing
    def publish(
        self,
        frame: np.ndarray,
        *,
        tick: int = 0,
        global_step: int = 0,
        episode_count: int = 0,
        last_reward: float = 0.0,
        rolling_return: float | None = None,
        step_rate_hz: float = 0.0,
    ) -> bool:
        """Copy one HxWxC uint8 frame and its metrics into the next page; False when closed."""
        if self.closed or os.getpid() != self._pid:
            return False
        for _step in self.publish_steps(
            frame,
            tick=tick,
            global_step=global_step,
            episode_count=episode_count,
            last_reward=last_reward,
            rolling_return=rolling_return,
            step_rate_hz=step_rate_hz,
        ):
            pass
        return True

    def publish_steps(
        self,
        frame: np.ndarray,
        *,
        tick: int = 0,
        global_step: int = 0,
        episode_count: int = 0,
        last_reward: float = 0.0,
        rolling_return: float | None = None,
        step_rate_hz: float = 0.0,
    ) -> Iterator[str]:
        """The stores of one publish, one per step, in the order readers rely on.

        Yields after each store the name of what was stored: ``busy`` (the page's ``seq`` is
        odd), ``pixels``, ``metrics`` (the rest of the page header), ``settled`` (``seq`` even),
        ``announced`` (the slot's ``published``). Pixels and metrics change only while the
        page is busy; a reader that sees an even ``seq`` before and after its copy has a whole frame.
        """
        if frame.ndim == 2:
            frame = frame[:, :, None]
        height, width, channels = frame.shape
        pixel_format = PixelFormat.for_channels(channels)
        nbytes = height * width * channels
        if nbytes > self.capacity:
            raise ValueError(f"a {height}x{width}x{channels} frame does not fit a page of {self.capacity} bytes")
        page = self.published % layout.PAGES_PER_SLOT
        offset, seq = self._page_offsets[page], self._seqs[page]
        writing = seq + 1 if seq % 2 == 0 else seq + 2  # odd; a dead writer may have left it odd
        number = self.published + 1
        buf = self.mapping.buf
        PAGE_SEQ.pack_into(buf, offset, writing)
        yield "busy"
        np.copyto(self._pixels[page][:nbytes].reshape(height, width, channels), frame, casting="unsafe")
        yield "pixels"
        PAGE_HEADER.pack_into(
            buf,
            offset,
            writing,
            tick,
            global_step,
            episode_count,
            height,
            width,
            channels,
            int(pixel_format),
            last_reward,
            math.nan if rolling_return is None else rolling_return,
            step_rate_hz,
            time.time(),
            self.env_index,
            number,
        )
        yield "metrics"
        PAGE_SEQ.pack_into(buf, offset, writing + 1)
        self._seqs[page] = writing + 1
        yield "settled"
        self.published = number
        struct.pack_into("<Q", buf, self._slot_offset + layout.SLOT_PUBLISHED_OFFSET, number)
        yield "announced"

    def add_busy(self, seconds: float) -> None:
        """Account time spent rendering and publishing (readers and the manifest show it)."""
        if not self.closed and os.getpid() == self._pid:
            self.busy_seconds += seconds
            struct.pack_into("<d", self.mapping.buf, self._slot_offset + layout.SLOT_BUSY_OFFSET, self.busy_seconds)

    # ------------------------------------------------------------------ grid coordination
    def render_at(self) -> int:
        """The env clock at which every grid env renders its next tile."""
        return _RENDER_AT.unpack_from(self.mapping.buf, layout.RENDER_AT_OFFSET)[0]

    def request_render_at(self, clock: int) -> None:
        """Leader only: ask every grid env to render when its clock reaches ``clock``."""
        _RENDER_AT.pack_into(self.mapping.buf, layout.RENDER_AT_OFFSET, clock)
