"""A second, independent ``on_frame`` consumer: saves every Nth frame of each env as PNG.

Turned on by ``extras.fastlane_record = N``; files land in ``videos/fastlane/`` inside the
run directory as ``env<index>-step<global_step>.png``. It exists to show that frame
consumers compose: it only sees what the ``mosaic_on_frame`` hook hands every consumer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from mosaic_core.child import ChildContext, FrameInfo

SUBDIR = Path("videos") / "fastlane"
_seen: dict[int, int] = {}  # env index -> frames seen in this process


def record(child: "ChildContext", frame: "np.ndarray", info: "FrameInfo", every: int) -> Path | None:
    """Write the frame if it is the Nth of its env; returns the file written."""
    count = _seen.get(info.env_index, 0) + 1
    _seen[info.env_index] = count
    if every < 1 or count % every:
        return None
    from mosaic_fastlane.frames import encode_png

    folder = Path(child.run_dir) / SUBDIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"env{info.env_index}-step{info.global_step:09d}.png"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(encode_png(frame, level=1))
    tmp.replace(path)
    return path
