"""Experiment names (``--name EXP``, Sample Factory's ``--experiment`` with
``--restart_behavior``): a run records its name in ``extras.experiment_name``; the next run
with that name resumes the latest checkpoint of the latest run so named when that run was
interrupted (no ``run_completed`` event), and starts a new run otherwise or with ``--restart``.

Everything is read from the runs root (``config.json``, ``events.jsonl``, ``launch.json``),
without torch: the dry run shows the decision the real run takes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic_core import ConfigError, UsageError, WorkerConfig
from mosaic_core.files import is_within
from mosaic_core.toolkit import RUN_ID


@dataclass(frozen=True)
class NamedRun:
    """A recorded run of an experiment."""

    path: Path
    config: dict[str, Any]
    started: float  # config.json's modification time: when the run started

    @property
    def run_id(self) -> str:
        return self.path.name

    def events(self, *names: str) -> Iterator[dict[str, Any]]:
        """Its events named ``names``, streamed (a huge log costs time, not memory)."""
        from mosaic_core.toolkit import iter_events

        try:
            yield from iter_events(self.path / "events.jsonl", names)
        except OSError:
            return

    def completed(self) -> bool:
        return any(self.events("run_completed"))

    def latest_checkpoint(self) -> tuple[Path, int] | None:
        """The checkpoint with the highest step the run saved (``checkpoint_saved`` events) that
        still exists; else the one it resumed from itself (``launch.json``)."""
        base = self.path.resolve()
        best: tuple[Path, int] | None = None
        for event in self.events("checkpoint_saved"):
            payload = event.get("payload")
            if not isinstance(payload, dict) or not isinstance(payload.get("path"), str):
                continue
            path, step = (base / payload["path"]).resolve(), payload.get("global_step")
            if isinstance(step, int) and is_within(base, path) and path.is_file() and (best is None or step > best[1]):
                best = (path, step)
        return best or self._resumed_from()

    def _resumed_from(self) -> tuple[Path, int] | None:
        try:
            launch = json.loads((self.path / "launch.json").read_text(encoding="utf-8"))
            experiment = launch["experiment"]
            path, step = Path(experiment["checkpoint"]), int(experiment["step"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return (path, step) if path.is_file() else None


def named_runs(root: Path, name: str) -> list[NamedRun]:
    """The runs under ``root`` whose config records experiment ``name``, oldest first (found
    through the runs root's index: only their configs are read). An imported run that is not
    trusted yet (:mod:`mosaic_core.runstore.trust`) is never one of them."""
    from mosaic_core.runstore.index import RunIndex
    from mosaic_core.runstore.trust import untrusted_run

    found = []
    index = RunIndex(root)
    try:
        run_ids = index.named(name) if root.is_dir() else []
    finally:
        index.close()
    for run_id in run_ids:
        if untrusted_run(root / run_id) is not None:
            continue
        config_file = root / run_id / "config.json"
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
            started = config_file.stat().st_mtime
        except (OSError, ValueError):
            continue
        extras = config.get("extras") if isinstance(config, dict) else None
        if isinstance(extras, dict) and extras.get("experiment_name") == name:
            found.append(NamedRun(root / run_id, config, started))
    return sorted(found, key=lambda run: (run.started, run.run_id))


def _experiment_name(config: WorkerConfig) -> str:
    name = config.extras["experiment_name"]
    if not isinstance(name, str) or not RUN_ID.fullmatch(name):
        raise ConfigError(
            f"experiment name (--name / extras.experiment_name) must be 1-128 letters, digits, "
            f"'-' or '_', got {name!r}",
            field="extras.experiment_name",
            source=config.source,
        )
    return name


def decide(config: WorkerConfig, root: Path, *, restart: bool, explicit: bool) -> dict[str, Any]:
    """Whether this run of experiment ``extras.experiment_name`` resumes (and from which
    checkpoint) or starts a new run; ``decision`` says it in one sentence."""
    name = _experiment_name(config)
    if explicit:
        return {
            "name": name,
            "action": "as_configured",
            "decision": f"experiment {name}: mode {config.extras.get('mode')} as configured (no lookup)",
        }
    if restart:
        return {"name": name, "action": "restart", "decision": f"experiment {name}: starting afresh (--restart)"}
    runs = named_runs(root, name)
    if not runs:
        return {"name": name, "action": "new", "decision": f"experiment {name}: no earlier run; starting one"}
    latest = runs[-1]
    if latest.completed():
        return {
            "name": name,
            "action": "new",
            "previous_run": latest.run_id,
            "decision": f"experiment {name}: its latest run {latest.run_id} completed; starting a new run",
        }
    for field in ("algo", "env_id"):
        if latest.config.get(field) != getattr(config, field):
            raise UsageError(
                f"experiment {name}: its interrupted run {latest.run_id} has {field} "
                f"{latest.config.get(field)!r}, this run {getattr(config, field)!r}; "
                "use --restart to start afresh, or another --name"
            )
    checkpoint = latest.latest_checkpoint()
    if checkpoint is None:
        return {
            "name": name,
            "action": "new",
            "previous_run": latest.run_id,
            "decision": f"experiment {name}: its run {latest.run_id} was interrupted before its first "
            "checkpoint; starting afresh",
        }
    path, step = checkpoint
    if step >= config.total_timesteps:
        raise UsageError(
            f"experiment {name}: run {latest.run_id}'s checkpoint is at step {step}, at or past "
            f"--total-timesteps {config.total_timesteps}; raise it to train further, or --restart"
        )
    return {
        "name": name,
        "action": "resume",
        "previous_run": latest.run_id,
        "checkpoint": str(path),
        "step": step,
        "decision": f"experiment {name}: resuming interrupted run {latest.run_id} from its checkpoint at "
        f"step {step} ({path.name})",
    }
