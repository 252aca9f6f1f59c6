"""Evaluation videos: the MP4 of an evaluation's first episode (``mosaic evaluate --video``), with
whichever encoder the worker's environment has; part of the run contract (:mod:`mosaic_core.contract`
names them too)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["VIDEO_ENCODERS", "VIDEO_FPS", "mp4_enjoy_extras", "no_video_encoder", "video_encoder", "write_mp4"]

# What writes an evaluation's MP4, the first found: OpenCV (XuanCe's environment brings it),
# imageio's ffmpeg, moviepy. A worker environment with none refuses --video in one line.
VIDEO_ENCODERS = ("cv2", "imageio_ffmpeg", "moviepy")
VIDEO_FPS = 30
_FIND_ENCODER = "import importlib.util as u; print(next((n for n in %r if u.find_spec(n)), ''))" % (VIDEO_ENCODERS,)


def video_encoder(python: str | None = None) -> str | None:
    """The MP4 encoder (:data:`VIDEO_ENCODERS`) of the Python at ``python`` (a worker's
    environment; None: this one), or None when it has none: checked without importing any."""
    if python is None:
        import importlib.util

        return next((name for name in VIDEO_ENCODERS if importlib.util.find_spec(name)), None)
    import subprocess

    from mosaic_core.procs import NEUTRAL_CWD, python_command

    try:
        done = subprocess.run(
            python_command(python, "-c", _FIND_ENCODER), capture_output=True, text=True, timeout=60, cwd=NEUTRAL_CWD
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def mp4_enjoy_extras(video_format: str | None, live: bool) -> dict[str, Any] | None:
    """``Worker.enjoy_extras`` of a worker whose evaluate mode records an MP4 of the first episode
    (``extras.eval_capture_video``) and streams nothing live: no GIF, no ``--live``."""
    if live or video_format not in (None, "mp4"):
        return None
    return {"eval_capture_video": True} if video_format else {}


def no_video_encoder(worker: str) -> str:
    """The one line that refuses ``--video`` where a worker's environment has no encoder."""
    return (
        f"--video: the {worker} worker's environment has no MP4 encoder (none of "
        f"{', '.join(VIDEO_ENCODERS)} is installed there): install one into it (e.g. its python -m pip "
        "install opencv-python-headless), or evaluate without --video"
    )


def write_mp4(path: Path, frames: Sequence[Any], fps: int = VIDEO_FPS) -> Path:
    """``frames`` (RGB ``uint8`` arrays of one size) as an MP4 at ``path``, with this Python's
    :func:`video_encoder`; written beside it, then renamed. A RuntimeError without an encoder."""
    import numpy as np

    encoder = video_encoder()
    if encoder is None or not frames:
        raise RuntimeError("no MP4 encoder in this Python" if encoder is None else "no frame to write")
    path = Path(path)
    images = [np.ascontiguousarray(frame, dtype=np.uint8)[..., :3] for frame in frames]
    height, width = images[0].shape[:2]
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.tmp.mp4")
    try:
        if encoder == "cv2":
            import cv2

            writer = cv2.VideoWriter(str(temporary), cv2.VideoWriter.fourcc(*"mp4v"), fps, (width, height))
            for image in images:
                writer.write(cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
            writer.release()
        elif encoder == "imageio_ffmpeg":
            import imageio_ffmpeg

            sink = imageio_ffmpeg.write_frames(str(temporary), (width, height), fps=fps, macro_block_size=1)
            sink.send(None)
            for image in images:
                sink.send(image.tobytes())
            sink.close()
        else:
            try:
                from moviepy import ImageSequenceClip  # moviepy 2
            except ImportError:
                from moviepy.editor import ImageSequenceClip  # moviepy 1
            ImageSequenceClip(list(images), fps=fps).write_videofile(str(temporary), logger=None)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path
