"""Our own entry-point loop: each load isolated, every failure reported, names unique.

``MOSAIC_LOAD_PLUGINS`` (unset = all, empty = none, ``a,b`` = only those) and
``MOSAIC_DISABLE_PLUGINS`` (``a,b``) select what is loaded from ``mosaic.plugins`` and
``mosaic.workers``;
``MOSAIC_STRICT_PLUGINS=1`` turns any load failure into an error (for CI).
"""

from __future__ import annotations

import functools
import importlib
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mosaic_core import installed
from mosaic_core.errors import PluginError

LOAD_VAR = "MOSAIC_LOAD_PLUGINS"
DISABLE_VAR = "MOSAIC_DISABLE_PLUGINS"
STRICT_VAR = "MOSAIC_STRICT_PLUGINS"


@dataclass
class LoadedEntryPoint:
    """One entry point and what became of it: ``active``, ``blocked`` or ``failed``."""

    name: str
    group: str
    value: str
    distribution: str
    version: str
    status: str = "active"
    error: str | None = None
    detail: str | None = field(default=None, repr=False)  # traceback of a failure
    obj: Any = field(default=None, repr=False)
    plugin: str = ""  # what a plugin provides (a worker, a launcher): that plugin's entry point name

    def describe(self) -> str:
        name = self.plugin or self.name
        return f"entry point {name!r} ({self.value}) from {self.distribution} {self.version}"


def _names(var: str) -> set[str] | None:
    raw = os.environ.get(var)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def strict() -> bool:
    return os.environ.get(STRICT_VAR, "").strip().lower() in {"1", "true", "yes", "on"}


def is_blocked(name: str) -> str | None:
    """Why a plugin name is blocked by the environment, or None."""
    allowed, disabled = _names(LOAD_VAR), _names(DISABLE_VAR) or set()
    if allowed is not None and name not in allowed:
        return f"not listed in {LOAD_VAR}"
    if name in disabled:
        return f"listed in {DISABLE_VAR}"
    return None


def load_group(
    group: str,
    check: Callable[[Any], Any] | None = None,
    select: Callable[[str], str | None] = lambda name: None,
) -> list[LoadedEntryPoint]:
    """Load every entry point of ``group``, sorted by name.

    ``check`` turns the loaded object into what is kept, raising TypeError/ValueError when it
    is the wrong kind; ``select`` returns a reason to block a name. Two entry points with one
    name are rejected, naming both distributions. In strict mode the first failure raises.
    """
    found: dict[str, LoadedEntryPoint] = {}
    results: list[LoadedEntryPoint] = []
    for name, value, distribution, version in installed.entry_points(group):
        item = LoadedEntryPoint(name=name, group=group, value=value, distribution=distribution, version=version)
        results.append(item)
        if name in found:
            first = found[name]
            if (first.distribution, first.value) == (item.distribution, item.value):
                results.pop()  # the same distribution seen twice on sys.path
                continue
            item.status = "failed"
            item.error = (
                f"duplicate name {name!r}: provided by {first.distribution} ({first.value}) "
                f"and by {item.distribution} ({item.value})"
            )
            report_failure(item)
            continue
        found[name] = item
        reason = select(name)
        if reason:
            item.status, item.error = "blocked", reason
            continue
        load_into(item, functools.partial(load_value, item.value), check)
    return results


def load_value(value: str) -> Any:
    """The object an entry point's value names (``module``, ``module:attr`` or ``module:a.b``,
    extras ignored), as ``EntryPoint.load`` finds it."""
    module, _colon, attrs = value.partition(":")
    obj = importlib.import_module(module.strip())
    for attr in filter(None, attrs.split("[", 1)[0].strip().split(".")):
        obj = getattr(obj, attr)
    return obj


def load_listed(
    group: str, records: list[list[str]], check: Callable[[Any], Any] | None = None
) -> list[LoadedEntryPoint]:
    """Load entry points a host already selected (``[name, value, distribution, version]``
    each), without scanning installed metadata again: what a run's training process does."""
    results = []
    for name, value, distribution, version in records:
        item = LoadedEntryPoint(name=name, group=group, value=value, distribution=distribution, version=version)
        load_into(item, functools.partial(load_value, value), check)
        results.append(item)
    return results


def load_into(item: LoadedEntryPoint, load: Callable[[], Any], check: Callable[[Any], Any] | None) -> None:
    """Load one entry point into ``item``; any error is isolated, recorded and reported."""
    try:
        obj = load()
        item.obj = check(obj) if check else obj
    except Exception as exc:  # any plugin error is isolated and reported
        item.status = "failed"
        item.error = f"{type(exc).__name__}: {exc}"
        item.detail = traceback.format_exc()
        report_failure(item)


def unknown_selected(items: list[LoadedEntryPoint], also: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Names in ``MOSAIC_LOAD_PLUGINS`` / ``MOSAIC_DISABLE_PLUGINS`` that no entry point has
    (a typo there would otherwise block or keep every plugin without a word); ``also``: other
    names those lists may hold (the workers')."""
    known = {item.name for item in items} | set(also)
    listed = (_names(LOAD_VAR) or set()) | (_names(DISABLE_VAR) or set())
    return sorted(listed - known)


def report_failure(item: LoadedEntryPoint) -> None:
    """In strict mode a load failure is an error; otherwise it is only recorded on ``item``."""
    if strict():
        raise PluginError(f"{item.describe()} failed to load ({STRICT_VAR}=1): {item.error}")


def worker_names() -> set[str]:
    """The names of the ``mosaic.workers`` entry points (nothing of them is imported)."""
    return {name for name, *_ in installed.entry_points("mosaic.workers")}
