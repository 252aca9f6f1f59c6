"""The plugin host: loads ``mosaic.plugins`` entry points into pluggy and offers one typed
accessor per hook, so application code never touches ``pm.hook`` directly.

Built-in plugins (CleanRL, FastLane, analytics, curriculum) are entry points of this
distribution and load through exactly the same path as third-party ones. Implementations
are called in pluggy's order; the accessors combine results as the hook specs say and name
the plugin whenever something is wrong. ``MOSAIC_TRACE_HOOKS=1`` prints every call to stderr.
"""

from __future__ import annotations

import os
import sys
import time
import types
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable

import pluggy

from mosaic_core import hookspecs
from mosaic_core.entrypoints import LoadedEntryPoint, is_blocked, load_group, report_failure
from mosaic_core.errors import PluginError

if TYPE_CHECKING:
    from mosaic_core.child import ChildContext, FrameInfo
    from mosaic_core.cli.commands import CliCommand
    from mosaic_core.config import WorkerConfig
    from mosaic_core.runs import RunContext

PLUGIN_GROUP = "mosaic.plugins"
TRACE_VAR = "MOSAIC_TRACE_HOOKS"
HOOK_NAMES = tuple(name for name in dir(hookspecs) if name.startswith("mosaic_"))


def _check_module(obj: Any) -> Any:
    if not isinstance(obj, types.ModuleType):
        raise TypeError(f"a mosaic.plugins entry point must name a module of hook implementations, got {type(obj).__name__}")
    return obj


class PluginHost:
    """A pluggy manager with the loaded plugins and typed accessors for every hook."""

    def __init__(self, loaded: list[LoadedEntryPoint] | None = None, trace: bool | None = None):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.loaded: list[LoadedEntryPoint] = []
        self._trace = os.environ.get(TRACE_VAR, "") not in ("", "0") if trace is None else trace
        self._impls: dict[str, list[tuple[str, Callable[..., Any], tuple[str, ...]]]] = {}
        self._scalar_calls: list[tuple[Callable[..., Any], tuple[int, ...]]] | None = None
        for item in loaded or []:
            self.add(item)

    # ----------------------------------------------------------------- registration
    def add(self, item: LoadedEntryPoint) -> None:
        """Register a loaded entry point; a module that pluggy rejects is marked failed."""
        self.loaded.append(item)
        if item.status != "active":
            return
        try:
            self.pm.register(item.obj, name=item.name)
            self.pm.check_pending()
        except Exception as exc:
            if self.pm.is_registered(item.obj):
                self.pm.unregister(item.obj)
            item.status, item.error, item.obj = "failed", f"{type(exc).__name__}: {exc}", None
            report_failure(item)
        self._impls.clear()
        self._scalar_calls = None

    def register_module(self, module: types.ModuleType, name: str) -> None:
        """Register an in-process plugin module (used by tests and embedding programs)."""
        self.add(LoadedEntryPoint(name=name, group=PLUGIN_GROUP, value=module.__name__,
                                  distribution="(in-process)", version="", obj=module))

    def hooks_of(self, name: str) -> list[str]:
        plugin = self.pm.get_plugin(name)
        if plugin is None:
            return []
        return sorted(caller.name for caller in self.pm.get_hookcallers(plugin) or [])

    # ----------------------------------------------------------------- calling
    def _implementations(self, hook: str) -> list[tuple[str, Callable[..., Any], tuple[str, ...]]]:
        impls = self._impls.get(hook)
        if impls is None:
            caller = getattr(self.pm.hook, hook)
            impls = [(i.plugin_name, i.function, tuple(i.argnames)) for i in reversed(caller.get_hookimpls())]
            self._impls[hook] = impls
        return impls

    def _call(self, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call every implementation in pluggy's order; returns (plugin, result) pairs."""
        results = []
        for plugin, function, argnames in self._implementations(hook):
            if self._trace:
                print(f"mosaic-trace: {hook} -> {plugin} ({', '.join(argnames)})", file=sys.stderr)
                started = time.perf_counter()
            try:
                result = function(*[kwargs[a] for a in argnames])
            except PluginError:
                raise
            except Exception as exc:
                raise PluginError(f"plugin {plugin!r} failed in {hook}: {type(exc).__name__}: {exc}") from exc
            if self._trace:
                print(f"mosaic-trace: {hook} <- {plugin} {(time.perf_counter() - started) * 1e3:.2f} ms: {result!r:.200}", file=sys.stderr)
            if result is not None:
                results.append((plugin, result))
        return results

    def _merge(self, hook: str, what: str, results: list[tuple[str, Any]], reserved: set[str] = set()) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        owners: dict[str, str] = {}
        for plugin, result in results:
            if not isinstance(result, dict):
                raise PluginError(f"plugin {plugin!r} returned {type(result).__name__} from {hook}; expected a dict")
            for key, value in result.items():
                if key in reserved:
                    raise PluginError(f"plugin {plugin!r} tried to set reserved {what} {key!r} in {hook}")
                if key in owners:
                    raise PluginError(f"{what} {key!r} is contributed by both {owners[key]!r} and {plugin!r} ({hook})")
                owners[key] = plugin
                merged[key] = value
        return merged

    # ----------------------------------------------------------------- host accessors
    def cli_commands(self) -> list[CliCommand]:
        from mosaic_core.cli.commands import CliCommand

        commands: dict[str, tuple[str, CliCommand]] = {}
        for plugin, result in self._call("mosaic_cli_commands"):
            for command in result:
                if not isinstance(command, CliCommand):
                    raise PluginError(f"plugin {plugin!r} returned {type(command).__name__} from mosaic_cli_commands; expected CliCommand")
                if command.name in commands:
                    raise PluginError(f"command {command.name!r} is contributed by both {commands[command.name][0]!r} and {plugin!r}")
                commands[command.name] = (plugin, command)
        return [commands[name][1] for name in sorted(commands)]

    def config_defaults(self, data: dict[str, Any]) -> dict[str, Any]:
        defaults = self._merge("mosaic_config_defaults", "config default", self._call("mosaic_config_defaults", data=data))
        return {key: value for key, value in defaults.items() if data.get(key) in (None, "")}

    def validate_config(self, config: WorkerConfig) -> list[str]:
        problems: list[str] = []
        for plugin, result in self._call("mosaic_validate_config", config=config):
            if not isinstance(result, (list, tuple)) or not all(isinstance(p, str) for p in result):
                raise PluginError(f"plugin {plugin!r} returned {result!r} from mosaic_validate_config; expected a list of strings")
            problems.extend(result)
        return problems

    def build_args(self, config: WorkerConfig) -> list[str]:
        argv: list[str] = []
        for plugin, result in self._call("mosaic_build_args", config=config):
            if not isinstance(result, (list, tuple)) or not all(isinstance(a, str) for a in result):
                raise PluginError(f"plugin {plugin!r} returned {result!r} from mosaic_build_args; expected a list of strings")
            argv.extend(result)
        return argv

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

    def heartbeat_fields(self, run: RunContext, reserved: set[str] = frozenset()) -> dict[str, Any]:
        return self._merge("mosaic_on_heartbeat", "heartbeat field", self._call("mosaic_on_heartbeat", run=run), set(reserved))

    def build_manifest(self, run: RunContext, status: str) -> dict[str, Any]:
        return self._merge("mosaic_build_manifest", "manifest section",
                           self._call("mosaic_build_manifest", run=run, status=status))

    def run_finished(self, run: RunContext, status: str) -> list[str]:
        """Call every implementation even if one fails; returns the failures' messages."""
        errors = []
        for plugin, function, argnames in self._implementations("mosaic_run_finished"):
            try:
                function(*[{"run": run, "status": status}[a] for a in argnames])
            except Exception as exc:
                errors.append(f"plugin {plugin!r} failed in mosaic_run_finished: {type(exc).__name__}: {exc}")
        return errors

    # ----------------------------------------------------------------- training-process accessors
    def child_setup(self, child: ChildContext) -> None:
        self._call("mosaic_child_setup", child=child)

    def env_make_kwargs(self, child: ChildContext, env_id: str, env_index: int | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        return self._merge("mosaic_env_make_kwargs", "gym.make keyword",
                           self._call("mosaic_env_make_kwargs", child=child, env_id=env_id, env_index=env_index, kwargs=kwargs))

    def wrap_env(self, child: ChildContext, env: Any, env_id: str, env_index: int | None) -> Any:
        for plugin, wrap in self._call("mosaic_wrap_env", child=child, env=env, env_id=env_id, env_index=env_index):
            if not callable(wrap):
                raise PluginError(f"plugin {plugin!r} returned {type(wrap).__name__} from mosaic_wrap_env; expected a callable")
            env = wrap(env)
        return env

    def on_frame(self, child: ChildContext, frame: Any, info: FrameInfo) -> None:
        self._call("mosaic_on_frame", child=child, frame=frame, info=info)

    def on_scalar(self, child: ChildContext, tag: str, value: float, step: int | None) -> None:
        # The hottest hook (every add_scalar): argument positions are worked out once.
        calls = self._scalar_calls
        if calls is None:
            order = ("child", "tag", "value", "step")
            calls = self._scalar_calls = [(function, tuple(order.index(a) for a in argnames))
                                          for _p, function, argnames in self._implementations("mosaic_on_scalar")]
        args = (child, tag, value, step)
        for function, positions in calls:
            function(*[args[i] for i in positions])


def load_plugin_host() -> PluginHost:
    """Load every ``mosaic.plugins`` entry point allowed by the environment."""
    return PluginHost(load_group(PLUGIN_GROUP, check=_check_module, select=is_blocked))


@lru_cache(maxsize=1)
def plugin_host() -> PluginHost:
    """The process-wide plugin host, loaded on first use."""
    return load_plugin_host()
