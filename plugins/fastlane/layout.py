"""The FastLane shared-memory segment: names, byte layout, process liveness.

One segment per run, ``/dev/shm/mosaic-fl-<run_id>``, created by the host when the run
starts and removed by the host when it ends. Little-endian, every field naturally aligned::

    segment header (256 bytes)
      magic        8s   b"MOSAICFL"
      version      u32  LAYOUT_VERSION; readers refuse any other
      header_size  u32  256
      slot_count   u32  1 in single mode, one per tile in grid mode
      mode         u32  1 single, 2 grid
      slot_size    u64  bytes from one slot to the next
      page_capacity u64 pixel bytes a page can hold (max_dim * max_dim * 4)
      owner_pid    u32  the host process that created the segment (and will remove it)
      max_dim      u32  frames are downscaled so that max(H, W) <= max_dim
      owner_start  u64  the owner's start time (/proc/<pid>/stat field 22), against pid reuse
      created      f64  unix time of creation
      interval_ms  f64  the publishing interval
      render_at    u64  grid mode: the env clock at which every env renders its next tile
      run_id       128s utf-8, NUL padded
    slot i at header_size + i * slot_size:
      slot header (64 bytes)
        writer_pid   u32  the one process publishing into this slot (0 = none)
        env_index    i32  the env it publishes (-1 = none yet)
        writer_start u64  the writer's start time, against pid reuse
        published    u64  frames published so far; the newest is in page (published - 1) % 2
        busy_seconds f64  time the writer's process spent rendering and publishing this env's frames
      page 0, page 1 (page_size bytes each; page_size = 128 + page_capacity, 64-aligned)
        page header (128 bytes)
          seq          u64  sequence lock: odd while the writer is inside the page
          tick         u64  the env clock when rendered (grid tiles with one tick belong together)
          global_step  u64
          episode_count u64
          height, width, channels, pixel_format  u32 x4
          last_reward, rolling_return (NaN = none yet), step_rate_hz, timestamp  f64 x4
          env_index    i32  (then 4 bytes of padding)
          frame_number u64  this frame's number in its slot (1, 2, …): readers order pages by it
        pixels       height * width * channels bytes, row-major HxWxC uint8

Writes, in this order (:meth:`SlotWriter.publish_steps`): bump the page's ``seq`` to odd, write
the pixels, write the metrics and ``frame_number``, bump ``seq`` to even, then increment the
slot's ``published``. It alternates pages, so a reader copying the newest page has a whole
frame interval before that page is overwritten. Reads: pick the settled page with the highest
``frame_number``, read ``seq`` (skip while odd), copy, read ``seq`` again; a change means the
copy may be torn and is retried. ``published`` may lag a settled page by one frame, which is
why readers order pages by ``frame_number`` and not by ``published``.
This relies on stores and loads not being reordered with each other (x86-64 TSO; each field
write is a separate C call from Python, so the compiler cannot merge them).
"""

from __future__ import annotations

import os
import struct
from enum import IntEnum
from pathlib import Path

from mosaic_core import procs

MAGIC = b"MOSAICFL"
LAYOUT_VERSION = 2
NAME_PREFIX = "mosaic-fl-"
SHM_DIR_VAR = "MOSAIC_FASTLANE_SHM_DIR"
DEFAULT_SHM_DIR = "/dev/shm"
NAME_MAX = 255

HEADER = struct.Struct("<8sIIIIQQIIQddQ128s")
HEADER_SIZE = 256
SLOT_HEADER = struct.Struct("<IiQQd")
SLOT_HEADER_SIZE = 64
PAGE_HEADER = struct.Struct("<QQQQIIIIddddi4xQ")
PAGE_HEADER_SIZE = 128
PAGES_PER_SLOT = 2
BYTES_PER_PIXEL_MAX = 4

# Offsets of the fields written after creation.
RENDER_AT_OFFSET = HEADER.size - 128 - 8
SLOT_PUBLISHED_OFFSET = 16
SLOT_BUSY_OFFSET = 24
PAGE_SEQ = struct.Struct("<Q")

assert HEADER.size <= HEADER_SIZE and SLOT_HEADER.size <= SLOT_HEADER_SIZE and PAGE_HEADER.size <= PAGE_HEADER_SIZE


class Mode(IntEnum):
    SINGLE = 1
    GRID = 2


class PixelFormat(IntEnum):
    """How the pixel bytes of a page are laid out (the value is the channel count)."""

    GRAY = 1
    RGB = 3
    RGBA = 4

    @classmethod
    def for_channels(cls, channels: int) -> PixelFormat:
        try:
            return cls(channels)
        except ValueError:
            raise ValueError(f"frames must have 1 (GRAY), 3 (RGB) or 4 (RGBA) channels, got {channels}") from None


def segment_name(run_id: str) -> str:
    """The segment of a run; run ids are at most 128 characters, so this fits NAME_MAX."""
    name = f"{NAME_PREFIX}{run_id}"
    if len(name.encode()) > NAME_MAX or "/" in run_id:
        raise ValueError(f"run id {run_id!r} cannot name a shared-memory segment (too long or has '/')")
    return name


def shm_dir() -> Path:
    """Where segments live: /dev/shm unless ``MOSAIC_FASTLANE_SHM_DIR`` says otherwise."""
    return Path(os.environ.get(SHM_DIR_VAR) or DEFAULT_SHM_DIR)


def page_size(page_capacity: int) -> int:
    return (PAGE_HEADER_SIZE + page_capacity + 63) // 64 * 64


def slot_size(page_capacity: int) -> int:
    return SLOT_HEADER_SIZE + PAGES_PER_SLOT * page_size(page_capacity)


def segment_size(slot_count: int, page_capacity: int) -> int:
    return HEADER_SIZE + slot_count * slot_size(page_capacity)


def slot_offset(slot: int, slot_bytes: int) -> int:
    return HEADER_SIZE + slot * slot_bytes


def page_offset(slot: int, page: int, slot_bytes: int, page_capacity: int) -> int:
    return slot_offset(slot, slot_bytes) + SLOT_HEADER_SIZE + page * page_size(page_capacity)


# ------------------------------------------------------------------------------ processes
process_start = procs.process_start  # the one process-table helper of the host
process_alive = procs.process_alive
