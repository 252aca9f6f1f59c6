"""Hooks on the host: what a plugin provides, its commands, what it owns (:mod:`mosaic_core.hookspecs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mosaic_core.hookspecs.marks import ISOLATE, STOP, spec

if TYPE_CHECKING:  # pragma: no cover - typing only, keeps discovery import-light
    from types import ModuleType

    from mosaic_core.capabilities import WorkerMetadata
    from mosaic_core.cli.commands import CliCommand
    from mosaic_core.types import ChildEvent, ExtrasKey


__all__ = [
    "mosaic_workers",
    "mosaic_launchers",
    "mosaic_hookspecs",
    "mosaic_cli_commands",
    "mosaic_extras_keys",
    "mosaic_child_events",
]


# --------------------------------------------------------------------------------------
# Host: what a plugin provides
# --------------------------------------------------------------------------------------
@spec(ISOLATE)  # a broken plugin never hides another's workers
def mosaic_workers() -> list[WorkerMetadata] | None:
    """Provide workers: one :class:`mosaic_core.WorkerMetadata` each, its ``name`` given (besides
    the ``mosaic.workers`` entry-point group, where a distribution registers a worker by itself).

    Called when the host lists or looks up workers (``mosaic workers``, ``mosaic run``). Return
    descriptors only (data: the worker class and its ``run_hooks`` are named as strings and
    imported when a run needs them), so listing stays cheap. Each descriptor is checked in one
    place: a wrong type, a missing name or a name another distribution provides too marks it
    failed in ``mosaic workers``, naming this plugin's entry point and distribution.
    Failure: isolate (this plugin's workers are listed as failed; every other worker works).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_workers():
            return [
                WorkerMetadata(
                    name="random",
                    version="1.0",
                    description="a random policy",
                    capabilities=CAPABILITIES,
                    worker="my_pkg.worker:RandomWorker",
                    run_hooks="my_pkg.run_hooks",
                )
            ]
    """


@spec(ISOLATE)  # a broken plugin never hides another's launchers
def mosaic_launchers() -> list[Any] | None:  # Launcher (mosaic_core.launchers imports the plugin host)
    """Provide launchers: one :class:`mosaic_core.launchers.Launcher` each (where prepared
    runs execute besides here: Ray, Slurm).

    Called when the host builds ``mosaic run``'s, ``mosaic sweep run``'s and ``mosaic daemon``'s
    options. Return instances whose module imports nothing heavy (a method imports its cluster
    client when a run uses it). Checked in one place as :func:`mosaic_workers`' are, and their
    methods' signatures against the base's; two launchers declaring one flag: the second fails,
    naming both.
    Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_launchers():
            from my_pkg.k8s import KubeLauncher  # a Launcher subclass: name, options, execute(job)

            return [KubeLauncher()]
    """


@spec(ISOLATE)
def mosaic_hookspecs() -> list[ModuleType] | None:
    """Declare hooks of this plugin's own, for other packages to implement (the CleanRL worker's
    ``mosaic_cleanrl_algorithms``).

    Called once, after every plugin is registered and before their hooks are checked, so an
    implementation registered before its spec is still checked against it. Return modules whose
    functions are marked with ``@hookspec(STOP)`` or ``@hookspec(ISOLATE)`` (``from mosaic_core
    import hookspec``), or None. Implement a hook
    another plugin declares with ``@hookimpl(optionalhook=True)``: your package then loads
    whether or not that plugin is installed (or disabled). Two plugins declaring one hook name:
    the second fails to load. Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_hookspecs():
            from my_pkg import hookspecs

            return [hookspecs]
    """


# --------------------------------------------------------------------------------------
# Host: command line
# --------------------------------------------------------------------------------------
@spec(ISOLATE)  # a broken plugin never breaks the CLI (--help included)
def mosaic_cli_commands() -> list[CliCommand] | None:
    """Contribute subcommands to the ``mosaic`` CLI (``mosaic plot``, ``mosaic fastlane``…).

    Called once when the CLI builds its parser. Return a list of
    :class:`mosaic_core.cli.commands.CliCommand` descriptors. Results are concatenated; two
    commands with the same name: the second is dropped and both plugins are named. Keep
    imports inside the command's ``run`` so ``mosaic --help`` stays fast. Failure: isolate
    (the plugin's commands are missing; every other command works).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_cli_commands():
            return [CliCommand("hello", "say hello", lambda parser: None, lambda ns: print("hello") or 0)]
    """


# --------------------------------------------------------------------------------------
# Host: what a plugin owns
# --------------------------------------------------------------------------------------
@spec(STOP)
def mosaic_extras_keys() -> list[ExtrasKey] | None:
    """Declare the ``extras`` keys this plugin consumes (:class:`mosaic_core.types.ExtrasKey`,
    an exact key or a prefix such as ``fastlane_``).

    Called once per run (and by ``mosaic plugins --extras``). Return a list of descriptors,
    or None. Owned keys are never handed to a worker as algorithm flags; keys nobody owns are
    the worker's. Results are concatenated; one key (or overlapping prefixes) owned by two
    plugins is an error naming both. Failure: stop.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_extras_keys():
            return [ExtrasKey("thresh_level", "note when the return reaches this level")]
    """


@spec(STOP)
def mosaic_child_events() -> list[ChildEvent] | None:
    """Declare the lifecycle events this plugin's training-process code emits through
    :func:`mosaic_core.child.emit_event` (:class:`mosaic_core.types.ChildEvent`).

    Called once per run. Return a list of descriptors, or None. The host emits a child's
    event when the host itself (``note``, ``checkpoint_saved``), a plugin or the run's worker
    (:meth:`mosaic_core.worker.Worker.child_events`) declared it; terminal events never. An
    undeclared event is dropped with one warning per run naming the event and the worker.
    The same name from two plugins is allowed (one vocabulary). Failure: stop.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_child_events():
            return [ChildEvent("stage_advanced", "the curriculum moved to its next stage")]
    """
