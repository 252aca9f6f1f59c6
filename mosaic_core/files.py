"""Small file helpers used across MOSAIC: atomic JSON writes, reading a file's tail, and the
shared-machine checks every reader of run files goes through (:func:`open_private`)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

from mosaic_core import procs
from mosaic_core.jsontext import dumps


def is_within(base: Path | str, target: Path | str) -> bool:
    """Whether ``target`` is ``base`` or below it, symlinks resolved (a sibling sharing the
    prefix, ``base-x/…``, is not)."""
    base, target = Path(base).resolve(), Path(target).resolve()
    return target == base or base in target.parents


def write_atomic(path: Path | str, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename:
    readers see the old file or the new one, never half of one. ``mode`` defaults to 0o666
    less the umask (a run's umask makes it 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
        os.chmod(tmp, 0o666 & ~current_umask() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path | str, data: Any, mode: int | None = None) -> None:
    """:func:`write_atomic` of ``data`` as indented, key-sorted JSON."""
    text = dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    write_atomic(path, text.encode("utf-8"), mode)


def tail_text(path: Path | str, max_bytes: int = 64 * 1024) -> tuple[str, bool]:
    """The last ``max_bytes`` of a file as text, and whether the start was cut ("" if unreadable)."""
    try:
        with open_private(path) as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            return handle.read().decode("utf-8", "replace"), size > max_bytes
    except OSError:
        return "", False


def tail_lines(path: Path | str, lines: int, max_bytes: int = 64 * 1024) -> list[str]:
    """The last ``lines`` lines of a file (a line cut by the byte window is dropped)."""
    text, cut = tail_text(path, max_bytes)
    found = text.splitlines()
    if cut and found:
        found = found[1:]
    return found[-lines:] if lines else []


# ------------------------------------------------------------------ shared machines
# Another local user may plant links, FIFOs and directories wherever they can write (``/tmp``,
# a runs root they made). Run files are read through :func:`open_private` and run directories
# checked with :func:`check_own_dir`: one rule, one message naming the path and its owner.
class UntrustedPath(OSError):
    """A path MOSAIC will not use: another user's, writable by others, a link, FIFO or device."""


def owner_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return f"uid {uid}"


def check_own_dir(path: Path | str, what: str = "directory") -> None:
    """Refuse ``path`` unless it is a directory (not a link) owned by us that nobody else can
    write; UntrustedPath names the path and its owner."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise UntrustedPath(f"{what} {path} is {kind} (owner {owner_name(info.st_uid)}); refused")
    if info.st_uid != os.geteuid():
        raise UntrustedPath(
            f"{what} {path} belongs to {owner_name(info.st_uid)}, not to you ({owner_name(os.geteuid())}); refused"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedPath(
            f"{what} {path} (owner {owner_name(info.st_uid)}) is writable by others "
            f"(mode {stat.S_IMODE(info.st_mode):o}); refused"
        )


def check_ancestors(path: Path | str, what: str = "folder") -> None:
    """Refuse ``path``'s existing folders, itself and up to ``/``, when another user could
    rename or replace what lies in them: each must be ours or root's, and one that others can
    write must be sticky (like ``/tmp``: nobody else can move our entries). Links are resolved
    first, so their targets' folders are what is checked."""
    chains = []
    for start in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
        while not os.path.lexists(start) and start != start.parent:
            start = start.parent
        chains.append((start, *start.parents))
    for current in dict.fromkeys(chains[0] + chains[1]):  # the path as written, and as resolved
        info = os.lstat(current)
        if info.st_uid not in (os.geteuid(), 0):
            raise UntrustedPath(
                f"{what} {path} lies in {current}, which belongs to {owner_name(info.st_uid)}; "
                "refused (they could replace what is in it)"
            )
        if stat.S_ISLNK(info.st_mode):
            continue  # a link's own mode means nothing; its owner was checked
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
            raise UntrustedPath(
                f"{what} {path} lies in {current} (owner {owner_name(info.st_uid)}), which others "
                f"can write (mode {stat.S_IMODE(info.st_mode):o}, not sticky); refused"
            )


def open_private(
    path: Path | str, *, owner: int | None = None, any_owner: bool = False, own_pipe: bool = False
) -> BinaryIO:
    """Open a run file for reading without following a link and without blocking on a FIFO;
    only a regular file owned by ``owner`` (default: us) is returned, anything else raises
    UntrustedPath (an OSError, so readers that skip unreadable files skip it too).
    ``any_owner`` (a file the user named on a command line) follows links and accepts any
    owner, still only a regular file. ``own_pipe`` (the same) also accepts a pipe or FIFO of
    ours, read as its writer writes (``--config <(…)``): one another user made could hold
    the reader forever; a device never."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags if any_owner else flags | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        expected = os.geteuid() if owner is None else owner
        if own_pipe and stat.S_ISFIFO(info.st_mode) and info.st_uid == os.geteuid():
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        if not stat.S_ISREG(info.st_mode):
            what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise UntrustedPath(f"{path} is {what} (owner {owner_name(info.st_uid)}); not read")
        if info.st_uid != expected and not any_owner:
            raise UntrustedPath(f"{path} belongs to {owner_name(info.st_uid)}, not {owner_name(expected)}; not read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_private_text(path: Path | str, limit: int | None = None) -> str:
    """The text of a run file (at most ``limit`` bytes) read through :func:`open_private`."""
    with open_private(path) as handle:
        return handle.read(-1 if limit is None else limit).decode("utf-8", "replace")


# Run files: private unless the owner opts into group sharing (``MOSAIC_SHARE_RUNS=group``).
SHARE_RUNS_VAR = "MOSAIC_SHARE_RUNS"


def run_umask() -> int:
    """The umask runs are written under: 0o077 (0700/0600), or 0o027 (group may read) when
    ``$MOSAIC_SHARE_RUNS`` is ``group``."""
    return 0o027 if os.environ.get(SHARE_RUNS_VAR, "").strip().lower() == "group" else 0o077


def current_umask() -> int:
    """This process's umask, read without changing it (from /proc; 0o022 if unknown)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str, keep_newlines: bool = False) -> str:
    """``text`` with control characters (terminal escapes, carriage returns, C1 codes; newlines
    too unless ``keep_newlines``) shown as ``?``: for human output of anything read from a run
    directory, so a run's files cannot drive the terminal of whoever reads them. Tabs stay."""
    return (_CONTROL_BUT_NEWLINES if keep_newlines else _CONTROL).sub("?", text)


def private_dir(prefix: str, base: Path | None = None) -> Path:
    """A fresh 0700 directory ``<prefix><pid>.<start>-XXXX`` of this process in ``base`` (default:
    the temp dir). First, those of processes that are gone (e.g. a Ray actor killed with its
    caller before it could remove its own) are removed: only our own real directories, never
    through a link, never one of a live process."""
    base = Path(base or tempfile.gettempdir())
    mine = f"{prefix}{os.getpid()}.{procs.process_start(os.getpid())}-"
    pattern = re.compile(re.escape(prefix) + r"(\d+)\.(\d+)-")
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            match = pattern.match(entry.name)
            if not match or procs.process_alive(int(match[1]), int(match[2])):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
                    shutil.rmtree(entry.path, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=mine, dir=base))


def cache_dir(*parts: str, create: bool = False) -> Path | None:
    """MOSAIC's cache folder (``$XDG_CACHE_HOME/mosaic/PARTS``, else ``~/.cache/mosaic/PARTS``)
    when it is ours to use, made 0700 when ``create``: ``mosaic/`` and each folder below it are
    ours, not links, and nobody else can write them, and every folder above is ours or root's
    (sticky where others can write), so nobody can swap what lies in them. None otherwise (a
    shared cache folder, another user's): a cache is then not used at all."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folders = [Path(base, "mosaic", *parts[:depth]) for depth in range(len(parts) + 1)]
    try:
        if create:
            os.makedirs(folders[-1], mode=0o700, exist_ok=True)
        check_ancestors(folders[-1], "cache folder")
        for folder in folders:
            check_own_dir(folder, "cache folder")
    except OSError:
        return None
    return folders[-1]
