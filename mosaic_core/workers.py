"""Worker discovery: the :class:`WorkerMetadata` descriptors of the ``mosaic.workers`` entry
points (a descriptor, or a function returning one, per entry point; its name the worker's) and
of plugins' ``mosaic_workers`` hook (:mod:`mosaic_core.descriptors` checks them).

Discovery imports only those modules (kept import-light): the worker class and its run hooks are
named as strings and imported when a run needs them. A broken worker is reported with its entry
point, distribution and error, and never stops the host.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING

from mosaic_core.entrypoints import LoadedEntryPoint, is_blocked
from mosaic_core.errors import UsageError

if TYPE_CHECKING:
    from mosaic_core.config import WorkerConfig
    from mosaic_core.plugins import PluginHost
    from mosaic_core.worker import Worker

DEFAULT_WORKER_VAR = "MOSAIC_DEFAULT_WORKER"  # the worker of runs that name none (mosaic_core.choice)


def discover_workers(host: PluginHost | None = None) -> list[LoadedEntryPoint]:
    """Every worker the plugins provide (then the deprecated group's), loaded (``obj`` is the
    WorkerMetadata) or failed; ``host``: the process's plugin host unless given."""
    from mosaic_core.descriptors import worker_items
    from mosaic_core.plugins import plugin_host

    return worker_items(host or plugin_host())


def find_worker(name: str) -> LoadedEntryPoint:
    """The installed worker called ``name`` (``obj`` is its WorkerMetadata); a UsageError
    lists the installed ones."""
    from mosaic_core.plugins import plugin_host

    host = plugin_host()
    items = discover_workers(host)
    for item in items:
        if item.name == name:
            if item.status != "active":
                raise UsageError(f"worker {name!r} is installed but failed to load: {item.error} ({item.describe()})")
            return item
    blocked = next((i for i in host.loaded if i.name == name and i.status == "blocked"), None)
    hint = f" (plugin {name!r} is not loaded: {blocked.error})" if blocked else ""
    hint = hint or (f" (worker {name!r} is not loaded: {why})" if (why := is_blocked(name)) else "")
    raise UsageError(unknown_worker(name, items) + hint)


def worker_python(name: str) -> str:
    """The interpreter of worker ``name``'s environment (the host's for a worker without one of its
    own), as a run of it gets (``run.python``); a UsageError when that environment is missing or stale."""
    from mosaic_core.environments import preflight

    item = find_worker(name)
    return preflight(item.obj, item.distribution).python


def unknown_worker(name: str, items: list[LoadedEntryPoint]) -> str:
    """ "unknown worker", the closest installed one, and the installed ones."""
    names = [i.name for i in items if i.status == "active"]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown worker {name!r}{hint}; installed workers: {', '.join(names) or 'none'}"


def recorded_run(run_dir: Path) -> tuple[str, Worker, WorkerConfig]:
    """The worker's name, the worker and the config a run recorded (``config.json``): what
    evaluating or serving its policy starts from. An imported, untrusted run is refused."""
    from mosaic_core.config import WorkerConfig, read_config_file
    from mosaic_core.runstore.trust import refuse_untrusted
    from mosaic_core.worker import load_worker

    refuse_untrusted(run_dir / "config.json", f"run {run_dir.name}")
    recorded = read_config_file(run_dir / "config.json", run_file=True)
    name = recorded.pop("worker", None)
    if not isinstance(name, str):
        raise UsageError(f"run {run_dir.name} is not a training run: its config.json names no worker")
    return name, load_worker(find_worker(name)), WorkerConfig.from_dict(recorded, source=str(run_dir / "config.json"))
