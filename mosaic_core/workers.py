"""Worker discovery: the :class:`WorkerMetadata` descriptors plugins return from their
``mosaic_workers`` hook (:mod:`mosaic_core.descriptors` checks them).

Discovery imports only the plugin modules (kept import-light) and calls that hook: the worker
class and its run hooks are named as strings and imported when a run needs them. A broken
worker is reported with its plugin's entry point, distribution and error, and never stops the
host. The ``mosaic.workers`` entry-point group (a descriptor, or a function returning one, per
entry point; its name the worker's) is still read, with a deprecation notice.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from mosaic_core.capabilities import WorkerMetadata
from mosaic_core.entrypoints import LoadedEntryPoint, load_group
from mosaic_core.errors import UsageError

if TYPE_CHECKING:
    from mosaic_core.plugins import PluginHost

LEGACY_GROUP = "mosaic.workers"  # deprecated: a plugin's mosaic_workers hook instead
DEFAULT_WORKER_VAR = "MOSAIC_DEFAULT_WORKER"  # the worker of runs that name none (mosaic_core.choice)


def _check_worker(obj: Any) -> WorkerMetadata:
    if isinstance(obj, WorkerMetadata):
        return obj
    if not callable(obj):
        raise TypeError(
            f"a {LEGACY_GROUP} entry point must name a WorkerMetadata (or a function returning one), "
            f"got {type(obj).__name__}"
        )
    metadata = obj()
    if not isinstance(metadata, WorkerMetadata):
        raise TypeError(
            f"{getattr(obj, '__qualname__', obj)}() returned {type(metadata).__name__}, expected WorkerMetadata"
        )
    return metadata


def _named(item: LoadedEntryPoint) -> LoadedEntryPoint:
    """A deprecated entry point's worker, named by its entry point."""
    if item.status == "active":
        if item.obj.name and item.obj.name != item.name:
            item.status = "failed"
            item.error = f"entry point name {item.name!r} differs from the worker's name {item.obj.name!r}"
            return item
        try:
            item.obj = item.obj.named(item.name)
        except ValueError as exc:  # an entry point name that is no worker name
            item.status, item.error = "failed", str(exc)
    return item


def discover_workers(host: PluginHost | None = None) -> list[LoadedEntryPoint]:
    """Every worker the plugins provide (then the deprecated group's), loaded (``obj`` is the
    WorkerMetadata) or failed; ``host``: the process's plugin host unless given."""
    from mosaic_core.descriptors import collect
    from mosaic_core.plugins import plugin_host

    legacy = lambda: [_named(item) for item in load_group(LEGACY_GROUP, check=_check_worker)]
    return collect(host or plugin_host(), "mosaic_workers", WorkerMetadata, legacy)


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
