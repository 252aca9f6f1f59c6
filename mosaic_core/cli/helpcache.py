"""The plugins' commands as ``mosaic --help`` lists them (name and help line), kept between starts.

Listing them means loading every plugin (pluggy and each plugin's modules): most of what
``mosaic --help`` would cost. The first ``--help`` loads them and keeps the lines in
``$XDG_CACHE_HOME/mosaic/cli-commands/``, one file per interpreter, keyed by a *stamp*: what is
installed (:mod:`mosaic_core.installed`'s stamp), the plugin selection in the environment
(``MOSAIC_LOAD_PLUGINS``, ``MOSAIC_DISABLE_PLUGINS``) and each file of the plugins' packages that
was imported (path, mtime, size: an edited plugin in an editable install). Anything else (a
plugin that failed to load, another stamp, a file that is not ours or not this format) and the
plugins are loaded again. The file holds text only: names and help lines, never code.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from typing import Any

from mosaic_core.cli.commands import CliCommand

FOLDER = "cli-commands"
FORMAT = 1
MAX_BYTES = 1024 * 1024


def cached_commands() -> list[CliCommand] | None:
    """The plugins' commands from the cache, to be listed only (their ``configure`` adds nothing;
    running one is refused): None when the cache does not hold for what is installed now."""
    from mosaic_core.files import cache_dir, open_private

    folder = cache_dir(FOLDER)
    if folder is None:
        return None
    try:
        with open_private(folder / _cache_name()) as handle:
            data = json.loads(handle.read(MAX_BYTES + 1))
        if data.get("format") != FORMAT or data.get("stamp") != _stamp(data.get("files")):
            return None
        return [CliCommand(name, help_line, _lists_only, _never) for name, help_line in data["commands"]]
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return None


def store_commands(commands: list[CliCommand], packages: set[str]) -> None:
    """Keep ``commands``' lines, stamped with the imported files of ``packages`` (top-level names)."""
    from mosaic_core.files import cache_dir, write_atomic

    files = sorted(
        str(module.__file__)
        for name, module in list(sys.modules.items())
        if name.partition(".")[0] in packages and isinstance(getattr(module, "__file__", None), str)
    )
    folder = cache_dir(FOLDER, create=True)
    if folder is None:
        return
    record = {
        "format": FORMAT,
        "stamp": _stamp(files),
        "files": files,
        "commands": [[c.name, c.help] for c in commands],
    }
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
