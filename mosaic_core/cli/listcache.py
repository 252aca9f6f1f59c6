"""What ``mosaic --help`` and ``mosaic workers`` list of the plugins, kept between starts.

Listing the plugins' commands (name and help line) or workers (their descriptors) means loading
every plugin (pluggy and each plugin's modules): most of what those commands would cost. The
first start loads them and keeps what it listed in ``$XDG_CACHE_HOME/mosaic/<kind>/`` (kinds:
``cli-commands``, ``workers``), one file per interpreter, keyed by a *stamp*: what is installed
(:mod:`mosaic_core.installed`'s stamp), the plugin selection in the environment
(``MOSAIC_LOAD_PLUGINS``, ``MOSAIC_DISABLE_PLUGINS``) and each file of the plugins' packages that
was imported (path, mtime, size: an edited plugin in an editable install). Anything else (a
plugin that failed to load, another stamp, a file that is not ours or not this format) and the
plugins are loaded again. Rendered tables are kept too (kind ``tables``), each under the key of
everything it was drawn from (:func:`cached_text`). The files hold data only (names, help lines,
descriptors, text), never code.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from typing import Any

from mosaic_core.cli.commands import CliCommand
from mosaic_core.entrypoints import LoadedEntryPoint

COMMANDS = "cli-commands"
WORKERS = "workers"
TABLES = "tables"  # rendered tables (:func:`cached_text`)
FORMAT = 1
MAX_BYTES = 1024 * 1024


def cached_commands() -> list[CliCommand] | None:
    """The plugins' commands from the cache, to be listed only (their ``configure`` adds nothing;
    running one is refused): None when the cache does not hold for what is installed now."""
    found = _read(COMMANDS)
    try:
        return None if found is None else [CliCommand(name, line, _lists_only, _never) for name, line in found]
    except (ValueError, TypeError):
        return None


def cached_workers() -> list[LoadedEntryPoint] | None:
    """The workers the plugins provide, from the cache (``obj``: the WorkerMetadata); None when it does not hold."""
    from mosaic_core.capabilities import WorkerMetadata

    found = _read(WORKERS)
    try:
        return None if found is None else [_worker(record, WorkerMetadata.from_dict(meta)) for record, meta in found]
    except (ValueError, TypeError, KeyError):
        return None


def store_commands(commands: list[CliCommand], packages: set[str]) -> None:
    """Keep ``commands``' lines, stamped with the imported files of ``packages`` (top-level names)."""
    _store(COMMANDS, [[c.name, c.help] for c in commands], packages)


def store_workers(items: list[LoadedEntryPoint], packages: set[str]) -> None:
    """Keep the workers ``items`` (every one active), stamped as :func:`store_commands`."""
    records = [[[getattr(i, name) for name in _ITEM_FIELDS], i.obj.to_dict()] for i in items]
    _store(WORKERS, records, packages)


_ITEM_FIELDS = ("name", "group", "value", "distribution", "version", "plugin")


def cached_text(key: str) -> str | None:
    """What was stored for exactly ``key`` (:func:`store_text`), else None."""
    from mosaic_core.files import cache_dir, open_private

    folder = cache_dir(TABLES)
    if folder is None:
        return None
    try:
        with open_private(folder / _text_name(key)) as handle:
            data = json.loads(handle.read(MAX_BYTES + 1))
        return data["text"] if data.get("format") == FORMAT and data.get("key") == key else None
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return None


def store_text(key: str, text: str) -> None:
    """Keep ``text`` for ``key`` (one file per key's hash; a later key of that hash replaces it)."""
    from mosaic_core.files import cache_dir, write_atomic

    folder = cache_dir(TABLES, create=True)
    if folder is None:
        return
    try:
        write_atomic(
            folder / _text_name(key), json.dumps({"format": FORMAT, "key": key, "text": text}).encode(), mode=0o600
        )
    except OSError:
        pass


def _text_name(key: str) -> str:
    return f"{zlib.crc32(key.encode()):08x}.json"


def _worker(record: list[str], meta: Any) -> LoadedEntryPoint:
    if len(record) != len(_ITEM_FIELDS) or not all(isinstance(v, str) for v in record):
        raise ValueError("not a worker record")
    return LoadedEntryPoint(**dict(zip(_ITEM_FIELDS, record)), obj=meta)


def _read(kind: str) -> Any:
    from mosaic_core.files import cache_dir, open_private

    folder = cache_dir(kind)
    if folder is None:
        return None
    try:
        with open_private(folder / _cache_name()) as handle:
            data = json.loads(handle.read(MAX_BYTES + 1))
        if data.get("format") != FORMAT or data.get("stamp") != _stamp(data.get("files")):
            return None
        return data["listed"] if isinstance(data["listed"], list) else None
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return None


def _store(kind: str, listed: list[Any], packages: set[str]) -> None:
    from mosaic_core.files import cache_dir, write_atomic

    files = sorted(
        str(module.__file__)
        for name, module in list(sys.modules.items())
        if name.partition(".")[0] in packages and isinstance(getattr(module, "__file__", None), str)
    )
    folder = cache_dir(kind, create=True)
    if folder is None:
        return
    record = {"format": FORMAT, "stamp": _stamp(files), "files": files, "listed": listed}
    try:
        write_atomic(folder / _cache_name(), json.dumps(record).encode(), mode=0o600)
    except OSError:
        pass


def _stamp(files: Any) -> str:
    from mosaic_core import installed
    from mosaic_core.entrypoints import DISABLE_VAR, LOAD_VAR

    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise TypeError("files")
    parts: list[Any] = [installed.installed_stamp(), os.environ.get(LOAD_VAR), os.environ.get(DISABLE_VAR)]
    for path in files:
        try:
            found = os.stat(path)
            parts.append((path, found.st_mtime_ns, found.st_size))
        except OSError:
            parts.append(path)
    return repr(parts)


def _cache_name() -> str:
    return f"{zlib.crc32(sys.executable.encode()):08x}.json"


def _lists_only(_parser: Any) -> None:
    return None


def _never(_ns: Any) -> int:
    raise RuntimeError("a command listed from the cache is never run")
