"""Tuned hyperparameter presets: per algorithm, per env id, kept as data files in the package.

``presets/<algo>.toml`` holds named presets (today one, ``tuned``), each a table per env id::

    [tuned."Pendulum-v1"]
    source = "RL Baselines3 Zoo, hyperparams/ppo.yml, Pendulum-v1"
    total_timesteps = 100000          # the budget when --total-timesteps is not given
    notes = "what the translation to CleanRL's flags left out"
    [tuned."Pendulum-v1".flags]       # the script's Args fields and their values
    gamma = 0.9

Precedence, lowest first: the script's own defaults < the preset < extras < script flags
typed on the command line. Read with :mod:`tomllib`; nothing here imports torch.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import UsageError

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
SCALARS = (bool, int, float, str)


@dataclass(frozen=True)
class Preset:
    """One preset for one algorithm on one env id."""

    name: str
    algo: str
    env_id: str
    flags: dict[str, Any]
    source: str
    file: Path
    total_timesteps: int | None = None
    notes: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "algo": self.algo,
            "env_id": self.env_id,
            "flags": dict(self.flags),
            "total_timesteps": self.total_timesteps,
            "source": self.source,
            "notes": self.notes,
            "file": str(self.file),
        }


@dataclass(frozen=True)
class Applied:
    """What a preset did to one launch: the values it set and those extras or flags overrode."""

    preset: Preset
    flags: dict[str, Any] = field(default_factory=dict)
    overridden: tuple[str, ...] = ()

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.preset.name,
            "env_id": self.preset.env_id,
            "source": self.preset.source,
            "file": str(self.preset.file),
            "applied": dict(self.flags),
            "overridden": list(self.overridden),
        }

    def headline(self) -> str:
        values = (
            " ".join(
                f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in self.flags.items()
            )
            or "nothing (all overridden)"
        )
        return f"preset {self.preset.name} for {self.preset.env_id}: {values}"


def _preset(name: str, algo: str, env_id: str, table: Any, file: Path) -> Preset:
    where = f"{file}: [{name}.{env_id!r}]"
    if not isinstance(table, dict) or not isinstance(table.get("flags"), dict):
        raise UsageError(f"{where} needs a flags table")
    unknown = sorted(set(table) - {"flags", "source", "total_timesteps", "notes"})
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}")
    if not isinstance(table.get("source"), str) or not table["source"]:
        raise UsageError(f"{where} must name its source")
    budget = table.get("total_timesteps")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0):
        raise UsageError(f"{where}: total_timesteps must be an integer > 0")
    for key, value in table["flags"].items():
        if not key.isidentifier() or not isinstance(value, SCALARS):
            raise UsageError(f"{where}: flag {key!r} must be an identifier with a number, bool or string")
    return Preset(
        name=name,
        algo=algo,
        env_id=env_id,
        flags=dict(table["flags"]),
        source=table["source"],
        file=file,
        total_timesteps=budget,
        notes=str(table.get("notes", "")),
    )


def read_presets(file: Path) -> list[Preset]:
    """Every preset in one algorithm's file (a broken file is a UsageError naming it)."""
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"preset file {file}: {exc}") from None
    return [
        _preset(name, file.stem, env_id, table, file)
        for name, envs in data.items()
        if isinstance(envs, dict)
        for env_id, table in envs.items()
    ]


def all_presets(folder: Path = PRESETS_DIR) -> list[Preset]:
    """Every preset of every algorithm, sorted by algorithm, preset name and env id."""
    found = [p for file in sorted(folder.glob("*.toml")) for p in read_presets(file)]
    return sorted(found, key=lambda p: (p.algo, p.name, p.env_id))


def find_preset(name: str, algo: str, env_id: str, folder: Path = PRESETS_DIR) -> Preset:
    """The preset ``name`` of ``algo`` for ``env_id``, or a one-line UsageError naming what exists."""
    presets = all_presets(folder)
    for preset in presets:
        if (preset.name, preset.algo, preset.env_id) == (name, algo, env_id):
            return preset
    same_algo = [p for p in presets if p.algo == algo and p.name == name]
    if same_algo:
        envs = ", ".join(p.env_id for p in same_algo)
        raise UsageError(
            f"no {name!r} preset for {algo} on {env_id}; {algo} has it for {envs} "
            "(mosaic algos presets lists every preset)"
        )
    pairs = sorted({(p.name, p.algo) for p in presets})
    known = ", ".join(sorted({algo for _, algo in pairs})) or "none"
    names = ", ".join(sorted({n for n, _ in pairs})) or "none"
    raise UsageError(
        f"no {name!r} preset for algo {algo!r}; presets ({names}) exist for {known} (mosaic algos presets lists them)"
    )


def apply_preset(preset: Preset, given: set[str]) -> Applied:
    """The preset's values for the fields not ``given`` by extras or on the command line."""
    flags = {key: value for key, value in preset.flags.items() if key not in given}
    return Applied(preset, flags, tuple(sorted(set(preset.flags) & given)))


def given_fields(argv: list[str]) -> set[str]:
    """Args field names an argv sets (``--num-envs=8``, ``--no-anneal-lr`` → num_envs, anneal_lr)."""
    names = set()
    for item in argv:
        if item.startswith("--") and len(item) > 2:
            name = item[2:].split("=", 1)[0].replace("-", "_")
            names.add(name[3:] if name.startswith("no_") else name)
    return names
