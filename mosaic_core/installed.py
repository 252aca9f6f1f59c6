"""What is installed: every entry point with its distribution and version, from a cache.

Reading installed metadata costs more than the rest of ``mosaic --help``: importing
``importlib.metadata`` (email, csv, zipfile…), reading every distribution's
``entry_points.txt``, and a version from each ``METADATA`` (``dist.metadata`` parses the whole file,
a long description included). The scan is kept in ``$XDG_CACHE_HOME/mosaic/entry-points/``,
one file per interpreter, keyed by the *stamp* of what it read: ``sys.path``, each folder's
mtime and, for each ``*.dist-info``/``*.egg-info`` in it, its ``entry_points.txt``'s mtime and
size. Installing, removing or upgrading a distribution (or a ``pip install -e``) changes the
stamp; then the scan runs again and replaces the file. The folder and the file are checked
before either is used (folders of ours nobody else can write, a regular file of ours: a link or
FIFO planted in a shared ``$XDG_CACHE_HOME`` is never followed or waited on). No cache (read-only
home, another user's folder or file, bad JSON): the scan, every time.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from typing import Any

# group -> [[name, value, distribution, version], ...] sorted by (name, value)
Index = dict[str, list[list[str]]]
FORMAT = 1
FOLDER = "entry-points"  # in MOSAIC's cache folder (mosaic_core.files.cache_dir)
MAX_BYTES = 16 * 1024 * 1024  # a cache file larger than this is not read
_memo: dict[str, Index] = {}


def entry_points(group: str) -> list[list[str]]:
    """``[name, value, distribution, version]`` of every installed entry point of ``group``."""
    stamp = installed_stamp()
    if stamp not in _memo:
        _memo.clear()
        _memo[stamp] = _read(stamp) or _scan_and_store(stamp)
    return _memo[stamp].get(group, [])


def installed_stamp() -> str:
    """What the cache is keyed by (the folders on ``sys.path``, their distributions' entry points)."""
    parts: list[Any] = [sys.executable, FORMAT]
    for entry in sys.path:
        folder = entry or "."
        try:
            parts.append((entry, os.stat(folder).st_mtime_ns))
            names = sorted(os.listdir(folder))
        except OSError:  # missing, or a zip file (its mtime is above)
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    found = os.stat(os.path.join(folder, name, "entry_points.txt"))
                    parts.append((name, found.st_mtime_ns, found.st_size))
                except OSError:
                    parts.append(name)
    return repr(parts)  # compared whole (hashlib's import costs more than the comparison)


def _cache_name() -> str:
    return f"{zlib.crc32(sys.executable.encode()):08x}.json"


def _read(stamp: str) -> Index | None:
    from mosaic_core.files import cache_dir, open_private

    folder = cache_dir(FOLDER)  # checked before anything in it is opened
    if folder is None:
        return None
    try:  # never a link, FIFO (opened without blocking) or another user's file: only a regular file of ours
        with open_private(folder / _cache_name()) as handle:
            data = json.loads(handle.read(MAX_BYTES + 1))
        return data["groups"] if data.get("stamp") == stamp else None
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return None


def _scan_and_store(stamp: str) -> Index:
    index = scan()
    from mosaic_core.files import cache_dir, write_atomic

    folder = cache_dir(FOLDER, create=True)  # written only into a folder checked as ours alone
    if folder is None:  # no cache here: the scan runs every time
        return index
    try:
        text = json.dumps({"stamp": stamp, "groups": index})
        if len(text) <= MAX_BYTES:
            write_atomic(folder / _cache_name(), text.encode(), mode=0o600)
    except OSError:
        pass
    return index


def scan() -> Index:
    """Every entry point importlib.metadata finds (one distribution per name, the first on
    ``sys.path``), each with its distribution's name and version."""
    from importlib import metadata

    found = metadata.entry_points()
    # Python 3.11 returns a dict of groups (whose own methods warn that they are deprecated), 3.12 a sequence
    every = [ep for eps in dict.values(found) for ep in eps] if isinstance(found, dict) else list(found)
    identities: dict[int, tuple[str, str]] = {}
    index: Index = {}
    for ep in every:
        dist = getattr(ep, "dist", None)
        if dist is not None and id(dist) not in identities:
            identities[id(dist)] = name_and_version(dist)
        name, version = identities[id(dist)] if dist is not None else ("?", "?")
        index.setdefault(ep.group, []).append([ep.name, ep.value, name, version])
    for records in index.values():
        records.sort(key=lambda record: (record[0], record[1]))
    return index


def name_and_version(dist: Any) -> tuple[str, str]:
    """A distribution's name and version from its metadata's header (``dist.metadata`` parses the
    whole file, a long description included: our README is 100 KB)."""
    found: dict[str, str] = {}
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    for line in text.split("\n\n", 1)[0].splitlines():
        key, colon, value = line.partition(":")
        if colon and key in ("Name", "Version"):
            found.setdefault(key, value.strip())
    return found.get("Name", "?"), found.get("Version", "?")
