"""What ``mosaic run`` shows a person at a terminal instead of JSON lines: one human line per
event worth reading (start, checkpoints, curriculum stages, evaluations, notes) above the
progress bar, and a closing summary (status, wall time, step, SPS, the run's score named with its
source as ``mosaic runs`` shows it, the moving average labelled as such, run directory,
checkpoints; a stopped run's ends with the command that continues it and the step it continues
from, or why it cannot be continued). The JSON stream still goes to ``events.jsonl`` (and to
stdout with ``--json`` or when stdout is not a terminal)."""

from __future__ import annotations

import math
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mosaic_core.contract import normalize_mode
from mosaic_core.files import printable


def _number(value: Any, digits: int = 2) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def score_lines(run_dir: Path, metrics: dict[str, Any]) -> list[str]:
    """The run's score, named as ``mosaic runs`` shows it (``487.20 eval``, ``93.25 train``) with what
    it is, and the live moving average, labelled: they are different numbers."""
    from mosaic_core.runstore.score import WINDOW_NAME, format_score, run_score

    score = run_score(run_dir)
    if score is None:
        lines = ["  score: none (no episode ended)"]
    else:
        what = (
            "the final evaluation's mean return" if score.source == "eval" else f"mean training return, {WINDOW_NAME}"
        )
        at = f", step {score.step:,}" if score.step is not None else ""
        lines = [f"  score: {format_score(score)} ({what}: {score.episodes} episodes{at})"]
    average, episodes = metrics.get("episodic_return_smoothed"), metrics.get("smoothed_episodes")
    if _finite(average) and isinstance(episodes, int) and episodes > 0:
        lines.append(f"  moving average of the last {episodes} episodes: {_number(average)}")
    return lines


class HumanLines:
    """Renders a run's events as lines through ``write`` (the progress bar's console when one
    is shown, so lines land above it; stdout otherwise)."""

    def __init__(self, run: Any, write: Callable[[str], None] | None = None):
        self.run = run
        shown = write or (lambda line: print(line, file=sys.stdout, flush=True))
        self.write = lambda line: shown(printable(line, keep_newlines=True))  # a run's text never drives the terminal
        self.started = time.monotonic()
        self.checkpoints: list[str] = []
        self.episodes: tuple[Any, Any] | None = None  # (episodes done, mean return) of an evaluation
        self.episode_event: str | None = None  # the event that counts them (the run_started payload's progress)

    def opening(self, counted: Any = None) -> None:
        """The first line (``run_started`` is emitted before plugins hear of the run); ``counted``:
        what its progress counts (:class:`mosaic_core.runstore.summary.Progress`), steps if None."""
        run = self.run
        self.episode_event = counted.event if counted is not None else None
        unit, total = (counted.unit, counted.total) if counted is not None else ("steps", run.config.total_timesteps)
        self.write(
            f"run {run.run_id}: {run.config.algo} on {run.config.env_id} with {run.worker}, "
            f"{total:,} {unit} -> {run.run_dir}"
        )

    def on_event(self, name: str, payload: dict[str, Any], metrics: dict[str, Any]) -> None:
        if name == "checkpoint_saved":
            path = str(payload.get("path", "?"))
            self.checkpoints.append(path)
            self.write(f"checkpoint at step {payload.get('global_step', '?')}: {path}")
        elif name == "curriculum_stage":
            self.write(
                f"curriculum: stage {payload.get('stage')} ({payload.get('env_id')}), "
                f"{payload.get('condition', '')}".rstrip(", ")
            )
        elif name == self.episode_event:
            self.episodes = (payload.get("episodes_done"), payload.get("mean_return"))
            self.write(
                f"evaluation: {payload.get('episodes_done')}/{payload.get('episodes_total')} episodes, "
                f"mean return {_number(payload.get('mean_return'))}"
            )
        elif name == "eval_result" and _finite(payload.get("mean")) and isinstance(payload.get("episodes"), list):
            step = payload.get("global_step")
            self.write(
                f"evaluation at step {_number(step, 0) if isinstance(step, int) else '?'}: "
                f"{len(payload['episodes'])} episodes, mean return {_number(payload['mean'])}"
            )
        elif name == "note" and isinstance(payload.get("text"), str):
            self.write(f"note: {payload['text']}")
        elif name in ("run_completed", "run_failed", "run_cancelled"):
            self._summary(name.removeprefix("run_"), payload, metrics)

    def _summary(self, status: str, payload: dict[str, Any], metrics: dict[str, Any]) -> None:
        wall = time.monotonic() - self.started
        if self.episodes is not None:  # an evaluation: what it played, not the steps it took
            done, mean = self.episodes
            figures, scored = f"{done} episode(s), mean return {_number(mean)}", []
        else:
            figures = f"step {metrics.get('global_step', 0):,}, {_number(metrics.get('sps'), 0)} SPS"
            scored = score_lines(Path(self.run.run_dir), metrics)
        lines = [f"run {self.run.run_id} {status} in {wall:,.1f} s: {figures}", *scored]
        if status == "failed" and payload.get("error"):
            lines.append(f"  error: {payload['error']}")
        elif status == "cancelled" and payload.get("reason"):
            lines.append(f"  reason: {payload['reason']}")
        lines.append(f"  run dir: {self.run.run_dir}")
        for path in self.checkpoints[-3:]:
            lines.append(f"  checkpoint: {path}")
        for summary_file in sorted(Path(self.run.run_dir).glob("eval_summary.json")):
            lines.append(f"  evaluation: {summary_file}")
        if status == "completed" and payload.get("stopped"):
            lines.append(f"  stopped: {payload['stopped']}")
        if status == "cancelled" and normalize_mode(self.run.config.extras.get("mode")) != "evaluate":
            lines.append(self._how_to_continue(payload))  # last: what a person types next
        self.write("\n".join(lines))

    def _how_to_continue(self, payload: dict[str, Any]) -> str:
        """The command that resumes a stopped run and the step it resumes from (its checkpoint's,
        not its last metric's), or why it cannot be resumed."""
        run_id = self.run.run_id
        command = f"mosaic resume {run_id}{self._runs_dir_flag()}"
        if payload.get("resumable") and isinstance(payload.get("from_step"), int):
            checkpoint = Path(str(payload.get("checkpoint", ""))).name
            return f"  continue it: {command}  (from step {payload['from_step']:,}, checkpoint {checkpoint})"
        why = payload.get("not_resumable") or "it has no checkpoint to resume from"
        return f"  not resumable: {why}; `mosaic run --run-id {run_id} --restart{self._runs_dir_flag()}` starts it over"

    def _runs_dir_flag(self) -> str:
        """`` --runs-dir ROOT`` when the run lies elsewhere than where `mosaic` looks by default."""
        from mosaic_core.toolkit import default_runs_root

        root = Path(self.run.run_dir).parent
        try:
            same = root.resolve() == default_runs_root().resolve()
        except OSError:
            same = False
        return "" if same else f" --runs-dir {shlex.quote(str(root))}"
