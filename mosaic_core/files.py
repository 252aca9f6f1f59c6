"""Small file helpers used across MOSAIC: atomic JSON writes, reading a file's tail, and the
shared-machine checks every reader of run files goes through (:func:`open_private`)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from mosaic_core import procs
from mosaic_core.errors import UsageError
from mosaic_core.jsontext import dumps

__all__ = [
    "FOLDER",
    "NEW_FILE",
    "OutputFolder",
    "SHARE_RUNS_VAR",
    "UntrustedPath",
    "atomic_output",
    "cache_dir",
    "check_ancestors",
    "check_output",
    "check_own_dir",
    "current_umask",
    "is_within",
    "open_private",
    "owner_name",
    "printable",
    "private_dir",
    "read_private_text",
    "run_umask",
    "tail_lines",
    "tail_text",
    "write_atomic",
    "write_json_atomic",
]


def is_within(base: Path | str, target: Path | str) -> bool:
    """Whether ``target`` is ``base`` or below it, symlinks resolved (a sibling sharing the
    prefix, ``base-x/…``, is not)."""
    base, target = Path(base).resolve(), Path(target).resolve()
    return target == base or base in target.parents


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


# ------------------------------------------------------------------ writing files
# Every file MOSAIC writes whole goes through :func:`atomic_output`: a run's JSON files, caches,
# and every output a user names (``-o``, ``--export``, ``--config``, ``--video``; a card's
# folder through :class:`OutputFolder`). Its folder is held open by descriptor and the file is
# created exclusively (O_EXCL|O_NOFOLLOW), so nothing is ever written through a link another
# user planted, and a name that changes meanwhile makes a refusal, never a write.
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
FOLDER = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


class _Output:
    """Where a file goes: its folder, checked and held open, and the file's name in it.

    ``named``: a path the user typed. Its folder must exist, and it and every folder above it
    must be ours or root's, sticky where others can write (:func:`check_ancestors`, as for a
    runs root), and what is at the name is checked (:meth:`refuse_existing`); our own files'
    folders are made when missing. A folder only we can write takes a private temporary renamed
    over the name (readers see the old file or the new one); in one others can write (``/tmp``)
    the file is only ever created new."""

    def __init__(self, path: Path | str, named: bool, new: bool):
        self.shown, self.named, self.new = str(path), named, new
        absolute = Path(os.path.abspath(path))
        self.folder, self.name = absolute.parent, absolute.name
        if named:
            try:
                check_ancestors(self.folder, "its folder")
            except UntrustedPath as exc:
                raise UntrustedPath(f"{self.shown}: {exc}") from None
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self.fd = os.open(self.folder, FOLDER)
        except FileNotFoundError:
            raise UntrustedPath(f"{self.shown}: cannot write there: folder {self.folder} does not exist") from None
        except NotADirectoryError:
            raise UntrustedPath(f"{self.shown}: cannot write there: {self.folder} is not a folder") from None
        info = os.fstat(self.fd)
        self.private = info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        self.temporary: str | None = None
        self.inode = -1

    def refuse_existing(self) -> None:
        """Refuse what is at the name: anything when ``new`` or in a folder others can write;
        otherwise, for a path the user named, a link, a folder, a FIFO or device, or another
        user's file. Our own file in our own folder (a run's ``analytics.json``) is renamed over,
        a link there too: replaced, never followed."""
        if self.private and not (self.named or self.new):
            return
        try:
            info = os.stat(self.name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        owner = owner_name(info.st_uid)
        if stat.S_ISLNK(info.st_mode):
            why = f"is a symbolic link (owner {owner}): an output is never written through a link"
        elif self.new:
            why = "exists already (name a new one)"
        elif stat.S_ISDIR(info.st_mode):
            why = f"is a folder (owner {owner})"
        elif not stat.S_ISREG(info.st_mode):
            why = f"is not a regular file (owner {owner})"
        elif info.st_uid != os.geteuid():
            why = f"belongs to {owner}, not to you"
        elif not self.private:
            why = (
                f"exists already in {self.folder}, which others can write: an output there is only "
                "ever a new file (remove it or choose another name)"
            )
        else:
            return
        raise UntrustedPath(f"{self.shown} {why}; refused")

    def create(self) -> int:
        """A new file for the bytes: a private temporary (our own folder) or the name itself."""
        self.refuse_existing()
        if self.private:  # nobody else makes names here: a random one is free
            self.temporary = f".{self.name[:200]}.{os.urandom(8).hex()}.tmp"  # secrets.token_hex, without its import
            return self._open_new(self.temporary)
        try:
            return self._open_new(self.name)
        except FileExistsError:  # planted since we looked
            self.refuse_existing()
            raise

    def _open_new(self, name: str) -> int:
        fd = os.open(name, NEW_FILE, 0o600, dir_fd=self.fd)
        self.inode = os.fstat(fd).st_ino
        return fd

    def publish(self) -> None:
        if self.temporary is not None:
            self.refuse_existing()  # our own folder: only a process of ours could have put it there
            os.rename(self.temporary, self.name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            self.temporary = None

    def discard(self) -> None:
        """Remove what this made (by name, only while the name is still that file)."""
        name = self.temporary or self.name
        with contextlib.suppress(OSError):
            if os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_ino == self.inode:
                os.unlink(name, dir_fd=self.fd)

    def close(self) -> None:
        os.close(self.fd)


@contextlib.contextmanager
def _refusals(flag: str | None, path: Path | str) -> Iterator[None]:
    """With ``flag`` (the option that named the path): a refusal or an OSError becomes one
    UsageError line, ``FLAG PATH …``; without, it propagates as it is."""
    try:
        yield
    except UntrustedPath as exc:
        if flag is None:
            raise
        raise UsageError(f"{flag} {exc}") from None
    except OSError as exc:
        if flag is None:
            raise
        raise UsageError(f"{flag} {path}: cannot write: {exc.strerror or exc}") from None


@contextlib.contextmanager
def atomic_output(
    path: Path | str, *, flag: str | None = None, mode: int | None = None, new: bool = False
) -> Iterator[BinaryIO]:
    """A binary handle whose bytes become the file ``path`` when the block ends; on an error
    nothing is left. ``flag`` (an output the user named, e.g. ``"-o"``): checked as
    :class:`_Output` says, refusals are one UsageError line naming it. ``new``: anything at
    ``path`` is refused. ``mode`` defaults to 0o666 less the umask."""
    with _refusals(flag, path):
        out = _Output(path, named=flag is not None, new=new)
    try:
        with _refusals(flag, path):
            fd = out.create()
        try:
            with os.fdopen(fd, "wb") as handle:
                yield handle
                handle.flush()
                os.fchmod(handle.fileno(), 0o666 & ~current_umask() if mode is None else mode)
            with _refusals(flag, path):
                out.publish()
        except BaseException:
            out.discard()
            raise
    finally:
        out.close()


def write_atomic(
    path: Path | str, data: bytes, mode: int | None = None, *, flag: str | None = None, new: bool = False
) -> None:
    """Write ``data`` to ``path`` through :func:`atomic_output`: readers see the old file or the
    new one, never half of one (a run's umask makes it 0600)."""
    with atomic_output(path, flag=flag, mode=mode, new=new) as handle:
        handle.write(data)


def write_json_atomic(path: Path | str, data: Any, mode: int | None = None, *, flag: str | None = None) -> None:
    """:func:`write_atomic` of ``data`` as indented, key-sorted JSON."""
    text = dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    write_atomic(path, text.encode("utf-8"), mode, flag=flag)


def check_output(path: Path | str, flag: str, new: bool = False) -> None:
    """Refuse now, before slow work, an output path :func:`atomic_output` would refuse (it
    checks again when it writes)."""
    with _refusals(flag, path):
        out = _Output(path, named=True, new=new)
        try:
            out.refuse_existing()
        finally:
            out.close()


class OutputFolder:
    """A folder a user named for several outputs (a model card's): made here by ``mkdir``, an
    existing name refused (never "checked absent, written later"), then reached only through
    its descriptor: each file in it is created O_EXCL|O_NOFOLLOW, each subfolder by ``mkdir``.
    Refusals are one UsageError line naming ``flag``."""

    def __init__(self, path: Path | str, flag: str, mode: int = 0o755):
        self.flag, self.shown = flag, str(path)
        with _refusals(flag, path):
            self._out = _Output(path, named=True, new=True)
            try:
                self._out.refuse_existing()
                os.mkdir(self._out.name, mode, dir_fd=self._out.fd)
            except FileExistsError:  # planted since we looked
                self._out.refuse_existing()
                raise
            except BaseException:
                self._out.close()
                raise
            self.fd = os.open(self._out.name, FOLDER | os.O_NOFOLLOW, dir_fd=self._out.fd)

    def write(self, name: str, data: bytes, into: int | None = None) -> None:
        """A new file ``name`` (in the folder, or in one of its subfolders' ``into``)."""
        with self.create(name, into) as handle:
            handle.write(data)

    def create(self, name: str, into: int | None = None) -> BinaryIO:
        with _refusals(self.flag, self.shown):
            return os.fdopen(os.open(name, NEW_FILE, 0o666, dir_fd=self.fd if into is None else into), "wb")

    def subfolder(self, name: str, into: int | None = None) -> int:
        """A new subfolder ``name``; its descriptor (the caller closes it)."""
        parent = self.fd if into is None else into
        with _refusals(self.flag, self.shown):
            os.mkdir(name, 0o777, dir_fd=parent)
            return os.open(name, FOLDER | os.O_NOFOLLOW, dir_fd=parent)

    def link(self, name: str, target: str, into: int | None = None) -> None:
        with _refusals(self.flag, self.shown):
            os.symlink(target, name, dir_fd=self.fd if into is None else into)

    def discard(self) -> None:
        """Remove the folder and what this wrote in it (never following a link)."""
        with contextlib.suppress(OSError):
            shutil.rmtree(self._out.name, dir_fd=self._out.fd)

    def close(self) -> None:
        os.close(self.fd)
        self._out.close()


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
        check_ancestors(folders[-1], "cache folder")  # before anything is made: nothing lands in theirs
        for folder in folders:  # each made only once the one above it is checked ours
            if create and not os.path.lexists(folder):
                os.makedirs(folder, mode=0o700, exist_ok=True)
            check_own_dir(folder, "cache folder")
    except OSError:
        return None
    return folders[-1]
