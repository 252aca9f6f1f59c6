"""A match's board, live: the match publishes frames of the game (the PettingZoo env rendered as
``rgb_array`` by its own renderer, downscaled) into its folder, and a viewer in another process (the
dashboard, through the core hook ``mosaic_frame_source``) reads the newest.

The match writes ``frames/latest.npz`` (the pixels, compressed) and then ``frames/state.json``
(``published``, a counter; ``ended``; ``interval_ms``), each atomically: a reader sees a whole frame
or the one before. A frame is rendered at most every ``INTERVAL_MS`` while the match plays, at once
when a human seat is to move (the person sees the board they decide on) and when their game ends,
and once more at the match's end; that last frame stays (a finished match shows its last board). A reader loads the pixels
as data only (no pickle), bounded in size and shape.
"""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from mosaic_core import FrameSource, NoFrames

__all__ = ["FRAMES_DIR", "INTERVAL_MS", "FramePublisher", "MatchFrames", "is_match"]

FRAMES_DIR = "frames"
INTERVAL_MS = 500  # a render costs ~15 ms (pygame, downscale, compression): ~3 % of a fast match
MAX_DIM = 320  # a frame's longest side (PettingZoo's boards render at 700-1000 pixels)
MAX_FRAME_BYTES = 4 << 20


def is_match(run_dir: Path) -> bool:
    """Whether ``run_dir`` is a match's folder (its config says ``kind: match``)."""
    from mosaic_core.files import read_private_text

    try:
        config = json.loads(read_private_text(run_dir / "config.json", limit=1 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("kind") == "match"


class FramePublisher:
    """The match's side: renders ``env`` into the folder's ``frames/`` when a frame is due."""

    def __init__(self, folder: Path, env: Any):
        self.folder, self.env = folder / FRAMES_DIR, env
        self.published, self.due = 0, 0.0
        self.broken: str | None = None  # a renderer that failed once is not asked again

    def offer(self, urgent: bool = False) -> None:
        """A frame of the board now if one is due (``urgent``: a person decides on it, or their game ended)."""
        now = time.monotonic()
        if self.broken or (not urgent and now < self.due):
            return
        self.due = now + INTERVAL_MS / 1000
        self._render(ended=False)

    def end(self) -> None:
        """The match is over: its final board, and no frame after it (it stays)."""
        if not self._render(ended=True) and self.published and not self.broken:
            self._write_state(ended=True)

    def _render(self, ended: bool) -> bool:
        if self.broken:
            return False
        try:
            pixels = self.env.render()
        except Exception as exc:  # a game that cannot render: the match plays on without frames
            return self._break(exc)
        if not (isinstance(pixels, np.ndarray) and pixels.ndim == 3 and pixels.dtype == np.uint8):
            return False
        try:
            self._write(_downscaled(pixels), ended)
        except OSError as exc:  # a full disk: the match plays on, without frames
            return self._break(exc)
        return True

    def _break(self, exc: Exception) -> bool:
        self.broken = f"{type(exc).__name__}: {exc}"
        print(f"mosaic: match: no live frames from here on ({self.broken})", file=sys.stderr)
        return False

    def _write(self, pixels: np.ndarray, ended: bool) -> None:
        from mosaic_core.files import write_atomic

        self.folder.mkdir(mode=0o700, exist_ok=True)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, pixels=pixels)
        write_atomic(self.folder / "latest.npz", buffer.getvalue())
        self.published += 1
        self._write_state(ended)

    def _write_state(self, ended: bool) -> None:
        from mosaic_core.files import write_json_atomic

        state = {"published": self.published, "ended": ended, "interval_ms": INTERVAL_MS}
        write_json_atomic(self.folder / "state.json", state)


def _downscaled(pixels: np.ndarray) -> np.ndarray:
    step = -(-max(pixels.shape[:2]) // MAX_DIM)  # ceil
    return np.ascontiguousarray(pixels[::step, ::step, :3])


class MatchFrames(FrameSource):
    """A match's frames for a viewer (the arena's ``mosaic_frame_source``)."""

    publishing = True

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir

    def open(self) -> _Reader:
        if not (self.run_dir / FRAMES_DIR / "state.json").exists():
            raise NoFrames(f"match {self.run_dir.name} has published no frame yet")
        return _Reader(self.run_dir / FRAMES_DIR)


class _Frame:
    def __init__(self, pixels: np.ndarray):
        self.pixels = pixels

    def metrics(self) -> dict[str, Any]:
        return {}


class _Reader:
    """The newest frame of a match (:class:`mosaic_core.FrameReader`)."""

    interval_ms = INTERVAL_MS

    def __init__(self, folder: Path):
        self.folder = folder

    def _state(self) -> dict[str, Any]:
        from mosaic_core.files import read_private_text

        try:
            state = json.loads(read_private_text(self.folder / "state.json", limit=4096))
        except (OSError, ValueError):
            raise NoFrames(f"the frames of match {self.folder.parent.name} are gone") from None
        return state if isinstance(state, dict) else {}

    def frames_published(self) -> int:
        published = self._state().get("published")
        return published if isinstance(published, int) else 0

    def ended(self) -> bool:
        return self._state().get("ended") is True

    def latest(self) -> _Frame | None:
        from mosaic_core.files import open_private

        try:
            with open_private(self.folder / "latest.npz") as handle:
                data = handle.read(MAX_FRAME_BYTES + 1)
        except OSError:
            return None
        if len(data) > MAX_FRAME_BYTES:
            raise NoFrames(f"the frame of match {self.folder.parent.name} is over {MAX_FRAME_BYTES} bytes")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                pixels = archive["pixels"]
        except Exception:  # a damaged archive (zipfile's, numpy's errors): no frame now
            return None
        if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] not in (1, 3, 4):
            raise NoFrames(f"the frame of match {self.folder.parent.name} is not an image")
        return _Frame(pixels)

    def wait(self, timeout: float) -> _Frame | None:
        deadline = time.monotonic() + timeout
        while (frame := self.latest()) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return frame

    def status(self) -> dict[str, Any]:
        state = self._state()
        published = state.get("published") if isinstance(state.get("published"), int) else 0
        ended = state.get("ended") is True
        return {"mode": "board", "frame_number": published, "frames_published": published, "ended": ended,
                "interval_ms": INTERVAL_MS}  # fmt: skip

    def close(self) -> None:
        pass
