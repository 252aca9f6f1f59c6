"""A sweep spec: what to run per trial, the search space, the objective, sampler and pruner.

Read from TOML (stdlib ``tomllib``) or JSON, validated into frozen dataclasses before anything
runs; every problem is a :class:`~mosaic_core.errors.UsageError` (exit 2) naming the key and
the file. Nothing here imports Optuna: the sampler and pruner options are checked against the
Optuna classes by :mod:`mosaic_sweep.study`. See ``examples/sweep/ppo_cartpole.toml``.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import reprlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from mosaic_core import UsageError
from mosaic_core.toolkit import MAX_DEPTH, depth, read_spec_text

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")
PARAM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_SEEDS = 1000  # per trial
TOP_KEYS = (
    "study_name",
    "worker",
    "algo",
    "env_id",
    "env_ids",
    "seeds",
    "seed_start",
    "total_timesteps",
    "max_trials",
    "storage",
    "heartbeat_s",
    "max_retries",
    "algo_params",
    "extras",
    "objective",
    "sampler",
    "pruner",
    "params",
)
OBJECTIVE_KEYS = ("metric", "last_n", "direction", "aggregate")
PARAM_KEYS = ("type", "low", "high", "log", "step", "choices", "when")
AGGREGATES = ("mean", "median", "min", "max")
SAMPLERS = {
    "tpe": "TPESampler",
    "random": "RandomSampler",
    "grid": "GridSampler",
    "cmaes": "CmaEsSampler",
    "qmc": "QMCSampler",
    "gp": "GPSampler",
}
PRUNERS = {
    "none": "NopPruner",
    "median": "MedianPruner",
    "percentile": "PercentilePruner",
    "successive_halving": "SuccessiveHalvingPruner",
    "hyperband": "HyperbandPruner",
    "threshold": "ThresholdPruner",
    "wilcoxon": "WilcoxonPruner",
}
ENV_PARAM = "env_id"  # the search dimension added when a spec names several env ids
DEFAULT_METRIC = "charts/episodic_return"


@dataclass(frozen=True)
class Param:
    """One dimension of the search space; its value becomes ``algo_params.<name>``."""

    name: str
    type: str  # float | int | categorical
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()
    when: tuple[tuple[str, Any], ...] = ()  # sampled only when every earlier param named has that value

    def grid_values(self) -> list[Any]:
        if self.type == "categorical":
            return list(self.choices)
        low, high = self.bounds()
        return list(range(int(low), int(high) + 1, int(self.step or 1)))

    def bounds(self) -> tuple[float, float]:
        """``low`` and ``high`` of an int or float parameter (the parser required both)."""
        if self.low is None or self.high is None:
            raise ValueError(f"parameter {self.name}: a {self.type} parameter has low and high")
        return self.low, self.high

    def first_value(self) -> Any:
        if self.type == "categorical":
            return self.choices[0]
        low = self.bounds()[0]
        return int(low) if self.type == "int" else low


@dataclass(frozen=True)
class Objective:
    metric: str = DEFAULT_METRIC
    last_n: int = 10  # a metric other than the return: mean of its last N values in each seed's run
    direction: Literal["minimize", "maximize"] = "maximize"
    aggregate: str = "mean"  # over the trial's seeds


@dataclass(frozen=True)
class SweepSpec:
    study_name: str
    algo: str
    env_ids: tuple[str, ...]
    total_timesteps: int
    worker: str  # the spec's `worker`, else the one `mosaic run` would choose (mosaic_core.choice)
    seeds: tuple[int, ...] = (1,)
    max_trials: int = 20
    storage: str | None = None
    heartbeat_s: int = 10
    max_retries: int = 2
    algo_params: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    objective: Objective = field(default_factory=Objective)
    sampler: dict[str, Any] = field(default_factory=lambda: {"type": "tpe"})
    pruner: dict[str, Any] = field(default_factory=lambda: {"type": "median"})
    params: tuple[Param, ...] = ()
    source: str = "<spec>"

    @property
    def grid(self) -> bool:
        return self.sampler.get("type") == "grid"

    def dimensions(self) -> dict[str, list[Any]]:
        """The grid: every param's values, plus ``env_id`` when several envs are named."""
        grid = {p.name: p.grid_values() for p in self.params}
        if len(self.env_ids) > 1:
            grid[ENV_PARAM] = list(self.env_ids)
        return grid

    def space(self) -> dict[str, Any]:
        """What must match for two sweep processes to share a study: params, envs, direction."""
        return {
            "params": [_param_record(p) for p in self.params],
            "env_ids": list(self.env_ids),
            "direction": self.objective.direction,
        }

    def to_dict(self) -> dict[str, Any]:
        """The spec as a spec file would hold it (``parse_spec`` reads it back)."""
        data = asdict(self)
        data["params"] = {p.name: {k: v for k, v in _param_record(p).items() if k != "name"} for p in self.params}
        data["env_ids"], data["seeds"] = list(self.env_ids), list(self.seeds)
        data.pop("source")
        return data

    def for_process(self, index: int) -> SweepSpec:
        """Sweep process ``index`` of ``--parallel N``: a fixed sampler seed becomes seed + index, or
        every process would draw the same parameters (Optuna's samplers are per process)."""
        seed = self.sampler.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool) and index:
            return replace(self, sampler={**self.sampler, "seed": seed + index})
        return self

    def with_overrides(self, **values: Any) -> SweepSpec:
        """``--study-name``, ``--max-trials``, ``--total-timesteps``, ``--seeds``, ``--storage``."""
        changes = {k: v for k, v in values.items() if v is not None}
        where = "command line"
        if "study_name" in changes:
            _check_name(changes["study_name"], "--study-name", where)
        for key, flag in (("max_trials", "--max-trials"), ("total_timesteps", "--total-timesteps")):
            if key in changes and changes[key] < 1:
                raise UsageError(f"{flag} must be >= 1, got {changes[key]}")
        if "seeds" in changes:
            if not 1 <= changes["seeds"] <= MAX_SEEDS:
                raise UsageError(f"--seeds must be >= 1 and at most {MAX_SEEDS}, got {changes['seeds']}")
            start = self.seeds[0] if self.seeds else 1
            changes["seeds"] = tuple(range(start, start + changes["seeds"]))
        return replace(self, **changes)


def _param_record(p: Param) -> dict[str, Any]:
    record = {k: v for k, v in asdict(p).items() if v not in (None, (), False)}
    if p.choices:
        record["choices"] = list(p.choices)
    if p.when:
        record["when"] = dict(p.when)
    return record


# ------------------------------------------------------------------ loading
def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a spec file (``.toml`` or ``.json``)."""
    path = Path(path)
    where = str(path)
    text = read_spec_text(path, "sweep spec")  # a regular file (a FIFO is never waited on), size-capped
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text)
        elif path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            raise UsageError(f"sweep spec {where}: use a .toml or .json file")
    except (UnicodeDecodeError, ValueError) as exc:  # tomllib.TOMLDecodeError and JSONDecodeError are ValueErrors
        raise UsageError(f"sweep spec {where} is not valid {path.suffix[1:].upper()}: {exc}") from None
    except RecursionError:
        data = None
    if data is None or depth(data) > MAX_DEPTH:
        raise UsageError(f"sweep spec {where}: nests deeper than {MAX_DEPTH} levels")
    if not isinstance(data, dict):
        raise UsageError(f"sweep spec {where}: the top level must be a table/object")
    return parse_spec(data, where, default_name=path.stem)


def parse_spec(data: dict[str, Any], where: str = "<spec>", default_name: str = "sweep") -> SweepSpec:
    """Validate a spec mapping; errors name ``where`` and the key."""

    def fail(key: str, message: str) -> UsageError:
        return UsageError(f"sweep spec {where}: {key}: {message}")

    _unknown(data, TOP_KEYS, "", fail)
    study_name = data.get("study_name", re.sub(r"[^A-Za-z0-9_\-]", "-", default_name))
    _check_name(study_name, "study_name", where)
    algo = _text(data, "algo", fail, required=True) or ""  # required: never empty here
    worker = _text(data, "worker", fail)
    if "env_id" in data and "env_ids" in data:
        raise fail("env_ids", "give env_id or env_ids, not both")
    envs = data.get("env_ids", [data["env_id"]] if "env_id" in data else None)
    key = "env_ids" if "env_ids" in data else "env_id"
    if envs is None:
        raise fail("env_id", "missing (the gymnasium env id to train on, or env_ids = [...])")
    if not isinstance(envs, list) or not envs or not all(isinstance(e, str) and e.strip() for e in envs):
        raise fail(key, f"must be a non-empty string or list of strings, got {envs!r}")
    if len(set(envs)) != len(envs):
        raise fail(key, "lists an env id twice")
    total = _int(data, "total_timesteps", fail, required=True, minimum=1)
    seeds = _seeds(data, fail)
    extras = _table(data, "extras", fail)
    worker = worker or _default_worker(algo, envs[0], extras, fail)
    spec = SweepSpec(
        study_name=study_name,
        algo=algo,
        worker=worker,
        env_ids=tuple(envs),
        total_timesteps=total,
        seeds=seeds,
        max_trials=_int(data, "max_trials", fail, minimum=1, default=20),
        storage=_text(data, "storage", fail),
        heartbeat_s=_int(data, "heartbeat_s", fail, minimum=1, default=10),
        max_retries=_int(data, "max_retries", fail, minimum=0, default=2),
        algo_params=_table(data, "algo_params", fail),
        extras=extras,
        objective=_objective(data.get("objective", {}), fail),
        sampler=_choice_table(data, "sampler", SAMPLERS, "tpe", fail),
        pruner=_choice_table(data, "pruner", PRUNERS, "median", fail),
        params=_params(data.get("params", {}), fail),
        source=where,
    )
    _cross_checks(spec, fail)
    return spec


def _default_worker(algo: str, env_id: str, extras: dict[str, Any], fail: Any) -> str:
    """The worker `mosaic run` would send a run of this algo and env to (the host's rule)."""
    from mosaic_core.toolkit import choose_worker

    try:
        return choose_worker(data={"algo": algo, "env_id": env_id, "extras": extras})
    except UsageError as exc:
        raise fail("worker", str(exc)) from None


def _unknown(table: dict[str, Any], known: tuple[str, ...], prefix: str, fail: Any) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else f" (known: {', '.join(known)})"
            raise fail(f"{prefix}{key}", f"unknown key{hint}")


def _check_name(name: Any, key: str, where: str) -> None:
    if not isinstance(name, str) or not NAME.match(name):
        raise UsageError(
            f"sweep spec {where}: {key}: must be 1-64 letters, digits, '-' or '_' "
            f"(it names files and run ids), got {name!r}"
        )


def _text(data: dict[str, Any], key: str, fail: Any, required: bool = False) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise fail(key, "missing")
        return None
    if not isinstance(value, str) or not value.strip():
        raise fail(key, f"must be a non-empty string, got {value!r}")
    return value


def _int(
    data: dict[str, Any], key: str, fail: Any, *, required: bool = False, minimum: int = 0, default: int | None = None
) -> int:
    value = data.get(key, default)
    if value is None:
        raise fail(key, "missing")
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise fail(key, f"must be an integer >= {minimum}, got {value!r}")
    return value


def _table(data: dict[str, Any], key: str, fail: Any) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise fail(key, f"must be a table, got {type(value).__name__}")
    for name in value:
        if key == "extras" and str(name).startswith("optuna_"):
            raise fail(f"{key}.{name}", "optuna_* keys are set by the sweep for each run")
        if not PARAM.match(str(name)):
            raise fail(f"{key}.{name}", "keys must be identifiers")
    return dict(value)


def _seeds(data: dict[str, Any], fail: Any) -> tuple[int, ...]:
    value = data.get("seeds", 1)
    start = _int(data, "seed_start", fail, minimum=0, default=1)
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= MAX_SEEDS:
            raise fail(
                "seeds", f"must be >= 1 and at most {MAX_SEEDS} (seeds per trial) or a list of seeds, got {value}"
            )
        return tuple(range(start, start + value))
    if (
        isinstance(value, list)
        and 0 < len(value) <= MAX_SEEDS
        and len(set(value)) == len(value)
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value)
    ):
        if "seed_start" in data:
            raise fail("seed_start", "only applies when seeds is a count")
        return tuple(value)
    raise fail(
        "seeds",
        f"must be a count >= 1 or a list of distinct seeds >= 0 (at most {MAX_SEEDS}), got {reprlib.repr(value)}",
    )


def _objective(value: Any, fail: Any) -> Objective:
    if not isinstance(value, dict):
        raise fail("objective", "must be a table")
    _unknown(value, OBJECTIVE_KEYS, "objective.", fail)
    metric = value.get("metric", DEFAULT_METRIC)
    if not isinstance(metric, str) or not metric.strip():
        raise fail("objective.metric", f"must be a scalar tag such as {DEFAULT_METRIC}, got {metric!r}")
    last_n = _int(value, "last_n", lambda k, m: fail(f"objective.{k}", m), minimum=1, default=10)
    direction = value.get("direction", "maximize")
    if direction not in ("maximize", "minimize"):
        raise fail("objective.direction", f"must be maximize or minimize, got {direction!r}")
    aggregate = value.get("aggregate", "mean")
    if aggregate not in AGGREGATES:
        raise fail("objective.aggregate", f"must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
    return Objective(metric, last_n, direction, aggregate)


def _choice_table(data: dict[str, Any], key: str, known: dict[str, str], default: str, fail: Any) -> dict[str, Any]:
    value = data.get(key, {"type": default})
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, dict):
        raise fail(key, "must be a table with a type")
    kind = value.get("type", default)
    if kind not in known:
        close = difflib.get_close_matches(str(kind), list(known), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise fail(f"{key}.type", f"unknown {key} {kind!r} (known: {', '.join(known)}){hint}")
    return {**value, "type": kind}


def _params(value: Any, fail: Any) -> tuple[Param, ...]:
    if not isinstance(value, dict):
        raise fail("params", "must be a table of [params.NAME] tables")
    params: list[Param] = []
    for name, body in value.items():
        key = f"params.{name}"
        if not PARAM.match(name):
            raise fail(key, "parameter names are identifiers (they become script flags)")
        if name == ENV_PARAM:
            raise fail(key, "env_id is not a hyperparameter; list the envs in env_ids")
        if not isinstance(body, dict):
            raise fail(key, "must be a table with a type")
        _unknown(body, PARAM_KEYS, f"{key}.", fail)
        params.append(_param(name, body, {p.name: p for p in params}, lambda k, m, key=key: fail(f"{key}{k}", m)))
    return tuple(params)


def _number(body: dict[str, Any], key: str, fail: Any, integer: bool) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not math.isfinite(value):
        raise fail(f".{key}", f"must be {'an integer' if integer else 'a number'}, got {value!r}")
    return value


def _param(name: str, body: dict[str, Any], earlier: dict[str, Param], fail: Any) -> Param:
    kind = body.get("type")
    if kind not in ("float", "int", "categorical"):
        raise fail(".type", f"must be float, int or categorical, got {kind!r}")
    when = body.get("when", {})
    if not isinstance(when, dict):
        raise fail(".when", "must be a table {earlier_param = value}")
    for other, wanted in when.items():
        if other not in earlier:
            raise fail(f".when.{other}", "names no parameter defined before this one")
        prior = earlier[other]
        if prior.type != "categorical" or wanted not in prior.choices:
            raise fail(f".when.{other}", f"{wanted!r} is not one of the choices of params.{other}")
    if kind == "categorical":
        for extra in ("low", "high", "log", "step"):
            if extra in body:
                raise fail(f".{extra}", "does not apply to a categorical parameter")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            raise fail(".choices", "must be a non-empty list")
        if any(isinstance(c, (dict, list)) for c in choices) or len({json.dumps(c) for c in choices}) != len(choices):
            raise fail(".choices", "must be distinct strings, numbers or booleans")
        return Param(name, kind, choices=tuple(choices), when=tuple(when.items()))
    if "choices" in body:
        raise fail(".choices", f'does not apply to a {kind} parameter (use type = "categorical")')
    integer = kind == "int"
    low, high = _number(body, "low", fail, integer), _number(body, "high", fail, integer)
    if low is None or high is None:
        raise fail(".low" if low is None else ".high", "missing")
    if low >= high:
        raise fail("", f"empty or inverted range: low {low} must be below high {high}")
    log = body.get("log", False)
    if not isinstance(log, bool):
        raise fail(".log", f"must be true or false, got {log!r}")
    if log and low <= 0:
        raise fail(".low", f"a log range needs low > 0, got {low}")
    step = _number(body, "step", fail, integer)
    if step is not None and (step <= 0 or log):
        raise fail(".step", "must be > 0, and cannot be combined with log = true")
    return Param(name, kind, low=low, high=high, log=log, step=step, when=tuple(when.items()))


def _cross_checks(spec: SweepSpec, fail: Any) -> None:
    for p in spec.params:
        if p.name in spec.algo_params:
            raise fail(f"params.{p.name}", "is also fixed in algo_params; keep one")
    for key in ("algo_params", "seed", "env_id", "total_timesteps"):
        if key in spec.extras:
            raise fail(f"extras.{key}", "is set by the sweep itself (use the top-level keys / [params])")
    if spec.grid:
        for p in spec.params:
            if p.type == "float":
                raise fail(f"params.{p.name}", "grid mode needs categorical choices or an int range")
            if p.when:
                raise fail(f"params.{p.name}.when", "grid mode takes no conditional parameters")
        options = set(spec.sampler) - {"type", "seed"}
        if options:
            raise fail(f"sampler.{sorted(options)[0]}", "grid mode takes only seed; the grid comes from [params]")


def check_params(spec: SweepSpec, env_id: str, params: dict[str, Any]) -> str | None:
    """Why parameters loaded from storage (an enqueued or stored trial: Optuna only warns about
    values outside a distribution) do not fit the spec, or None when they do: each value must
    be one of the spec's params, inside its range (on its step) or one of its choices, and
    ``env_id`` one of the spec's envs. The study's storage is data, never trusted for these."""
    if env_id not in spec.env_ids:
        return f"env_id {env_id!r} is not one of the spec's env_ids {list(spec.env_ids)}"
    known = {p.name: p for p in spec.params}
    for name, value in params.items():
        param = known.get(name)
        if param is None:
            return f"parameter {name!r} is not in the spec (its params: {', '.join(known) or 'none'})"
        if param.type == "categorical":
            if not any(value == choice and type(value) is type(choice) for choice in param.choices):
                return f"{name}={value!r} is not one of the spec's choices {list(param.choices)}"
            continue
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if param.type == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
            return f"{name}={value!r} is not a whole number"
        if not numeric or not math.isfinite(value) or not param.low <= value <= param.high:
            return f"{name}={value!r} is outside the spec's range [{param.low}, {param.high}]"
        if param.step and abs((value - param.low) / param.step - round((value - param.low) / param.step)) > 1e-6:
            return f"{name}={value!r} is not on the spec's step {param.step} from {param.low}"
    return None
