"""The run's current curriculum stage: one word in a 16-byte file, memory-mapped.

The host owns the file (``<run dir>/curriculum.stage``): it creates it when the run starts,
writes the stage index when it decides a transition, and removes it when the run ends.
Every process of the run that wraps an env maps it read-only, so checking the stage at an
episode reset is one memory read, with no system call and no lock. Layout (little-endian):
``b"MCUR"``, version (u32), stage (u32), reserved (u32). The stage is an aligned 4-byte
word written with a single store, so a reader sees the old or the new value, never a mix.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from mosaic_core.files import write_atomic

FILE_NAME = "curriculum.stage"
MAGIC = b"MCUR"
VERSION = 1
_HEADER = struct.Struct("<4sI")
_WORD = struct.Struct("<I")
_STAGE_OFFSET = 8
SIZE = 16


def stage_path(run_dir: Path | str) -> Path:
    return Path(run_dir) / FILE_NAME


class StageFile:
    """A mapped stage file; :meth:`create` for the host (writer), :meth:`open` for readers."""

    def __init__(self, path: Path, mapped: mmap.mmap, writable: bool):
        self.path, self._map, self._writable = path, mapped, writable

    @classmethod
    def create(cls, path: Path, stage: int = 0) -> StageFile:
        """Write a fresh file (through a rename, so no reader sees it half-made) and map it."""
        data = bytearray(SIZE)
        _HEADER.pack_into(data, 0, MAGIC, VERSION)
        _WORD.pack_into(data, _STAGE_OFFSET, stage)
        write_atomic(path, bytes(data), mode=0o600)
        with open(path, "r+b") as handle:
            return cls(path, mmap.mmap(handle.fileno(), SIZE), writable=True)

    @classmethod
    def open(cls, path: Path) -> StageFile:
        """Map an existing file read-only; raises ValueError when it is not a stage file."""
        with open(path, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), SIZE, access=mmap.ACCESS_READ)
        magic, version = _HEADER.unpack_from(mapped, 0)
        if magic != MAGIC or version != VERSION:
            mapped.close()
            raise ValueError(f"{path} is not a curriculum stage file (magic {magic!r}, version {version})")
        return cls(path, mapped, writable=False)

    def read(self) -> int:
        return _WORD.unpack_from(self._map, _STAGE_OFFSET)[0]

    def write(self, stage: int) -> None:
        if not self._writable:
            raise PermissionError(f"{self.path} is mapped read-only")
        _WORD.pack_into(self._map, _STAGE_OFFSET, stage)

    def close(self) -> None:
        if not self._map.closed:
            self._map.close()

    def remove(self) -> None:
        """Unmap and delete the file (host, at the end of the run)."""
        self.close()
        self.path.unlink(missing_ok=True)
