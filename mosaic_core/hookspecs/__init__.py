"""Every hook a MOSAIC plugin can implement, grouped by where and when it runs.

A plugin is a module (registered through the ``mosaic.plugins`` entry-point group, the one
registration group) whose functions carry the :data:`hookimpl` marker and a name below. An
implementation may take any subset of a hook's arguments, so hooks can grow arguments without
breaking plugins. What a plugin provides besides hooks (workers, launchers, hook specs of its
own) it returns from the hooks of the first section, as typed descriptors.

A worker's hooks for its own runs live in a module its :class:`~mosaic_core.WorkerMetadata`
names (``run_hooks``): the host registers it for that worker's runs only, so no hook body asks
which worker a run has. Such a module implements only the hooks in :data:`PER_RUN` (those
taking ``run`` or ``child``); a plugin's hooks in a ``mosaic.plugins`` module see every run.

Order: plugins are registered sorted by entry-point name, and implementations run in
pluggy's order (last registered first, ``tryfirst``/``trylast`` honoured, ``wrapper=True``
implementations wrap the others). Application code never calls ``pm.hook.*`` directly:
:class:`mosaic_core.plugins.PluginHost` has one typed accessor per hook; each accessor calls
through pluggy and then combines the results as the docstring says, naming the plugin
whenever a result is invalid or two plugins conflict.

Failure policy, carried by each spec (``@spec(STOP)`` / ``@spec(ISOLATE)``; :data:`POLICY`
is read from the specs at import, which fails if one has none) and applied by the host to
every implementation, wrappers and training-process hooks included:
- ``stop``: config hooks. A raising implementation, an invalid result or a conflict stops
  the run before anything starts, exit code 2, naming the plugin and the hook.
- ``isolate``: contribution and sink hooks. Only the failing plugin's part is dropped; the
  failure is named once on stderr and recorded in ``manifest.json`` (``plugins`` section);
  every other plugin's results are kept and the run goes on. A ``wrapper=True``
  implementation that raises costs only its own part: the call goes on as if it were absent.

Every result is tagged with the plugin that produced it as pluggy runs it, so a conflict or
an invalid result always names the right plugin. ``docs/hooks.md`` is generated from this
module (``python -m mosaic_core.hookdocs``): every docstring ends with an ``**Example:**``.

Host hooks receive a :class:`mosaic_core.runs.RunContext` (``run``): run id, run directory,
validated config, worker name and an ``emit(event, payload)`` for lifecycle events.
Training-process hooks receive a :class:`mosaic_core.types.ChildContext` (``child``): run
id, run directory, extras and a ``publish(kind, payload)`` side channel back to the host.

The specs live in three modules by where they run: :mod:`~mosaic_core.hookspecs.provide` (what a
plugin provides, its commands, what it owns), :mod:`~mosaic_core.hookspecs.run` (the host, around
one run) and :mod:`~mosaic_core.hookspecs.child` (the training process); this package is the one
namespace pluggy reads them from (``pm.add_hookspecs(hookspecs)``).
"""

from __future__ import annotations

import inspect

from mosaic_core.hookspecs import child, provide, run
from mosaic_core.hookspecs.child import *  # noqa: F403 - each module's __all__: its specs
from mosaic_core.hookspecs.marks import ISOLATE, PROJECT, STOP, hookimpl, hookspec, spec
from mosaic_core.hookspecs.provide import *  # noqa: F403
from mosaic_core.hookspecs.run import *  # noqa: F403

__all__ = ["HOOK_NAMES", "ISOLATE", "PER_RUN", "POLICY", "PROJECT", "STOP", "THEMES", "hookimpl", "hookspec", "spec"]
__all__ += provide.__all__
__all__ += run.__all__
__all__ += child.__all__
THEMES = ("provide", "run", "child")  # the spec modules, in the order of a run (docs/hooks.md follows it)
HOOK_NAMES = tuple(name for name in sorted(globals()) if name.startswith("mosaic_"))


def _per_run() -> frozenset[str]:
    return frozenset(
        name for name in HOOK_NAMES if {"run", "child"} & set(inspect.signature(globals()[name]).parameters)
    )


# The hooks a worker's ``run_hooks`` module may implement: those called for one run (``run`` or ``child``).
PER_RUN = _per_run()


def _policies() -> dict[str, str]:
    missing = [name for name in HOOK_NAMES if getattr(globals()[name], "mosaic_policy", None) not in (STOP, ISOLATE)]
    if missing:
        raise RuntimeError(f"hook spec(s) without a failure policy (@spec(STOP|ISOLATE)): {', '.join(missing)}")
    return {name: globals()[name].mosaic_policy for name in HOOK_NAMES}


POLICY = _policies()  # hook name -> STOP or ISOLATE, read from the specs
