"""An experiment spec (TOML): a grid of (worker, algo, env, overrides) × seeds.

.. code-block:: toml

    name = "cartpole"            # letters, digits, - and _; tags every run (extras.experiment)
    seeds = [1, 2, 3]            # or a count: 3 → seeds 1, 2, 3
    total_timesteps = 20000
    parallel = 2                 # runs at a time on this machine (default 1)

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

Any other key is refused, naming it and the file. A spec is a regular file of at most 1 MiB
(a FIFO is refused, never waited on) nesting at most 32 levels, with at most 1000 seeds, 1000
groups and 10,000 runs: each checked before anything is expanded.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import reprlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import UsageError
from mosaic_core.toolkit import MAX_DEPTH, MAX_SEED, depth, read_spec_text

TOP_KEYS = ("name", "seeds", "total_timesteps", "parallel", "grid", "group")
GROUP_KEYS = ("worker", "algo", "env", "overrides", "extras", "total_timesteps")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
MAX_SEEDS = 1000
MAX_GROUPS = 1000
MAX_RUNS = 10_000  # groups × seeds: each is a `mosaic run`


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
    """Read (a regular file, within a size cap) and validate the spec; everything is checked,
    sizes first, before a group or a seed is expanded. Each problem is one UsageError."""
    text = read_spec_text(path, "experiment spec")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"experiment spec {path}: not valid TOML ({exc})") from None
    except RecursionError:
        data = None
    if data is None or depth(data) > MAX_DEPTH:
        raise UsageError(f"experiment spec {path}: nests deeper than {MAX_DEPTH} levels")

    def fail(where: str, why: str) -> UsageError:
        return UsageError(f"experiment spec {path}: {where}: {why}")

    _known(data, TOP_KEYS, "", fail)
    name = data.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise fail("name", f"must be letters, digits, - and _ (at most 64), got {_shown(name)}")
    seeds = _seeds(data.get("seeds", 3), fail)
    budget = _positive_or_none(data.get("total_timesteps"), "total_timesteps", fail)
    parallel = _positive(data.get("parallel", 1), "parallel", fail)
    listed = data.get("group", [])
    if not isinstance(listed, list):
        raise fail("group", "must be [[group]] tables")
    entries = _grid(data.get("grid"), len(listed), fail) + listed
    if not entries:
        raise fail("grid", "names no group: give [grid] lists or [[group]] tables")
    if len(entries) * len(seeds) > MAX_RUNS:
        raise fail("seeds", f"{len(entries)} groups × {len(seeds)} seeds is more than {MAX_RUNS} runs")
    groups = [_group(entry, i, budget, fail) for i, entry in enumerate(entries)]
    if len({g.key for g in groups}) != len(groups):
        raise fail("group", "two groups train the same thing")
    return Experiment(name, seeds, groups, parallel, path)


def _seeds(value: Any, fail) -> list[int]:
    """A count (seeds 1…N) or a list of distinct seeds, at most :data:`MAX_SEEDS` of them."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_SEEDS:
        return list(range(1, value + 1))
    if (
        isinstance(value, list)
        and 0 < len(value) <= MAX_SEEDS
        and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_SEED for s in value)
        and len(set(value)) == len(value)
    ):
        return value
    raise fail(
        "seeds",
        f"a count or a list of distinct seeds (integers 0…{MAX_SEED}), at most {MAX_SEEDS} of them; got {_shown(value)}",
    )


def _shown(value: Any) -> str:
    """``value`` for a one-line message: its repr, cut short (a spec's value may be anything)."""
    return reprlib.repr(value)


def _known(table: dict[str, Any], keys: tuple[str, ...], where: str, fail) -> None:
    for key in table:
        if key not in keys:
            import difflib

            close = difflib.get_close_matches(key, keys, n=1)
            raise fail(
                f"{where}{key}",
                "unknown key" + (f" (did you mean {close[0]!r}?)" if close else "") + f"; known: {', '.join(keys)}",
            )


def _positive_or_none(value: Any, where: str, fail) -> int | None:
    return None if value is None else _positive(value, where, fail)


def _positive(value: Any, where: str, fail) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise fail(where, f"must be a positive integer, got {_shown(value)}")
    return value


def _grid(grid: Any, listed: int, fail) -> list[dict[str, Any]]:
    """The grid's combinations; their number (with ``listed`` groups) is checked before any is made."""
    if grid is None:
        return []
    if not isinstance(grid, dict):
        raise fail("grid", "must be a table of lists")
    _known(grid, ("worker", "algo", "env", "overrides"), "grid.", fail)
    axes = {k: v if isinstance(v, list) else [v] for k, v in grid.items()}
    for key in ("worker", "algo", "env"):
        if not axes.get(key):
            raise fail(f"grid.{key}", "a non-empty list is needed")
    combinations = math.prod(len(values) for values in axes.values())
    if combinations + listed > MAX_GROUPS:
        raise fail("grid", f"{combinations} combinations (and {listed} groups) are more than {MAX_GROUPS} groups")
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


def _group(entry: Any, index: int, budget: int | None, fail) -> GroupSpec:
    where = f"group {index + 1}"
    if not isinstance(entry, dict):
        raise fail(where, "must be a table")
    _known(entry, GROUP_KEYS, f"{where}: ", fail)
    for key in ("worker", "algo", "env"):
        value = entry.get(key)
        if not isinstance(value, str) or not value or len(value) > 256 or not value.isprintable():
            raise fail(f"{where}.{key}", f"a name (1-256 printable characters) is needed, got {_shown(value)}")
    for key in ("overrides", "extras"):
        if not isinstance(entry.get(key, {}), dict):
            raise fail(f"{where}.{key}", "must be a table")
        try:  # what reaches a run's config: JSON values only (TOML's dates and nan are not)
            json.dumps(entry.get(key, {}), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise fail(f"{where}.{key}", f"holds a value a run's config cannot take ({exc})") from None
    total = _positive(entry.get("total_timesteps", budget), f"{where}.total_timesteps", fail)
    return GroupSpec(
        entry["worker"],
        entry["algo"],
        entry["env"],
        total,
        dict(entry.get("overrides", {})),
        dict(entry.get("extras", {})),
    )
