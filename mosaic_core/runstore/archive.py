"""A run as one ``.tar.gz``: ``mosaic runs export`` writes it, ``mosaic runs import`` unpacks it.

The archive holds ``<run_id>/…`` (config, events, logs, manifest, TensorBoard files and, unless
left out, checkpoints: every regular file of the run directory; links and special files are
never followed nor stored) and ``<run_id>/EXPORT.json``, which lists every member with its size
and sha256. Import refuses anything else: an archive without that list (foreign), a member the
list does not name or whose bytes differ (corrupt), absolute or ``..`` names, links and devices
(tarfile's ``data`` filter too), and a run id already under the runs root. It unpacks into a
hidden folder of the root and renames it into place: a refused import leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from mosaic_core.config import check_run_id
from mosaic_core.errors import ConfigError, UsageError
from mosaic_core.files import check_own_dir, open_private, run_umask
from mosaic_core.runstore.artifacts import CHECKPOINT_SUFFIXES

FORMAT = "mosaic.run-export/1"
MANIFEST = "EXPORT.json"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Archived:
    run_id: str
    files: int
    bytes: int
    skipped: tuple[str, ...] = ()  # links, special files, and checkpoints left out


def _members(run_dir: Path, checkpoints: bool) -> tuple[list[str], list[str]]:
    """The run's regular files (relative paths, sorted) and what is left out."""
    keep, skipped, todo = [], [], [""]
    while todo:
        rel = todo.pop()
        with os.scandir(run_dir / rel if rel else run_dir) as entries:
            for entry in entries:
                name = f"{rel}/{entry.name}" if rel else entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    todo.append(name)
                elif not stat.S_ISREG(mode) or name == MANIFEST:
                    skipped.append(name)
                elif not checkpoints and entry.name.endswith(CHECKPOINT_SUFFIXES):
                    skipped.append(name)
                else:
                    keep.append(name)
    return sorted(keep), sorted(skipped)


def export_run(run_dir: Path, output: Path, checkpoints: bool = True) -> Archived:
    """Write ``run_dir`` to ``output`` (a new ``.tar.gz``; written under a temporary name and
    renamed, so a failed export leaves no file)."""
    run_id = run_dir.name
    if not output.name.endswith((".tar.gz", ".tgz")):
        raise UsageError(f"-o {output}: the archive's name must end in .tar.gz")
    if output.exists() or output.is_symlink():
        raise UsageError(f"-o {output}: the file exists already; choose another name")
    folder = output.absolute().parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"-o {output}: cannot write there ({folder} is not a writable directory)")
    if folder == run_dir.absolute() or run_dir.absolute() in folder.parents:
        raise UsageError(f"-o {output}: the archive cannot go inside the run it exports")
    names, skipped = _members(run_dir, checkpoints)
    listing: dict[str, dict[str, object]] = {}
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", dir=folder)
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            for name in names:
                with open_private(run_dir / name) as handle:
                    info = os.fstat(handle.fileno())
                    digest, size = _hash_copy(handle)
                    handle.seek(0)
                    member = tarfile.TarInfo(f"{run_id}/{name}")
                    member.size, member.mtime, member.mode = size, int(info.st_mtime), 0o600
                    tar.addfile(member, _Exactly(handle, size))
                listing[name] = {"size": size, "sha256": digest}
            document = json.dumps({"format": FORMAT, "run_id": run_id, "exported_at": time.time(),
                                   "checkpoints": checkpoints, "files": listing}, indent=2).encode()
            member = tarfile.TarInfo(f"{run_id}/{MANIFEST}")
            member.size, member.mtime, member.mode = len(document), int(time.time()), 0o600
            tar.addfile(member, io.BytesIO(document))
        os.replace(tmp, output)
    except OSError as exc:
        raise UsageError(f"-o {output}: cannot write the archive: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return Archived(run_id, len(names), sum(int(v["size"]) for v in listing.values()), tuple(skipped))


def _hash_copy(handle) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    while chunk := handle.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


class _Exactly(io.RawIOBase):
    """``size`` bytes of a file that may still grow (a live run's log): tar needs the size it was told."""

    def __init__(self, handle, size: int):
        self.handle, self.left = handle, size

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.handle.read(n)
        self.left -= len(data)
        return data


def import_run(archive: Path, root: Path) -> Archived:
    """Unpack an exported run under ``root``; UsageError (nothing written) for anything else."""
    where = f"{archive}"
    try:
        with open_private(archive, any_owner=True) as raw, tarfile.open(fileobj=raw, mode="r:gz") as tar:
            members = tar.getmembers()
            listing, run_id = _read_listing(tar, members, where)
            _check_members(members, listing, run_id, where)
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            check_own_dir(root, "runs root")
            if (root / run_id).exists() or (root / run_id).is_symlink():
                raise UsageError(f"{where}: run {run_id!r} exists already under {root}; remove it first")
            staging = Path(tempfile.mkdtemp(prefix=".import-", dir=root))
            previous_umask = os.umask(run_umask())
            try:
                tar.extractall(staging, members=[m for m in members if m.isfile()], filter="data")
                _verify(staging / run_id, listing, where)
                os.rename(staging / run_id, root / run_id)
            finally:
                os.umask(previous_umask)
                shutil.rmtree(staging, ignore_errors=True)
    except (FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        raise UsageError(f"cannot read {where}: {exc.strerror}") from None
    except (tarfile.TarError, EOFError, OSError, ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{where}: not a readable MOSAIC run export ({type(exc).__name__}: {exc})") from None
    sizes = [int(v["size"]) for v in listing.values()]
    return Archived(run_id, len(sizes), sum(sizes))


def _read_listing(tar: tarfile.TarFile, members: list[tarfile.TarInfo], where: str) -> tuple[dict, str]:
    found = [m for m in members if m.isfile() and m.name.count("/") == 1 and m.name.endswith("/" + MANIFEST)]
    if len(found) != 1:
        raise UsageError(f"{where}: not a MOSAIC run export (no single <run>/{MANIFEST} in it)")
    try:
        document = json.loads(tar.extractfile(found[0]).read(16 * 1024 * 1024))
    except ValueError:
        raise UsageError(f"{where}: its {found[0].name} is not valid JSON (corrupt archive)") from None
    run_id = found[0].name.split("/")[0]
    if not isinstance(document, dict) or document.get("format") != FORMAT or document.get("run_id") != run_id \
            or not isinstance(document.get("files"), dict):
        raise UsageError(f"{where}: not a MOSAIC run export of format {FORMAT}")
    try:
        check_run_id(run_id)
    except ConfigError:
        raise UsageError(f"{where}: {run_id!r} is not a run id") from None
    return document["files"], run_id


def _check_members(members: list[tarfile.TarInfo], listing: dict, run_id: str, where: str) -> None:
    for member in members:
        name = member.name
        rel = name[len(run_id) + 1:] if name.startswith(run_id + "/") else None
        if name.startswith("/") or ".." in name.split("/") or rel is None:
            raise UsageError(f"{where}: member {name!r} lies outside the run's folder; refused")
        if member.isdir():
            continue
        if not member.isfile():
            raise UsageError(f"{where}: member {name!r} is a link or special file; refused")
        if rel != MANIFEST and (rel not in listing or listing[rel].get("size") != member.size):
            raise UsageError(f"{where}: member {name!r} is not the file its {MANIFEST} lists (corrupt archive)")
    present = {m.name[len(run_id) + 1:] for m in members if m.isfile()}
    missing = sorted(set(listing) - present)
    if missing:
        raise UsageError(f"{where}: {len(missing)} listed file(s) missing, e.g. {missing[0]!r} (corrupt archive)")


def _verify(run_dir: Path, listing: dict, where: str) -> None:
    for rel, expected in listing.items():
        with open(run_dir / rel, "rb") as handle:
            digest, _ = _hash_copy(handle)
        if digest != expected.get("sha256"):
            raise UsageError(f"{where}: {rel} does not match its checksum (corrupt archive)")
        os.chmod(run_dir / rel, 0o666 & ~run_umask())
    (run_dir / MANIFEST).unlink()
