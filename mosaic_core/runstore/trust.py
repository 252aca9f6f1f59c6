"""Untrusted runs, and checkpoints that are code.

``mosaic runs import`` makes a run out of someone else's archive, so the run is *untrusted*:
the import writes ``UNTRUSTED.json`` (where the archive came from) into it before the rename
that makes it appear, and only ``mosaic runs trust RUN`` removes it. The marker lives in the
run directory, so it moves with the run and costs one ``lstat`` per folder to find; nothing
else writes that name (the import refuses an archive member of that name, export leaves it out),
and only the owner can remove it (a run directory is theirs alone).

Nothing in an untrusted run executes: a script its config names, its config itself (``run
--from``), and a checkpoint that is code (a pickle, which a worker reading one checks with
:func:`check_code_checkpoint`) are refused in one line naming the run and ``mosaic runs trust``
(:func:`refuse_untrusted`). Checkpoints read by a weights-only reader are data and may be played
from anywhere; a checkpoint that is code is loaded only from folders the owner made.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from mosaic_core.errors import UsageError
from mosaic_core.files import UntrustedPath, check_ancestors, owner_name, printable, read_private_text

__all__ = ["MARKER", "check_code_checkpoint", "mark_untrusted", "origin", "refuse_untrusted", "trust", "untrusted_run"]

MARKER = "UNTRUSTED.json"


def mark_untrusted(run_fd: int, origin: dict[str, Any]) -> None:
    """Write the marker into the run directory open at ``run_fd`` (new file, never through a link)."""
    data = (json.dumps({**origin, "marked_at": time.time()}, indent=2, sort_keys=True) + "\n").encode()
    fd = os.open(MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=run_fd)
    try:
        os.write(fd, data)
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def untrusted_run(path: Path | str) -> Path | None:
    """The untrusted run ``path`` is (or lies in), as written or with links resolved; else None."""
    chains = []
    for start in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
        chains += [start, *start.parents]
    for folder in dict.fromkeys(chains):
        if _is_marker(folder / MARKER):
            return folder
    return None


def marked_untrusted(run_dir: Path) -> bool:
    """Whether the run directory itself holds the marker (one ``lstat``; its folders above not looked at)."""
    return _is_marker(run_dir / MARKER)


def _is_marker(path: Path) -> bool:
    """Ours and a regular file: one another user plants (``/tmp/UNTRUSTED.json``) means nothing."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()


def refuse_untrusted(path: Path | str, what: str) -> None:
    """UsageError when ``path`` lies in an untrusted run; ``what`` names what would run (a flag, a field)."""
    run = untrusted_run(path)
    if run is not None:
        name = printable(run.name)
        raise UsageError(
            f"{printable(what)}: run {name} was imported and is untrusted; nothing in it runs (its "
            f"config, scripts, checkpoints that are code) until you trust it: `mosaic runs trust {name}`"
        )


def origin(run_dir: Path) -> dict[str, Any] | None:
    """The marker's content (where the run was imported from), ``{}`` if unreadable, None if trusted."""
    if not _is_marker(run_dir / MARKER):
        return None
    try:
        data = json.loads(read_private_text(run_dir / MARKER, 64 * 1024))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def trust(run_dir: Path) -> bool:
    """Remove the marker (the owner's decision); whether there was one."""
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.unlink(MARKER, dir_fd=fd)
    except FileNotFoundError:
        return False
    finally:
        os.close(fd)
    return True


def check_code_checkpoint(path: Path | str, what: str = "checkpoint") -> None:
    """Refuse a checkpoint that is code (loading it runs it) unless the owner made it: it, every
    folder and file in it, must be ours and writable by nobody else (no link in it), every folder
    above it ours or root's (sticky where others can write), and it must not lie in an untrusted
    run. UsageError names the path and why."""
    refuse_untrusted(path, what)
    try:
        check_ancestors(path, what)
        _check_tree(Path(path), what)
    except UntrustedPath as exc:
        raise UsageError(f"{exc} (loading it would run its code as you)") from None
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot read it: {exc.strerror or exc}") from None


def _check_tree(top: Path, what: str) -> None:
    todo = [top]
    while todo:
        current = todo.pop()
        info = os.lstat(current)
        kind = stat.S_IFMT(info.st_mode)
        if kind not in (stat.S_IFDIR, stat.S_IFREG):
            raise UntrustedPath(
                f"{what} {top}: {current} is not a regular file or folder (a link, FIFO or device); refused"
            )
        if info.st_uid != os.geteuid():
            raise UntrustedPath(f"{what} {top}: {current} belongs to {owner_name(info.st_uid)}, not to you; refused")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UntrustedPath(
                f"{what} {top}: {current} is writable by others (mode {stat.S_IMODE(info.st_mode):o}); refused"
            )
        if kind == stat.S_IFDIR:
            todo += [Path(entry.path) for entry in os.scandir(current)]
