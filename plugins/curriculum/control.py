"""The host side of a curriculum run: counts what the envs report and decides transitions.

Every wrapped env, in whatever process it lives, reports over the side channel
(kind :data:`REPORT_KIND`): the stage its inner env belongs to, the steps taken and the
episodes (with their returns) finished since its last report. The controller adds them up
per stage, so there is one decision for the whole run: when the current stage's condition
fires it writes the next stage into the stage file (envs switch at their next reset) and
emits a ``curriculum_stage`` lifecycle event. Reports from envs still playing an earlier
stage count for that stage, never for the current one.
"""

from __future__ import annotations

import threading
from typing import Any

from mosaic_curriculum.schedule import Clause, Schedule, StageProgress
from mosaic_curriculum.stagefile import StageFile

REPORT_KIND = "curriculum"
EVENT = "curriculum_stage"


class CurriculumController:
    """Owns the stage file and the per-stage counts of one run (thread-safe)."""

    def __init__(self, schedule: Schedule, stage_file: StageFile, emit: Any):
        self.schedule = schedule
        self.stage_file = stage_file
        self._emit = emit
        self._lock = threading.Lock()
        self.stage = 0
        self.total_steps = 0
        self.progress = [StageProgress(s.return_window) for s in schedule.stages]
        self.transitions: list[dict[str, Any]] = []
        self.ignored_reports = 0

    def start(self) -> None:
        """Announce stage 0 (``condition: "start"``) so readers know the env from the start."""
        first = self.schedule.stages[0]
        self._emit(
            EVENT,
            {
                "stage": 0,
                "env_id": first.env_id,
                "condition": "start",
                "stages": len(self.schedule.stages),
                "until": self._until(0),
            },
        )

    def on_report(self, payload: dict[str, Any]) -> None:
        """Add one env report; advance the stage when its condition fires."""
        try:
            stage = int(payload["stage"])
            steps = int(payload.get("steps", 0))
            returns = [float(r) for r in payload.get("returns", [])]
            episodes = int(payload.get("episodes", len(returns)))
        except (KeyError, TypeError, ValueError):
            self.ignored_reports += 1
            return
        if not 0 <= stage < len(self.progress) or steps < 0 or episodes < 0:
            self.ignored_reports += 1
            return
        with self._lock:
            self.progress[stage].add(steps, episodes, returns)
            self.total_steps += steps
            fired = self._check()
            event = self._advance(fired) if fired else None
        if event:
            self._emit(EVENT, event)

    def _check(self) -> Clause | None:
        if self.schedule.is_last(self.stage):
            return None
        return self.schedule.stages[self.stage].until.fired(self.progress[self.stage])

    def _advance(self, fired: Clause) -> dict[str, Any]:
        done, progress = self.stage, self.progress[self.stage]
        self.stage += 1
        self.stage_file.write(self.stage)
        event = {
            "stage": self.stage,
            "env_id": self.schedule.stages[self.stage].env_id,
            "condition": str(fired),
            "until": self._until(self.stage),
            "previous_stage": done,
            "previous_env_id": self.schedule.stages[done].env_id,
            "stage_steps": progress.steps,
            "stage_episodes": progress.episodes,
            "mean_return": progress.mean_return,
            "total_steps": self.total_steps,
        }
        self.transitions.append(event)
        return event

    def _until(self, index: int) -> str | None:
        return None if self.schedule.is_last(index) else str(self.schedule.stages[index].until)

    def heartbeat(self) -> dict[str, Any]:
        with self._lock:
            progress = self.progress[self.stage]
            return {
                "stage": self.stage,
                "env_id": self.schedule.stages[self.stage].env_id,
                "stage_steps": progress.steps,
                "stage_episodes": progress.episodes,
            }

    def manifest(self) -> dict[str, Any]:
        with self._lock:
            return {
                **self.schedule.to_dict(),
                "stage": self.stage,
                "env_id": self.schedule.stages[self.stage].env_id,
                "total_steps": self.total_steps,
                "transitions": list(self.transitions),
                "progress": [
                    {
                        "stage": i,
                        "env_id": self.schedule.stages[i].env_id,
                        "steps": p.steps,
                        "episodes": p.episodes,
                        "mean_return": p.mean_return,
                    }
                    for i, p in enumerate(self.progress)
                ],
                "ignored_reports": self.ignored_reports,
            }
