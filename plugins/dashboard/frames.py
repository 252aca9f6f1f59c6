"""FastLane frames for the page: read through :class:`mosaic_fastlane.FastLaneReader`, JPEG-encoded
once per new frame and shared by every viewer of a run, and only while someone watches.

A :class:`FrameFeed` per watched run runs one producer task while it has viewers: it polls
the segment at twice the run's publish rate (``interval_ms`` from the segment header), encodes
each new frame once (in a worker thread) and wakes the viewers. The last viewer leaving stops
the task and closes the reader. The segment disappearing (the run ended) ends every stream.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any, AsyncIterator

import numpy as np

from mosaic_fastlane.reader import FastLaneReader, Frame
from mosaic_fastlane.segment import FastLaneError

JPEG_QUALITY = 80
BOUNDARY = "mosaicframe"
MIN_POLL_S, MAX_POLL_S = 0.01, 0.5


def encode_jpeg(pixels: np.ndarray, quality: int = JPEG_QUALITY) -> bytes:
    """A JPEG of an HxWxC uint8 frame (GRAY, RGB or RGBA; alpha is dropped)."""
    from PIL import Image

    image = pixels[:, :, 0] if pixels.shape[2] == 1 else pixels[:, :, :3]
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def mjpeg_part(jpeg: bytes) -> bytes:
    """One part of a ``multipart/x-mixed-replace`` stream, closed by the next boundary so that a
    browser shows it at once instead of waiting for the next frame."""
    head = f"Content-Type: image/jpeg\r\nContent-Length: {len(jpeg)}\r\n\r\n".encode()
    return head + jpeg + f"\r\n--{BOUNDARY}\r\n".encode()


def open_reader(run_id: str) -> FastLaneReader:
    """The run's reader; FastLaneError (SegmentMissing when there is no segment) otherwise."""
    return FastLaneReader(run_id)


def why_no_frames(run_dir: Path, error: FastLaneError) -> str:
    """Why a run has no frames to show, in FastLane's own words (ended, no FastLane, starting)."""
    from mosaic_fastlane.cli import explain_missing
    from mosaic_fastlane.segment import SegmentMissing

    if isinstance(error, SegmentMissing):
        return explain_missing(run_dir.name, str(run_dir.parent))
    return str(error)


def frame_status(reader: FastLaneReader) -> dict[str, Any]:
    """What the page shows next to the stream: counters and metrics of the newest frame."""
    frame = reader.latest()
    status: dict[str, Any] = {"mode": reader.header.mode.name.lower(), "slots": reader.header.slot_count,
                              "interval_ms": reader.header.interval_ms, "ended": reader.ended(),
                              "frames_published": reader.frames_published()}
    if frame is not None:
        status.update(frame.metrics())
    return status


class FrameFeed:
    """The frames of one run, for however many viewers."""

    def __init__(self, run_id: str, on_idle: Any = None):
        self.run_id = run_id
        self.viewers = 0
        self.jpeg: bytes | None = None
        self.number = 0  # frames encoded so far (each one different)
        self.encoded = 0
        self.ended = False
        self._on_idle = on_idle
        self._changed = asyncio.Condition()
        self._reader: FastLaneReader | None = None
        self._task: asyncio.Task | None = None

    async def stream(self) -> AsyncIterator[bytes]:
        """JPEG frames as they are published; ends with the run. FastLaneError if there is none."""
        if self._reader is None:
            self._reader = open_reader(self.run_id)  # an mmap of a small file: quick
        self.viewers += 1
        if self._task is None:
            self._task = asyncio.create_task(self._produce(), name=f"frames-{self.run_id}")
        seen = 0
        try:
            while True:
                async with self._changed:
                    await self._changed.wait_for(lambda: self.number > seen or self.ended)
                if self.number > seen and self.jpeg is not None:
                    seen = self.number
                    yield self.jpeg
                elif self.ended:
                    return
        finally:
            self.viewers -= 1
            if self.viewers == 0:
                await self._stop()

    def finish(self) -> None:
        """End every viewer's stream now (the server is shutting down)."""
        self.ended = True
        asyncio.get_running_loop().create_task(self._wake())

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _produce(self) -> None:
        reader = self._reader
        assert reader is not None
        poll_s = min(MAX_POLL_S, max(MIN_POLL_S, reader.header.interval_ms / 2000.0))
        last_published = 0
        try:
            while self.viewers > 0 and not self.ended:
                published = reader.frames_published()
                if published > last_published:
                    last_published = published
                    jpeg = await asyncio.to_thread(self._read_and_encode, reader)
                    if jpeg is not None:
                        async with self._changed:
                            self.jpeg, self.number = jpeg, self.number + 1
                            self._changed.notify_all()
                elif reader.ended():
                    break
                await asyncio.sleep(poll_s)
        except FastLaneError:
            pass  # a segment that went bad ends the stream like one that went away
        async with self._changed:
            self.ended = True
            self._changed.notify_all()

    def _read_and_encode(self, reader: FastLaneReader) -> bytes | None:
        frame: Frame | None = reader.latest()
        if frame is None:
            return None
        self.encoded += 1
        return encode_jpeg(frame.pixels)

    async def _stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._on_idle is not None:
            self._on_idle(self)


class FrameHub:
    """One :class:`FrameFeed` per watched run, dropped when its last viewer leaves."""

    def __init__(self) -> None:
        self.feeds: dict[str, FrameFeed] = {}
        self.encoded_total = 0

    def feed(self, run_id: str) -> FrameFeed:
        feed = self.feeds.get(run_id)
        if feed is None or feed.ended:
            feed = self.feeds[run_id] = FrameFeed(run_id, on_idle=self._idle)
        return feed

    def _idle(self, feed: FrameFeed) -> None:
        self.encoded_total += feed.encoded
        if self.feeds.get(feed.run_id) is feed:
            del self.feeds[feed.run_id]

    @property
    def viewers(self) -> int:
        return sum(feed.viewers for feed in self.feeds.values())

    @property
    def encoded(self) -> int:
        return self.encoded_total + sum(feed.encoded for feed in self.feeds.values())
