"""A run as one ``.tar.gz``: ``mosaic runs export`` writes it, ``mosaic runs import`` unpacks it.

The archive holds ``<run_id>/…`` (config, events, logs, manifest, TensorBoard files and, unless
left out, checkpoints: every regular file of the run directory; links and special files are
never followed nor stored) and ``<run_id>/EXPORT.json``, which lists every member with its size
and sha256.

Import (:mod:`mosaic_core.runstore.unpack`) trusts nothing in an archive and makes an untrusted run.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from mosaic_core.errors import UsageError
from mosaic_core.files import atomic_output, is_within, open_private
from mosaic_core.runstore import trust
from mosaic_core.runstore.artifacts import is_checkpoint

__all__ = ["Archived", "CHUNK", "FORMAT", "MANIFEST", "export_run"]

FORMAT = "mosaic.run-export/1"
MANIFEST = "EXPORT.json"
CHUNK = 1 << 20


@dataclass(frozen=True)
class Archived:
    run_id: str
    files: int
    bytes: int
    skipped: tuple[str, ...] = ()  # links, special files, and checkpoints left out


def _announced_checkpoints(run_dir: Path) -> set[str]:
    """The files the run's ``checkpoint_saved`` events name, relative to the run directory."""
    from mosaic_core.events import iter_events

    base = run_dir.resolve()
    named = set()
    for event in iter_events(run_dir / "events.jsonl", ("checkpoint_saved",)):
        payload = event.get("payload")
        path = payload.get("path") if isinstance(payload, dict) else None
        if isinstance(path, str):
            named.add(os.path.relpath(os.path.normpath(base / path), base))
    return named


def _members(run_dir: Path, checkpoints: bool) -> tuple[list[str], list[str]]:
    """The run's regular files (relative paths, sorted) and what is left out."""
    announced = set() if checkpoints else _announced_checkpoints(run_dir)
    keep, skipped, todo = [], [], [""]
    while todo:
        rel = todo.pop()
        with os.scandir(run_dir / rel if rel else run_dir) as entries:
            for entry in entries:
                name = f"{rel}/{entry.name}" if rel else entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    todo.append(name)
                elif not stat.S_ISREG(mode) or name in (MANIFEST, trust.MARKER):
                    skipped.append(name)
                elif not checkpoints and (is_checkpoint(name) or name in announced):
                    skipped.append(name)
                else:
                    keep.append(name)
    return sorted(keep), sorted(skipped)


def export_run(run_dir: Path, output: Path, checkpoints: bool = True) -> Archived:
    """Write ``run_dir`` to ``output``: a new ``.tar.gz``, 0600 (it holds private run files),
    through :func:`~mosaic_core.files.atomic_output` (never through a link; a failed export
    leaves no file)."""
    run_id = run_dir.name
    if not output.name.endswith((".tar.gz", ".tgz")):
        raise UsageError(f"-o {output}: the archive's name must end in .tar.gz")
    if is_within(run_dir, output.absolute().parent):
        raise UsageError(f"-o {output}: the archive cannot go inside the run it exports")
    names, skipped = _members(run_dir, checkpoints)
    listing: dict[str, dict[str, int | str]] = {}
    try:
        with (
            atomic_output(output, flag="-o", mode=0o600, new=True) as raw,
            tarfile.open(fileobj=raw, mode="w:gz") as tar,
        ):
            for name in names:
                with open_private(run_dir / name) as handle:
                    info = os.fstat(handle.fileno())
                    digest, size = _hash_copy(handle)
                    handle.seek(0)
                    member = tarfile.TarInfo(f"{run_id}/{name}")
                    member.size, member.mtime, member.mode = size, int(info.st_mtime), 0o600
                    tar.addfile(member, _Exactly(handle, size))
                listing[name] = {"size": size, "sha256": digest}
            document = json.dumps(
                {
                    "format": FORMAT,
                    "run_id": run_id,
                    "exported_at": time.time(),
                    "checkpoints": checkpoints,
                    "files": listing,
                },
                indent=2,
            ).encode()
            member = tarfile.TarInfo(f"{run_id}/{MANIFEST}")
            member.size, member.mtime, member.mode = len(document), int(time.time()), 0o600
            tar.addfile(member, io.BytesIO(document))
    except OSError as exc:  # reading a run file, or the disk filling
        raise UsageError(f"-o {output}: cannot write the archive: {exc.strerror or exc}") from None
    return Archived(run_id, len(names), sum(int(v["size"]) for v in listing.values()), tuple(skipped))


def _hash_copy(handle: BinaryIO) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    while chunk := handle.read(CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


class _Exactly(io.RawIOBase):
    """``size`` bytes of a file that may still grow (a live run's log): tar needs the size it was told."""

    def __init__(self, handle: BinaryIO, size: int):
        self.handle, self.left = handle, size

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.handle.read(n)
        self.left -= len(data)
        return data
