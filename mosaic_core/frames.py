"""Live frames of a run, for a viewer in the host (the dashboard): what a frame-source plugin
(FastLane) returns from :func:`~mosaic_core.hookspecs.mosaic_frame_source`, so a viewer reads
frames without importing the plugin that publishes them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

from mosaic_core.errors import MosaicError


class NoFrames(MosaicError):
    """A run has no frames to read now; the message says why, to a person (the run ended, it
    publishes none, its frames are not yours to read)."""


class LiveFrame(Protocol):
    """One frame: ``HxWxC`` uint8 pixels (gray, RGB or RGBA) and the metrics it came with."""

    pixels: Any

    def metrics(self) -> dict[str, Any]: ...


class FrameReader(Protocol):
    """An open view of a run's newest frames. Any call may raise :class:`NoFrames` (the frames
    went away or went bad)."""

    interval_ms: int  # how often the run publishes a frame (a viewer polls at about half that)

    def frames_published(self) -> int: ...  # a counter that grows with each frame

    def ended(self) -> bool: ...  # the run is over: no frame will come

    def latest(self) -> LiveFrame | None: ...  # the newest frame (None before the first)

    def wait(self, timeout: float) -> LiveFrame | None: ...  # the newest frame, waiting for a first

    def status(self) -> dict[str, Any]: ...  # for the page: ended, frames_published, interval_ms, …

    def close(self) -> None: ...


class FrameSource(ABC):
    """Where one run's frames come from. Made cheaply (opens nothing) by a plugin's
    :func:`~mosaic_core.hookspecs.mosaic_frame_source`."""

    #: whether the run's config asks this source for frames (a viewer offers to show them)
    publishing: bool = False

    @abstractmethod
    def open(self) -> FrameReader:
        """The run's frames; :class:`NoFrames` with the reason when there are none now."""
