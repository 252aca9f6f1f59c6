"""Which runs belong together in ``mosaic plot --group``: read from each run's ``config.json``.

* ``seed``: runs whose configs are equal once the seed is left out (run id, seed, worker id,
  the script argv that repeats them, and a sweep's per-seed ``optuna_seed``/``optuna_trial``);
  so the seeds of one sweep trial, or of one hand-made experiment, form one group;
* ``env`` / ``algo``: runs of one env id / one algorithm.

A group's label names the algorithm and env, plus the settings that tell the groups apart.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

PER_SEED_KEYS = ("run_id", "seed", "worker_id", "argv")
PER_SEED_EXTRAS = ("optuna_seed", "optuna_trial", "notes")


def _config(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def setting(run_dir: Path) -> dict[str, Any]:
    """A run's config without what changes from seed to seed, flattened (``extras.algo_params.lr``)."""
    config = {k: v for k, v in _config(run_dir).items() if k not in PER_SEED_KEYS}
    extras = config.get("extras")
    if isinstance(extras, dict):
        config["extras"] = {k: v for k, v in extras.items() if k not in PER_SEED_EXTRAS}
    if not config:
        return {"run_id": run_dir.name}  # no config: a group of its own
    return _flatten(config)


def group_runs(dirs: list[Path], by: str) -> dict[str, list[Path]]:
    """Groups of ``dirs`` in first-seen order, keyed by a readable label."""
    settings = {d: setting(d) for d in dirs}
    if by == "seed":
        keys = {d: json.dumps(settings[d], sort_keys=True, default=str) for d in dirs}
    else:
        field = "env_id" if by == "env" else "algo"
        keys = {d: str(settings[d].get(field, d.name)) for d in dirs}
    members: dict[str, list[Path]] = {}
    for d in dirs:
        members.setdefault(keys[d], []).append(d)
    if by != "seed":
        return members
    groups: dict[str, list[Path]] = {}
    for runs in members.values():
        label = _label(runs[0], settings, members)
        if label in groups:  # differs only in a setting not shown (e.g. the study)
            label = f"{label} #{len(groups) + 1}"
        groups[label] = runs
    return groups


def _label(first: Path, settings: dict[Path, dict[str, Any]], members: dict[str, list[Path]]) -> str:
    """``ppo CartPole-v1 learning_rate=0.001``: algorithm, env, and up to 4 settings that
    differ between the groups (a sweep's optuna_* bookkeeping left out)."""
    mine = settings[first]
    algo = os.path.basename(str(mine.get("algo", ""))) or first.name
    label = f"{algo} {mine.get('env_id', '')}".strip()
    others = [settings[runs[0]] for runs in members.values() if runs[0] != first]
    differing = sorted(k for k in mine if k not in ("algo", "env_id") and not k.startswith("extras.optuna_")
                       and any(o.get(k) != mine[k] for o in others))
    shown = [f"{k.rsplit('.', 1)[-1]}={_short(mine[k])}" for k in differing]
    return " ".join([label, *shown[:4]]) + (f" (+{len(shown) - 4})" if len(shown) > 4 else "")


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
