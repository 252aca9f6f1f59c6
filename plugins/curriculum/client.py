"""The curriculum for training programs whose envs bypass ``gym.make`` (EnvPool, an env runner of
their own): the stage the host chose, and reports of the steps and episodes played. Programs get it
through the core's :func:`mosaic_core.child.env_switch` (the plugin's ``mosaic_env_switch``)::

    switch = child.env_switch()             # None outside a MOSAIC run in curriculum mode
    envs = make(switch.env_id(switch.stage()) if switch else env_id)
    ...                                     # after each rollout:
    switch.report(stage, steps=n, returns=[...]); switch.stage() != stage -> make the new stage's envs

The reports are the ones :class:`~mosaic_curriculum.wrapper.CurriculumEnv` sends, so the host
decides the same way (conditions, events, the ``curriculum`` manifest section, the stage curve).
"""

from __future__ import annotations

from typing import Any

from mosaic_core import EnvSwitch, child
from mosaic_curriculum.childstate import child_state
from mosaic_curriculum.control import REPORT_KIND
from mosaic_curriculum.wrapper import MAX_PENDING_RETURNS


class StageClient(EnvSwitch):
    def __init__(self, context: Any, state: Any):
        self._context, self._state = context, state

    @classmethod
    def connect(cls) -> StageClient | None:
        context = child.current()
        state = child_state(context) if context is not None else None
        return cls(context, state) if state is not None else None

    def stage(self) -> int:
        """The stage the host has chosen (0 until the first switch)."""
        return min(self._state.read_stage(), len(self._state.schedule.stages) - 1)

    def env_id(self, stage: int) -> str:
        return self._state.schedule.stages[stage].env_id

    def report(self, stage: int, *, steps: int, returns: list[float], episodes: int | None = None) -> bool:
        """Steps and finished episodes' returns played on ``stage`` since the last report."""
        payload = {
            "stage": int(stage),
            "steps": int(steps),
            "episodes": len(returns) if episodes is None else int(episodes),
            "returns": [float(r) for r in returns[-MAX_PENDING_RETURNS:]],
        }
        return self._context.publish(REPORT_KIND, payload, True)

    def close(self) -> None:
        """Nothing to release: the stage file is the host's; kept for symmetry with the envs."""
