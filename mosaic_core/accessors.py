"""The plugin host's calls: every hook called through pluggy, its results tagged, combined and
checked as its spec says (:class:`HookCalls`), and one typed accessor per hook (:class:`Accessors`),
so application code never touches ``pm.hook``. :class:`mosaic_core.plugins.PluginHost` adds the
loading and registration."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from mosaic_core import hookspecs
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

WRAPPER = "a wrapper implementation"
# A plugin's fields in a terminal event, as JSON (readers skip an event line over 64 KiB).
TERMINAL_FIELDS_LIMIT = 32 * 1024


class HookCalls:
    """Calling hooks: results tagged with their plugin, failures recorded per (plugin, hook)."""

    pm: GuardedManager
    failures: dict[tuple[str, str], HookFailure]
    failure_counts: dict[tuple[str, str], int]
    where: str
    on_failure: Callable[[HookFailure], None]
    _lock: threading.Lock
    _owned: list[tuple[str, ExtrasKey]] | None

    def _caller(self, hook: str, kwargs: dict[str, Any]) -> Any:
        """The pluggy caller of ``hook`` for these arguments (the host scopes a run's hooks)."""
        return getattr(self.pm.hook, hook)

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


class Accessors(HookCalls):
    """One typed accessor per hook: each calls through pluggy, then combines as the spec says."""

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
        self,
        child: ChildContext,
        tag: str,
        value: float,
        step: int | None,
        agent: str | None = None,
        log_dir: str | None = None,
    ) -> None:
        # The hottest hook (every add_scalar): guarded like every hook, results not tagged.
        self._call(
            "mosaic_on_scalar", False, child=child, tag=tag, value=value, step=step, agent=agent, log_dir=log_dir
        )

    def scalars_reported(self, child: ChildContext) -> None:
        self._call("mosaic_scalars_reported", False, child=child)
