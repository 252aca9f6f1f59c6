"""A ``.cleanrl_model`` checkpoint's header read without torch and without running its pickle:
the host checks a checkpoint before it resumes or evaluates a run (a truncated or corrupt
file, one of a newer format, of another algorithm or env is refused in one line, the run
directory untouched).

``torch.save`` writes a zip archive whose ``*/data.pkl`` holds the dict; its opcodes are read
with :func:`pickletools.genops`, which decodes and never executes. The first value after each
of the dict's first keys (``format``, ``format_version``, ``algo``, ``env_id``) is the
checkpoint's own (the dict's top-level keys come first, in the order
:func:`cleanrl_worker.checkpoint.save_checkpoint` writes them).
"""

from __future__ import annotations

import pickletools
import zipfile
from pathlib import Path
from typing import Any

# The format's names, here so the host side reads them without torch (checkpoint.py re-exports them).
FORMAT = "mosaic.cleanrl_model"
FORMAT_VERSION = 1
SUFFIX = ".cleanrl_model"
CHECKPOINTS = "checkpoints/step_{step}" + SUFFIX  # the layout, relative to the run directory (the cwd)

FIELDS = ("format", "format_version", "algo", "env_id")
VERSIONS = "versions"  # the libraries a checkpoint was saved with: {"torch": "2.13.0+cpu", ...}
MEMO_OPS = {"BINPUT", "LONG_BINPUT", "MEMOIZE", "PUT"}
GET_OPS = {"BINGET", "LONG_BINGET", "GET"}
MAX_PICKLE = 64 * 1024 * 1024


def read_header(path: Path) -> dict[str, Any]:
    """``FIELDS`` of the checkpoint at ``path``; ValueError naming what is wrong with the file."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()  # every member's CRC: a truncated or damaged file fails here
            if bad is not None:
                raise ValueError(f"member {bad} is damaged")
            name = next((n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"), None)
            if name is None:
                raise ValueError("no data.pkl: not a torch.save file")
            if archive.getinfo(name).file_size > MAX_PICKLE:
                raise ValueError("data.pkl is too large for a checkpoint header")
            data = archive.read(name)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ValueError(f"not a readable checkpoint, truncated or corrupt ({exc})") from None
    found: dict[str, Any] = {}
    pending: str | None = None
    try:
        for opcode, arg, _pos in pickletools.genops(data):
            if opcode.name in MEMO_OPS:
                continue
            if pending is not None:
                found.setdefault(pending, arg)
                pending = None
            elif isinstance(arg, str) and arg in FIELDS and arg not in found:
                pending = arg
            if len(found) == len(FIELDS):
                break
        found[VERSIONS] = _versions(data)
    except (ValueError, IndexError) as exc:
        raise ValueError(f"its data.pkl is corrupt ({exc})") from None
    return found


def _versions(data: bytes) -> dict[str, str]:
    """The ``versions`` dict's strings (library: version), read as opcodes: after the key, a dict
    of string pairs up to its ``SETITEMS``; a string seen before comes back from the memo."""
    memo: dict[int, Any] = {}
    last: Any = None
    strings: list[str] | None = None
    for opcode, arg, _pos in pickletools.genops(data):
        name = opcode.name
        if name in MEMO_OPS:
            memo[len(memo) if arg is None else arg] = last
            continue
        value = memo.get(arg) if name in GET_OPS and isinstance(arg, int) else arg
        last = value
        if strings is None:
            strings = [] if value == VERSIONS else None
        elif name in ("SETITEMS", "SETITEM"):
            return dict(zip(strings[::2], strings[1::2]))
        elif isinstance(value, str):
            strings.append(value)
        elif name not in ("EMPTY_DICT", "MARK"):
            return {}  # not a dict of strings: no versions to compare
    return {}
