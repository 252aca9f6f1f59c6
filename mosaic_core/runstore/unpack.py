"""``mosaic runs import``: an exported run (:mod:`mosaic_core.runstore.archive`) unpacked under a runs root.

The archive comes from anyone, so nothing in it is trusted. It is read once, as a stream this
module decompresses itself (so the caps hold before tarfile reads a header), and every member is
written by the import itself, through file descriptors, into a fresh 0700 folder of the runs root:
a name must be a clean relative path under one ``<run id>/`` (not absolute, no empty, ``.`` or
``..`` component); each folder is made and entered relative to its parent's fd (``O_NOFOLLOW|
O_DIRECTORY``), each file created there ``O_CREAT|O_EXCL|O_NOFOLLOW`` (fstat: a regular file),
hashed as its bytes are written and given its mode with ``fchmod``. No listed name is ever joined
to a path, opened, hashed or changed outside that folder. Only regular files and folders are
accepted: links, devices, FIFOs and sparse members are refused before anything is written.
:data:`LIMITS` bound members, sizes and the compression ratio; free space is checked before each
file. The members must then be exactly those ``EXPORT.json`` lists, with its sizes and sha256.
The run is marked untrusted (:mod:`mosaic_core.runstore.trust`) and appears by one rename; a
refused import leaves nothing behind, and a run id that exists is never overwritten.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from mosaic_core.config import check_run_id
from mosaic_core.errors import ConfigError, UsageError
from mosaic_core.files import check_own_dir, open_private, printable, run_umask
from mosaic_core.runstore import trust
from mosaic_core.runstore.archive import CHUNK, FORMAT, MANIFEST, Archived

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["GiB", "LIMITS", "Limits", "clean_parts", "import_run"]

GiB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """What one import may unpack. A legitimate run is far below each; an archive beyond one is
    refused naming it."""

    members: int = 100_000
    member_bytes: int = 16 * GiB  # one file (a checkpoint, a replay buffer)
    total_bytes: int = 64 * GiB  # everything unpacked, headers included
    ratio: int = 200  # unpacked / compressed bytes, checked past ``ratio_after`` (zeros gzip ~1000:1)
    ratio_after: int = 32 << 20
    listing_bytes: int = 16 << 20  # EXPORT.json
    spare_bytes: int = 256 << 20  # free space left on the runs root's disk after each file


LIMITS = Limits()


def import_run(archive: Path, root: Path, limits: Limits = LIMITS) -> Archived:
    """Unpack an exported run under ``root``, untrusted; UsageError (nothing written) for anything else."""
    where = printable(str(archive))
    try:
        raw = open_private(archive, any_owner=True)
    except OSError as exc:
        raise UsageError(f"cannot read {where}: {exc.strerror or exc}") from None
    with raw:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            check_own_dir(root, "runs root")
            root_fd = _open_dir(root, None)
        except OSError as exc:
            raise UsageError(str(exc) if not exc.strerror else f"runs root {root}: {exc.strerror}") from None
        staging = Path(tempfile.mkdtemp(prefix=".import-", dir=root))
        previous_umask = os.umask(run_umask())
        unpacker = None
        try:
            unpacker = _Unpacker(raw, root, root_fd, _open_dir(staging.name, root_fd), where, limits)
            done = unpacker.unpack()
            try:
                os.lstat(done.run_id, dir_fd=root_fd)
                raise UsageError(f"{where}: run {done.run_id!r} appeared under {root} meanwhile; not replaced")
            except FileNotFoundError:
                os.rename(done.run_id, done.run_id, src_dir_fd=unpacker.staging_fd, dst_dir_fd=root_fd)
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, ValueError, UnicodeError) as exc:
            raise UsageError(f"{where}: not a readable MOSAIC run export ({type(exc).__name__}: {exc})") from None
        except OSError as exc:
            raise UsageError(f"{where}: cannot unpack it into {root}: {exc.strerror or exc}") from None
        finally:
            os.umask(previous_umask)
            if unpacker is not None:
                unpacker.close()
            os.close(root_fd)
            shutil.rmtree(staging, ignore_errors=True)
    return done


def _open_dir(name: Path | str, dir_fd: int | None) -> int:
    """An fd of the folder ``name`` (relative to ``dir_fd``), never through a link; must be ours."""
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    if os.fstat(fd).st_uid != os.geteuid():
        os.close(fd)
        raise PermissionError(0, f"{name} is not ours")
    return fd


def clean_parts(name: object) -> list[str] | None:
    """The components of a clean relative path (``a/b``), or None (absolute, empty, ``.``, ``..``)."""
    if not isinstance(name, str) or not name or "\0" in name:
        return None
    parts = name.split("/")
    return None if any(part in ("", ".", "..") for part in parts) else parts


class _Counted(io.RawIOBase):
    """The compressed archive, counted and hashed as gzip reads it."""

    def __init__(self, handle: BinaryIO):
        self.handle, self.count, self.digest = handle, 0, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)
        data = self.handle.read(len(view))
        view[: len(data)] = data
        self.count += len(data)
        self.digest.update(data)
        return len(data)


class _Capped(io.RawIOBase):
    """The decompressed tar stream, refused past the total size or the compression ratio."""

    def __init__(self, source: _Counted, where: str, limits: Limits):
        self.source, self.where, self.limits, self.out = source, where, limits, 0
        self.gz = gzip.GzipFile(fileobj=io.BufferedReader(source, CHUNK), mode="rb")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)
        data = self.gz.read(len(view))
        view[: len(data)] = data
        self.out += len(data)
        limits = self.limits
        if self.out > limits.total_bytes:
            raise UsageError(
                f"{self.where}: unpacks to more than {_gib(limits.total_bytes)} (the import limit); refused"
            )
        if self.out > limits.ratio_after and self.out > limits.ratio * max(1, self.source.count):
            raise UsageError(
                f"{self.where}: unpacks to more than {limits.ratio} times its compressed size "
                f"({self.out:,} bytes from {self.source.count:,}; the import limit): a compression bomb; "
                "refused"
            )
        return len(data)


class _Unpacker:
    """One import: the archive read once, each member written through fds under ``staging_fd``."""

    def __init__(self, raw: BinaryIO, root: Path, root_fd: int, staging_fd: int, where: str, limits: Limits):
        self.counted = _Counted(raw)
        self.stream = _Capped(self.counted, where, limits)
        self.root, self.root_fd, self.where, self.limits = root, root_fd, where, limits
        self.staging_fd: int | None = staging_fd
        self.run_id: str | None = None
        self.run_fd: int | None = None
        self.written: dict[str, tuple[int, str]] = {}
        self.document: dict[str, Any] | None = None

    def close(self) -> None:
        for fd in (self.run_fd, self.staging_fd):
            if fd is not None:
                os.close(fd)
        self.run_fd = self.staging_fd = None

    def unpack(self) -> Archived:
        count, total = 0, 0
        with tarfile.open(fileobj=self.stream, mode="r|") as tar:
            for member in tar:
                count += 1
                if count > self.limits.members:
                    raise UsageError(
                        f"{self.where}: more than {self.limits.members:,} members (the import limit); refused"
                    )
                rel = self._place(member)
                if rel is None:
                    continue
                if member.size > self.limits.member_bytes:
                    raise UsageError(
                        f"{self.where}: member {member.name!r} is {member.size:,} bytes, over "
                        f"{_gib(self.limits.member_bytes)} (the import limit for one file); refused"
                    )
                total += member.size
                if total > self.limits.total_bytes:
                    raise UsageError(
                        f"{self.where}: its files add up to more than {_gib(self.limits.total_bytes)} "
                        "(the import limit); refused"
                    )
                source = tar.extractfile(member)
                assert source is not None  # a regular file: _place refused links and special files
                if rel == MANIFEST:
                    self._read_listing(member, source)
                else:
                    self.written[rel] = self._write(rel, member, source)
        self._compare()
        # _compare found the listing, which comes after the member that opened the run's folder
        assert self.document is not None and self.run_id is not None and self.run_fd is not None
        trust.mark_untrusted(
            self.run_fd,
            {
                "imported_from": str(Path(self.where).absolute()),
                "archive_sha256": self.counted.digest.hexdigest(),
                "exported_at": self.document.get("exported_at"),
            },
        )
        return Archived(self.run_id, len(self.written), sum(size for size, _ in self.written.values()))

    def _place(self, member: tarfile.TarInfo) -> str | None:
        """Check a member's name and kind; its path inside the run (None: the run folder itself)."""
        name = member.name
        parts = clean_parts(name.rstrip("/") if member.isdir() else name)
        if parts is None or (self.run_id is not None and parts[0] != self.run_id):
            raise UsageError(
                f"{self.where}: member {name!r} lies outside the run's folder or is not a clean "
                "relative path (an empty, . or .. part); refused"
            )
        if not (member.isreg() or member.isdir()):
            raise UsageError(f"{self.where}: member {name!r} is a link or special file; refused")
        if member.issparse():
            raise UsageError(
                f"{self.where}: member {name!r} is a sparse file (its apparent size is {member.size:,} bytes); refused"
            )
        if self.run_id is None:
            self._start(parts[0])
        rel = "/".join(parts[1:])
        if rel == trust.MARKER:
            raise UsageError(f"{self.where}: member {name!r} has a name only the import writes; refused")
        if member.isdir():
            if parts[1:]:
                os.close(self._folder(parts[1:]))
            return None
        if not rel:
            raise UsageError(f"{self.where}: member {name!r} is a file where the run's folder should be; refused")
        return rel

    def _start(self, run_id: str) -> None:
        try:
            check_run_id(run_id)
        except ConfigError:
            raise UsageError(f"{self.where}: {run_id!r} is not a run id (not a MOSAIC run export)") from None
        if os.path.lexists(self.root / run_id):
            raise UsageError(f"{self.where}: run {run_id!r} exists already under {self.root}; remove it first")
        os.mkdir(run_id, 0o700, dir_fd=self.staging_fd)
        self.run_id, self.run_fd = run_id, _open_dir(run_id, self.staging_fd)

    def _folder(self, parts: list[str]) -> int:
        """An fd of the run's folder ``parts``, made where missing, each step without following a link."""
        assert self.run_fd is not None  # _place opens the run's folder before any member in it
        fd = os.dup(self.run_fd)
        try:
            for part in parts:
                try:
                    os.mkdir(part, 0o777 & ~run_umask(), dir_fd=fd)
                except FileExistsError:
                    pass
                inner = _open_dir(part, fd)
                os.close(fd)
                fd = inner
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _write(self, rel: str, member: tarfile.TarInfo, source: IO[bytes]) -> tuple[int, str]:
        parts = rel.split("/")
        parent = self._folder(parts[:-1])
        try:
            free = os.fstatvfs(parent)
            if member.size + self.limits.spare_bytes > free.f_bavail * free.f_frsize:
                raise UsageError(
                    f"{self.where}: member {member.name!r} needs {member.size:,} bytes and the disk of "
                    f"{self.root} has {free.f_bavail * free.f_frsize:,} free (keeping "
                    f"{self.limits.spare_bytes >> 20} MiB spare); refused"
                )
            try:
                fd = os.open(
                    parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent
                )
            except FileExistsError:
                raise UsageError(f"{self.where}: member {member.name!r} appears twice; refused") from None
        finally:
            os.close(parent)
        with os.fdopen(fd, "wb") as out:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UsageError(f"{self.where}: member {member.name!r} did not become a regular file; refused")
            digest, size = hashlib.sha256(), 0
            while chunk := source.read(min(CHUNK, member.size - size)):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
            if size != member.size:
                raise UsageError(f"{self.where}: member {member.name!r} is cut short (corrupt archive)")
            os.fchmod(fd, 0o666 & ~run_umask())
        return size, digest.hexdigest()

    def _read_listing(self, member: tarfile.TarInfo, source: IO[bytes]) -> None:
        if self.document is not None:
            raise UsageError(f"{self.where}: two {MANIFEST} in it (corrupt archive)")
        if member.size > self.limits.listing_bytes:
            raise UsageError(f"{self.where}: its {MANIFEST} is over {self.limits.listing_bytes >> 20} MiB; refused")
        try:
            document = json.loads(source.read(member.size))
        except (ValueError, RecursionError):
            raise UsageError(
                f"{self.where}: its {MANIFEST} is not valid JSON, or nested too deeply (corrupt archive)"
            ) from None
        if (
            not isinstance(document, dict)
            or document.get("format") != FORMAT
            or document.get("run_id") != self.run_id
            or not isinstance(document.get("files"), dict)
        ):
            raise UsageError(f"{self.where}: not a MOSAIC run export of format {FORMAT}")
        for rel, entry in document["files"].items():
            what = f"{self.where}: its {MANIFEST} lists {rel!r}"
            if clean_parts(rel) is None:
                raise UsageError(f"{what}, which is not a clean relative path inside the run; refused")
            if rel in (MANIFEST, trust.MARKER):
                raise UsageError(f"{what}, a name only the import writes; refused")
            if not isinstance(entry, dict):
                raise UsageError(f"{what} with {type(entry).__name__} instead of an object (corrupt archive)")
            size, digest = entry.get("size"), entry.get("sha256")
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise UsageError(f"{what} with a size that is not a whole number of bytes (corrupt archive)")
            if not isinstance(digest, str) or len(digest) != 64 or digest.strip("0123456789abcdef"):
                raise UsageError(f"{what} without a sha256 (64 hex digits) (corrupt archive)")
        self.document = document

    def _compare(self) -> None:
        if self.document is None:
            raise UsageError(f"{self.where}: not a MOSAIC run export (no single <run>/{MANIFEST} in it)")
        listing = self.document["files"]
        for rel, (size, digest) in self.written.items():
            if rel not in listing or listing[rel]["size"] != size:
                raise UsageError(f"{self.where}: member {rel!r} is not the file its {MANIFEST} lists (corrupt archive)")
            if listing[rel]["sha256"] != digest:
                raise UsageError(f"{self.where}: {rel} does not match its checksum (corrupt archive)")
        missing = sorted(set(listing) - set(self.written))
        if missing:
            raise UsageError(
                f"{self.where}: {len(missing)} listed file(s) missing, e.g. {missing[0]!r} (corrupt archive)"
            )


def _gib(size: int) -> str:
    return f"{size / GiB:g} GiB"
