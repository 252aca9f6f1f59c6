"""Curriculum schedules: stages, stopping conditions and built-in presets.

A schedule is ``extras.curriculum_schedule``: either a preset name (see :data:`PRESETS`)
or a list of stages, each an object with

- ``env_id`` (required): the environment id of the stage;
- ``until``: a stopping condition (below), or ``steps``: N, short for ``"until": "steps>=N"``
  (give one of the two; neither means ``steps>=100000``);
- ``return_window`` (optional, default 100): how many of the stage's most recent episodes
  the ``episode_return`` condition averages.

A condition is one or more clauses joined by ``|`` (any clause fires it)::

    steps>=N            environment steps taken in this stage, summed over all sub-envs
    episodes>=N         episodes finished in this stage, summed over all sub-envs
    episode_return>=X   mean return of the stage's last ``return_window`` episodes; it is
                        only evaluated once that many episodes have finished in the stage,
                        so a few lucky episodes cannot end a stage

The syntax is the ``>=``/``|`` subset of Syllabus-RL's ``SequentialCurriculum`` conditions,
so schedules carry over. Counting starts afresh in each stage. Steps are ``env.step`` calls,
as CleanRL's ``global_step`` counts them (under gymnasium 1.x a vector step that only resets
an ended env is not one). The envs report every 64 of their steps, so a condition is seen
at most ``64 * num_envs`` steps late. The last stage has no end:
it runs until ``total_timesteps`` (a condition given to it never fires).

This module is pure (no gymnasium, no numpy) so the host CLI can import it cheaply.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

SCHEDULE_KEY = "curriculum_schedule"
WHERE = f"extras.{SCHEDULE_KEY}"
METRICS = ("steps", "episodes", "episode_return")
DEFAULT_UNTIL = "steps>=100000"
DEFAULT_RETURN_WINDOW = 100
STAGE_KEYS = ("env_id", "until", "steps", "return_window")

_CLAUSE = re.compile(r"^\s*([A-Za-z_]+)\s*>=\s*(\S+?)\s*$")
_INTEGER = re.compile(r"^\d+$")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


@dataclass(frozen=True)
class Clause:
    """One ``metric>=threshold`` test."""

    metric: str
    threshold: int | float  # int for steps/episodes, float for episode_return

    def __str__(self) -> str:
        return f"{self.metric}>={self.threshold!r}"


@dataclass(frozen=True)
class Condition:
    """Clauses joined by OR; :meth:`fired` returns the first one that holds."""

    clauses: tuple[Clause, ...]

    def __str__(self) -> str:
        return "|".join(str(c) for c in self.clauses)

    def fired(self, progress: StageProgress) -> Clause | None:
        for clause in self.clauses:
            if progress.reaches(clause):
                return clause
        return None


class ConditionError(ValueError):
    """A condition string that does not parse; the message says what is wrong."""


def parse_condition(text: Any) -> Condition:
    """Parse ``"steps>=5000|episode_return>=0.9"``; raises :class:`ConditionError`."""
    if not isinstance(text, str):
        raise ConditionError(f"must be a string like 'steps>=100000', got {type(text).__name__}")
    if not text.strip():
        raise ConditionError("is empty; write e.g. 'steps>=100000'")
    if "&" in text:
        raise ConditionError("'&' (AND) is not supported: a condition is clauses joined by '|' (OR)")
    clauses = []
    for part in text.split("|"):
        match = _CLAUSE.match(part)
        if not match:
            raise ConditionError(f"{part.strip()!r} is not 'metric>=value' (metrics: {', '.join(METRICS)})")
        metric, value = match.groups()
        if metric not in METRICS:
            raise ConditionError(f"unknown metric {metric!r} in {part.strip()!r} (use {', '.join(METRICS)})")
        if metric == "episode_return":
            if not _NUMBER.match(value):
                raise ConditionError(f"{value!r} in {part.strip()!r} is not a number")
            threshold = float(value)
        else:
            if not _INTEGER.match(value):
                raise ConditionError(f"{value!r} in {part.strip()!r} is not a whole number >= 0")
            threshold = int(value)
        clauses.append(Clause(metric, threshold))
    return Condition(tuple(clauses))


@dataclass(frozen=True)
class Stage:
    index: int
    env_id: str
    until: Condition
    return_window: int = DEFAULT_RETURN_WINDOW

    def to_dict(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "until": str(self.until), "return_window": self.return_window}


@dataclass(frozen=True)
class Schedule:
    stages: tuple[Stage, ...]
    preset: str | None = None

    def is_last(self, index: int) -> bool:
        return index >= len(self.stages) - 1

    def stage(self, index: int) -> Stage:
        """The stage at ``index``, clamped into the schedule."""
        return self.stages[max(0, min(index, len(self.stages) - 1))]

    def to_dict(self) -> dict[str, Any]:
        stages = [s.to_dict() for s in self.stages]
        stages[-1]["until"] = None  # the last stage runs to the end of training
        return {"preset": self.preset, "stages": stages}


@dataclass
class StageProgress:
    """What has happened in one stage so far, summed over every sub-env of the run."""

    return_window: int = DEFAULT_RETURN_WINDOW
    steps: int = 0
    episodes: int = 0
    returns: deque = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.returns = deque(self.returns, maxlen=self.return_window)

    def add(self, steps: int, episodes: int, returns: list[float]) -> None:
        self.steps += steps
        self.episodes += episodes
        self.returns.extend(returns)

    @property
    def mean_return(self) -> float | None:
        return sum(self.returns) / len(self.returns) if self.returns else None

    def reaches(self, clause: Clause) -> bool:
        if clause.metric == "steps":
            return self.steps >= clause.threshold
        if clause.metric == "episodes":
            return self.episodes >= clause.threshold
        if len(self.returns) < self.return_window:
            return False
        return self.mean_return >= clause.threshold  # type: ignore[operator]


def _preset(*stages: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"env_id": env_id, "until": until} if until else {"env_id": env_id} for env_id, until in stages]


#: Built-in schedules. A stage ends when the agent is good at it (mean return of the last
#: 100 episodes; MiniGrid/BabyAI returns are 1 - 0.9 * steps/max_steps on success, else 0)
#: or after a step budget, whichever comes first.
PRESETS: dict[str, list[dict[str, Any]]] = {
    "babyai_goto": _preset(
        ("BabyAI-GoToRedBallNoDists-v0", "episode_return>=0.8|steps>=200000"),
        ("BabyAI-GoToRedBall-v0", "episode_return>=0.8|steps>=300000"),
        ("BabyAI-GoToObj-v0", "episode_return>=0.8|steps>=300000"),
        ("BabyAI-GoToLocal-v0", ""),
    ),
    "doorkey": _preset(
        ("MiniGrid-DoorKey-5x5-v0", "episode_return>=0.8|steps>=200000"),
        ("MiniGrid-DoorKey-6x6-v0", "episode_return>=0.8|steps>=300000"),
        ("MiniGrid-DoorKey-8x8-v0", "episode_return>=0.8|steps>=500000"),
        ("MiniGrid-DoorKey-16x16-v0", ""),
    ),
}


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _parse_stage(index: int, raw: Any, problems: list[str]) -> Stage | None:
    where = f"{WHERE}[{index}]"
    if not isinstance(raw, dict):
        problems.append(
            f'{where}: a stage must be an object like {{"env_id": "CartPole-v1", "steps": 10000}}, '
            f"got {type(raw).__name__}"
        )
        return None
    before = len(problems)
    for key in sorted(set(raw) - set(STAGE_KEYS), key=str):
        problems.append(f"{where}.{key}: unknown key (allowed: {', '.join(STAGE_KEYS)})")
    env_id = raw.get("env_id")
    if not isinstance(env_id, str) or not env_id.strip():
        problems.append(f"{where}.env_id: required, a non-empty string (got {env_id!r})")
    until = DEFAULT_UNTIL
    if "steps" in raw and "until" in raw:
        problems.append(f"{where}: give 'steps' or 'until', not both (write both in 'until' joined by '|')")
    elif "steps" in raw:
        if not _positive_int(raw["steps"]):
            problems.append(f"{where}.steps: must be an integer > 0, got {raw['steps']!r}")
        else:
            until = f"steps>={raw['steps']}"
    elif "until" in raw:
        until = raw["until"]
    try:
        condition = parse_condition(until)
    except ConditionError as exc:
        problems.append(f"{where}.until: {exc}")
        condition = None
    window = raw.get("return_window", DEFAULT_RETURN_WINDOW)
    if not _positive_int(window):
        problems.append(f"{where}.return_window: must be an integer > 0, got {window!r}")
    if len(problems) > before:
        return None
    return Stage(index, env_id.strip(), condition, window)  # type: ignore[arg-type,union-attr]


def parse_schedule(value: Any) -> tuple[Schedule | None, list[str]]:
    """Resolve a preset name or parse a list of stages; returns (schedule, problems)."""
    preset = None
    if isinstance(value, str):
        if value not in PRESETS:
            return None, [f"{WHERE}: unknown preset {value!r} (presets: {', '.join(sorted(PRESETS))})"]
        preset, value = value, PRESETS[value]
    if not isinstance(value, list):
        return None, [
            f"{WHERE}: must be a preset name ({', '.join(sorted(PRESETS))}) or a list of stages, "
            f"got {type(value).__name__}"
        ]
    if not value:
        return None, [f"{WHERE}: the list of stages is empty; give at least one stage"]
    problems: list[str] = []
    stages = [_parse_stage(i, raw, problems) for i, raw in enumerate(value)]
    if problems:
        return None, problems
    return Schedule(tuple(stages), preset), []  # type: ignore[arg-type]


def load_schedule(value: Any) -> Schedule:
    """Like :func:`parse_schedule` for a schedule already validated; raises ValueError."""
    schedule, problems = parse_schedule(value)
    if schedule is None:
        raise ValueError("; ".join(problems))
    return schedule


def first_env_id(extras: dict[str, Any]) -> str | None:
    """The env id of the first stage when ``extras`` holds a valid schedule, else None.

    For the host CLI: with a schedule, the script's ``--env-id`` is the first stage's env.
    """
    if SCHEDULE_KEY not in extras:
        return None
    schedule, _ = parse_schedule(extras[SCHEDULE_KEY])
    return schedule.stages[0].env_id if schedule else None
