"""MOSAIC's documented curriculum and evaluation runs of the CleanRL worker, as a library:
:func:`run_curriculum_training` and :func:`run_batched_evaluation`, a supervised run of the worker
in curriculum mode or ``policy_eval`` mode (:class:`cleanrl_worker.runtime.CleanRLWorkerRuntime`,
the same pipeline as ``mosaic run``); each returns MOSAIC's five fields plus the run directory.
MOSAIC's presets are importable here as they were, :data:`BABYAI_GOTO_CURRICULUM` and
:data:`BABYAI_DOORKEY_CURRICULUM` (copies of the curriculum plugin's, asked through its
``mosaic_curriculum_presets`` hook); its task wrappers are ``mosaic_curriculum.tasks``'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic_core import UsageError, WorkerConfig

PRESET_NAMES = {"BABYAI_GOTO_CURRICULUM": "babyai_goto", "BABYAI_DOORKEY_CURRICULUM": "doorkey"}
__all__ = ["run_curriculum_training", "run_batched_evaluation", *PRESET_NAMES]


def __getattr__(name: str) -> Any:
    """MOSAIC's preset constants, from the installed curriculum plugin (a fresh copy each time)."""
    preset = PRESET_NAMES.get(name)
    if preset is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from mosaic_core.toolkit import plugin_host

    for _plugin, presets, _error in plugin_host().provided("mosaic_curriculum_presets"):
        if isinstance(presets, dict) and preset in presets:
            return presets[preset]
    raise AttributeError(f"{name}: the curriculum plugin (its preset {preset!r}) is not installed or is disabled")


def _run(config: WorkerConfig, extras: dict[str, Any], runs_dir: str | Path | None, quiet: bool) -> dict[str, Any]:
    from cleanrl_worker.runtime import CleanRLWorkerRuntime

    runtime = CleanRLWorkerRuntime(config.with_overrides(extras=extras), runs_dir=runs_dir, quiet=quiet)
    summary = runtime.run()
    summary["run_dir"] = str(runtime.run_dir)
    return summary


def run_curriculum_training(
    config: WorkerConfig,
    schedule: str | list[dict[str, Any]] | None = None,
    *,
    runs_dir: str | Path | None = None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Train ``config`` stage by stage (``schedule``: a preset name or stage list; default the
    config's own schedule, else the ``babyai_goto`` preset)."""
    key = _schedule_key()
    schedule = schedule or config.extras.get(key) or "babyai_goto"
    return _run(config, {key: schedule}, runs_dir, quiet)


def _schedule_key() -> str:
    """The extras key that asks for env switches during a run, as the plugin that switches them
    declares it (``ExtrasKey(switches_envs=True)``: the curriculum plugin's schedule)."""
    from mosaic_core.toolkit import plugin_host

    for _plugin, key in plugin_host().extras_keys():
        if key.switches_envs and not key.prefix:
            return key.name
    raise UsageError(
        "no installed plugin switches envs during a run (the curriculum plugin is not installed or is disabled)"
    )


def run_batched_evaluation(
    config: WorkerConfig,
    policy_path: str | Path | None = None,
    *,
    episodes: int | None = None,
    batch_size: int | None = None,
    runs_dir: str | Path | None = None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Evaluate a checkpoint (``policy_path``, else ``extras.policy_path``) in ``policy_eval`` mode:
    ``episodes`` per round, ``batch_size`` played in parallel; results in ``eval_summary.json``."""
    extras: dict[str, Any] = {"mode": "policy_eval"}
    for key, value in (
        ("policy_path", str(policy_path) if policy_path else None),
        ("eval_episodes", episodes),
        ("eval_batch_size", batch_size),
    ):
        if value is not None:
            extras[key] = value
    return _run(config, extras, runs_dir, quiet)
