"""What plugins provide besides hooks (workers, launchers), collected and checked in one place.

A plugin's ``mosaic_workers`` / ``mosaic_launchers`` hook returns typed descriptors; each one
becomes a :class:`~mosaic_core.entrypoints.LoadedEntryPoint` named after what it provides, with
the providing plugin's entry point and distribution, ``active`` or ``failed`` with one error
format: ``entry point 'NAME' (VALUE) from DIST VERSION: HOOK ...``. A name provided twice:
the second is failed, naming both. The groups these replace (``mosaic.workers``,
``mosaic.launchers``) are still read for third-party distributions, with a one-line
deprecation notice naming the distribution and what to change.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mosaic_core.entrypoints import LoadedEntryPoint

if TYPE_CHECKING:
    from mosaic_core.plugins import PluginHost

_noticed: set[tuple[str, str, str]] = set()  # (group, distribution, name) said this process


def collect(
    host: PluginHost,
    hook: str,
    kind: type,
    legacy: Callable[[], list[LoadedEntryPoint]] | None = None,
) -> list[LoadedEntryPoint]:
    """Every ``kind`` descriptor the plugins' ``hook`` returns, one item each, then what
    ``legacy`` loads from a deprecated group (not in a training process, which scans nothing)."""
    items: list[LoadedEntryPoint] = []
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
    items.sort(key=lambda item: (item.name, item.plugin))
    if legacy is not None and not host.listed:
        for item in legacy():
            _notice(item, hook)
            items.append(item)
    return _unique(items)


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
