"""Opening names in a shared directory without trusting them: no links, no FIFOs, no strangers.

``/dev/shm`` is writable by every user, so anything can sit at a segment's name: a symbolic
link to a private file, a FIFO (whose ``open`` blocks until a writer comes), a look-alike
segment owned by another user and writable by all. FastLane therefore

- creates files only with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (an existing name, link or not,
  is never opened, followed, truncated or removed: another name is tried);
- opens existing names only with ``O_NOFOLLOW | O_NONBLOCK`` (a link fails, a FIFO opens
  at once instead of hanging) and trusts what it opened only after ``fstat`` says: a regular
  file, owned by the expected user, mode 0600;
- looks at names it will not open with ``lstat`` only.

The expected owner is the effective uid of the process (the host and the training process
run as the same user); a reader may name another user whose runs it means to read.
"""

from __future__ import annotations

import errno
import os
import pwd
import secrets
import stat
from pathlib import Path

from mosaic_core import MosaicError

SEGMENT_MODE = 0o600
OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CREATE_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_ATTEMPTS = 16


class UntrustedFile(MosaicError):
    """The entry at a name is not a file FastLane may use (a link, a FIFO, another user's…)."""


def user_name(uid: int) -> str:
    """``uid 65534 (nobody)``, or ``uid 1234`` when the account has no name."""
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def resolve_user(user: str | int | None) -> int:
    """A user name or uid as a uid; None means this process's effective uid."""
    if user is None:
        return os.geteuid()
    if isinstance(user, int) or str(user).isdigit():
        return int(user)
    try:
        return pwd.getpwnam(str(user)).pw_uid
    except KeyError:
        raise UntrustedFile(f"no user called {user!r} on this machine") from None


def kind_of(mode: int) -> str:
    """What a file is, in words (``a FIFO``, ``a symbolic link``…)."""
    for test, name in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "an unknown kind of file"


def problem(info: os.stat_result, expected_uid: int) -> str | None:
    """Why a file with this ``stat`` is not to be trusted as a segment (None: it may be)."""
    if not stat.S_ISREG(info.st_mode):
        return f"is {kind_of(info.st_mode)}, not a regular file"
    if info.st_uid != expected_uid:
        return f"is owned by {user_name(info.st_uid)}, not by {user_name(expected_uid)}"
    mode = stat.S_IMODE(info.st_mode)
    if mode != SEGMENT_MODE:
        return f"has mode {mode:04o}; FastLane segments are {SEGMENT_MODE:04o}"
    return None


def open_trusted(path: Path, flags: int, expected_uid: int) -> tuple[int, os.stat_result]:
    """Open an existing name without following links or blocking, and check what it is.

    Returns the descriptor and its ``fstat``; raises FileNotFoundError when nothing is there,
    :class:`UntrustedFile` (descriptor closed) when the entry is not to be trusted, and
    OSError for anything else.
    """
    try:
        fd = os.open(path, flags | OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UntrustedFile(f"{path} is a symbolic link; FastLane never follows links") from None
        raise
    try:
        info = os.fstat(fd)
        why = problem(info, expected_uid)
        if why:
            raise UntrustedFile(f"{path} {why}")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def create_private(directory: Path, stem: str) -> tuple[int, Path]:
    """Create a new 0600 file ``.<stem>.<pid>.<random>.tmp`` in ``directory``; never an existing name.

    A name that exists (whatever it is, whoever planted it) is left alone and another random
    name tried. Raises OSError when the directory refuses.
    """
    for _attempt in range(TEMP_ATTEMPTS):
        path = directory / f".{stem}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(path, CREATE_FLAGS, SEGMENT_MODE)
        except FileExistsError:
            continue
        os.fchmod(fd, SEGMENT_MODE)  # exactly 0600, whatever the umask
        return fd, path
    raise FileExistsError(errno.EEXIST, f"{TEMP_ATTEMPTS} fresh temporary names in {directory} all existed")


def temp_pid(name: str) -> int | None:
    """The creator's pid in a temporary name made by :func:`create_private` (None if not one)."""
    parts = name.split(".")
    if len(parts) >= 4 and parts[0] == "" and parts[-1] == "tmp" and parts[2].isdigit():
        return int(parts[2])
    return None
