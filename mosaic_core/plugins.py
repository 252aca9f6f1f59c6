"""The plugin host: loads ``mosaic.plugins`` entry points into pluggy and offers one typed
accessor per hook, so application code never touches ``pm.hook`` directly.

Built-in plugins (CleanRL, FastLane, analytics, curriculum) are entry points of this
distribution and load through exactly the same path as third-party ones. Every accessor
calls through pluggy (``pm.hook.<name>(...)``), so ``wrapper=True`` implementations,
``tryfirst``/``trylast`` and pluggy's call monitoring all work, then combines the results
as the hook spec says. The failure policy of each hook (:data:`mosaic_core.hookspecs.POLICY`)
is carried by each spec and applied by :class:`mosaic_core.hookcalls.GuardedManager`, which runs every implementation
(``wrapper=True`` ones and training-process hooks included) through a guard: ``stop`` turns
an exception into a :class:`PluginError` naming plugin and hook (exit 2); ``isolate`` drops
that plugin's part, records a :class:`HookFailure` (named once on stderr, listed in
``manifest.json``) and lets pluggy go on with the others (a failed wrapper as if absent).
Each result is tagged with its plugin as it is produced (:class:`Tagged`), never matched
back by identity.
``MOSAIC_TRACE_HOOKS=1`` prints every hook call to stderr through pluggy's monitoring.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import types
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import pluggy

from mosaic_core import hookspecs
from mosaic_core.accessors import Accessors
from mosaic_core.entrypoints import (
    DISABLE_VAR,
    LOAD_VAR,
    LoadedEntryPoint,
    is_blocked,
    load_group,
    load_into,
    load_listed,
    load_value,
    report_failure,
    strict,
    unknown_selected,
    worker_names,
)
from mosaic_core.errors import PluginError
from mosaic_core.hookcalls import GuardedManager
from mosaic_core.types import ExtrasKey, HookFailure

if TYPE_CHECKING:
    pass

PLUGIN_GROUP = "mosaic.plugins"
WORKER_HOOKS = "worker:"  # the plugin name of a worker's run hooks: worker:NAME
TRACE_VAR = "MOSAIC_TRACE_HOOKS"
HOOK_NAMES = hookspecs.HOOK_NAMES


def _check_module(obj: Any) -> Any:
    if not isinstance(obj, types.ModuleType):
        raise TypeError(
            f"a mosaic.plugins entry point must name a module of hook implementations, got {type(obj).__name__}"
        )
    return obj


def _worker_namespace(module: Any, name: str) -> types.ModuleType:
    """A worker's run-hooks module as a plugin of its own (two workers may name one module)."""
    namespace = types.ModuleType(name)
    namespace.__dict__.update({k: v for k, v in vars(_check_module(module)).items() if not k.startswith("__")})
    return namespace


class PluginHost(Accessors):
    """A pluggy manager with the loaded plugins and typed accessors for every hook."""

    def __init__(self, loaded: list[LoadedEntryPoint] | None = None, trace: bool | None = None, listed: bool = False):
        self.pm = GuardedManager(self)
        self.pm.add_hookspecs(hookspecs)
        self.loaded: list[LoadedEntryPoint] = []
        self.listed = listed  # the plugins a host selected (a training process): no scan of installed metadata
        # worker name -> its run hooks (registered as "worker:NAME"; None: it has none)
        self.worker_hooks: dict[str, LoadedEntryPoint | None] = {}
        self._spec_modules: set[str] = set()
        self._scoped: dict[tuple[str, str], Any] = {}
        self.failures: dict[tuple[str, str], HookFailure] = {}
        self.failure_counts: dict[tuple[str, str], int] = {}
        self.where = "host"
        # How a failure is announced the first time (the training process also tells its host).
        self.on_failure: Callable[[HookFailure], None] = _print_failure
        self._lock = threading.Lock()
        self._workers_lock = threading.RLock()
        self._owned: list[tuple[str, ExtrasKey]] | None = None
        trace = os.environ.get(TRACE_VAR, "") not in ("", "0") if trace is None else trace
        if trace:
            _enable_trace(self.pm)
        from mosaic_core import host_plugin

        self.pm.register(host_plugin, name=host_plugin.NAME)
        items = list(loaded or [])
        for item in items:  # every plugin first, then the specs they declare, then each one checked
            self._register(item)
        self._declare_specs()
        for item in items:
            self._verify(item)

    # ----------------------------------------------------------------- registration
    def add(self, item: LoadedEntryPoint) -> None:
        """Register a loaded entry point; a module that pluggy rejects is marked failed."""
        self._register(item)
        self._declare_specs()
        self._verify(item)

    def _register(self, item: LoadedEntryPoint) -> None:
        self.loaded.append(item)
        self._owned = None
        self._scoped.clear()
        if item.status != "active":
            return
        try:
            self.pm.register(item.obj, name=item.name)
        except Exception as exc:
            self._fail(item, f"{type(exc).__name__}: {exc}")

    def _fail(self, item: LoadedEntryPoint, error: str) -> None:
        if item.obj is not None and self.pm.is_registered(item.obj):
            self.pm.unregister(item.obj)
        self._scoped.clear()
        item.status, item.error, item.obj = "failed", error, None
        report_failure(item)

    def _verify(self, item: LoadedEntryPoint, allowed: frozenset[str] | None = None) -> None:
        """A plugin implementing a hook nobody declares (a typo) fails, naming the hook; so does
        a worker's run-hooks module implementing one outside ``allowed``."""
        if item.status != "active":
            return
        plugin = item.obj
        implemented = [
            (caller, impl)
            for caller in self.pm.get_hookcallers(plugin) or []
            for impl in caller.get_hookimpls()
            if impl.plugin is plugin
        ]
        unknown = sorted({c.name for c, impl in implemented if c.spec is None and not impl.optionalhook})
        if unknown:
            self._fail(
                item, f"unknown hook(s) {', '.join(unknown)}: neither MOSAIC's nor one an installed plugin declares"
            )
            return
        outside = sorted({c.name for c, _impl in implemented if allowed is not None and c.name not in allowed})
        if outside:
            self._fail(item, f"implements {', '.join(outside)}: a worker's run hooks take `run` or `child` only")

    def _declare_specs(self) -> None:
        """Add the hook specs plugins declare (``mosaic_hookspecs``), each module once."""
        for plugin, modules in self._call("mosaic_hookspecs"):
            item = self._item(plugin)
            if not isinstance(modules, (list, tuple)) or not all(isinstance(m, types.ModuleType) for m in modules):
                self._invalid("mosaic_hookspecs", plugin, f"returned {modules!r:.120}; expected a list of modules")
                continue
            for module in modules:
                if module.__name__ in self._spec_modules:
                    continue
                self._spec_modules.add(module.__name__)
                try:
                    self.pm.add_hookspecs(module)
                except pluggy.PluginValidationError as exc:  # an implementation registered earlier does not fit
                    culprit = next((i for i in self.loaded if i.obj is exc.plugin), None)
                    if culprit is not None:
                        self._fail(culprit, f"PluginValidationError: {exc}")
                except Exception as exc:
                    if item is not None:
                        self._fail(item, f"its hook specs {module.__name__}: {type(exc).__name__}: {exc}")

    def _item(self, plugin: str) -> LoadedEntryPoint | None:
        return next((i for i in self.loaded if i.name == plugin and i.status == "active"), None)

    def register_module(self, module: types.ModuleType, name: str) -> None:
        """Register an in-process plugin module (used by tests and embedding programs)."""
        self.add(
            LoadedEntryPoint(
                name=name,
                group=PLUGIN_GROUP,
                value=module.__name__,
                distribution="(in-process)",
                version="",
                obj=module,
            )
        )

    # ----------------------------------------------------------------- what plugins provide
    def provided(self, hook: str, **kwargs: Any) -> list[tuple[LoadedEntryPoint, Any, str | None]]:
        """(plugin, result, None) for each plugin's result of a descriptor hook
        (``mosaic_workers``…) or of a plugin's own hook called with ``kwargs``, and (plugin, None,
        error) for each plugin whose implementation raised; :mod:`mosaic_core.descriptors` checks them."""
        found: list[tuple[LoadedEntryPoint, Any, str | None]] = []
        if getattr(self.pm.hook, hook, None) is None:  # nobody declares it (its plugin absent or disabled)
            return found
        for plugin, result in self._call(hook, **kwargs):
            item = self._item(plugin) or LoadedEntryPoint(plugin, PLUGIN_GROUP, "?", "?", "?")
            found.append((item, result, None))
        for (plugin, failed_hook), failure in sorted(self.failures.items()):
            failed = self._item(plugin)
            if failed_hook == hook and failed is not None:
                found.append((failed, None, failure.error))
        return found

    def use_worker(self, worker: str) -> None:
        """Register ``worker``'s run hooks (its metadata's ``run_hooks``) for its runs, once."""
        if not worker:
            return
        if worker in self.worker_hooks:
            self._check_worker_hooks(worker)
            return
        from mosaic_core.descriptors import worker_items

        with self._workers_lock:  # a run's threads may ask at once
            if worker in self.worker_hooks:
                return self._check_worker_hooks(worker)
            found = next((i for i in worker_items(self) if i.name == worker and i.status == "active"), None)
            where = found.obj.run_hooks if found is not None else None
            if found is None or not where:
                self.worker_hooks[worker] = None
                return
            self.add_worker_hooks(
                worker,
                LoadedEntryPoint(f"{WORKER_HOOKS}{worker}", PLUGIN_GROUP, where, found.distribution, found.version),
            )

    def add_worker_hooks(self, worker: str, hooks: LoadedEntryPoint) -> None:
        """Load and register a worker's run-hooks module; one that fails stops the run."""
        self.worker_hooks[worker] = hooks
        self._scoped.clear()
        load_into(hooks, lambda: _worker_namespace(load_value(hooks.value), hooks.name), None)
        if hooks.status == "active":
            try:
                self.pm.register(hooks.obj, name=hooks.name)
            except Exception as exc:
                hooks.status, hooks.error, hooks.obj = "failed", f"{type(exc).__name__}: {exc}", None
            self._verify(hooks, allowed=hookspecs.PER_RUN)
        self._check_worker_hooks(worker)

    def _check_worker_hooks(self, worker: str) -> None:
        """A worker whose run hooks failed to load cannot run (asked again, it says so again)."""
        hooks = self.worker_hooks.get(worker)
        if hooks is not None and hooks.status != "active":
            raise PluginError(
                f"worker {worker!r} ({hooks.distribution} {hooks.version}): its run hooks {hooks.value} "
                f"failed to load: {hooks.error}"
            )

    def _caller(self, hook: str, kwargs: dict[str, Any]) -> Any:
        """The hook's caller: for a hook of one run, without other workers' run hooks."""
        if hook not in hookspecs.PER_RUN:
            return getattr(self.pm.hook, hook)
        worker = getattr(kwargs.get("run", kwargs.get("child")), "worker", "") or ""
        self.use_worker(worker)
        caller = self._scoped.get((hook, worker))
        if caller is None:
            others = [h.obj for w, h in self.worker_hooks.items() if w != worker and h is not None and h.obj]
            caller = self.pm.subset_hook_caller(hook, others)
            self._scoped[(hook, worker)] = caller
        return caller

    def hooks_of(self, name: str) -> list[str]:
        plugin = self.pm.get_plugin(name)
        if plugin is None:
            return []
        return sorted(caller.name for caller in self.pm.get_hookcallers(plugin) or [])

    def load_failures(self) -> list[LoadedEntryPoint]:
        return [item for item in self.loaded if item.status == "failed"]


def _print_failure(failure: HookFailure) -> None:
    print(f"mosaic: warning: {failure.describe()}; its contribution is dropped, the run goes on", file=sys.stderr)


def _enable_trace(pm: pluggy.PluginManager) -> None:
    """Print every hook call, its implementations, time and result (pluggy's monitoring)."""
    started: list[float] = []

    def before(hook_name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
        names = ", ".join(i.plugin_name for i in reversed(impls)) or "no implementation"
        print(f"mosaic-trace: {hook_name} -> {names}", file=sys.stderr)
        started.append(time.perf_counter())

    def after(
        outcome: pluggy.Result[Any], hook_name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]
    ) -> None:
        elapsed = (time.perf_counter() - started.pop()) * 1e3 if started else 0.0
        shown = f"raised {outcome.exception!r}" if outcome.exception else f"{outcome.get_result()!r:.200}"
        print(f"mosaic-trace: {hook_name} <- {elapsed:.2f} ms: {shown}", file=sys.stderr)

    pm.add_hookcall_monitoring(before, after)


def load_plugin_host() -> PluginHost:
    """Load every ``mosaic.plugins`` entry point allowed by the environment. A name in the
    allow or block list that no plugin has is an error in strict mode, a warning otherwise."""
    items = load_group(PLUGIN_GROUP, check=_check_module, select=is_blocked)
    unknown = unknown_selected(items, also=worker_names())
    if unknown:
        message = (
            f"{LOAD_VAR}/{DISABLE_VAR} name(s) {', '.join(unknown)} that no installed plugin has; "
            f"installed: {', '.join(sorted(i.name for i in items)) or 'none'}"
        )
        if strict():
            raise PluginError(message)
        print(f"mosaic: warning: {message}", file=sys.stderr)
    return PluginHost(items)


def listed_plugin_host(records: list[list[str]]) -> PluginHost:
    """The plugins a host selected for a run (its training process gets the list in
    ``MOSAIC_CHILD``), and the run's worker's hooks (``worker:NAME``), loaded without scanning
    installed metadata again."""
    plugins = [r for r in records if not r[0].startswith(WORKER_HOOKS)]
    host = PluginHost(load_listed(PLUGIN_GROUP, plugins, check=_check_module), listed=True)
    for name, value, distribution, version in (r for r in records if r[0].startswith(WORKER_HOOKS)):
        host.add_worker_hooks(
            name.removeprefix(WORKER_HOOKS), LoadedEntryPoint(name, PLUGIN_GROUP, value, distribution, version)
        )
    return host


def plugin_records(host: PluginHost, worker: str | None = None) -> list[list[str]]:
    """``[name, value, distribution, version]`` of every active plugin loaded by entry point,
    and of ``worker``'s run hooks (for its run's training process)."""
    host.use_worker(worker or "")
    hooks = host.worker_hooks.get(worker or "")
    return [
        [i.name, i.value, i.distribution, i.version]
        for i in [*host.loaded, *([hooks] if hooks else [])]
        if i.status == "active" and i.group == PLUGIN_GROUP and i.distribution != "(in-process)"
    ]


@lru_cache(maxsize=1)
def plugin_host() -> PluginHost:
    """The process-wide plugin host, loaded on first use."""
    return load_plugin_host()
