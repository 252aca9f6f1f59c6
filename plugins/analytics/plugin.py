"""Hook implementations of the analytics plugin.

Training process: every ``add_scalar`` goes into a :class:`~mosaic_analytics.bridge.ScalarBuffer`
that sends batches to the host; ``wandb.init`` is wrapped to carry the requested run name.
Host: batches feed a :class:`~mosaic_analytics.board.MetricBoard`, which is emitted as
``metrics`` events (at most every ``extras.metrics_interval_s``, default 1 s) and put in every
heartbeat; a progress bar follows the events at a terminal; at the end, the manifest sections
``tensorboard``, ``checkpoints``, ``videos``, ``metrics`` and, when relevant, ``wandb``,
and ``notes``; then MOSAIC's ``analytics.json`` (:mod:`~mosaic_analytics.analytics_json`), also
carried by the terminal event. CLI: ``mosaic runs``, ``mosaic plot``, ``mosaic tensorboard``.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from mosaic_analytics import analytics_json, bridge, extras, logdir, manifest, tracking
from mosaic_analytics.board import MetricBoard
from mosaic_core import hookimpl
from mosaic_core.toolkit import is_secret_key

STATE_KEY = "analytics"
MAX_SEEN_CHECKPOINTS = 1000


@dataclass
class RunAnalytics:
    """What the plugin keeps about one run on the host (``run.state["analytics"]``)."""

    board: MetricBoard
    interval: float
    progress: Any = None
    counted: Any = None  # what the run's progress counts (mosaic_core.runstore.summary.Progress)
    human: Any = None  # terminal.HumanLines when a person watches the run
    started: dict[str, Any] = field(default_factory=dict)  # the run_started payload
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    wandb: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def state(run: Any) -> RunAnalytics:
    current = run.state.get(STATE_KEY)
    if current is None:
        current = run.state.setdefault(
            STATE_KEY,
            RunAnalytics(
                board=MetricBoard(run.config.total_timesteps), interval=extras.metrics_interval(run.config.extras)
            ),
        )
    return current


# ------------------------------------------------------------------ command line
@hookimpl
def mosaic_cli_commands():
    from mosaic_analytics.cli import COMMANDS

    return list(COMMANDS)


@hookimpl
def mosaic_run_scalars(run_dir, tag):
    """A run's series from its TensorBoard files, as TensorBoard shows them (None when it wrote none)."""
    from mosaic_analytics.curves import scalar_points

    return scalar_points(run_dir, tag)


@hookimpl
def mosaic_private_run_folders():
    """W&B's own folder of the run (copies of the event files, its logs): not the run's artifacts."""
    return ["wandb"]


# ------------------------------------------------------------------ before a run
@hookimpl
def mosaic_extras_keys():
    return extras.OWNED


@hookimpl
def mosaic_validate_config(config):
    return extras.validate(config.extras) or None


@hookimpl
def mosaic_run_settings(config):
    """``extras.track_wandb: true`` -> :class:`TrackingSettings` for the worker to honour (the
    CleanRL worker's ``--track``); a worker that cannot track refuses the run."""
    settings = tracking.settings(config.extras)
    return [settings] if settings else None


@hookimpl
def mosaic_child_env(run):
    return tracking.child_env(run.run_dir, run.config.extras, resumed=run.resume is not None)


@hookimpl
def mosaic_run_started(run):
    from mosaic_analytics import progress
    from mosaic_core.runstore.summary import progress_of

    current = state(run)
    if extras.tracking_enabled(run.config.extras):
        mode, why = tracking.resolve_mode(run.config.extras, dict(os.environ))
        if mode == "offline" and why.startswith("no W&B credential"):
            print(
                f"mosaic: note: W&B runs offline ({why}); its files go to {run.run_dir / 'wandb'}, "
                "`wandb sync` uploads them later",
                file=sys.stderr,
            )
    counted = current.counted = progress_of(current.started, run.config.total_timesteps)
    if run.resume is not None and counted.unit == "steps":
        _resume_board(run, current.board)
    if progress.wanted(run.quiet):
        current.progress = progress.ProgressView(run.run_id, counted.total, counted.unit)
        if current.board.has_data:  # a resume: the bar and its average go on from where they were
            current.progress.update(current.board.snapshot())
    if run.human and not run.quiet:
        from mosaic_analytics.terminal import HumanLines

        view = current.progress
        current.human = HumanLines(run, view.print if view is not None else None)
        current.human.opening(counted)


def _resume_board(run: Any, board: MetricBoard) -> None:
    """A resumed run's board starts where its earlier attempts left it at the checkpoint: that
    step, and the episodes they recorded up to it (their one history; what the last attempt did
    past the checkpoint is not the run's), so the moving average covers the run's last episodes."""
    from mosaic_core.runstore.score import episode_returns

    step = run.resume.checkpoint.step
    if not isinstance(step, int) or step < 0:
        return
    try:
        returns = [value for at, value in episode_returns(run.run_dir) if at <= step]
    except Exception as exc:  # unreadable records cost the average its past, never the run
        print(
            f"mosaic: note: the earlier attempts' episodes could not be read ({exc}); the moving average starts afresh",
            file=sys.stderr,
        )
        returns = []
    board.resume_from(step, returns)


# ------------------------------------------------------------------ while it trains
@hookimpl
def mosaic_on_child_message(run, kind, payload):
    if kind == bridge.MESSAGE_KIND:
        current = state(run)
        if current.board.update(payload) and run.emitter is not None:
            snapshot = current.board.take_due(current.interval)
            if snapshot is not None:
                run.emit("metrics", snapshot)
    elif kind == tracking.INFO_KIND:
        current = state(run)
        current.wandb = {k: v for k, v in payload.items() if isinstance(v, (str, bool)) and not is_secret_key(k)}


@hookimpl
def mosaic_on_event(run, event):
    name, payload = event.get("event"), event.get("payload") or {}
    current = state(run)
    if name == "run_started":  # emitted before mosaic_run_started: what the run counts comes from it
        current.started = payload
    if name == "checkpoint_saved" and isinstance(payload.get("path"), str):
        step = payload.get("global_step", payload.get("step"))
        with current.lock:
            if len(current.checkpoints) < MAX_SEEN_CHECKPOINTS:
                current.checkpoints.append({"path": payload["path"], "step": step if isinstance(step, int) else None})
    if current.human is not None:
        current.human.on_event(name, payload, current.board.snapshot())
    view = current.progress
    if view is None:
        return
    if name == "metrics":
        view.update(payload)
    elif current.counted is not None and name == current.counted.event:  # e.g. an evaluation's episodes
        view.update_episodes(payload.get("episodes_done"), payload.get("episodes_total"))
    elif name == "heartbeat" and isinstance(payload.get("metrics"), dict):
        view.update(payload["metrics"])
    elif name in ("run_completed", "run_failed", "run_cancelled"):
        view.finish(name.removeprefix("run_"))


@hookimpl
def mosaic_on_heartbeat(run):
    current = state(run)
    # Values that arrived within the interval after the last `metrics` event were held back by it; if
    # no batch comes after them (a run's last iteration, a slow one's), they go out now, not at the end.
    held = current.board.take_due(current.interval) if run.emitter is not None else None
    if held is not None:
        run.emit("metrics", held)
    return {"metrics": current.board.snapshot()}


# ------------------------------------------------------------------ after the run
def _secrets(run: Any) -> list[str]:
    found = [v for k, v in run.config.extras.items() if is_secret_key(k) and isinstance(v, str) and len(v) >= 4]
    key = os.environ.get("WANDB_API_KEY")
    return found + ([key] if key and len(key) >= 4 else [])


@hookimpl
def mosaic_build_manifest(run, status):
    from mosaic_core.runstore import artifacts

    current = state(run)
    final = current.board.take_pending()
    if final is not None and run.emitter is not None:
        run.emit("metrics", final)  # the last values, before the terminal event
    config_extras = run.config.extras
    with current.lock:
        seen = list(current.checkpoints)
    sections = artifacts.scan(run.directory, seen)
    for key, section in (("tensorboard_dir", "tensorboard"), ("checkpoints_dir", "checkpoints")):
        if isinstance(config_extras.get(key), str):
            sections[section]["dir"] = artifacts.inside(run.directory, config_extras[key])
    metrics = current.board.snapshot()
    metrics["source"] = "live" if current.board.has_data else "none"
    sections["metrics"] = metrics
    wandb = tracking.manifest_section(run.run_dir, config_extras, current.wandb)
    if wandb is not None:
        sections["wandb"] = wandb
    if isinstance(config_extras.get("notes"), str):
        sections["notes"] = config_extras["notes"]
    return manifest.scrub(sections, _secrets(run))


@hookimpl
def mosaic_terminal_payload(run, status, manifest):
    """`analytics.json`, MOSAIC's analytics manifest, is written beside `manifest.json` at the end of
    every run, whatever its status, and the terminal event's payload carries the same document
    (MOSAIC's `run_completed` payload was that manifest): `artifacts.tensorboard` (the run's
    TensorBoard directory: `extras.tensorboard_dir`, else the folder holding the event files the
    worker wrote), `artifacts.wandb` (`extras.wandb_run_path`, `wandb_entity`,
    `wandb_project_name`/`wandb_project`, else what the run's W&B folder shows), `artifacts.optuna`
    (`extras.optuna_db`), `artifacts.checkpoints` (`extras.checkpoints_dir`, else the run's
    `checkpoints/`, with every checkpoint file and its step), MOSAIC's flat fields and `notes`.
    Paths are absolute, under the run directory (`relative_path`: relative to it); a configured path
    that resolves outside the run directory is left out with an `error` line. No secret. In the
    event, `checkpoints.files` keeps the newest 20 and `tensorboard.event_dirs` the first 20
    (`files_total`: how many the file lists), and notes their first 2,000 characters. For a PPO run
    with `{"tensorboard_dir": "tb", "checkpoints_dir": "ckpt", "optuna_db": "sqlite:///study.db",
    "track_wandb": true, "wandb_entity": "team", "wandb_project_name": "demo", "notes": "lr sweep"}`
    in `var/trainer/runs/RUN`:

    ```json
    {
      "run_id": "RUN",
      "status": "completed",
      "artifacts": {
        "tensorboard": {
          "enabled": true,
          "log_dir": "/home/me/var/trainer/runs/RUN/tb",
          "relative_path": "tb",
          "event_dirs": ["tb/CartPole-v1__ppo__1__1767225600"],
          "event_files": 1
        },
        "wandb": {
          "enabled": true,
          "run_path": "team/demo/1a2b3c4d",
          "run_id": "1a2b3c4d",
          "entity": "team",
          "project": "demo",
          "mode": "offline",
          "offline_dir": "/home/me/var/trainer/runs/RUN/wandb/offline-run-20260101_000000-1a2b3c4d"
        },
        "optuna": {
          "enabled": true,
          "db_path": "/home/me/var/trainer/runs/RUN/study.db",
          "relative_path": "study.db",
          "exists": true
        },
        "checkpoints": {
          "enabled": true,
          "dir": "/home/me/var/trainer/runs/RUN/ckpt",
          "relative_path": "ckpt",
          "files": [{"path": "/home/me/var/trainer/runs/RUN/ckpt/step_2048.cleanrl_model", "step": 2048}],
          "files_total": 1
        }
      },
      "tensorboard_dir": "/home/me/var/trainer/runs/RUN/tb",
      "wandb_run_path": "team/demo/1a2b3c4d",
      "optuna_db_path": "/home/me/var/trainer/runs/RUN/study.db",
      "checkpoints_dir": "/home/me/var/trainer/runs/RUN/ckpt",
      "notes": "lr sweep"
    }
    ```
    """
    document = analytics_json.document(run.run_dir, run.run_id, status, run.config.extras, manifest)
    document = analytics_json.scrubbed(document, _secrets(run))
    analytics_json.write(run.run_dir, document)
    return analytics_json.for_event(document)


@hookimpl
def mosaic_check_run(run_dir):
    return analytics_json.check(run_dir) or None


@hookimpl
def mosaic_run_finished(run, status):
    view = state(run).progress
    if view is not None:
        view.finish(status)


# ------------------------------------------------------------------ training process
@hookimpl
def mosaic_child_setup(child):
    tracking.install_init_wrapper(child)
    logdir.install(child)


@hookimpl
def mosaic_on_scalar(child, tag, value, step, agent):
    # A multi-agent run's per-agent values are series of their own (``agents/<id>/<tag>``),
    # never mixed into the run's (team's) series of the same tag.
    (bridge._buffer or bridge.buffer_for(child)).add(tag if agent is None else f"agents/{agent}/{tag}", value, step)


@hookimpl
def mosaic_scalars_reported(child):
    if bridge._buffer is not None:  # a burst ended: its values go to the host now, not with the next burst
        bridge._buffer.flush()
