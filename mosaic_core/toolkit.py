"""The host toolkit: what the CLI and the built-in plugins share (finding and loading workers, the
plugin host, config and run-directory helpers, the run store, the daemon's client, console
helpers). A worker, plugin or launcher written elsewhere needs only the extension API
(:mod:`mosaic_core`); this module may change between releases as the host does
(``docs/extending/public-api.md``).

- the names below, lazily (``from mosaic_core.toolkit import plugin_host`` imports the plugin
  host, nothing else);
- the modules in :data:`MODULES`, each a namespace of its own (its ``__all__``): safe files,
  JSON text, processes, a token-guarded local web server, the run store on disk, the daemon's client.
"""

from __future__ import annotations

from typing import Any

from mosaic_core import _exported, _from

# The toolkit's modules (importable as ``mosaic_core.NAME``; a package's submodules included).
MODULES = ("files", "jsontext", "procs", "webtoken", "runstore", "trainer.client")


# Toolkit name -> "module" or "module:attribute" that defines it (imported on first use).
_EXPORTS = {
    # Workers and plugins, found and loaded as the host does.
    **_from("workers", "find_worker", "recorded_run", "worker_python"),
    **_from("worker", "load_worker"),
    **_from("choice", "choose_worker"),
    **_from("plugins", "plugin_host"),
    **_from("environments", "HOST_DISTRIBUTION"),
    # Configs: read, checked, redacted.
    **_from(
        "config",
        "RUN_ID",
        "new_run_id",
        "build_config",
        "read_config_file",
        "redact",
        "is_secret_key",
        "check_run_id",
        "extras_for_child",
        "MAX_DEPTH",
        "MAX_SEED",
        "depth",
        "read_spec_text",
    ),
    # Runs on disk: where they are, their files, their events.
    **_from(
        "runs",
        "default_runs_root",
        "find_run_dir",
        "check_runs_root",
        "job_folder",
        "read_cancel_note",
        "write_json_atomic",
        "manifest_of",
    ),
    **_from("events", "iter_events", "events_backwards"),
    # The command line: another command in this process, the console.
    "run_command": "mosaic_core.cli.main",
    "make_console": "mosaic_core.cli.console:console",
    **_from("cli.console", "said_if_slow"),
    "print_table": "mosaic_core.cli.algos:table",  # a titled rich table of plain-text cells (mosaic algos' views)
    # The run daemon, for the tools that talk to it (analytics, the dashboard).
    **_from("trainer.auth", "find_token"),
    **_from("trainer.protocol", "check_target"),
    **_from("trainer.store", "RunStore"),
    **_from("trainer.removal", "RunStillActive", "remove_recorded_run"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return _exported(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
