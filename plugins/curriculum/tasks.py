"""The curriculum as a library, for a training loop of one's own: the presets as stage lists, and
task wrappers that switch envs at run time (runs of a worker need neither: the plugin swaps envs
itself, :class:`~mosaic_curriculum.wrapper.CurriculumEnv`).

- ``BABYAI_GOTO_CURRICULUM`` / ``BABYAI_DOORKEY_CURRICULUM``: the presets
  (:data:`mosaic_curriculum.schedule.PRESETS`) as stage lists, for ``extras.curriculum_schedule``.
- :class:`ReinitTaskWrapper` (Syllabus-RL's interface: ``change_task`` / ``reset(new_task=...)``
  rebuild the inner env with ``env_fn(task)``) and :class:`BabyAITaskWrapper`, its subclass that
  switches between BabyAI/MiniGrid env ids.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from mosaic_curriculum.schedule import PRESETS, load_schedule
from mosaic_curriculum.spaces import check_stage_spaces, make_env

__all__ = ["BABYAI_GOTO_CURRICULUM", "BABYAI_DOORKEY_CURRICULUM", "ReinitTaskWrapper", "BabyAITaskWrapper"]

BABYAI_GOTO_CURRICULUM: list[dict[str, Any]] = copy.deepcopy(PRESETS["babyai_goto"])
BABYAI_DOORKEY_CURRICULUM: list[dict[str, Any]] = copy.deepcopy(PRESETS["doorkey"])


class ReinitTaskWrapper(gym.Wrapper):
    """Rebuilds its env for a new task: ``env_fn(task)`` makes it, the old one is closed."""

    def __init__(self, env: gym.Env, env_fn: Callable[[Any], gym.Env], task_space: gym.Space | None = None):
        super().__init__(env)
        self.env_fn, self.task_space = env_fn, task_space
        self.task: Any = None

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
        super().__init__(
            env or make_env(self.env_ids[0], **make_kwargs),
            lambda task: make_env(self.env_ids[task], **make_kwargs),
            gym.spaces.Discrete(len(self.env_ids)),
        )
        self.observation_space, self.action_space = self.env.observation_space, self.env.action_space
        self.task = 0

    @property
    def env_id(self) -> str:
        return self.env_ids[self.task]
