"""Hooks on the host around one run: before, while it trains, after (:mod:`mosaic_core.hookspecs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mosaic_core.hookspecs.marks import ISOLATE, STOP, spec

if TYPE_CHECKING:  # pragma: no cover - typing only, keeps discovery import-light
    from pathlib import Path

    from mosaic_core.config import WorkerConfig
    from mosaic_core.frames import FrameSource
    from mosaic_core.runs import RunContext
    from mosaic_core.types import RunRelay


__all__ = [
    "mosaic_config_defaults",
    "mosaic_validate_config",
    "mosaic_run_settings",
    "mosaic_build_args",
    "mosaic_child_env",
    "mosaic_run_started",
    "mosaic_on_event",
    "mosaic_on_child_message",
    "mosaic_on_heartbeat",
    "mosaic_run_relay",
    "mosaic_frame_source",
    "mosaic_build_manifest",
    "mosaic_terminal_payload",
    "mosaic_check_run",
    "mosaic_run_scalars",
    "mosaic_private_run_folders",
    "mosaic_run_finished",
]


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
