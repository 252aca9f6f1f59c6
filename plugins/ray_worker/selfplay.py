"""Self-play's pool of past policies, in the worker's environment (driver side).

The pool is ``pool_size`` modules (``pool_0``…), never trained, that play ``main``'s opponents
(:class:`ray_worker.teams.SelfPlayMapping`). At the start each holds ``main``'s first weights;
every ``snapshot_every`` iterations ``main``'s weights are copied into the next slot, the oldest
snapshot giving way, and the env runners get them. Which iteration each slot holds is a function
of the iteration (:func:`pool_record`). An MPE env's sides each have their own ``main_SIDE`` and
pool (``pool_SIDE_0``…), snapshotted together.

A checkpoint holds the pool as data beside RLlib's files (:data:`POOL_DIR`: ``pool.json`` and one
``.npz`` of weights per slot, read without unpickling); a resume restores the slots from them
(:func:`restore_pool`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ray_worker.teams import carried_setup, main_module, pool_modules, sides_of

POOL_DIR = "self_play_pool"
POOL_FILE = "pool.json"
POOL_FORMAT = 1


def settings(algorithm: Any) -> dict[str, int] | None:
    """The run's self-play settings (``pool_size``, ``snapshot_every``), None without self-play."""
    found = carried_setup(algorithm.config).get("self_play")
    return found if isinstance(found, dict) else None


def _copy_main(algorithm: Any, pool_size: int, slot: int | None) -> None:
    """Each side's ``main`` into its pool's ``slot`` (None: into every slot)."""
    sides = sides_of(carried_setup(algorithm.config))
    mains = algorithm.learner_group.get_weights(module_ids=[main_module(side) for side in sides])
    weights = {}
    for side in sides:
        slots = pool_modules(pool_size, side)
        for module in slots if slot is None else [slots[slot]]:
            weights[module] = mains[main_module(side)]
    _set(algorithm, weights)


def _set(algorithm: Any, weights: dict[str, Any]) -> None:
    algorithm.learner_group.set_weights(weights)
    algorithm.env_runner_group.sync_weights(
        policies=list(weights), from_worker_or_learner_group=algorithm.learner_group, inference_only=True
    )


def start_pool(algorithm: Any) -> None:
    """Every slot holds ``main``'s first weights (a new run; a resume's are restored after)."""
    found = settings(algorithm)
    if found:
        _copy_main(algorithm, found["pool_size"], None)


def after_iteration(algorithm: Any) -> None:
    """Every ``snapshot_every`` iterations, ``main``'s weights into the next slot."""
    found = settings(algorithm)
    if found and algorithm.iteration % found["snapshot_every"] == 0:
        snapshot = algorithm.iteration // found["snapshot_every"]
        _copy_main(algorithm, found["pool_size"], (snapshot - 1) % found["pool_size"])


def pool_record(iteration: int, pool_size: int, snapshot_every: int, sides: Sequence[str] = ("",)) -> dict[str, Any]:
    """The pool after ``iteration`` iterations: each slot's module and the iteration its weights are from."""
    snapshots = iteration // snapshot_every
    slots = []
    for index in range(pool_size):
        latest = max((s for s in range(1, snapshots + 1) if (s - 1) % pool_size == index), default=0)
        slots += [
            {"module": pool_modules(pool_size, side)[index], "iteration": latest * snapshot_every} for side in sides
        ]
    return {
        "format": POOL_FORMAT,
        "pool_size": pool_size,
        "snapshot_every": snapshot_every,
        "iteration": iteration,
        "snapshots": snapshots,
        "slots": slots,
    }


def pool_weights(algorithm: Any, state: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """Each slot's weights: from ``state`` (an algorithm state, as a stop saves it) or, without one,
    from the learner now; None without self-play. Taken before RLlib saves ``state`` (it empties it)."""
    found = settings(algorithm)
    if not found:
        return None
    modules = [m for side in sides_of(carried_setup(algorithm.config)) for m in pool_modules(found["pool_size"], side)]
    if state is not None:
        return {m: dict(state["learner_group"]["learner"]["rl_module"][m]) for m in modules}
    return dict(algorithm.learner_group.get_weights(module_ids=modules))


def write_pool(algorithm: Any, folder: Path, weights: dict[str, dict[str, Any]] | None, iteration: int) -> None:
    """The pool (:func:`pool_weights`) into checkpoint ``folder`` as data."""
    found = settings(algorithm)
    if not found or weights is None:
        return
    target = folder / POOL_DIR
    target.mkdir()
    for module, values in weights.items():
        np.savez(target / f"{module}.npz", **{name: np.asarray(_numpy(value)) for name, value in values.items()})
    record = pool_record(
        iteration, found["pool_size"], found["snapshot_every"], sides_of(carried_setup(algorithm.config))
    )
    (target / POOL_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")


def _numpy(value: Any) -> Any:
    return value.detach().cpu().numpy() if hasattr(value, "detach") else value


def read_pool(checkpoint: Path) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """(``pool.json``, each slot's weights) of a checkpoint; arrays only (no pickle is loaded)."""
    folder = checkpoint / POOL_DIR
    record = json.loads((folder / POOL_FILE).read_text(encoding="utf-8"))
    weights = {}
    for slot in record["slots"]:
        with np.load(folder / f"{slot['module']}.npz", allow_pickle=False) as arrays:
            weights[slot["module"]] = {name: arrays[name] for name in arrays.files}
    return record, weights


def restore_pool(algorithm: Any, checkpoint: Path) -> dict[str, Any] | None:
    """The checkpoint's pool into the algorithm's slots (learner and env runners), said in a note;
    its record, or None for a run without self-play."""
    from mosaic_core.child import emit_event

    if not settings(algorithm):
        return None
    record, weights = read_pool(checkpoint)
    _set(algorithm, weights)
    said = ", ".join(f"{slot['module']} of iteration {slot['iteration']}" for slot in record["slots"])
    emit_event("note", {"text": f"self-play pool restored from {checkpoint.name}: {said}"})
    return record
