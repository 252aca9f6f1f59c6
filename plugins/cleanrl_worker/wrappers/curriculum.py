"""MOSAIC's documented curriculum and evaluation names, as a library over what runs here.

- ``BABYAI_GOTO_CURRICULUM`` / ``BABYAI_DOORKEY_CURRICULUM``: the curriculum plugin's presets
  (:data:`mosaic_curriculum.schedule.PRESETS`) as stage lists, for ``extras.curriculum_schedule``.
- :class:`ReinitTaskWrapper` (Syllabus-RL's interface: ``change_task`` / ``reset(new_task=...)``
  rebuild the inner env with ``env_fn(task)``) and :class:`BabyAITaskWrapper`, its subclass that
  switches between BabyAI/MiniGrid env ids, for a training loop of one's own. Runs of the worker
  need neither: the curriculum plugin swaps envs itself (``CurriculumEnv``).
- :func:`run_curriculum_training` and :func:`run_batched_evaluation`: a supervised run of the
  worker in curriculum mode or ``policy_eval`` mode (:class:`cleanrl_worker.runtime.CleanRLWorkerRuntime`,
  the same pipeline as ``mosaic run``); each returns MOSAIC's five fields plus the run directory.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable, Sequence

import gymnasium as gym

from mosaic_core import WorkerConfig
from mosaic_curriculum.schedule import PRESETS, load_schedule
from mosaic_curriculum.spaces import check_stage_spaces, make_env

__all__ = ["BABYAI_GOTO_CURRICULUM", "BABYAI_DOORKEY_CURRICULUM", "ReinitTaskWrapper", "BabyAITaskWrapper",
           "run_curriculum_training", "run_batched_evaluation"]

BABYAI_GOTO_CURRICULUM: list[dict[str, Any]] = copy.deepcopy(PRESETS["babyai_goto"])
BABYAI_DOORKEY_CURRICULUM: list[dict[str, Any]] = copy.deepcopy(PRESETS["doorkey"])


class ReinitTaskWrapper(gym.Wrapper):
    """Rebuilds its env for a new task: ``env_fn(task)`` makes it, the old one is closed."""

    def __init__(self, env: gym.Env, env_fn: Callable[[Any], gym.Env], task_space: gym.Space | None = None):
        super().__init__(env)
        self.env_fn, self.task_space, self.task = env_fn, task_space, None

    def change_task(self, new_task: Any) -> None:
        if self.task_space is not None and not self.task_space.contains(new_task):
            raise ValueError(f"task {new_task!r} is not in the task space {self.task_space}")
        old, self.env, self.task = self.env, self.env_fn(new_task), new_task
        old.close()

    def reset(self, *, new_task: Any = None, seed: int | None = None, options: dict[str, Any] | None = None):
        if new_task is not None:
            self.change_task(new_task)
        return self.env.reset(seed=seed, options=options)


class BabyAITaskWrapper(ReinitTaskWrapper):
    """Switches between BabyAI/MiniGrid envs at run time; a task is an index into ``env_ids``.

    The observation and action spaces stay those of ``env_ids[0]`` (the agent was built for
    them); every id is checked against them up front, as the curriculum plugin checks a schedule.
    """

    def __init__(self, env_ids: Sequence[str] | None = None, env: gym.Env | None = None, **make_kwargs: Any):
        self.env_ids = list(env_ids or [stage["env_id"] for stage in BABYAI_GOTO_CURRICULUM])
        problems = check_stage_spaces(load_schedule([{"env_id": env_id} for env_id in self.env_ids]))
        if problems:  # an id that cannot be made, or spaces that differ from the first env's
            raise ValueError("; ".join(problems))
        super().__init__(env or make_env(self.env_ids[0], **make_kwargs),
                         lambda task: make_env(self.env_ids[task], **make_kwargs),
                         gym.spaces.Discrete(len(self.env_ids)))
        self.observation_space, self.action_space = self.env.observation_space, self.env.action_space
        self.task = 0

    @property
    def env_id(self) -> str:
        return self.env_ids[self.task]


def _run(config: WorkerConfig, extras: dict[str, Any], runs_dir: str | Path | None, quiet: bool) -> dict[str, Any]:
    from cleanrl_worker.runtime import CleanRLWorkerRuntime

    runtime = CleanRLWorkerRuntime(config.with_overrides(extras=extras), runs_dir=runs_dir, quiet=quiet)
    summary = runtime.run()
    summary["run_dir"] = str(runtime.run_dir)
    return summary


def run_curriculum_training(config: WorkerConfig, schedule: str | list[dict[str, Any]] | None = None, *,
                            runs_dir: str | Path | None = None, quiet: bool = True) -> dict[str, Any]:
    """Train ``config`` stage by stage (``schedule``: a preset name or stage list; default the
    config's ``extras.curriculum_schedule``, else :data:`BABYAI_GOTO_CURRICULUM`)."""
    schedule = schedule or config.extras.get("curriculum_schedule") or BABYAI_GOTO_CURRICULUM
    return _run(config, {"curriculum_schedule": schedule}, runs_dir, quiet)


def run_batched_evaluation(config: WorkerConfig, policy_path: str | Path | None = None, *, episodes: int | None = None,
                           batch_size: int | None = None, runs_dir: str | Path | None = None,
                           quiet: bool = True) -> dict[str, Any]:
    """Evaluate a checkpoint (``policy_path``, else ``extras.policy_path``) in ``policy_eval`` mode:
    ``episodes`` per round, ``batch_size`` played in parallel; results in ``eval_summary.json``."""
    extras: dict[str, Any] = {"mode": "policy_eval"}
    for key, value in (("policy_path", str(policy_path) if policy_path else None), ("eval_episodes", episodes),
                       ("eval_batch_size", batch_size)):
        if value is not None:
            extras[key] = value
    return _run(config, extras, runs_dir, quiet)
