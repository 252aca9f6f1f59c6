"""MOSAIC host: discovers workers and plugins, validates configs, runs and supervises jobs.

The extension API, what a worker, a plugin or a launcher needs (``docs/extending/public-api.md``;
``tests/core/test_layering.py`` keeps every package to it):

- the names below, from the top level, lazily (``import mosaic_core`` imports nothing else)::

      from mosaic_core import hookimpl, ExtrasKey, ChildEvent, Launch, Worker, WorkerMetadata

- the modules in :data:`PUBLIC_MODULES`, each a namespace of its own (its ``__all__``):
  :mod:`mosaic_core.child`, the training-program API; :mod:`mosaic_core.contract`, the run
  contract's helpers; :mod:`mosaic_core.launchers`, the launcher API, and :mod:`mosaic_core.caller`,
  a remote launcher's caller.

The host toolkit, what the CLI and the built-in plugins share besides, is :mod:`mosaic_core.toolkit`;
everything else in ``mosaic_core`` is private and may change.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# The extension API's modules (importable as ``mosaic_core.NAME``).
PUBLIC_MODULES = ("child", "contract", "launchers", "caller")


def _from(module: str, *names: str) -> dict[str, str]:
    return {name: f"mosaic_core.{module}" for name in names}


# Public name -> "module" or "module:attribute" that defines it (imported on first use).
_EXPORTS = {
    # A plugin's hooks: the marker, a hook of its own (@hookspec(STOP) or @hookspec(ISOLATE)), the
    # types hooks exchange, a patch of what the training program imports.
    **_from("hookspecs", "hookimpl", "STOP", "ISOLATE"),
    "hookspec": "mosaic_core.hookspecs:spec",
    **_from(
        "types",
        "ExtrasKey",
        "ChildEvent",
        "CodePath",
        "Launch",
        "FrameInfo",
        "ChildContext",
        "HookFailure",
        "TrackingSettings",
        "FormOption",
        "WorkerForm",
        "RunRelay",
        "EnvSwitch",
    ),
    **_from("cli.commands", "CliCommand"),
    **_from("frames", "FrameSource", "FrameReader", "LiveFrame", "NoFrames"),
    "after_import": "mosaic_core._patchpoints",
    **_from("errors", "MosaicError", "UsageError", "ConfigError"),
    # A worker: its class, its descriptor, what its hooks and plan receive.
    **_from("worker", "Worker"),
    **_from("capabilities", "WorkerMetadata", "WorkerCapabilities", "WorkerEnvironment"),
    **_from("config", "WorkerConfig"),
    **_from("runs", "RunContext", "RunDirectory"),
    **_from("environments", "ask_environment"),  # a worker with an environment of its own asks its libraries
    # A worker's console script and Python facade (the original's <worker>.config, .runtime, .telemetry).
    "worker_main": "mosaic_core.pipeline:main",
    **_from("stages.plan", "Prepared"),
    **_from("stages.flags", "DEFAULT_GRPC_TARGET"),
    **_from(
        "facade",
        "WorkerRuntime",
        "LifecycleEmitter",
        "parse_worker_config",
        "load_worker_config",
        "load_worker_config_from_string",
    ),
    # A training program's environment: the child's variables, its thread budget.
    **_from("childenv", "CHILD_VAR", "GRACE_VAR"),
    **_from("threads", "THREAD_VARS", "SHARE_VAR", "share", "pin_process_threads"),
    # A launcher: the run's events and terminal record, its node side (launch.json run as prepared).
    **_from("events", "EventEmitter", "EVENT_OF", "STATUS_OF", "TERMINAL"),
    **_from("manifest", "HOST_TERMINAL_FIELDS", "record_run_end"),
    **_from("node", "prepared_env"),
    "node_main": "mosaic_core.node:main",
    "take_held_signals": "mosaic_core.hostsignals:take_held",
}
__all__ = sorted(_EXPORTS)


def _exported(namespace: dict[str, Any], exports: dict[str, str], name: str) -> Any:
    """``name`` of a lazy namespace (this package, :mod:`mosaic_core.toolkit`): imported from the
    module ``exports`` names on first use, then kept in ``namespace``."""
    where = exports.get(name)
    if where is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    module, _, attribute = where.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    namespace[name] = value
    return value


def __getattr__(name: str) -> Any:
    return _exported(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
