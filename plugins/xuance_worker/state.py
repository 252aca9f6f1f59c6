"""What a XuanCe agent's checkpoint keeps and how it comes back (training process only).

XuanCe's own ``save_model`` keeps the policy, the optimizer and torch's RNG, and its
``load_model`` rebuilds nothing else: the learning-rate scheduler restarts with the loaded rate
(the schedule then ends at the wrong value), the step counter restarts at 0 (exploration and the
warm-up start over), the value normalisers restart. Here every one of those is kept, as tensors
and plain values only, so ``torch.load(weights_only=True)`` reads it back:

- the policy (its target networks included), every optimizer and scheduler of the learner
  (one, a dict per model or per agent and actor/critic, as each learner keeps them), the value
  normalisers (MAPPO's, IPPO's ``ValueNorm``), the learner's update counter;
- the agent's global step counter (XuanCe's ``current_step``: epsilon-greedy and noise schedules
  and the warm-up read it) and episode counters;
- the RNG states of torch, numpy and python.

XuanCe 1.4.4's multi-agent agents keep no observation-normalisation statistics (only its
single-agent base class has ``obs_rms``), so there are none to keep.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from xuance_worker.checkpoints import FORMAT_VERSION, LAYOUT, META, STATE


def _states(obj: Any) -> Any:
    """``state_dict()`` of an optimizer, scheduler or module, through the dicts and lists XuanCe keeps them in."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return {str(k): _states(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_states(v) for v in obj]
    return obj.state_dict()


def _load_states(obj: Any, state: Any) -> None:
    if obj is None or state is None:
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            _load_states(value, state[str(key)])
    elif isinstance(obj, (list, tuple)):
        for value, saved in zip(obj, state, strict=True):
            _load_states(value, saved)
    else:
        obj.load_state_dict(state)


def learning_rate(learner: Any) -> float | None:
    """The current rate of the learner's first optimizer (the one XuanCe logs)."""
    optimizer = learner.optimizer
    while isinstance(optimizer, (dict, list, tuple)) and optimizer:
        optimizer = next(iter(optimizer.values())) if isinstance(optimizer, dict) else optimizer[0]
    return float(optimizer.param_groups[0]["lr"]) if hasattr(optimizer, "param_groups") else None


def rng_state() -> dict[str, Any]:
    kind, keys, pos, has_gauss, gauss = cast(tuple[str, Any, int, int, float], np.random.get_state(legacy=True))
    version, internal, python_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "python": {"version": version, "internal": torch.tensor(internal, dtype=torch.int64), "gauss": python_gauss},
    }


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    saved = state["numpy"]
    np.random.set_state(
        (saved["kind"], saved["keys"].numpy().astype(np.uint32), saved["pos"], saved["has_gauss"], saved["gauss"])
    )
    saved = state["python"]
    random.setstate((saved["version"], tuple(int(v) for v in saved["internal"].tolist()), saved["gauss"]))


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def save(agent: Any, run_dir: Path, step: int, meta: dict[str, Any]) -> Path | None:
    """``checkpoints/step_{step}/`` of ``agent`` as it is now, written under a temporary name and
    renamed whole; None when that step's checkpoint exists already (the same state: XuanCe
    changes the model only in an update, and a checkpoint is labelled with the last update's step)."""
    final = LAYOUT.path(run_dir, step)
    if os.path.lexists(final):
        return None
    learner = agent.learner
    state = {
        "policy": agent.policy.state_dict(),
        "optimizer": _states(learner.optimizer),
        "scheduler": _states(getattr(learner, "scheduler", None)),
        "value_normalizer": _states(getattr(learner, "value_normalizer", None)),
        "rng": rng_state(),
    }
    meta = {
        "format": LAYOUT.format,
        "version": FORMAT_VERSION,
        "global_step": step,
        "iterations": int(getattr(learner, "iterations", 0)),
        "current_episode": [int(v) for v in np.asarray(agent.current_episode).ravel()],
        "learning_rate": learning_rate(learner),
        "libraries": library_versions(),
        **meta,
    }
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(mode=0o700)
    torch.save(state, temporary / STATE)
    (temporary / META).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    os.replace(temporary, final)
    return final


def library_versions() -> dict[str, str]:
    """The libraries a resume must share with the run it continues (``meta.json``'s ``libraries``)."""
    from importlib import metadata

    return {name: metadata.version(name) for name in ("xuance", "torch")}


def load(agent: Any, checkpoint: Path, everything: bool) -> dict[str, Any]:
    """Restore ``agent`` from ``checkpoint`` (its ``meta.json`` returned): the policy, and with
    ``everything`` (a resume) the optimizers, schedulers, value normalisers, counters and RNG
    states. ValueError when it cannot be read (truncated, or of another shape)."""
    meta = json.loads((checkpoint / META).read_text(encoding="utf-8"))
    try:
        state = torch.load(checkpoint / STATE, map_location=agent.device, weights_only=True)
        agent.policy.load_state_dict(state["policy"])
        if everything:
            learner = agent.learner
            _load_states(learner.optimizer, state["optimizer"])
            _load_states(getattr(learner, "scheduler", None), state["scheduler"])
            _load_states(getattr(learner, "value_normalizer", None), state["value_normalizer"])
            learner.iterations = int(meta["iterations"])
            agent.current_step = int(meta["global_step"])
            episodes = meta.get("current_episode") or []
            if len(episodes) == len(agent.current_episode):
                agent.current_episode[:] = episodes
            set_rng_state(state["rng"])
    except Exception as exc:  # truncated, not weights only (a pickle with code: refused unrun), another shape
        raise ValueError(
            f"{checkpoint / STATE} cannot be loaded into this {meta.get('algo')} agent: "
            f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0].split('. ')[0]}"
        ) from None
    return meta
