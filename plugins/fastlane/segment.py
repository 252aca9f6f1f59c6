"""Opening, checking, creating and removing FastLane segments (layout in :mod:`.layout`).

Segments are plain files under /dev/shm mapped with :mod:`mmap`. We deliberately do not use
``multiprocessing.shared_memory``: its resource tracker unlinks a segment when any process
that opened it exits, and a reader must never remove a run's segment. Only the host
(:class:`SegmentOwner`) creates and unlinks; writers and readers only map. Every name is
opened as :mod:`.trust` says: never through a link, never blocking on a FIFO, and only a
regular 0600 file of the expected user is mapped.
"""

from __future__ import annotations

import errno
import mmap
import os
import time
from dataclasses import dataclass
from pathlib import Path

from mosaic_core import NoFrames
from mosaic_fastlane import layout, trust
from mosaic_fastlane.layout import HEADER, LAYOUT_VERSION, MAGIC, Mode


class FastLaneError(NoFrames):  # a viewer's NoFrames: the frames are not there to read
    """A FastLane segment is missing, foreign, from another version, or already written."""


class SegmentMissing(FastLaneError):
    """There is no segment with that name (the run has none, or it ended)."""


class UntrustedSegment(FastLaneError):
    """The entry at a segment's name is a link, a FIFO, another user's file, or not mode 0600."""


class SharedMemoryUnavailable(FastLaneError):
    """Shared memory could not be created (no space, permission, name too long, name taken…)."""


@dataclass(frozen=True)
class Header:
    """The segment header, as read from a mapping."""

    version: int
    slot_count: int
    mode: Mode
    slot_size: int
    page_capacity: int
    owner_pid: int
    max_dim: int
    owner_start: int
    created: float
    interval_ms: float
    run_id: str

    @property
    def owner_alive(self) -> bool:
        return layout.process_alive(self.owner_pid, self.owner_start)


def parse_header(buf, name: str, size: int) -> Header:
    """Check magic, version and geometry; raise FastLaneError naming what is wrong."""
    if size < layout.HEADER_SIZE:
        raise FastLaneError(f"segment {name} is {size} bytes, too small for a FastLane header")
    (
        magic,
        version,
        header_size,
        slot_count,
        mode,
        slot_bytes,
        capacity,
        owner_pid,
        max_dim,
        owner_start,
        created,
        interval_ms,
        _render_at,
        run_id,
    ) = HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise FastLaneError(f"segment {name} is not a FastLane segment (magic {magic!r})")
    if version != LAYOUT_VERSION:
        raise FastLaneError(f"segment {name} has layout version {version}; this reader knows {LAYOUT_VERSION}")
    if mode not in (Mode.SINGLE, Mode.GRID):
        raise FastLaneError(f"segment {name} has unknown mode {mode}")
    if (
        header_size != layout.HEADER_SIZE
        or slot_count < 1
        or slot_bytes != layout.slot_size(capacity)
        or size != layout.segment_size(slot_count, capacity)
    ):
        raise FastLaneError(
            f"segment {name} has inconsistent geometry ({slot_count} slots of {slot_bytes} bytes in {size})"
        )
    return Header(
        version,
        slot_count,
        Mode(mode),
        slot_bytes,
        capacity,
        owner_pid,
        max_dim,
        owner_start,
        created,
        interval_ms,
        run_id.rstrip(b"\0").decode("utf-8", "replace"),
    )


class Mapping:
    """A mapped segment. ``writable`` mappings are for writers; readers map read-only.

    Only a regular file of ``owner_uid`` (default: our effective uid) with mode 0600 is mapped;
    anything else raises :class:`UntrustedSegment` naming the path and why.
    """

    def __init__(self, path: Path, writable: bool, owner_uid: int | None = None):
        self.path = path
        self.name = path.name
        expected = os.geteuid() if owner_uid is None else owner_uid
        try:
            fd, info = trust.open_trusted(path, os.O_RDWR if writable else os.O_RDONLY, expected)
        except FileNotFoundError:
            raise SegmentMissing(f"no FastLane segment {self.name} in {path.parent}") from None
        except trust.UntrustedFile as exc:
            raise UntrustedSegment(f"refusing FastLane segment {exc}") from None
        except OSError as exc:
            raise FastLaneError(f"cannot open FastLane segment {path}: {exc.strerror}") from None
        try:
            self.identity = (info.st_dev, info.st_ino)
            if info.st_size < layout.HEADER_SIZE:
                raise FastLaneError(f"segment {self.name} is {info.st_size} bytes, too small for a FastLane header")
            self.mm = mmap.mmap(
                fd, info.st_size, mmap.MAP_SHARED, mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
            )
        finally:
            os.close(fd)
        self.buf = memoryview(self.mm)
        try:
            self.header = parse_header(self.buf, self.name, info.st_size)
        except FastLaneError:
            self.close()
            raise

    def still_linked(self) -> bool:
        """Whether the segment is still the file at its path (False once the host removed it)."""
        try:
            info = os.lstat(self.path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self.identity

    def close(self) -> None:
        if getattr(self, "buf", None) is not None:
            self.buf.release()
            del self.buf  # closed: getattr(self, "buf", None) is None again
            try:
                self.mm.close()
            except BufferError:  # an exported numpy view still alive; the GC unmaps later
                pass


def open_segment(
    run_id: str | None = None,
    *,
    name: str | None = None,
    directory: Path | None = None,
    writable: bool = False,
    owner_uid: int | None = None,
    host_pid: int | None = None,
) -> Mapping:
    """Map the segment of ``run_id`` (or the one called ``name``) and check its file and header.

    ``owner_uid``: the user the segment must belong to (default: our effective uid).
    ``host_pid``: when given, the segment must have been created by that host process
    (a training process attaches only to its own run's segment).
    """
    name = name or layout.segment_name(run_id or "")
    mapping = Mapping((directory or layout.shm_dir()) / name, writable, owner_uid)
    if host_pid and mapping.header.owner_pid != host_pid:
        mapping.close()
        raise UntrustedSegment(
            f"refusing FastLane segment {mapping.path}: it was created by pid "
            f"{mapping.header.owner_pid}, not by this run's host (pid {host_pid})"
        )
    return mapping


def _reason(exc: OSError) -> str:
    known = {errno.ENOENT: "the directory does not exist", errno.ENAMETOOLONG: "name too long"}
    return known.get(exc.errno or 0, exc.strerror or str(exc))


class SegmentOwner:
    """The host's handle on a run's segment: creates it, and unlinks it exactly once.

    Creation never goes through an existing name: the segment is built in a fresh private
    file (``O_EXCL | O_NOFOLLOW``, see :mod:`.trust`), then hard-linked to its name, which
    fails if anything is there. What is there decides: our own segment whose host died, or
    our own leftover of any kind, is removed and replaced; our own live segment means the run
    id is in use (refused); **anything of another user is left alone and FastLane is off for
    the run** (:class:`SharedMemoryUnavailable`, so the host warns once and training goes on).
    We never delete another user's file, even as root: it may be that user's live run with the
    same run id, and removing files on the word of an untrusted directory is not ours to do.
    """

    def __init__(
        self,
        run_id: str,
        *,
        mode: Mode,
        slot_count: int,
        max_dim: int,
        interval_ms: float,
        directory: Path | None = None,
    ):
        self.run_id = run_id
        self.directory = directory or layout.shm_dir()
        self.replaced_stale: str | None = None
        try:
            self.name = layout.segment_name(run_id)
        except ValueError as exc:
            raise SharedMemoryUnavailable(str(exc)) from None
        self.path = self.directory / self.name
        self.capacity = max_dim * max_dim * layout.BYTES_PER_PIXEL_MAX
        self.size = layout.segment_size(slot_count, self.capacity)
        # Build the segment under a private name, then link it into place: a reader never sees
        # a half-made segment, and an existing one is never overwritten by accident.
        try:
            fd, tmp = trust.create_private(self.directory, self.name)
        except OSError as exc:
            raise SharedMemoryUnavailable(f"cannot create {self.path}: {_reason(exc)}") from None
        try:
            try:
                os.posix_fallocate(fd, 0, self.size)  # reserve the pages now: no SIGBUS later
            except OSError as exc:
                raise SharedMemoryUnavailable(
                    f"cannot reserve {self.size} bytes for {self.path}: {exc.strerror}"
                ) from None
            self._write_layout(fd, mode, slot_count, max_dim, interval_ms)
            info = os.fstat(fd)
            self.identity = (info.st_dev, info.st_ino)
            self._link_into_place(tmp)
        finally:
            os.close(fd)
            os.unlink(tmp)  # ours: made with O_EXCL, and nobody else may remove or rename it (sticky dir)
        self.removed = False

    def _write_layout(self, fd: int, mode: Mode, slot_count: int, max_dim: int, interval_ms: float) -> None:
        """Empty slots, then the header naming this process (its pid and start time) as the writer."""
        pid = os.getpid()
        empty_slot = layout.SLOT_HEADER.pack(0, -1, 0, 0, 0.0)
        for slot in range(slot_count):
            os.pwrite(fd, empty_slot, layout.slot_offset(slot, layout.slot_size(self.capacity)))
        header = HEADER.pack(
            MAGIC,
            LAYOUT_VERSION,
            layout.HEADER_SIZE,
            slot_count,
            int(mode),
            layout.slot_size(self.capacity),
            self.capacity,
            pid,
            max_dim,
            layout.process_start(pid),
            time.time(),
            float(interval_ms),
            0,
            self.run_id.encode()[:128],
        )
        os.pwrite(fd, header, 0)

    def _link_into_place(self, tmp: Path) -> None:
        for _attempt in range(2):
            try:
                os.link(tmp, self.path, follow_symlinks=False)
                return
            except FileExistsError:
                self._replace_if_stale()
            except OSError as exc:
                raise SharedMemoryUnavailable(f"cannot create {self.path}: {_reason(exc)}") from None
        raise SharedMemoryUnavailable(f"cannot create {self.path}: it keeps reappearing")

    def _replace_if_stale(self) -> None:
        """Something has our name: replace it if it is our own dead or broken leftover, else refuse."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return
        me = os.geteuid()
        if info.st_uid != me:
            raise SharedMemoryUnavailable(
                f"{self.path} already exists and is {trust.kind_of(info.st_mode)} owned by "
                f"{trust.user_name(info.st_uid)}, not by {trust.user_name(me)}; FastLane never writes into "
                "or deletes another user's file"
            )
        try:
            mapping = Mapping(self.path, writable=False)
        except FastLaneError as exc:
            reason = str(exc)  # our own file, but not a segment we can use: a leftover, replace it
        else:
            header = mapping.header
            mapping.close()
            if header.owner_alive:
                raise SharedMemoryUnavailable(
                    f"{self.path} belongs to a live run (host pid {header.owner_pid}); is run {self.run_id} running twice?"
                )
            reason = f"its owner (pid {header.owner_pid}) is gone"
        unlink_if_same(self.path, (info.st_dev, info.st_ino))
        self.replaced_stale = reason

    def remove(self) -> bool:
        """Unlink the segment we created (idempotent; never a newer one with the same name).

        Mappings held by writers and readers stay valid until they unmap.
        """
        if self.removed:
            return False
        self.removed = True
        return unlink_if_same(self.path, self.identity)


def unlink_if_same(path: Path, identity: tuple[int, int]) -> bool:
    """Unlink ``path`` only while it is still the file ``identity`` (device, inode) names."""
    try:
        info = os.lstat(path)
        if (info.st_dev, info.st_ino) != identity:
            return False
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def slot_status(mapping: Mapping) -> list[dict]:
    """Per slot: writer, frames published and the newest frame's metrics (no pixels copied)."""
    header, buf, status = mapping.header, mapping.buf, []
    for slot in range(header.slot_count):
        pid, env_index, start, published, busy = layout.SLOT_HEADER.unpack_from(
            buf, layout.slot_offset(slot, header.slot_size)
        )
        entry = {
            "slot": slot,
            "env_index": env_index,
            "published": published,
            "writer_pid": pid,
            "writer_alive": layout.process_alive(pid, start),
            "render_seconds": round(busy, 4),
        }
        if published:
            offset = layout.page_offset(
                slot, (published - 1) % layout.PAGES_PER_SLOT, header.slot_size, header.page_capacity
            )
            fields = layout.PAGE_HEADER.unpack_from(buf, offset)
            if fields[0] % 2 == 0 and layout.PAGE_SEQ.unpack_from(buf, offset)[0] == fields[0]:
                entry.update(global_step=fields[2], episode_count=fields[3], step_rate_hz=round(fields[10], 2))
        status.append(entry)
    return status
