"""Worker discovery from the ``mosaic.workers`` entry-point group.

Each entry point names a worker's one descriptor, a :class:`WorkerMetadata` (or a function
returning it); the entry point's name is the worker's name (given once: the descriptor may
leave ``name`` out). Discovery imports only the module holding the descriptor, so workers keep
heavy imports out of it; a broken one is reported with its entry point name, distribution and
error, and never stops the host.
"""

from __future__ import annotations

import difflib
from typing import Any

from mosaic_core.capabilities import WorkerMetadata
from mosaic_core.entrypoints import LoadedEntryPoint, load_group
from mosaic_core.errors import UsageError

WORKER_GROUP = "mosaic.workers"
DEFAULT_WORKER_VAR = "MOSAIC_DEFAULT_WORKER"  # the worker of runs that name none (mosaic_core.choice)


def _check_worker(obj: Any) -> WorkerMetadata:
    if isinstance(obj, WorkerMetadata):
        return obj
    if not callable(obj):
        raise TypeError(
            f"a mosaic.workers entry point must name a WorkerMetadata (or a function returning one), "
            f"got {type(obj).__name__}"
        )
    metadata = obj()
    if not isinstance(metadata, WorkerMetadata):
        raise TypeError(
            f"{getattr(obj, '__qualname__', obj)}() returned {type(metadata).__name__}, expected WorkerMetadata"
        )
    return metadata


def discover_workers() -> list[LoadedEntryPoint]:
    """Every worker entry point, loaded (``obj`` is the WorkerMetadata) or failed."""
    items = load_group(WORKER_GROUP, check=_check_worker)
    for item in items:
        if item.status != "active":
            continue
        if item.obj.name and item.obj.name != item.name:
            item.status = "failed"
            item.error = f"entry point name {item.name!r} differs from the worker's name {item.obj.name!r}"
            continue
        try:
            item.obj = item.obj.named(item.name)
        except ValueError as exc:  # an entry point name that is no worker name
            item.status, item.error = "failed", str(exc)
    return items


def find_worker(name: str) -> LoadedEntryPoint:
    """The installed worker called ``name`` (``obj`` is its WorkerMetadata); a UsageError
    lists the installed ones."""
    items = discover_workers()
    for item in items:
        if item.name == name:
            if item.status != "active":
                raise UsageError(f"worker {name!r} is installed but failed to load: {item.error} ({item.describe()})")
            return item
    raise UsageError(unknown_worker(name, items))


def unknown_worker(name: str, items: list[LoadedEntryPoint]) -> str:
    """ "unknown worker", the closest installed one, and the installed ones."""
    names = [i.name for i in items if i.status == "active"]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown worker {name!r}{hint}; installed workers: {', '.join(names) or 'none'}"
