"""The Optuna side of a sweep: sampler and pruner from the spec, the study, the search space.

The study is created once, before any sweep process starts, with ``load_if_exists`` (two processes
creating a study on a fresh SQLite file at once crash with ``table studies already exists``,
so a failed create is retried as a load). The spec's search space is stored in the study's
user attributes: a second sweep process or machine whose spec differs is refused (exit 2) instead of
mixing two experiments in one study. Optuna is imported inside functions only.
"""

from __future__ import annotations

import inspect
import random
import time
from typing import Any

from mosaic_core import UsageError
from mosaic_core.toolkit import redact
from mosaic_sweep.spec import ENV_PARAM, PRUNERS, SAMPLERS, SweepSpec

SPACE_ATTR = "mosaic_space"
SPEC_ATTR = "mosaic_spec"


def _build(
    kind: str,
    table: dict[str, Any],
    classes: dict[str, str],
    module: Any,
    where: str,
    fixed: dict[str, Any] | None = None,
) -> Any:
    cls = getattr(module, classes[table["type"]])
    options = {k: v for k, v in table.items() if k != "type"}
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "args", "kwargs"}
    for key in options:
        if key not in accepted or key in (fixed or {}):
            known = ", ".join(sorted(accepted - set(fixed or {}))) or "none"
            raise UsageError(f"sweep spec {where}: {kind}.{key}: not an option of {cls.__name__} (options: {known})")
    try:
        return cls(**options, **(fixed or {}))
    except Exception as exc:  # Optuna's own check of a value
        raise UsageError(f"sweep spec {where}: [{kind}] {cls.__name__}: {exc}") from None


def build_sampler(spec: SweepSpec) -> Any:
    import optuna

    fixed = {"search_space": spec.dimensions()} if spec.grid else None
    return _build("sampler", spec.sampler, SAMPLERS, optuna.samplers, spec.source, fixed)


def build_pruner(spec: SweepSpec) -> Any:
    import optuna

    return _build("pruner", spec.pruner, PRUNERS, optuna.pruners, spec.source)


def grid_size(spec: SweepSpec) -> int:
    size = 1
    for values in spec.dimensions().values():
        size *= len(values)
    return size


def open_study(spec: SweepSpec, storage: Any, create: bool, shown_url: str) -> Any:
    """Create (or load) the study and check that its search space is the spec's."""
    import optuna

    sampler, pruner = build_sampler(spec), build_pruner(spec)
    if not create:
        try:
            study = optuna.load_study(study_name=spec.study_name, storage=storage, sampler=sampler, pruner=pruner)
        except KeyError:
            raise UsageError(f"no study {spec.study_name!r} in {shown_url}") from None
    else:
        study = _create(spec, storage, sampler, pruner)
    check_space(study, spec, shown_url)
    return study


def _create(spec: SweepSpec, storage: Any, sampler: Any, pruner: Any) -> Any:
    import optuna

    for attempt in range(5):
        try:
            return optuna.create_study(
                study_name=spec.study_name,
                storage=storage,
                sampler=sampler,
                pruner=pruner,
                direction=spec.objective.direction,
                load_if_exists=True,
            )
        except optuna.exceptions.DuplicatedStudyError:
            pass  # created by another sweep process between the check and the insert
        except Exception:  # e.g. "table studies already exists" from a concurrent first create
            if attempt == 4:
                raise
        time.sleep(0.2 + random.random() * 0.5)
    return optuna.load_study(study_name=spec.study_name, storage=storage, sampler=sampler, pruner=pruner)


def check_space(study: Any, spec: SweepSpec, shown_url: str) -> None:
    """Store the spec's space on first use; refuse a different one afterwards."""
    space = spec.space()
    stored = study.user_attrs.get(SPACE_ATTR)
    if stored is None:
        direction = study.direction.name.lower()
        if direction != spec.objective.direction:
            raise UsageError(
                f"study {spec.study_name!r} in {shown_url} exists with direction {direction}; "
                f"the spec says {spec.objective.direction} (choose another --study-name)"
            )
        study.set_user_attr(SPACE_ATTR, space)
        study.set_user_attr(SPEC_ATTR, redact(spec.to_dict()))  # the storage is on disk: no secret extras
        return
    if stored != space:
        raise UsageError(
            f"study {spec.study_name!r} in {shown_url} exists with a different search space "
            f"({_difference(stored, space)}); choose another --study-name"
        )


def _difference(stored: dict[str, Any], space: dict[str, Any]) -> str:
    if stored.get("direction") != space["direction"]:
        return f"direction {stored.get('direction')} vs {space['direction']}"
    if stored.get("env_ids") != space["env_ids"]:
        return f"env_ids {stored.get('env_ids')} vs {space['env_ids']}"
    old = {p["name"]: p for p in stored.get("params", [])}
    new = {p["name"]: p for p in space["params"]}
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            return f"params.{name}: {old.get(name) or 'absent'} vs {new.get(name) or 'absent'}"
    return "parameter order differs"


def sample(trial: Any, spec: SweepSpec) -> tuple[str, dict[str, Any]]:
    """Define-by-run sampling: (env id, algo params). A param with ``when`` is sampled only
    when every earlier param it names took that value (Optuna's conditional spaces)."""
    env_id = spec.env_ids[0]
    if len(spec.env_ids) > 1:
        env_id = trial.suggest_categorical(ENV_PARAM, list(spec.env_ids))
    values: dict[str, Any] = {}
    for p in spec.params:
        if any(values.get(name, _ABSENT) != wanted for name, wanted in p.when):
            continue
        if p.type == "categorical":
            values[p.name] = trial.suggest_categorical(p.name, list(p.choices))
        elif p.type == "int":
            low, high = p.bounds()
            values[p.name] = trial.suggest_int(p.name, int(low), int(high), step=int(p.step or 1), log=p.log)
        else:
            low, high = p.bounds()
            values[p.name] = trial.suggest_float(p.name, low, high, step=p.step, log=p.log)
    return env_id, values


_ABSENT = object()
