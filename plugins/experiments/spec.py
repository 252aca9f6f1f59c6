"""An experiment spec (TOML): a grid of (worker, algo, env, overrides) × seeds.

.. code-block:: toml

    name = "cartpole"            # letters, digits, - and _; tags every run (extras.experiment)
    seeds = [1, 2, 3]            # or a count: 3 → seeds 1, 2, 3
    total_timesteps = 20000
    parallel = 2                 # runs at a time on this machine (default 1; `concurrency` before)

    [grid]                       # every combination of these lists
    worker = ["cleanrl"]
    algo = ["ppo", "dqn"]
    env = ["CartPole-v1"]

    [[group]]                    # and/or groups named one by one
    worker = "cleanrl"
    algo = "ppo"
    env = "CartPole-v1"
    overrides = { learning_rate = 0.001 }   # the algorithm's parameters (extras.algo_params)
    extras = { }                            # other run extras
    total_timesteps = 50000                 # this group's budget

Any other key is refused, naming it and the file.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import UsageError, say_renamed

TOP_KEYS = ("name", "seeds", "total_timesteps", "parallel", "grid", "group")
GROUP_KEYS = ("worker", "algo", "env", "overrides", "extras", "total_timesteps")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True)
class GroupSpec:
    worker: str
    algo: str
    env: str
    total_timesteps: int
    overrides: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A short stable id of what the group trains (its runs' ids carry it)."""
        text = json.dumps(
            [self.worker, self.algo, self.env, self.total_timesteps, self.overrides, self.extras],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    @property
    def label(self) -> str:
        shown = " ".join(f"{k}={v}" for k, v in sorted(self.overrides.items()))
        return " ".join(w for w in (self.worker, self.algo, self.env, shown) if w)


@dataclass(frozen=True)
class Experiment:
    name: str
    seeds: list[int]
    groups: list[GroupSpec]
    parallel: int  # runs at a time
    source: Path

    def run_id(self, group: GroupSpec, seed: int) -> str:
        return f"{self.name}-{group.algo.replace('/', '_')[:24]}-{group.key}-s{seed}"


def load(path: Path) -> Experiment:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"experiment spec {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"experiment spec {path}: not valid TOML ({exc})") from None

    def fail(where: str, why: str) -> UsageError:
        return UsageError(f"experiment spec {path}: {where}: {why}")

    if "concurrency" in data:  # parallel's old name
        say_renamed("concurrency", "parallel", f"experiment spec {path}")
        data.setdefault("parallel", data.pop("concurrency"))
    _known(data, TOP_KEYS, "", fail)
    name = data.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise fail("name", f"must be letters, digits, - and _ (at most 64), got {name!r}")
    seeds = data.get("seeds", 3)
    if isinstance(seeds, int) and not isinstance(seeds, bool) and seeds > 0:
        seeds = list(range(1, seeds + 1))
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
        or len(set(seeds)) != len(seeds)
    ):
        raise fail("seeds", f"a count or a list of distinct seeds (integers >= 0), got {data.get('seeds')!r}")
    budget = _positive(data.get("total_timesteps"), "total_timesteps", fail, required=False)
    parallel = _positive(data.get("parallel", 1), "parallel", fail)
    entries = _grid(data.get("grid"), fail)
    listed = data.get("group", [])
    if not isinstance(listed, list):
        raise fail("group", "must be [[group]] tables")
    entries += listed
    if not entries:
        raise fail("grid", "names no group: give [grid] lists or [[group]] tables")
    groups = [_group(entry, i, budget, fail) for i, entry in enumerate(entries)]
    if len({g.key for g in groups}) != len(groups):
        raise fail("group", "two groups train the same thing")
    return Experiment(name, seeds, groups, parallel, path)


def _known(table: dict[str, Any], keys: tuple[str, ...], where: str, fail) -> None:
    for key in table:
        if key not in keys:
            import difflib

            close = difflib.get_close_matches(key, keys, n=1)
            raise fail(
                f"{where}{key}",
                "unknown key" + (f" (did you mean {close[0]!r}?)" if close else "") + f"; known: {', '.join(keys)}",
            )


def _positive(value: Any, where: str, fail, required: bool = True) -> int | None:
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise fail(where, f"must be a positive integer, got {value!r}")
    return value


def _grid(grid: Any, fail) -> list[dict[str, Any]]:
    if grid is None:
        return []
    if not isinstance(grid, dict):
        raise fail("grid", "must be a table of lists")
    _known(grid, ("worker", "algo", "env", "overrides"), "grid.", fail)
    axes = {k: v if isinstance(v, list) else [v] for k, v in grid.items()}
    for key in ("worker", "algo", "env"):
        if not axes.get(key):
            raise fail(f"grid.{key}", "a non-empty list is needed")
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


def _group(entry: Any, index: int, budget: int | None, fail) -> GroupSpec:
    where = f"group {index + 1}"
    if not isinstance(entry, dict):
        raise fail(where, "must be a table")
    _known(entry, GROUP_KEYS, f"{where}: ", fail)
    for key in ("worker", "algo", "env"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise fail(f"{where}.{key}", f"a non-empty string is needed, got {entry.get(key)!r}")
    for key in ("overrides", "extras"):
        if not isinstance(entry.get(key, {}), dict):
            raise fail(f"{where}.{key}", "must be a table")
    total = _positive(entry.get("total_timesteps", budget), f"{where}.total_timesteps", fail)
    return GroupSpec(
        entry["worker"],
        entry["algo"],
        entry["env"],
        total,
        dict(entry.get("overrides", {})),
        dict(entry.get("extras", {})),
    )
