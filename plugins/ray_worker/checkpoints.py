"""The RLlib checkpoints of a run: ``checkpoints/step_<N>/`` (N: the env steps sampled in the run's
lifetime at the save), each RLlib's ``Algorithm.save_to_path`` directory, written under a temporary
name and renamed when complete, then announced with ``checkpoint_saved {path, step, format}``.

What a resume needs is in RLlib's checkpoint: the learner's weights and optimizer state, the
algorithm's iteration and lifetime counters (its metrics logger: the learning-rate schedule's
position is the lifetime env steps), the env runners' connector states (e.g. ``MeanStdFilter``).
Loading one unpickles it (code): ``code=True`` in the layout. A self-play run's pool of past
policies is beside them as data (:mod:`ray_worker.selfplay`)."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from mosaic_core.contract import CheckpointLayout
from ray_worker.metadata import METADATA

LAYOUT = CheckpointLayout("checkpoints/step_{step}", "ray.rllib", kind="dir", code=True)
CHECKPOINT_MARK = "rllib_checkpoint.json"  # what RLlib writes into every checkpoint directory
STEP_FILE = "mosaic_step.json"  # beside RLlib's files: the run's env steps, iteration, algo and env then
MULTIAGENT = "multiagent"  # in the step file of a multi-agent run: each agent's module, self-play's settings
FORMAT_VERSION = 1  # of what this worker writes beside RLlib's files
RAY_VERSION = METADATA.upstream_version  # what the worker's environment pins: the Ray that reads its checkpoints
SAVING = threading.RLock()  # held while a checkpoint is written: a stop's end waits for it


def saved_step(checkpoint: Path) -> int:
    """The env steps at which ``checkpoint`` was saved (its step file, else its name)."""
    try:
        return int(json.loads((checkpoint / STEP_FILE).read_text(encoding="utf-8"))["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        digits = checkpoint.name.rpartition("_")[2]
        return int(digits) if digits.isdigit() else 0


def problem(checkpoint: Path, algo: str, env_id: str) -> str | None:
    """What makes ``checkpoint`` unusable for a run of ``algo`` on ``env_id``, in one sentence
    (None: it looks usable); reads only its JSON files, never RLlib's pickles."""
    try:
        mark = json.loads((checkpoint / CHECKPOINT_MARK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{checkpoint} is not a complete RLlib checkpoint (no readable {CHECKPOINT_MARK})"
    written_by = mark.get("ray_version") if isinstance(mark, dict) else None
    if isinstance(written_by, str) and written_by != RAY_VERSION:
        return (
            f"{checkpoint} was written by Ray {written_by}, this worker runs Ray {RAY_VERSION}: RLlib's "
            "checkpoints (pickles of its classes) are read by the version that wrote them"
        )
    try:
        saved = json.loads((checkpoint / STEP_FILE).read_text(encoding="utf-8"))
    except OSError:
        return None  # made by RLlib itself, not by a MOSAIC run: RLlib checks it when it loads
    except ValueError:
        return f"{checkpoint / STEP_FILE} is corrupt"
    if not isinstance(saved, dict):
        return f"{checkpoint / STEP_FILE} is corrupt"
    version = saved.get("format_version", 1)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        return f"{checkpoint} is of a newer format ({version!r}) than this worker reads ({FORMAT_VERSION})"
    for what, theirs, ours in (("algorithm", saved.get("algo"), algo), ("env", saved.get("env_id"), env_id)):
        if isinstance(theirs, str) and theirs.lower() != ours.lower():
            return f"{checkpoint} is a checkpoint of {what} {theirs}, not {ours}"
    return None


def save(algo: Any, step: int, reason: str, env_id: str = "", state: dict[str, Any] | None = None) -> Path:
    """Save ``algo`` as the run's checkpoint at ``step`` (the cwd is the run directory) and
    announce it; returns its path. ``state``: what to save instead of ``algo``'s state now (a
    stop's :class:`ray_worker.train.LastIteration`, saved while the next iteration runs)."""
    from mosaic_core.child import emit_event
    from ray_worker.selfplay import pool_weights, write_pool
    from ray_worker.teams import carried_setup

    final = LAYOUT.path(Path.cwd(), step)
    temporary = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    iteration = algo.iteration if state is None else state.get("training_iteration", algo.iteration)
    with SAVING:
        shutil.rmtree(temporary, ignore_errors=True)
        pool = pool_weights(algo, state)  # (RLlib's save empties a given state)
        algo.save_to_path(str(temporary), state=state)
        write_pool(algo, temporary, pool, iteration)
        (temporary / STEP_FILE).write_text(
            json.dumps(
                {
                    "global_step": step,
                    "algo": type(algo).__name__,
                    "env_id": env_id,
                    "iteration": iteration,
                    "reason": reason,
                    "format_version": FORMAT_VERSION,
                    **({MULTIAGENT: carried_setup(algo.config)} if carried_setup(algo.config) else {}),
                }
            ),
            encoding="utf-8",
        )
        if final.is_dir() and not final.is_symlink():  # the same step saved again (a stop right after a save)
            shutil.rmtree(final)
        os.replace(temporary, final)
    emit_event(
        "checkpoint_saved",
        {
            "path": str(final),
            "step": step,
            "format": LAYOUT.format,
            "global_step": step,
            "reason": reason,
            "iteration": iteration,
        },
    )
    return final


def multiagent_setup(checkpoint: Path) -> dict[str, Any]:
    """A multi-agent run's setup as its checkpoint's step file records it (``{}``: none)."""
    try:
        found = json.loads((checkpoint / STEP_FILE).read_text(encoding="utf-8")).get(MULTIAGENT)
    except (OSError, ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}
