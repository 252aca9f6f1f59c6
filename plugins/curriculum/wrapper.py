"""The training-process side: an env wrapper that plays the run's current stage.

:class:`CurriculumEnv` sits directly on the env ``gym.make`` built for stage 0 (beneath the
script's wrappers and other plugins'), so it works the same in ``SyncVectorEnv`` and in
``AsyncVectorEnv``'s env processes. At every ``reset`` it reads the stage word the host
writes (:mod:`mosaic_curriculum.stagefile`); when the stage has changed it makes the new
stage's env with the same ``gym.make`` keyword arguments and swaps it in. The training loop
and the algorithm script never notice: spaces are checked to match before the run starts.

``step`` only counts (steps, episodes, their returns); every :data:`REPORT_EVERY` steps it
sends the counts to the host (one datagram of ~20 us, a fraction of a microsecond per step),
which adds up all envs and decides. At those same points (never on every step) it looks at
the stage word: an episode still running on the old stage is truncated there, so every env
switches within ``REPORT_EVERY`` steps of the decision even when episodes are long
(DoorKey-16x16 allows 2560 steps). A report the channel drops is kept and sent with the next (or at a reset
with no step since the last: a program that waits for a stage).
Determinism: a stage env is first reset with ``seed + SEED_STRIDE * stage`` when the script
seeded this env (CleanRL does, at its first reset), unseeded otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from mosaic_curriculum.schedule import Schedule
from mosaic_curriculum.spaces import make_env

REPORT_EVERY = 64  # env steps between reports (and stage checks) of one env
MAX_PENDING_RETURNS = 1000  # returns kept while the host cannot be reached
SEED_STRIDE = 10_000

Publish = Callable[[dict[str, Any], bool], bool]


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays: treat as different, so the value is passed on
        return False


def passed_kwargs(env: Any, env_id: str) -> dict[str, Any]:
    """The keyword arguments the ``gym.make`` call that built ``env`` passed to the env.

    The env's spec holds the registered defaults merged with what was passed (by the script
    and by plugins such as FastLane's ``render_mode``); the registered defaults of stage 0
    (e.g. MiniGrid's ``size``) must not follow the run to the next stage, so they are left out.
    """
    spec = getattr(env, "spec", None)
    made = dict(getattr(spec, "kwargs", None) or {})
    try:
        registered = gym.spec(env_id).kwargs or {}
    except Exception:
        registered = {}
    return {k: v for k, v in made.items() if k not in registered or not _same(registered[k], v)}


class CurriculumEnv(gym.Wrapper):
    """Plays the stage the host has chosen; swaps the inner env at a reset when it changes."""

    def __init__(
        self,
        env: Any,
        schedule: Schedule,
        read_stage: Callable[[], int],
        publish: Publish,
        make_kwargs: dict[str, Any] | None = None,
    ):
        super().__init__(env)
        # Stage 0's spaces for the whole run: outer wrappers and vector envs were built on them.
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self._schedule = schedule
        self._read_stage = read_stage
        self._publish = publish
        self._make_kwargs = dict(make_kwargs or {})
        self.stage = 0
        self._seed: int | None = None
        self._until_check = REPORT_EVERY
        self._steps = 0
        self._episodes = 0
        self._returns: list[float] = []
        self._episode_return = 0.0
        self._undelivered = False  # the last report was dropped (the host behind)
        self._stepped = False  # since the last reset

    @property
    def curriculum_env_id(self) -> str:
        return self._schedule.stages[self.stage].env_id

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed is not None and self._seed is None:
            self._seed = int(seed)
        if self._undelivered and not self._stepped:  # a program resetting without stepping waits for a
            self._report()  # stage: the counts kept may be what the host's decision waits for
        self._stepped = False
        target = self._target_stage()
        if target != self.stage:
            self._report()  # what was counted belongs to the stage being left
            self._switch(target)
            if seed is None and self._seed is not None:
                seed = self._seed + SEED_STRIDE * target
        self._episode_return = 0.0
        return self.env.reset(seed=seed, options=options)

    def _switch(self, target: int) -> None:
        env_id = self._schedule.stages[target].env_id
        try:
            new_env = make_env(env_id, **self._make_kwargs)
        except Exception as exc:
            raise RuntimeError(f"curriculum stage {target}: cannot make {env_id!r}: {exc}") from exc
        old, self.env, self.stage = self.env, new_env, target
        self._cached_spec = None
        old.close()

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        self._stepped = True
        self._episode_return += float(reward)
        self._until_check -= 1
        check = self._until_check <= 0
        if check and not (terminated or truncated) and self._target_stage() != self.stage:
            truncated = True  # end the old stage's episode now: the reset that follows switches
        if terminated or truncated:
            self._episodes += 1
            self._returns.append(self._episode_return)
            self._episode_return = 0.0
        if check:
            self._until_check = REPORT_EVERY  # also after a dropped report: no retry on every step
            self._report()
        return obs, reward, terminated, truncated, info

    def _target_stage(self) -> int:
        return min(self._read_stage(), len(self._schedule.stages) - 1)

    def _report(self, reliable: bool = False) -> None:
        """Send the counts since the last delivered report; keep them if this one is dropped."""
        if not self._steps and not self._episodes:
            return
        payload = {
            "stage": self.stage,
            "steps": self._steps,
            "episodes": self._episodes,
            "returns": self._returns[-MAX_PENDING_RETURNS:],
        }
        self._undelivered = not self._publish(payload, reliable)
        if not self._undelivered:
            self._steps, self._episodes, self._returns = 0, 0, []
        elif len(self._returns) > MAX_PENDING_RETURNS:
            del self._returns[:-MAX_PENDING_RETURNS]

    def close(self) -> None:
        self._report(reliable=True)
        super().close()
