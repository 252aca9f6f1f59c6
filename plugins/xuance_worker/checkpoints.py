"""XuanCe checkpoints in a run directory, as the host sees them (no torch, no XuanCe here).

One checkpoint per save, ``checkpoints/step_{step}/`` (:data:`LAYOUT`), holding:

- ``state.pt``: tensors and plain values only (``torch.load(weights_only=True)``): the policy,
  every optimizer and learning-rate scheduler, the value normalisers, the RNG states (torch,
  numpy, python) — :mod:`xuance_worker.state` writes and reads it;
- ``meta.json``: the format version, algorithm, env, global step, the learner's update counter,
  the budget, the learning rate at the save, the TensorBoard folder, the run's XuanCe config keys
  (``overrides``: what a policy server rebuilds the agent with, :mod:`xuance_worker.serve`), why it
  was saved and the versions of XuanCe and torch (a resume needs the XuanCe that saved it).

Nothing in it is code, so it loads from any run (``code=False``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mosaic_core import ConfigError
from mosaic_core.contract import CheckpointLayout, newest_checkpoint
from xuance_worker.metadata import METADATA

LAYOUT = CheckpointLayout("checkpoints/step_{step}", "xuance", kind="dir", code=False)
XUANCE_VERSION = METADATA.upstream_version  # what the worker's environment pins
FORMAT_VERSION = 1
META = "meta.json"
STATE = "state.pt"


def read_meta(checkpoint: Path) -> dict[str, Any]:
    """``meta.json`` of a checkpoint directory; ValueError saying what is wrong with it."""
    path = checkpoint / META
    if os.path.islink(checkpoint) or os.path.islink(path):
        raise ValueError("a link (checkpoints are read from plain files only)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"no readable {META} ({type(exc).__name__})") from None
    if (
        not isinstance(meta, dict)
        or not isinstance(meta.get("global_step"), int)
        or meta.get("format") != LAYOUT.format
    ):
        raise ValueError(f"{META} is not a XuanCe checkpoint's")
    version = meta.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(f"format version {version!r} is newer than this worker's ({FORMAT_VERSION})")
    state = checkpoint / STATE
    if os.path.islink(state) or not state.is_file():
        raise ValueError(f"no {STATE} beside {META}")
    return meta


def resolve(value: Any, key: str, algo: str, env: str, resume: bool = False) -> Path:
    """The checkpoint ``extras.<key>`` names: a checkpoint directory, or a run directory (its
    newest), checked to be of ``algo`` on ``env`` (and, to ``resume`` from, saved by the XuanCe
    this worker runs); a ConfigError naming the key otherwise."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"extras.{key} is required: a XuanCe checkpoint or a run directory", field=f"extras.{key}")
    path = Path(value).expanduser().absolute()
    if not (path / META).exists():
        found = newest_checkpoint(path, LAYOUT)
        if found is None:
            raise ConfigError(
                f"extras.{key}: no XuanCe checkpoint ({LAYOUT.pattern}) at {value}", field=f"extras.{key}"
            )
        path = found.path
    try:
        meta = read_meta(path)
    except ValueError as exc:
        raise ConfigError(
            f"extras.{key}: {path} is not a usable XuanCe checkpoint: {exc}", field=f"extras.{key}"
        ) from None
    for what, theirs, ours in (("algorithm", meta.get("algo"), algo), ("env", meta.get("env"), env)):
        if theirs != ours:
            raise ConfigError(
                f"extras.{key}: {path} is a checkpoint of {what} {theirs!r}, not {ours!r}", field=f"extras.{key}"
            )
    saved_by = (meta.get("libraries") or {}).get("xuance") if isinstance(meta.get("libraries"), dict) else None
    if resume and isinstance(saved_by, str) and saved_by != XUANCE_VERSION:
        raise ConfigError(
            f"extras.{key}: {path} was saved by XuanCe {saved_by}, this worker runs {XUANCE_VERSION}: resumed, it "
            "would not continue the same run (evaluate it instead)",
            field=f"extras.{key}",
        )
    return path
