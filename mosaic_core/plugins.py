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

import dataclasses
import json
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import pluggy

from mosaic_core import hookspecs
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
from mosaic_core.errors import PluginError, UsageError
from mosaic_core.hookcalls import GuardedManager, Tagged
from mosaic_core.types import ChildEvent, ExtrasKey, HookFailure, RunRelay

if TYPE_CHECKING:
    from pathlib import Path

    from mosaic_core.cli.commands import CliCommand
    from mosaic_core.config import WorkerConfig
    from mosaic_core.frames import FrameSource
    from mosaic_core.runs import RunContext
    from mosaic_core.types import ChildContext, FrameInfo

PLUGIN_GROUP = "mosaic.plugins"
WORKER_HOOKS = "worker:"  # the plugin name of a worker's run hooks: worker:NAME
TRACE_VAR = "MOSAIC_TRACE_HOOKS"
HOOK_NAMES = hookspecs.HOOK_NAMES
WRAPPER = "a wrapper implementation"
# A plugin's fields in a terminal event, as JSON (readers skip an event line over 64 KiB).
TERMINAL_FIELDS_LIMIT = 32 * 1024


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


class PluginHost:
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
    def provided(self, hook: str) -> list[tuple[LoadedEntryPoint, Any, str | None]]:
        """(plugin, result, None) for each plugin's result of a descriptor hook
        (``mosaic_workers``…), and (plugin, None, error) for each plugin whose implementation
        raised; :mod:`mosaic_core.descriptors` checks them."""
        found: list[tuple[LoadedEntryPoint, Any, str | None]] = []
        if getattr(self.pm.hook, hook, None) is None:  # nobody declares it (its plugin absent or disabled)
            return found
        for plugin, result in self._call(hook):
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

    # ----------------------------------------------------------------- failures
    def record_failure(self, plugin: str, hook: str, error: str, where: str | None = None) -> None:
        """Note that ``plugin`` failed in ``hook``; announced once per (plugin, hook)."""
        key = (plugin, hook)
        with self._lock:
            first = key not in self.failures
            self.failure_counts[key] = self.failure_counts.get(key, 0) + 1
            if first:
                self.failures[key] = HookFailure(plugin, hook, error, where or self.where)
        if first:
            try:
                self.on_failure(self.failures[key])
            except Exception:  # announcing must never fail the caller
                pass

    def failure_records(self) -> list[dict[str, Any]]:
        return [
            {
                "plugin": f.plugin,
                "hook": f.hook,
                "error": f.error,
                "where": f.where,
                "count": self.failure_counts.get(key, 1),
            }
            for key, f in sorted(self.failures.items())
        ]

    # ----------------------------------------------------------------- calling
    def _call(self, hook: str, _tagged: bool = True, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call ``hook`` through pluggy; returns (plugin, result) pairs in pluggy's order, each
        tagged as it was produced (``_tagged=False``: results ignored, the hot training-process
        hooks). A result that is not a producer's own is credited to the wrappers."""
        caller = self._caller(hook, kwargs)
        self.pm.tagging.on = _tagged
        try:
            results = caller(**kwargs)
        except (PluginError, UsageError):
            raise
        except Exception as exc:  # pluggy's own protocol errors: guards catch every plugin's
            if self.pm.policy.get(hook) == hookspecs.STOP:
                raise PluginError(f"{WRAPPER} of {hook} failed: {type(exc).__name__}: {exc}") from exc
            self.record_failure(self._wrapper_names(hook), hook, f"{type(exc).__name__}: {exc}")
            return []
        finally:
            self.pm.tagging.on = False
        if not _tagged:
            return []
        if not isinstance(results, list):
            self._invalid(hook, self._wrapper_names(hook), f"returned {type(results).__name__}; expected a list")
            return []
        return [(r.plugin, r.value) if isinstance(r, Tagged) else (self._wrapper_names(hook), r) for r in results]

    def _wrapper_names(self, hook: str) -> str:
        impls = getattr(self.pm.hook, hook).get_hookimpls()
        names = [i.plugin_name for i in impls if i.wrapper or i.hookwrapper]
        return ", ".join(names) or WRAPPER

    def _invalid(self, hook: str, plugin: str, message: str) -> None:
        if self.pm.policy.get(hook) == hookspecs.STOP:
            raise PluginError(f"plugin {plugin!r} {message} ({hook})")
        self.record_failure(plugin, hook, message)

    def _merge(
        self, hook: str, what: str, results: list[tuple[str, Any]], reserved: Iterable[str] = ()
    ) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        owners: dict[str, str] = {}
        reserved = set(reserved)
        for plugin, result in results:
            if not isinstance(result, dict):
                self._invalid(hook, plugin, f"returned {type(result).__name__}; expected a dict")
                continue
            for key, value in result.items():
                if key in reserved:
                    self._invalid(hook, plugin, f"tried to set the host's {what} {key!r}")
                elif key in owners:
                    self._invalid(hook, plugin, f"{what} {key!r} is already contributed by {owners[key]!r}")
                else:
                    owners[key] = plugin
                    merged[key] = value
        return merged

    def _lists(self, hook: str, results: list[tuple[str, Any]], kind: type, what: str) -> list[tuple[str, Any]]:
        items: list[tuple[str, Any]] = []
        for plugin, result in results:
            if not isinstance(result, (list, tuple)) or not all(isinstance(x, kind) for x in result):
                self._invalid(hook, plugin, f"returned {result!r:.120}; expected a list of {what}")
                continue
            items.extend((plugin, x) for x in result)
        return items

    # ----------------------------------------------------------------- declarations
    def extras_keys(self) -> list[tuple[str, ExtrasKey]]:
        """(plugin, key) for every declared extras key; overlaps between plugins stop the run."""
        if self._owned is not None:
            return self._owned
        owned = self._lists("mosaic_extras_keys", self._call("mosaic_extras_keys"), ExtrasKey, "ExtrasKey")
        for i, (plugin, key) in enumerate(owned):
            for other_plugin, other in owned[:i]:
                if other_plugin != plugin and (key.matches(other.name) or other.matches(key.name)):
                    raise PluginError(
                        f"extras key {str(key)!r} is owned by both {other_plugin!r} ({other}) and {plugin!r}"
                    )
        self._owned = owned
        return owned

    def extras_owner(self, key: str) -> str | None:
        """The plugin that consumes extras key ``key``, or None (then it is the worker's)."""
        for plugin, declared in self.extras_keys():
            if declared.matches(key):
                return plugin
        return None

    def child_events(self) -> frozenset[str]:
        results = self._lists("mosaic_child_events", self._call("mosaic_child_events"), ChildEvent, "ChildEvent")
        return frozenset(event.name for _plugin, event in results)

    # ----------------------------------------------------------------- host accessors
    def cli_commands(self) -> list[CliCommand]:
        from mosaic_core.cli.commands import CliCommand

        commands: dict[str, tuple[str, CliCommand]] = {}
        for plugin, command in self._lists(
            "mosaic_cli_commands", self._call("mosaic_cli_commands"), CliCommand, "CliCommand"
        ):
            if command.name in commands:
                self._invalid(
                    "mosaic_cli_commands",
                    plugin,
                    f"command {command.name!r} is already contributed by {commands[command.name][0]!r}",
                )
                continue
            commands[command.name] = (plugin, command)
        return [commands[name][1] for name in sorted(commands)]

    def config_defaults(self, data: dict[str, Any]) -> dict[str, Any]:
        defaults = self._merge(
            "mosaic_config_defaults", "config default", self._call("mosaic_config_defaults", data=data)
        )
        return {key: value for key, value in defaults.items() if data.get(key) in (None, "")}

    def validate_config(self, config: WorkerConfig) -> list[str]:
        results = self._call("mosaic_validate_config", config=config)
        return [problem for _plugin, problem in self._lists("mosaic_validate_config", results, str, "strings")]

    def run_settings(self, config: WorkerConfig) -> list[tuple[str, Any]]:
        """(plugin, setting) for every typed setting published for the run (frozen dataclass
        instances); one type from two plugins is an error naming both."""
        hook = "mosaic_run_settings"
        owners: dict[type, str] = {}
        settings: list[tuple[str, Any]] = []
        for plugin, setting in self._lists(hook, self._call(hook, config=config), object, "settings"):
            if (
                not dataclasses.is_dataclass(setting)
                or isinstance(setting, type)
                # typeshed's DataclassInstance declares __dataclass_fields__ only; every dataclass has the params
                or not type(setting).__dataclass_params__.frozen  # type: ignore[attr-defined]
            ):
                self._invalid(hook, plugin, f"published {setting!r:.80}; expected a frozen dataclass instance")
                continue
            kind = type(setting)
            if kind in owners:
                self._invalid(hook, plugin, f"setting {kind.__name__} is already published by {owners[kind]!r}")
                continue
            owners[kind] = plugin
            settings.append((plugin, setting))
        return settings

    def build_args(self, config: WorkerConfig) -> list[str]:
        results = self._call("mosaic_build_args", config=config)
        return [arg for _plugin, arg in self._lists("mosaic_build_args", results, str, "strings")]

    def child_env(self, run: RunContext) -> dict[str, str]:
        env = self._merge("mosaic_child_env", "environment variable", self._call("mosaic_child_env", run=run))
        bad = [k for k, v in env.items() if not isinstance(v, str)]
        if bad:
            raise PluginError(f"mosaic_child_env values must be strings: {', '.join(bad)}")
        return env

    def run_started(self, run: RunContext) -> None:
        self._call("mosaic_run_started", run=run)

    def on_event(self, run: RunContext, event: dict[str, Any]) -> None:
        self._call("mosaic_on_event", run=run, event=event)

    def on_child_message(self, run: RunContext, kind: str, payload: dict[str, Any]) -> None:
        self._call("mosaic_on_child_message", run=run, kind=kind, payload=payload)

    def heartbeat_fields(self, run: RunContext, reserved: Iterable[str] = ()) -> dict[str, Any]:
        return self._merge(
            "mosaic_on_heartbeat", "heartbeat field", self._call("mosaic_on_heartbeat", run=run), reserved
        )

    def build_manifest(self, run: RunContext, status: str, reserved: Iterable[str] = ()) -> dict[str, Any]:
        return self._merge(
            "mosaic_build_manifest",
            "manifest section",
            self._call("mosaic_build_manifest", run=run, status=status),
            reserved,
        )

    def terminal_payload(
        self, run: RunContext, status: str, manifest: dict[str, Any], reserved: Iterable[str] = ()
    ) -> dict[str, Any]:
        """The plugins' fields for the run's terminal event; a plugin's fields over
        :data:`TERMINAL_FIELDS_LIMIT` bytes of JSON are dropped, naming it."""
        hook = "mosaic_terminal_payload"
        kept = []
        for plugin, fields in self._call(hook, run=run, status=status, manifest=manifest):
            size = len(json.dumps(fields, default=str)) if isinstance(fields, dict) else 0
            if size > TERMINAL_FIELDS_LIMIT:
                self._invalid(hook, plugin, f"contributed {size} bytes of fields; at most {TERMINAL_FIELDS_LIMIT}")
                continue
            kept.append((plugin, fields))
        return self._merge(hook, "terminal payload field", kept, reserved)

    def check_run(self, run_dir: Path) -> list[str]:
        """Every plugin's problems with a finished run directory (``mosaic_check_run``), each
        line prefixed with its plugin; a check that raised is one of them."""
        hook = "mosaic_check_run"
        counts = {key: n for key, n in self.failure_counts.items() if key[1] == hook}
        results = self._lists(hook, self._call(hook, run_dir=run_dir), str, "strings")
        problems = [f"{plugin}: {problem}" for plugin, problem in results]
        for key, count in self.failure_counts.items():
            if key[1] == hook and count > counts.get(key, 0):
                problems.append(f"{key[0]}: its check failed: {self.failures[key].error}")
        return problems

    def run_scalars(self, run_dir: Path, tag: str) -> list[tuple[int, float]] | None:
        """The first series a plugin reads back for ``tag`` (None: no plugin stores scalars)."""
        for _plugin, series in self._call("mosaic_run_scalars", run_dir=run_dir, tag=tag):
            if series is not None:
                return list(series)
        return None

    def frame_source(self, run_dir: Path, extras: dict[str, Any]) -> FrameSource | None:
        """The first plugin's source of the run's live frames (None: no plugin publishes frames)."""
        from mosaic_core.frames import FrameSource

        for plugin, source in self._call("mosaic_frame_source", run_dir=run_dir, extras=dict(extras)):
            if isinstance(source, FrameSource):
                return source
            if source is not None:
                self._invalid(
                    "mosaic_frame_source", plugin, f"returned {type(source).__name__}; expected a FrameSource"
                )
        return None

    def private_run_folders(self) -> frozenset[str]:
        """The run-directory folders plugins keep for themselves (``mosaic_private_run_folders``)."""
        names: set[str] = set()
        for plugin, folders in self._lists(
            "mosaic_private_run_folders", self._call("mosaic_private_run_folders"), str, "folder name"
        ):
            if not folders or "/" in folders or folders in (".", ".."):
                self._invalid("mosaic_private_run_folders", plugin, f"not a plain folder name: {folders!r}")
            else:
                names.add(folders)
        return frozenset(names)

    def run_relays(self, run_id: str, extras: dict[str, Any], side: str) -> dict[str, RunRelay]:
        """Each plugin's relay for a run executed elsewhere (``side``: "node" or "caller")."""
        relays = {}
        for plugin, relay in self._call("mosaic_run_relay", run_id=run_id, extras=extras, side=side):
            if relay is None:
                continue
            if isinstance(relay, RunRelay):
                relays[plugin] = relay
            else:
                self._invalid("mosaic_run_relay", plugin, f"returned {type(relay).__name__}; expected a RunRelay")
        return relays

    def run_finished(self, run: RunContext, status: str) -> None:
        self._call("mosaic_run_finished", run=run, status=status)

    # ----------------------------------------------------------------- training-process accessors
    def child_setup(self, child: ChildContext) -> None:
        self._call("mosaic_child_setup", child=child)

    def env_make_kwargs(
        self, child: ChildContext, env_id: str, env_index: int | None, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        return self._merge(
            "mosaic_env_make_kwargs",
            "gym.make keyword",
            self._call("mosaic_env_make_kwargs", child=child, env_id=env_id, env_index=env_index, kwargs=kwargs),
        )

    def wrap_env(self, child: ChildContext, env: Any, env_id: str, env_index: int | None) -> Any:
        hook = "mosaic_wrap_env"
        for plugin, wrap in self._call(hook, child=child, env=env, env_id=env_id, env_index=env_index):
            if not callable(wrap):
                self._invalid(hook, plugin, f"returned {type(wrap).__name__}; expected a callable")
                continue
            try:
                env = wrap(env)
            except Exception as exc:
                self.record_failure(plugin, hook, f"its wrapper raised {type(exc).__name__}: {exc}")
        return env

    def on_frame(self, child: ChildContext, frame: Any, info: FrameInfo) -> None:
        self._call("mosaic_on_frame", False, child=child, frame=frame, info=info)

    def host_lost(self, child: ChildContext) -> None:
        self._call("mosaic_host_lost", child=child)

    def env_switch(self, child: ChildContext) -> Any:
        """The first plugin's :class:`~mosaic_core.types.EnvSwitch` for the run (None: none switches envs)."""
        from mosaic_core.types import EnvSwitch

        for plugin, switch in self._call("mosaic_env_switch", child=child):
            if isinstance(switch, EnvSwitch):
                return switch
            if switch is not None:
                self._invalid("mosaic_env_switch", plugin, f"returned {type(switch).__name__}; expected an EnvSwitch")
        return None

    def frame_wanted(self, child: ChildContext, env_index: int) -> bool:
        return any(
            result is True for _plugin, result in self._call("mosaic_frame_wanted", child=child, env_index=env_index)
        )

    def on_scalar(
        self, child: ChildContext, tag: str, value: float, step: int | None, agent: str | None = None
    ) -> None:
        # The hottest hook (every add_scalar): guarded like every hook, results not tagged.
        self._call("mosaic_on_scalar", False, child=child, tag=tag, value=value, step=step, agent=agent)


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
