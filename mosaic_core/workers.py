"""Worker discovery from the ``mosaic.workers`` entry-point group.

Each entry point names a worker's one descriptor, a :class:`WorkerMetadata` (or a function
returning it); the entry point's name is the worker's name (given once: the descriptor may
leave ``name`` out). Discovery imports only the module holding the descriptor, so workers keep
heavy imports out of it; a broken one is reported with its entry point name, distribution and
error, and never stops the host.
"""

from __future__ import annotations

from typing import Any

from mosaic_core.capabilities import WorkerMetadata
from mosaic_core.entrypoints import LoadedEntryPoint, load_group
from mosaic_core.errors import UsageError

WORKER_GROUP = "mosaic.workers"
DEFAULT_WORKER_VAR = "MOSAIC_DEFAULT_WORKER"


def _check_worker(obj: Any) -> WorkerMetadata:
    if isinstance(obj, WorkerMetadata):
        return obj
    if not callable(obj):
        raise TypeError(f"a mosaic.workers entry point must name a WorkerMetadata (or a function returning one), "
                        f"got {type(obj).__name__}")
    metadata = obj()
    if not isinstance(metadata, WorkerMetadata):
        raise TypeError(f"{getattr(obj, '__qualname__', obj)}() returned {type(metadata).__name__}, expected WorkerMetadata")
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
    installed = ", ".join(i.name for i in items if i.status == "active") or "none"
    raise UsageError(f"unknown worker {name!r}; installed workers: {installed}")


def default_worker(items: list[LoadedEntryPoint] | None = None) -> str:
    """The worker a run that names none goes to (``mosaic run`` without ``--worker``, a daemon
    submission without ``worker``): ``$MOSAIC_DEFAULT_WORKER`` when set, else the one installed
    worker whose runs can execute here (its own environment built, or none needed), examples
    (``WorkerMetadata.example``) left out. Otherwise a UsageError listing the installed workers."""
    import os

    from mosaic_core.environments import status

    named = os.environ.get(DEFAULT_WORKER_VAR, "").strip()
    if named:
        return named
    active = [item for item in (discover_workers() if items is None else items) if item.status == "active"]

    def runnable(item: LoadedEntryPoint) -> bool:
        try:
            return status(item.obj, item.distribution).ready
        except Exception:  # a broken environment root: not a candidate
            return False

    ready = [item.name for item in active if not item.obj.example and runnable(item)]
    if len(ready) == 1:
        return ready[0]
    installed = ", ".join(item.name for item in active) or "none"
    why = "no installed worker can run here" if not ready else f"{len(ready)} workers can run here"
    raise UsageError(f"name the worker: {why} (installed: {installed}); give --worker NAME or set "
                     f"${DEFAULT_WORKER_VAR}")
