"""Live frames for the page: read through the run's frame source (a plugin's
:func:`~mosaic_core.hookspecs.mosaic_frame_source`, FastLane's), JPEG-encoded once per new frame
and shared by every viewer of a run, and only while someone watches.

A :class:`FrameFeed` per watched run runs one producer task while it has viewers: it polls
the source at twice the run's publish rate (its ``interval_ms``), encodes
each new frame once (in a worker thread) and wakes the viewers. The last viewer leaving stops
the task and closes the reader. The frames going away (the run ended) end every stream.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np

from mosaic_core import FrameReader, LiveFrame, NoFrames
from mosaic_core.runstore.groups import read_config
from mosaic_core.toolkit import plugin_host

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


def extras_of(config: dict[str, Any] | None) -> dict[str, Any]:
    """A run's extras from its config (empty when the config is unreadable)."""
    extras = (config or {}).get("extras")
    return extras if isinstance(extras, dict) else {}


def open_frames(run_dir: Path) -> FrameReader:
    """The run's frames from the first plugin that serves them; NoFrames saying why otherwise."""
    source = plugin_host().frame_source(run_dir, extras_of(read_config(run_dir)))
    if source is None:
        raise NoFrames(f"no installed plugin publishes live frames (FastLane does), so run {run_dir.name} has none")
    return source.open()


def frames_wanted(run_dir: Path, config: dict[str, Any] | None) -> bool:
    """Whether the run's config asks a frame source for frames (the page offers a viewer)."""
    source = plugin_host().frame_source(run_dir, extras_of(config))
    return source is not None and source.publishing


class FrameFeed:
    """The frames of one run, for however many viewers."""

    def __init__(self, run_dir: Path, on_idle: Any = None):
        self.run_dir, self.run_id = run_dir, run_dir.name
        self.viewers = 0
        self.jpeg: bytes | None = None
        self.number = 0  # frames encoded so far (each one different)
        self.encoded = 0
        self.ended = False
        self._on_idle = on_idle
        self._changed = asyncio.Condition()
        self._reader: FrameReader | None = None
        self._task: asyncio.Task | None = None

    async def stream(self) -> AsyncIterator[bytes]:
        """JPEG frames as they are published; ends with the run. NoFrames if there are none."""
        if self._reader is None:
            self._reader = open_frames(self.run_dir)
        self.viewers += 1
        if self._task is None:
            self._task = asyncio.create_task(self._produce(), name=f"frames-{self.run_id}")
        seen = 0
        try:
            while True:

                def news(seen: int = seen) -> bool:
                    return self.number > seen or self.ended

                async with self._changed:
                    await self._changed.wait_for(news)
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
        poll_s = min(MAX_POLL_S, max(MIN_POLL_S, reader.interval_ms / 2000.0))
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
        except NoFrames:
            pass  # frames that went bad end the stream like frames that went away
        async with self._changed:
            self.ended = True
            self._changed.notify_all()

    def _read_and_encode(self, reader: FrameReader) -> bytes | None:
        frame: LiveFrame | None = reader.latest()
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

    def feed(self, run_dir: Path) -> FrameFeed:
        feed = self.feeds.get(run_dir.name)
        if feed is None or feed.ended:
            feed = self.feeds[run_dir.name] = FrameFeed(run_dir, on_idle=self._idle)
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
