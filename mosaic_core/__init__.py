"""MOSAIC host: discovers workers and plugins, validates configs, runs and supervises jobs.

The public surface, what a worker, plugin or launcher may import (``tests/core/test_layering.py``
keeps plugins and workers to it; everything else in ``mosaic_core`` is private and may change):

- the names below, from the top level, lazily (``import mosaic_core`` imports nothing else)::

      from mosaic_core import hookimpl, ExtrasKey, ChildEvent, Launch, Worker, WorkerMetadata

- the public modules in :data:`PUBLIC_MODULES`, each a namespace of its own (its ``__all__``, or
  its names without a leading underscore): :mod:`mosaic_core.child`, the training-program API;
  :mod:`mosaic_core.contract`, the run contract's helpers; :mod:`mosaic_core.launchers`, the
  launcher API, and :mod:`mosaic_core.caller`, a remote launcher's caller; and the toolkits the built-in plugins share (safe files, processes, a token-guarded
  local web server, the run store on disk, the daemon's client).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# The public modules (importable as ``mosaic_core.NAME``; a package's submodules included).
PUBLIC_MODULES = (
    "child",
    "contract",
    "launchers",
    "caller",
    "files",
    "jsontext",
    "procs",
    "webtoken",
    "runstore",
    "trainer.client",
)


def _from(module: str, *names: str) -> dict[str, str]:
    return {name: f"mosaic_core.{module}" for name in names}


# Public name -> "module" or "module:attribute" that defines it (imported on first use).
_EXPORTS = {
    # Extending: a plugin's hooks, a worker, a CLI command, the types they exchange.
    **_from("hookspecs", "hookimpl", "STOP", "ISOLATE"),
    "hookspec": "mosaic_core.hookspecs:spec",  # a plugin's own hook: @hookspec(STOP) or @hookspec(ISOLATE)
    **_from("worker", "Worker", "load_worker"),
    **_from("workers", "find_worker"),
    **_from("choice", "choose_worker"),
    **_from("capabilities", "WorkerMetadata", "WorkerCapabilities", "WorkerEnvironment"),
    **_from("cli.commands", "CliCommand"),
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
    **_from("errors", "MosaicError", "UsageError", "ConfigError"),
    **_from("plugins", "plugin_host"),
    **_from("frames", "FrameSource", "FrameReader", "LiveFrame", "NoFrames"),
    "after_import": "mosaic_core._patchpoints",  # a plugin patches what the training program imports
    # A run's config, and its directory on the host.
    **_from(
        "config",
        "WorkerConfig",
        "RUN_ID",
        "REDACTED",
        "build_config",
        "parse_json",
        "read_config_file",
        "unwrap_config",
        "redact",
        "is_secret_key",
        "check_run_id",
        "extras_for_child",
        "MAX_DEPTH",
        "MAX_SEED",
        "depth",
        "read_spec_text",
    ),
    **_from(
        "runs",
        "RunContext",
        "RunDirectory",
        "default_runs_root",
        "find_run_dir",
        "check_runs_root",
        "job_folder",
        "read_cancel_note",
        "write_json_atomic",
        "manifest_of",
    ),
    **_from(
        "events", "EventEmitter", "read_events", "iter_events", "events_backwards", "EVENT_OF", "STATUS_OF", "TERMINAL"
    ),
    **_from("manifest", "HOST_SECTIONS", "HOST_TERMINAL_FIELDS", "manifest_document", "record_run_end"),
    # Running a prepared run (a worker's own console script, a launcher, the sweep).
    **_from(
        "pipeline",
        "HostOptions",
        "Prepared",
        "DEFAULT_GRPC_TARGET",
        "host_parser",
        "prepare",
        "prepare_from_flags",
        "resolve_config",
        "execute",
        "run_worker",
        "worker_option_defaults",
    ),
    "worker_main": "mosaic_core.pipeline:main",
    # A worker's Python facade (the original's <worker>.config, .runtime, .telemetry modules), written once.
    **_from(
        "facade",
        "WorkerRuntime",
        "LifecycleEmitter",
        "parse_worker_config",
        "load_worker_config",
        "load_worker_config_from_string",
    ),
    "run_command": "mosaic_core.cli.main",  # another command of the CLI, in this process
    "make_console": "mosaic_core.cli.console:console",
    **_from("cli.console", "said_if_slow"),
    "print_table": "mosaic_core.cli.algos:table",  # a titled rich table of plain-text cells (mosaic algos' views)
    **_from("environments", "HOST_DISTRIBUTION", "preflight", "ask_environment"),
    **_from("renamed", "add_renamed_flag", "say_renamed"),  # an old spelling a user typed, said once
    "take_held_signals": "mosaic_core.hostsignals:take_held",
    # A launcher's node side: the recorded launch.json run as the caller prepared it.
    **_from("node", "prepared_env"),
    "node_main": "mosaic_core.node:main",
    **_from("childenv", "CHILD_VAR", "GRACE_VAR"),
    **_from("threads", "THREAD_VARS", "SHARE_VAR", "share", "pin_process_threads"),
    # The run daemon, for the tools that talk to it (analytics, the dashboard).
    **_from("trainer.auth", "find_token"),
    **_from("trainer.protocol", "check_target"),
    **_from("trainer.store", "RunStore"),
    **_from("trainer.removal", "RunStillActive", "remove_recorded_run"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'mosaic_core' has no attribute {name!r}")
    module, _, attribute = where.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
