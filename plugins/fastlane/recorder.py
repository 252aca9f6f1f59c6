"""A second, independent ``on_frame`` consumer: saves every Nth frame of each env as PNG.

Turned on by ``extras.fastlane_record = N``; files land in ``videos/fastlane/`` inside the
run directory as ``env<index>-step<global_step>.png``. It exists to show that frame
consumers compose: it only sees what the ``mosaic_on_frame`` hook hands every consumer.
Files are written through a fresh private file and renamed into place, and the folders must
be real directories: nothing is written through a symbolic link planted in the run directory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from mosaic_core import ChildContext, FrameInfo

SUBDIR = Path("videos") / "fastlane"
_seen: dict[int, int] = {}  # env index -> frames seen in this process


def record(child: ChildContext, frame: np.ndarray, info: FrameInfo, every: int) -> Path | None:
    """Write the frame if it is the Nth of its env; returns the file written."""
    count = _seen.get(info.env_index, 0) + 1
    _seen[info.env_index] = count
    if every < 1 or count % every:
        return None
    from mosaic_core.files import write_atomic
    from mosaic_fastlane.frames import encode_png

    folder = real_directory(Path(child.run_dir), SUBDIR)
    path = folder / f"env{info.env_index}-step{info.global_step:09d}.png"
    write_atomic(path, encode_png(frame, level=1))
    return path


def real_directory(root: Path, relative: Path) -> Path:
    """``root/relative``, each folder made if missing and refused if it is not a real directory."""
    folder = root
    for part in relative.parts:
        folder = folder / part
        try:
            folder.mkdir()
        except FileExistsError:
            pass
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            raise OSError(f"{folder} is not a directory (a symbolic link?); no frames are recorded there")
    return folder
