"""Hook implementations of the FastLane plugin (live frames over shared memory).

Host side: check the config, create the run's segment when the run starts, hand the
settings to the training process, report status in heartbeats and the manifest, remove the
segment when the run ends (whatever way it ends). Training side: ask ``gym.make`` for
``render_mode="rgb_array"`` on envs that publish, wrap them, and be one consumer of
``on_frame`` (the shared-memory writer); the PNG recorder is a second, independent one.
Heavy modules (numpy, gymnasium) are imported only inside training-side hooks.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic_core import ExtrasKey, hookimpl
from mosaic_fastlane import layout, settings

if TYPE_CHECKING:
    import numpy as np

    from mosaic_core import ChildContext, FrameInfo, RunContext, WorkerConfig
    from mosaic_fastlane.segment import SegmentOwner

STATE_KEY = "fastlane"


# ------------------------------------------------------------------------------ host side
@dataclass
class HostState:
    """What the host keeps about a run's FastLane between hooks (in ``run.state``)."""

    settings: settings.Settings
    owner: SegmentOwner | None = None
    create_failed: bool = False
    errors: list[str] = field(default_factory=list)


def _host_state(run: RunContext) -> HostState | None:
    """The run's resolved settings (None when FastLane is off). Creates nothing: a dry run
    asks for the child's environment too, and must leave no segment behind."""
    if STATE_KEY not in run.state:
        extras = run.config.extras
        if not settings.is_enabled(extras):
            return None
        resolved = settings.resolve(
            extras, layout.segment_name(run.run_id), str(layout.shm_dir()), host_pid=os.getpid()
        )
        run.state[STATE_KEY] = HostState(resolved)
    return run.state[STATE_KEY]


def _create_segment(state: HostState, run: RunContext) -> None:
    from mosaic_fastlane.segment import SegmentOwner, SharedMemoryUnavailable

    resolved = state.settings
    try:
        state.owner = SegmentOwner(
            run.run_id,
            mode=layout.Mode.GRID if resolved.mode == "grid" else layout.Mode.SINGLE,
            slot_count=resolved.slots,
            max_dim=resolved.max_dim,
            interval_ms=resolved.interval_ms,
            directory=Path(resolved.shm_dir),
        )
    except (SharedMemoryUnavailable, OSError) as exc:
        state.create_failed = True
        message = f"{exc}; FastLane is disabled for run {run.run_id} (training goes on)"
        state.errors.append(message)
        print(f"mosaic fastlane: {message}", file=sys.stderr, flush=True)


def _status(state: HostState) -> dict[str, Any]:
    from mosaic_fastlane.segment import FastLaneError, open_segment, slot_status

    owner = state.owner
    section: dict[str, Any] = {
        "enabled": owner is not None,
        "mode": state.settings.mode,
        "segment": owner.name if owner else None,
        "frames_published": 0,
    }
    if owner is None or owner.removed:
        return section
    try:
        mapping = open_segment(name=owner.name, directory=owner.directory)
    except FastLaneError as exc:
        section["error"] = str(exc)
        return section
    try:
        slots = slot_status(mapping)
    finally:
        mapping.close()
    section["frames_published"] = sum(s["published"] for s in slots)
    section["render_seconds"] = round(sum(s["render_seconds"] for s in slots), 3)
    for key in ("global_step", "step_rate_hz", "episode_count"):
        if key in slots[0]:
            section[key] = slots[0][key]
    section["slots"] = slots
    return section


@hookimpl
def mosaic_extras_keys() -> list[ExtrasKey]:
    return [
        ExtrasKey(
            "fastlane", "publish live frames over shared memory (true/false)", bookkeeping=True, live_frames=True
        ),
        ExtrasKey("fastlane_", "FastLane settings (the keys below)", prefix=True, bookkeeping=True),
        ExtrasKey("fastlane_video_mode", "single (one probe env), grid (tiles) or off", bookkeeping=True),
        ExtrasKey("fastlane_slot", "which env publishes in single mode (default 0)", bookkeeping=True),
        ExtrasKey("fastlane_grid_limit", "at most this many envs tiled in grid mode (default 16)", bookkeeping=True),
        ExtrasKey("fastlane_record", "also save every Nth frame as PNG under videos/fastlane/", bookkeeping=True),
    ]


@hookimpl
def mosaic_validate_config(config: WorkerConfig) -> list[str] | None:
    return settings.problems(config.extras) or None


@hookimpl
def mosaic_run_started(run: RunContext) -> None:
    state = _host_state(run)
    if state is not None and state.owner is None and not state.create_failed:
        _create_segment(state, run)


@hookimpl
def mosaic_child_env(run: RunContext) -> dict[str, str] | None:
    # Usually called before run_started creates the segment; if creating it fails, the
    # training process finds no segment and stays quiet (the host has warned already).
    state = _host_state(run)
    if state is None or state.create_failed:
        return None
    return {settings.CHILD_VAR: state.settings.to_env()}


@hookimpl
def mosaic_on_child_message(run: RunContext, kind: str, payload: dict[str, Any]) -> None:
    state = run.state.get(STATE_KEY)
    if state is None or state.create_failed:
        return  # the host's own error already explains why the training process has no segment
    if kind == "fastlane" and isinstance(payload.get("error"), str):
        if payload["error"] not in state.errors:
            state.errors.append(payload["error"])


@hookimpl
def mosaic_on_heartbeat(run: RunContext) -> dict[str, Any] | None:
    state = run.state.get(STATE_KEY)
    if state is None:
        return None
    status = _status(state)
    status.pop("slots", None)
    return {"fastlane": status}


@hookimpl
def mosaic_run_relay(run_id: str, extras: dict[str, Any], side: str) -> Any:
    """A run executed elsewhere (a launcher's node): its frames, relayed into our segment here."""
    if not settings.is_enabled(extras):
        return None
    from mosaic_fastlane import relay

    return relay.NodeFrames(run_id) if side == "node" else relay.CallerFrames(run_id)


@hookimpl
def mosaic_frame_source(run_dir: Path, extras: dict[str, Any]) -> Any:
    """A viewer's reader of the run's segment (the dashboard's live frames)."""
    from mosaic_fastlane.source import FastLaneSource

    return FastLaneSource(run_dir, extras)


@hookimpl
def mosaic_build_manifest(run: RunContext, status: str) -> dict[str, Any] | None:
    state = run.state.get(STATE_KEY)
    if state is None:
        return None
    section = _status(state)
    owner = state.owner
    section.update(
        interval_ms=state.settings.interval_ms,
        max_dim=state.settings.max_dim,
        errors=list(state.errors),
        replaced_stale=owner.replaced_stale if owner else None,
    )
    if state.settings.record_every:
        section["recorded_dir"] = "videos/fastlane"
    return {"fastlane": section}


@hookimpl
def mosaic_run_finished(run: RunContext, status: str) -> None:
    state = run.state.get(STATE_KEY)
    if state is not None and state.owner is not None:
        state.owner.remove()


@hookimpl
def mosaic_cli_commands() -> list:
    from mosaic_fastlane.cli import command

    return [command()]


# ------------------------------------------------------------------------------ training side
def _child_settings(env_index: int | None) -> settings.Settings | None:
    resolved = settings.Settings.from_env()
    return resolved if resolved is not None and resolved.publishes(env_index) else None


def _supports_rgb_array(env_id: str) -> bool:
    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    try:
        spec = gymnasium.spec(env_id)
        if spec.entry_point is None:
            return False
        creator = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
        return "rgb_array" in (getattr(creator, "metadata", {}).get("render_modes") or ())
    except Exception:  # an unknown env: gym.make reports it itself
        return False


def _frame_host() -> Any:
    """The plugin host of this training process, to call ``on_frame`` through."""
    from mosaic_core import child as child_module

    host = child_module.plugins()  # the host install() set up in this process
    if host is None:
        from mosaic_core.toolkit import plugin_host

        host = plugin_host()
    return host


@hookimpl
def mosaic_env_make_kwargs(
    child: ChildContext, env_id: str, env_index: int | None, kwargs: dict[str, Any]
) -> dict[str, Any] | None:
    # A render_mode the script chose always wins; an explicit None is gym.make's default, not a
    # choice, so FastLane still offers rgb_array (the host decides whether None may be filled in).
    if kwargs.get("render_mode") is not None or _child_settings(env_index) is None:
        return None
    return {"render_mode": "rgb_array"} if _supports_rgb_array(env_id) else None


@hookimpl
def mosaic_wrap_env(child: ChildContext, env: Any, env_id: str, env_index: int | None) -> Callable[[Any], Any] | None:
    resolved = _child_settings(env_index)
    if resolved is None or env_index is None:  # an env without an index never publishes
        return None
    from mosaic_fastlane.wrapper import EnvPublisher, FastLaneWrapper, active, is_wrapped, warn_once

    if is_wrapped(env) or env_index in active:
        return None
    if getattr(env, "render_mode", None) != "rgb_array":
        warn_once(
            child,
            "render-mode",
            f"env {env_index} ({env_id}) has render_mode={env.render_mode!r}, not 'rgb_array'; it publishes no frames",
        )
        return None
    host = _frame_host()

    def wrap(inner: Any) -> Any:
        publisher = EnvPublisher(
            child, resolved, env_index, inner.render, lambda frame, info: host.on_frame(child, frame, info)
        )
        return FastLaneWrapper(inner, publisher)

    return wrap


@hookimpl
def mosaic_host_lost(child: ChildContext) -> None:
    """The host died: remove the run's segment (it can no longer), if it is ours."""
    from mosaic_fastlane import trust

    resolved = settings.Settings.from_env()
    if resolved is None:
        return
    path = Path(resolved.shm_dir) / resolved.segment
    try:
        if trust.problem(os.lstat(path), os.geteuid()) is None:
            os.unlink(path)
    except FileNotFoundError:
        pass


@hookimpl
def mosaic_frame_wanted(child: ChildContext, env_index: int) -> bool | None:
    """A program that renders itself (``mosaic_core.child.frame_wanted``): is a frame due?"""
    resolved = _child_settings(env_index)
    if resolved is None or _wrapped_here(env_index):
        return None
    from mosaic_fastlane import direct

    return direct.wanted(resolved, env_index)


def _wrapped_here(env_index: int) -> bool:
    """Whether a ``gym.make``-wrapped env of this process publishes ``env_index`` itself."""
    import sys

    wrapper = sys.modules.get("mosaic_fastlane.wrapper")  # only ever loaded by a wrapped env
    return wrapper is not None and env_index in wrapper.active


@hookimpl
def mosaic_on_frame(child: ChildContext, frame: np.ndarray, info: FrameInfo) -> None:
    if _wrapped_here(info.env_index):
        from mosaic_fastlane.wrapper import active

        active[info.env_index].write(frame, info)
        return
    resolved = _child_settings(info.env_index)  # a frame the program published itself
    if resolved is not None:
        from mosaic_fastlane import direct

        direct.write(child, resolved, frame, info)


@hookimpl(specname="mosaic_on_frame")
def record_frame(child: ChildContext, frame: np.ndarray, info: FrameInfo) -> None:
    """Second consumer of the same hook: the PNG recorder (``extras.fastlane_record``)."""
    resolved = settings.Settings.from_env()
    if resolved is not None and resolved.record_every:
        from mosaic_fastlane.recorder import record

        record(child, frame, info, resolved.record_every)
