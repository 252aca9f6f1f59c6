"""Small file helpers used across MOSAIC: atomic JSON writes and reading a file's tail."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def is_within(base: Path | str, target: Path | str) -> bool:
    """Whether ``target`` is ``base`` or below it, symlinks resolved (a sibling sharing the
    prefix, ``base-x/…``, is not)."""
    base, target = Path(base).resolve(), Path(target).resolve()
    return target == base or base in target.parents


def write_atomic(path: Path | str, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename:
    readers see the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path | str, data: Any, mode: int = 0o644) -> None:
    """:func:`write_atomic` of ``data`` as indented, key-sorted JSON."""
    text = json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    write_atomic(path, text.encode("utf-8"), mode)


def tail_text(path: Path | str, max_bytes: int = 64 * 1024) -> tuple[str, bool]:
    """The last ``max_bytes`` of a file as text, and whether the start was cut ("" if unreadable)."""
    try:
        with open(path, "rb") as handle:
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
