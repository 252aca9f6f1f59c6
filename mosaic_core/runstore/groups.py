"""Which runs belong together: runs whose configs are equal once the seed is left out.

Read from each run's ``config.json`` (bounded, never through a link). Left out of the
comparison: what changes from seed to seed (run id, seed, worker id, the argv repeating them) and
the bookkeeping keys that never change what is trained: the core's (:data:`BOOKKEEPING`:
checkpoints, evaluation settings) and those a plugin declares (``ExtrasKey(bookkeeping=True)``:
tracking, notes, live frames, metrics cadence, a sweep's trial, an experiment's tags). A group's
label is its algorithm and env plus what differs between the groups: the worker when groups come
from more than one, the budget, then the settings.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic_core.runstore.summary import _read_json

__all__ = [
    "BOOKKEEPING",
    "BOOKKEEPING_PREFIXES",
    "Group",
    "LABEL_FIRST",
    "PER_SEED_KEYS",
    "group_by_fields",
    "group_by_seed",
    "label_of",
    "mixed_budgets",
    "read_config",
    "setting",
]

PER_SEED_KEYS = ("run_id", "seed", "worker_id", "program_id", "argv")  # program_id: worker_id's name for a while
# The core's own keys that never change what is trained; plugins mark theirs
# (``ExtrasKey(bookkeeping=True)``: tracking, live frames, metrics cadence, a sweep's trial…).
BOOKKEEPING = (
    "checkpoint_frequency",
    "save_replay_buffer",
    "schema_id",
    "schema_version",
    "supports_pause",
    "supports_checkpoint",
    "grpc",
    "eval_episodes",
    "eval_deterministic",
    "eval_seed",
    "eval_every_checkpoint",
)
BOOKKEEPING_PREFIXES = ("grpc_", "mosaic_")
LABEL_FIRST = ("worker", "algo", "env_id", "total_timesteps")


@functools.lru_cache(maxsize=1)
def _plugins_bookkeeping() -> tuple[Any, ...]:
    """The extras keys installed plugins mark as bookkeeping (none when plugins cannot load)."""
    from mosaic_core.errors import MosaicError
    from mosaic_core.plugins import plugin_host

    try:
        return tuple(key for _, key in plugin_host().extras_keys() if key.bookkeeping)
    except MosaicError:
        return ()


def _is_bookkeeping(key: str) -> bool:
    return (
        key in BOOKKEEPING
        or key.startswith(BOOKKEEPING_PREFIXES)
        or any(declared.matches(key) for declared in _plugins_bookkeeping())
    )


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def read_config(run_dir: Path) -> dict[str, Any]:
    """A run's ``config.json`` (bounded, never through a link); {} when unreadable."""
    return _read_json(run_dir / "config.json", []) or {}


def setting(run_dir: Path) -> dict[str, Any]:
    """A run's config without what changes from seed to seed or is bookkeeping, flattened
    (``extras.algo_params.learning_rate``)."""
    raw = read_config(run_dir)
    config = {k: v for k, v in raw.items() if k not in PER_SEED_KEYS and k != "extras"}
    extras = raw.get("extras")
    if isinstance(extras, dict):
        kept = {k: v for k, v in extras.items() if not _is_bookkeeping(k)}
        if kept:
            config["extras"] = kept
    if not config:
        return {"run_id": run_dir.name}  # no config: a group of its own
    if isinstance(config.get("algo"), str):
        config["algo"] = os.path.basename(config["algo"])
    return _flatten(config)


@dataclass
class Group:
    label: str
    runs: list[Path]
    setting: dict[str, Any]

    @property
    def budget(self) -> Any:
        return self.setting.get("total_timesteps")


def group_by_seed(dirs: list[Path]) -> list[Group]:
    """Runs that differ only by seed, in first-seen order, labelled by what differs."""
    settings = {d: setting(d) for d in dirs}
    members: dict[str, list[Path]] = {}
    for d in dirs:
        members.setdefault(json.dumps(settings[d], sort_keys=True, default=str), []).append(d)
    firsts = [settings[runs[0]] for runs in members.values()]
    groups: list[Group] = []
    labels: set[str] = set()
    for runs in members.values():
        label = label_of(settings[runs[0]], firsts)
        if label in labels:  # differs only in a setting not shown
            label = f"{label} #{len(groups) + 1}"
        labels.add(label)
        groups.append(Group(label, runs, settings[runs[0]]))
    return groups


def group_by_fields(dirs: list[Path], fields: list[str]) -> list[Group]:
    """Runs grouped by the named config fields (``worker``, ``algo``, ``env_id``, an extras key
    such as ``algo_params.learning_rate``), labelled by their values."""
    settings = {d: setting(d) for d in dirs}
    members: dict[tuple[str, ...], list[Path]] = {}
    for d in dirs:
        members.setdefault(tuple(_short(_field(settings[d], f)) for f in fields), []).append(d)
    return [
        Group(" ".join(key), runs, {f: _field(settings[runs[0]], f) for f in fields}) for key, runs in members.items()
    ]


def _field(flat: dict[str, Any], name: str) -> Any:
    return flat.get(name, flat.get(f"extras.{name}"))


def label_of(mine: dict[str, Any], others: list[dict[str, Any]]) -> str:
    """``cleanrl ppo CartPole-v1 learning_rate=0.001``: the worker when the groups' workers
    differ, algorithm, env, then up to 4 other settings that differ between the groups."""

    def differs(key: str) -> bool:
        return any(o.get(key) != mine.get(key) for o in others)

    words = [str(mine.get("worker", ""))] if differs("worker") else []
    words += [str(mine.get("algo", "")), str(mine.get("env_id", ""))]
    if differs("total_timesteps"):
        words.append(f"{mine.get('total_timesteps')} steps")
    keys = sorted({k for o in [mine, *others] for k in o} - set(LABEL_FIRST))
    shown = [f"{k.rsplit('.', 1)[-1]}={_short(mine.get(k))}" for k in keys if differs(k)]
    label = " ".join(w for w in [*words, *shown[:4]] if w)
    return label + (f" (+{len(shown) - 4})" if len(shown) > 4 else "")


def mixed_budgets(groups: list[Group]) -> str | None:
    """A warning when the groups were trained on different budgets (they then compare unequally)."""
    budgets = {g.label: g.budget for g in groups}
    if len({json.dumps(b, default=str) for b in budgets.values()}) <= 1:
        return None
    return (
        "the groups' budgets differ ("
        + ", ".join(f"{label}: {b}" for label, b in budgets.items())
        + "); their scores are not comparable step for step"
    )


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
