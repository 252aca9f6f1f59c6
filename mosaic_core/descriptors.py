"""What plugins provide besides hooks (workers, launchers), collected and checked in one place.

Workers register through the ``mosaic.workers`` entry-point group (the design card's and
MOSAIC's: ``NAME = "pkg:get_worker_metadata"``, a function returning the worker's
:class:`WorkerMetadata`, or MOSAIC's ``(metadata, capabilities)`` pair); a plugin may also provide
workers from its ``mosaic_workers`` hook. A plugin's ``mosaic_launchers`` hook returns launcher
descriptors. Each one becomes a :class:`~mosaic_core.entrypoints.LoadedEntryPoint` named after what it provides, with
the providing plugin's entry point and distribution, ``active`` or ``failed`` with one error
format: ``entry point 'NAME' (VALUE) from DIST VERSION: HOOK ...``. A name provided twice:
the second is failed, naming both. The ``mosaic.launchers`` group, which the hook replaced, is
still read for third-party distributions, with a one-line deprecation notice naming the
distribution and what to change.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from mosaic_core.capabilities import WorkerMetadata
from mosaic_core.entrypoints import LoadedEntryPoint, is_blocked, load_group

WORKERS_GROUP = "mosaic.workers"  # the design card's group: NAME = "pkg:get_worker_metadata"

_noticed: set[tuple[str, str, str]] = set()  # (group, distribution, name) said this process


def collect(
    host: Any,  # a mosaic_core.plugins.PluginHost (which imports this module)
    hook: str,
    kind: type,
    legacy: Callable[[], list[LoadedEntryPoint]] | None = None,
    group: Callable[[], list[LoadedEntryPoint]] | None = None,
) -> list[LoadedEntryPoint]:
    """What ``group`` loads from an entry-point group, then every ``kind`` descriptor the plugins'
    ``hook`` returns, one item each, then what ``legacy`` loads from a deprecated group (neither
    group in a training process, which scans nothing)."""
    items: list[LoadedEntryPoint] = []
    if group is not None and not host.listed:
        items.extend(group())
    for plugin, value, error in host.provided(hook):
        if error is not None:
            items.append(_failed(plugin, plugin.name, f"{hook} raised {error}"))
            continue
        if value is None:
            continue
        if not isinstance(value, (list, tuple)):
            items.append(
                _failed(plugin, plugin.name, f"{hook} returned {value!r:.80}; expected a list of {kind.__name__}")
            )
            continue
        for descriptor in value:
            items.append(_checked(plugin, hook, kind, descriptor))
    items.sort(key=lambda item: (item.group != WORKERS_GROUP, item.name, item.plugin))
    if legacy is not None and not host.listed:
        for item in legacy():
            _notice(item, hook)
            items.append(item)
    return _unique(items)


def worker_items(host: Any) -> list[LoadedEntryPoint]:
    """Every worker of the ``mosaic.workers`` group, then those ``host``'s plugins provide:
    ``obj`` is its WorkerMetadata when active."""
    return collect(host, "mosaic_workers", WorkerMetadata, group=_group_workers)


def _group_workers() -> list[LoadedEntryPoint]:
    """The group's workers the environment's allow/block lists keep (``MOSAIC_LOAD_PLUGINS``,
    ``MOSAIC_DISABLE_PLUGINS`` name workers as they name plugins)."""
    items = [_named(item) for item in load_group(WORKERS_GROUP, check=_check_worker, select=is_blocked)]
    for item in items:
        if item.status == "failed" and item.error and not item.error.startswith("entry point "):
            item.error = f"{item.describe()}: {item.error}"  # the one error format, as a hook's
    return [item for item in items if item.status != "blocked"]


def _check_worker(obj: Any) -> WorkerMetadata:
    if isinstance(obj, WorkerMetadata):
        return obj
    if not callable(obj):
        raise TypeError(
            f"a {WORKERS_GROUP} entry point must name a WorkerMetadata (or a function returning one), "
            f"got {type(obj).__name__}"
        )
    metadata = obj()
    if isinstance(metadata, tuple) and len(metadata) == 2 and isinstance(metadata[0], WorkerMetadata):
        metadata = metadata[0]  # MOSAIC's shape: (WorkerMetadata, WorkerCapabilities)
    if not isinstance(metadata, WorkerMetadata):
        raise TypeError(
            f"{getattr(obj, '__qualname__', obj)}() returned {type(metadata).__name__}, expected WorkerMetadata "
            "(or MOSAIC's (WorkerMetadata, WorkerCapabilities) pair)"
        )
    return metadata


def _named(item: LoadedEntryPoint) -> LoadedEntryPoint:
    """A ``mosaic.workers`` entry point's worker, named by its entry point."""
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


def _checked(plugin: LoadedEntryPoint, hook: str, kind: type, descriptor: Any) -> LoadedEntryPoint:
    if not isinstance(descriptor, kind):
        return _failed(plugin, plugin.name, f"{hook} returned {descriptor!r:.80}; expected {kind.__name__}")
    name = getattr(descriptor, "name", "")
    if not name:
        return _failed(plugin, plugin.name, f"{hook} returned a {kind.__name__} without a name")
    return _item(plugin, name, obj=descriptor)


def _item(plugin: LoadedEntryPoint, name: str, **fields: Any) -> LoadedEntryPoint:
    return LoadedEntryPoint(
        name=name,
        group=plugin.group,
        value=plugin.value,
        distribution=plugin.distribution,
        version=plugin.version,
        plugin=plugin.name,
        **fields,
    )


def _failed(plugin: LoadedEntryPoint, name: str, problem: str) -> LoadedEntryPoint:
    return _item(plugin, name, status="failed", error=f"{plugin.describe()}: {problem}")


def _unique(items: list[LoadedEntryPoint]) -> list[LoadedEntryPoint]:
    """The first item of a name wins; a later one (another plugin, a deprecated entry point) fails."""
    first: dict[str, LoadedEntryPoint] = {}
    for item in items:
        if item.status != "active":
            continue
        if item.name in first:
            other = first[item.name]
            item.status, item.obj = "failed", None
            item.error = (
                f"duplicate name {item.name!r}: provided by {other.distribution} ({other.value}) "
                f"and by {item.distribution} ({item.value})"
            )
        else:
            first[item.name] = item
    return items


def _notice(item: LoadedEntryPoint, hook: str) -> None:
    """One line per deprecated entry point and process, naming the distribution and the change."""
    key = (item.group, item.distribution, item.name)
    if key in _noticed:
        return
    _noticed.add(key)
    what = item.group.rsplit(".", 1)[-1].rstrip("s")
    print(
        f"mosaic: deprecated: {item.distribution} registers {what} {item.name!r} through the {item.group!r} "
        f"entry-point group; name a module in 'mosaic.plugins' instead whose {hook}() hook returns its "
        "descriptor (docs/extending/plugin.md)",
        file=sys.stderr,
    )
