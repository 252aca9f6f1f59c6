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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover - typing only, keeps discovery import-light
    from pathlib import Path
    from types import ModuleType

    import numpy as np
    from numpy.typing import NDArray

    from mosaic_core.capabilities import WorkerMetadata
    from mosaic_core.cli.commands import CliCommand
    from mosaic_core.config import WorkerConfig
    from mosaic_core.frames import FrameSource
    from mosaic_core.runs import RunContext
    from mosaic_core.types import ChildContext, ChildEvent, EnvSwitch, ExtrasKey, FrameInfo, RunRelay

PROJECT = "mosaic"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

STOP, ISOLATE = "stop", "isolate"


def spec(policy: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a function as a hook spec carrying its failure policy (``STOP`` or ``ISOLATE``):
    the policy lives on the spec, and :data:`POLICY` is read from the specs at import."""
    if policy not in (STOP, ISOLATE):
        raise ValueError(f"a hook's failure policy is {STOP!r} or {ISOLATE!r}, got {policy!r}")

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        function.mosaic_policy = policy  # type: ignore[attr-defined]
        marked: Callable[..., Any] = hookspec(**options)(function)
        return marked

    return mark


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


# --------------------------------------------------------------------------------------
# Host: before a run
# --------------------------------------------------------------------------------------
@spec(STOP)
def mosaic_config_defaults(data: dict[str, Any]) -> dict[str, Any] | None:
    """Fill in worker-config fields the user left out.

    Called once while a config is built, after the file, CLI overrides and ``--extras``
    are merged and before validation, with that raw merged mapping. Return values for
    missing fields only (e.g. ``{"env_id": <first curriculum stage>}``), or None. Fields
    already present are never replaced; the same field from two plugins is an error naming
    both. Failure: stop.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_config_defaults(data):
            stages = data.get("extras", {}).get("curriculum_schedule")
            return {"env_id": stages[0]["env_id"]} if stages else None
    """


@spec(STOP)
def mosaic_validate_config(config: WorkerConfig) -> list[str] | None:
    """Check the parts of a worker config this plugin owns (usually its ``extras`` keys).

    Called on every run and dry run, before anything is started. Return a list of problems,
    each a sentence naming the key (``"extras.fastlane_video_mode: 'movie' is not one of
    single, grid, off"``), or None. All problems from all plugins are reported together and
    the run stops with exit code 2. Failure: stop.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_validate_config(config):
            level = config.extras.get("thresh_level")
            if level is not None and not isinstance(level, (int, float)):
                return [f"extras.thresh_level: must be a number, got {level!r}"]
            return None
    """


@spec(STOP)
def mosaic_run_settings(config: WorkerConfig) -> list[Any] | None:
    """Publish typed settings for the run's worker to honour (e.g.
    :class:`mosaic_core.types.TrackingSettings` from ``extras.track_wandb``).

    Called once per run after validation. Return a list of frozen-dataclass settings, or
    None. Each worker turns the settings it honours into its own flags or calls
    (``run.setting(TrackingSettings)`` in ``plan``); a setting whose type the worker does not
    list in :meth:`mosaic_core.worker.Worker.honoured_settings` stops the run in one line
    naming the setting, the plugin and the worker (exit 2). One type from two plugins is an
    error naming both. Failure: stop.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_run_settings(config):
            if config.extras.get("track_wandb") is True:
                return [TrackingSettings(project=config.extras.get("wandb_project_name"))]
            return None
    """


@spec(STOP)
def mosaic_build_args(config: WorkerConfig) -> list[str] | None:
    """Contribute command-line arguments for the algorithm subprocess.

    Called once per run after validation, with the merged config. Return the extra argv
    items or None. Results are concatenated in plugin order and handed to the worker's
    ``plan`` (``run.plugin_args``), which places them on its training program's command line
    if it understands them. Flags are one program's vocabulary: prefer
    :func:`mosaic_run_settings`, which every worker can honour or refuse. Failure: stop.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_build_args(config):
            return ["--capture-video"] if config.extras.get("record") else None
    """


@spec(STOP)
def mosaic_child_env(run: RunContext) -> dict[str, str] | None:
    """Contribute environment variables for the training process.

    Called once per run after the run directory exists and before the child starts. Return
    a mapping of names to string values, or None. Mappings are merged; the same name from
    two plugins is an error naming both. Secrets passed here reach the child only through
    its environment: the host redacts any name containing api_key/token/password/secret
    when it prints or writes the environment. A dry run calls it too: create nothing here.
    Failure: stop.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_child_env(run):
            return {"MY_PLUGIN_DIR": str(run.run_dir / "my_plugin")}
    """


@spec(ISOLATE)
def mosaic_run_started(run: RunContext) -> None:
    """A run is about to start its training process (``run_started`` has been emitted).

    Called once per run. Use it to create resources whose lifetime the host owns; free them
    in :func:`mosaic_run_finished`. Return value ignored. Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_run_started(run):
            run.state["my_plugin"] = {"started": time.time()}
    """


# --------------------------------------------------------------------------------------
# Host: while a run trains
# --------------------------------------------------------------------------------------
@spec(ISOLATE)
def mosaic_on_event(run: RunContext, event: dict[str, Any]) -> None:
    """A lifecycle event was emitted (already written to stdout and ``events.jsonl``).

    Called for every event of the run, in order, from the host's supervising thread; the
    event is the full JSON object (``event``, ``run_id``, ``seq``, ``timestamp``,
    ``payload``). For sinks: progress bars, notifications. Must not block. Return ignored.
    Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_on_event(run, event):
            if event["event"] == "checkpoint_saved":
                print("checkpoint:", event["payload"].get("path"))
    """


@spec(ISOLATE)
def mosaic_on_child_message(run: RunContext, kind: str, payload: dict[str, Any]) -> None:
    """A message arrived from the training process over the side channel.

    Called on the host for every ``ChildContext.publish(kind, payload)`` made in the
    training process (or its env processes), in arrival order. A plugin handles the
    kinds it publishes and ignores the rest. Return value ignored. Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_on_child_message(run, kind, payload):
            if kind == "my_plugin.sample":
                run.state.setdefault("my_plugin", []).append(payload)
    """


@spec(ISOLATE)
def mosaic_on_heartbeat(run: RunContext) -> dict[str, Any] | None:
    """Contribute fields to a heartbeat payload.

    Called each time the host emits a ``heartbeat`` event (every 30 s by default). Return
    a mapping merged into the payload, or None. Failure: isolate (a raising plugin, a
    non-dict result, a key another plugin already set or a key the host sets itself —
    ``elapsed_s``, ``pid`` — drops that plugin's contribution only, naming it).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_on_heartbeat(run):
            return {"my_plugin_samples": len(run.state.get("my_plugin", []))}
    """


# --------------------------------------------------------------------------------------
@spec(ISOLATE)
def mosaic_run_relay(run_id: str, extras: dict[str, Any], side: str) -> RunRelay | None:
    """This plugin's relay for a run that a launcher executes on another machine, or None.

    Called by a launcher (``--ray-address``) twice per attempt: on the node (``side="node"``)
    before it starts the run's ``mosaic run`` there, and on the caller (``side="caller"``) once
    the run has started; ``extras`` are the run's (secrets redacted). The two
    :class:`~mosaic_core.types.RunRelay` objects carry the plugin's live data of the run from the
    node to the caller (FastLane: the newest frames, into the caller's segment), over the channel
    that carries the run's events, at most ``rate_hz`` times a second. Return a relay, or None
    when the plugin has nothing to relay for this run. Failure: isolate (the plugin's relay is
    dropped; the run goes on).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_run_relay(run_id, extras, side):
            if extras.get("my_plugin"):
                return NodeCounter(run_id) if side == "node" else CallerCounter(run_id)
            return None
    """


@spec(ISOLATE)
def mosaic_frame_source(run_dir: Path, extras: dict[str, Any]) -> FrameSource | None:
    """Where a viewer in the host reads the live frames of the run in ``run_dir``, or None.

    Called by a viewer (the dashboard's run page and frame stream) whenever it looks for a run's
    frames; ``extras`` are the run's (from its ``config.json``; empty when unreadable). Return a
    :class:`~mosaic_core.frames.FrameSource` when this plugin publishes frames of runs (cheap:
    it opens nothing; its ``publishing`` says whether this run's config asks for frames, and its
    ``open()`` raises :class:`~mosaic_core.frames.NoFrames` with the reason when there are none
    now), or None when it publishes none; the first source returned wins. Failure: isolate (the
    viewer shows no frames of the run from this plugin).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_frame_source(run_dir, extras):
            return MyFrames(run_dir, publishing=bool(extras.get("my_frames")))
    """


# Host: after a run
# --------------------------------------------------------------------------------------
@spec(ISOLATE)
def mosaic_build_manifest(run: RunContext, status: str) -> dict[str, Any] | None:
    """Contribute sections to the run's ``manifest.json``.

    Called once at the end of every run, whatever ``status`` (``completed``, ``failed``,
    ``cancelled``), after the training process is gone and just before the terminal event
    is emitted, so the manifest exists when a reader sees the run end. Return ``{section_name: data}`` or None.
    Sections are merged. Paths must be relative to the run directory, and secrets must
    never appear. Failure: isolate (a raising plugin, a non-dict result or a section another
    plugin already wrote drops that plugin's sections only, naming it in the manifest).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_build_manifest(run, status):
            return {"my_plugin": {"samples": len(run.state.get("my_plugin", [])), "status": status}}
    """


@spec(ISOLATE)
def mosaic_terminal_payload(run: RunContext, status: str, manifest: dict[str, Any]) -> dict[str, Any] | None:
    """Contribute fields to the payload of the run's terminal event (``run_completed``,
    ``run_failed`` or ``run_cancelled``), e.g. what the plugin derived from the manifest.

    Called once at the end of every run, whatever ``status``, after :func:`mosaic_build_manifest`
    and :func:`mosaic_run_finished` and just before ``manifest.json`` and the terminal event are
    written. ``manifest`` is the document ``manifest.json`` will hold (the host's header and every
    plugin's section, redacted): read it, never change it. A plugin may write a file of its own
    derived from it here, so it exists when a reader sees the run end. Return a mapping merged into
    the payload, or None; keep it small (a reader skips an event line over 64 KiB: a plugin's
    fields over 32 KiB of JSON are dropped). Failure: isolate (a raising plugin, a non-dict result or
    fields over the limit drop that plugin's fields; a field another plugin already set or one the
    host sets itself — ``returncode``, ``logs``, ``error``, ``reason``… — drops that field; each
    names the plugin in ``manifest.json``).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_terminal_payload(run, status, manifest):
            return {"my_plugin_samples": (manifest.get("my_plugin") or {}).get("samples")}
    """


@spec(ISOLATE)
def mosaic_check_run(run_dir: Path) -> list[str] | None:
    """Check a finished run's directory for what this plugin promises to leave in it (its files,
    their shape, its fields in the terminal event).

    Called by the worker contract suite (:mod:`mosaic_core.testing.contract_suite`) on a run each
    worker under test completed for real, so a plugin's promise is proven for every worker without
    the suite knowing the plugin. Return one line per problem (an empty list or None: all kept).
    Results are joined, each line prefixed with its plugin's name. Failure: isolate (a raising check
    is reported as a problem of its plugin).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_check_run(run_dir):
            if not (run_dir / "my_plugin.json").is_file():
                return ["my_plugin.json is missing"]
            return None
    """


@spec(ISOLATE)
def mosaic_run_scalars(run_dir: Path, tag: str) -> list[tuple[int, float]] | None:
    """The ``(step, value)`` series a finished or running run recorded under ``tag``.

    Called in the host by whoever needs a run's numbers without knowing how they were stored
    (the sweep's objective reads its trials' final values through it). Return the series in step
    order, or None when this plugin does not store scalars; the first series returned wins.
    Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_run_scalars(run_dir, tag):
            path = run_dir / "scalars.csv"
            if not path.exists():
                return None
            rows = (line.split(",") for line in path.read_text().splitlines())
            return [(int(step), float(value)) for name, step, value in rows if name == tag]
    """


@spec(ISOLATE)
def mosaic_private_run_folders() -> list[str] | None:
    """Name the folders of a run directory that this plugin's tool keeps for itself (e.g. a
    tracker's own copies of the run's event files and models).

    Called by whoever scans a run directory for its TensorBoard files, checkpoints and videos
    (the manifest, the dashboard, export): those folders, at any depth, are not scanned, so
    their copies are neither listed twice nor counted against the scan's limits. Return plain
    folder names (no ``/``), or None. Results are joined. Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_private_run_folders():
            return ["mytracker"]
    """


@spec(ISOLATE)
def mosaic_run_finished(run: RunContext, status: str) -> None:
    """The run has ended by any path and the manifest sections are collected.

    Called exactly once per started run, even after a crash or cancel, after
    :func:`mosaic_build_manifest` and before ``manifest.json`` and the terminal event are
    written (so its failures are in the manifest): free what :func:`mosaic_run_started` created. Every implementation is
    called even if one raises. Return value ignored. Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_run_finished(run, status):
            run.state.pop("my_plugin", None)
    """


# --------------------------------------------------------------------------------------
# Training process
# --------------------------------------------------------------------------------------
@spec(ISOLATE)
def mosaic_child_setup(child: ChildContext) -> None:
    """The training process is starting, before the algorithm script is imported.

    Called once in every process of the run that imports the patch points (the training
    process itself and a vector env's env processes started with ``spawn``), after the patch
    points are installed. Install process-wide state here (e.g. a FastLane writer). Return
    value ignored. Failure: isolate (only that plugin's setup is missing; the patch points and
    every other plugin's setup stay).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_child_setup(child):  # in a worker's run_hooks module: its runs only
            os.environ.setdefault("MY_LIB_THREADS", "1")
    """


@spec(ISOLATE)
def mosaic_env_make_kwargs(
    child: ChildContext, env_id: str, env_index: int | None, kwargs: dict[str, Any]
) -> dict[str, Any] | None:
    """Contribute keyword arguments to a ``gym.make`` call made by the script.

    Called for each ``gym.make`` in the training process and its env processes; ``env_index``
    is the env's index in its vector env when known (None otherwise), ``kwargs`` what the
    script passed. Return extra kwargs (e.g. ``{"render_mode": "rgb_array"}``) or None.
    The script's own kwargs win (an explicit None counts as not given, as in
    ``gym.make(env_id, render_mode=None)``). Failure: isolate (a raising plugin or a key
    another plugin already gave drops that plugin's kwargs, naming it).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_env_make_kwargs(child, env_id, env_index, kwargs):
            return {"render_mode": "rgb_array"} if env_index == 0 else None
    """


@spec(ISOLATE)
def mosaic_wrap_env(child: ChildContext, env: Any, env_id: str, env_index: int | None) -> Callable[[Any], Any] | None:
    """Offer a wrapper for an environment just created by ``gym.make``.

    Called after each ``gym.make``. Return a callable ``wrap(env) -> env`` or None. The
    callables are applied in plugin order, each to the previous result, so wrappers nest
    predictably; a plugin must not wrap an env it has already wrapped. Failure: isolate
    (a raising hook, a non-callable or a raising ``wrap`` leaves the env unwrapped by that
    plugin).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_wrap_env(child, env, env_id, env_index):
            import gymnasium as gym

            return gym.wrappers.RecordEpisodeStatistics
    """


@spec(ISOLATE)
def mosaic_env_switch(child: ChildContext) -> EnvSwitch | None:
    """The run's env switches for a training program whose envs bypass ``gym.make``, or None.

    Called in a training process when the program asks :func:`mosaic_core.child.env_switch`
    (EnvPool, an env runner of its own: envs the ``gym.make`` patch point never sees). Return an
    :class:`~mosaic_core.types.EnvSwitch` when this plugin switches this run's envs (a
    curriculum's stages), else None; the first one returned wins. Failure: isolate (the program
    trains on its first env).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_env_switch(child):
            return MyStages(child) if "my_stages" in child.extras else None
    """


@spec(ISOLATE)
def mosaic_on_frame(child: ChildContext, frame: NDArray[np.uint8], info: FrameInfo) -> None:
    """A rendered frame and its step metrics are available in the training process.

    Called by the plugin that renders (FastLane) each time it renders, with an ``HxWxC``
    uint8 array (C = 3 RGB, 4 RGBA, 1 grayscale) and a :class:`mosaic_core.types.FrameInfo`
    (global step, env index, last reward, rolling return, step rate, episode count). The
    frame is only valid during the call: copy it to keep it. Return value ignored.
    Failure: isolate (a raising implementation, ``wrapper=True`` ones included, costs only
    its plugin; the frame still reaches every other).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_on_frame(child, frame, info):
            if info.global_step % 10_000 == 0:
                np.save(child.run_dir / f"frame_{info.global_step}.npy", frame.copy())
    """


@spec(ISOLATE)
def mosaic_frame_wanted(child: ChildContext, env_index: int) -> bool | None:
    """Whether a frame of env ``env_index`` is wanted now.

    Called in the training process by a program that renders itself
    (:func:`mosaic_core.child.frame_wanted`, for envs that bypass ``gym.make``: PettingZoo,
    EnvPool, a Ray env runner), before it renders. The program renders only when some consumer
    says True, so rendering costs nothing between frames.

    Return True to ask for a frame, False or None otherwise; results combine as "any": True from
    one implementation is enough. Must be cheap (a clock read). When every implementation says no,
    ``frame_wanted`` keeps that answer for 50 ms for that env (``mosaic_core.child.FRAME_CHECK_S``),
    so programs may ask after every step. Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_frame_wanted(child, env_index):
            return env_index == 0 and time.monotonic() >= NEXT_FRAME[0]
    """


@spec(ISOLATE)
def mosaic_on_scalar(child: ChildContext, tag: str, value: float, step: int | None, agent: str | None) -> None:
    """The script wrote a scalar (``SummaryWriter.add_scalar``) in the training process.

    Called for every ``add_scalar`` of ``torch.utils.tensorboard`` and ``tensorboardX``
    writers, and for :func:`mosaic_core.child.report_scalar` (workers without a
    SummaryWriter), before the write itself, so it must be cheap (buffer, never block).
    ``agent`` is the agent id for a per-agent value of a multi-agent run (None for the
    run's own or the team's values). Return value ignored. Failure: isolate (a raising
    implementation, ``wrapper=True`` ones included, costs only its plugin; the run and every
    other plugin go on).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_on_scalar(child, tag, value, step, agent):
            if tag == "charts/episodic_return" and agent is None:
                BEST[0] = max(BEST[0], value)
    """


@spec(ISOLATE)
def mosaic_host_lost(child: ChildContext) -> None:
    """The run's host died (e.g. ``kill -9``) while the training process was running.

    Called once, in the training process only, from MOSAIC's watchdog thread, just before it
    records the run as failed and stops the run's processes. Free what the host would have
    freed in :func:`mosaic_run_finished` and can be freed from here (e.g. a shared-memory
    segment). Must be quick. Return value ignored. Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_host_lost(child):
            SEGMENT.unlink()
    """


# --------------------------------------------------------------------------------------
HOOK_NAMES = tuple(name for name in sorted(globals()) if name.startswith("mosaic_"))


def _per_run() -> frozenset[str]:
    import inspect

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
