"""The submit form: built from a worker's capabilities and the algorithm's ``Args``, and the
parsing of what the page sends back into a worker config for ``SubmitRun``.

``Args`` are read with :mod:`cleanrl_worker.script_args` (ast, no torch import), so the form
shows the script's own fields, types, defaults and help. Only values that differ from a
default are sent, as ``extras.algo_params``. Bad input raises :class:`FormError` naming the field.
"""

from __future__ import annotations

from typing import Any

from mosaic_core.config import check_run_id
from mosaic_core.errors import ConfigError, MosaicError

# Fields the form asks for itself (the host turns them into flags), never as algorithm fields.
HOST_FIELDS = {"env_id", "total_timesteps", "seed", "track", "wandb_project_name", "wandb_entity"}
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


class FormError(ValueError):
    """Malformed form input; the message names the field."""


def algorithm_fields(algo: str) -> tuple[list[dict[str, Any]], str]:
    """The form fields of an algorithm's ``Args`` and the script they come from; FormError if none."""
    from cleanrl_worker.registry import resolve
    from cleanrl_worker.script_args import read_script_args

    try:
        resolved = resolve(algo)
        fields = read_script_args(resolved.script).fields
    except MosaicError as exc:  # unknown algo, unreadable script, no Args class: the registry says which
        raise FormError(f"algo: {exc}") from None
    shown = []
    for field in fields.values():
        if field.name in HOST_FIELDS:
            continue
        entry = field.to_dict()
        entry["choices"] = list(field.choices) if field.choices else None
        entry["item_kind"] = field.item_kind
        shown.append(entry)
    return shown, str(resolved.script)


def algorithm_names() -> list[str]:
    from cleanrl_worker.registry import list_algorithms

    return [entry.name for entry in list_algorithms() if entry.winner is not None]


def form_schema(worker: dict[str, Any], algo: str | None) -> dict[str, Any]:
    """What the page needs to draw the form for ``worker`` (a daemon WorkerInfo as a dict)."""
    metadata = worker.get("metadata") or {}
    capabilities = metadata.get("capabilities") or {}
    schema: dict[str, Any] = {"worker": worker.get("name"), "capabilities": capabilities,
                              "algos": [], "algo": None, "fields": [], "script": None}
    if capabilities.get("worker_type", worker.get("name")) != "cleanrl":
        return schema  # other workers: the base fields only
    schema["algos"] = algorithm_names()
    schema["algo"] = algo or ("ppo" if "ppo" in schema["algos"] else (schema["algos"] or [None])[0])
    if schema["algo"] is not None:
        schema["fields"], schema["script"] = algorithm_fields(schema["algo"])
    return schema


def _convert(name: str, kind: str, text: Any, choices: list | None = None) -> Any:
    if kind == "bool":
        if isinstance(text, bool):
            return text
        lowered = str(text).strip().lower()
        if lowered in TRUE or lowered in FALSE:
            return lowered in TRUE
        raise FormError(f"{name}: {text!r} is not true or false")
    if not isinstance(text, (str, int, float)) or isinstance(text, bool):
        raise FormError(f"{name}: expected a {kind}, got {type(text).__name__}")
    text = str(text).strip()
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            value = float(text)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError
            return value
    except ValueError:
        raise FormError(f"{name}: {text!r} is not {'a whole number' if kind == 'int' else 'a number'}") from None
    if kind == "literal" and choices and text not in [str(c) for c in choices]:
        raise FormError(f"{name}: {text!r} is not one of {', '.join(map(str, choices))}")
    if kind == "literal" and choices:
        return next(c for c in choices if str(c) == text)
    return text


def parse_submission(form: Any, schema_fields: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The worker config (with ``worker``) for a submitted form; FormError names a bad field."""
    if not isinstance(form, dict):
        raise FormError("the form must be sent as a JSON object")
    worker = form.get("worker") or "cleanrl"
    algo = form.get("algo")
    env_id = form.get("env_id")
    if not isinstance(env_id, str) or not env_id.strip():
        raise FormError("env_id: required (e.g. CartPole-v1)")
    total = _convert("total_timesteps", "int", form.get("total_timesteps", ""))
    if total <= 0:
        raise FormError(f"total_timesteps: must be > 0, got {total}")
    config: dict[str, Any] = {"worker": worker, "env_id": env_id.strip(), "total_timesteps": total, "extras": {}}
    if algo:
        config["algo"] = str(algo)
    if str(form.get("seed", "")).strip():
        config["seed"] = _convert("seed", "int", form["seed"])
    run_id = str(form.get("run_id") or "").strip()
    if run_id:
        try:
            config["run_id"] = check_run_id(run_id)
        except ConfigError:
            raise FormError(f"run_id: {run_id[:80]!r} may hold only letters, digits, '-' and '_'") from None
    if form.get("fastlane") not in (None, False, "", "false"):
        config["extras"]["fastlane"] = True
    config["extras"].update(_algo_params(form.get("args") or {}, schema_fields or [], str(algo)))
    return config


def _algo_params(values: Any, fields: list[dict[str, Any]], algo: str) -> dict[str, Any]:
    if not isinstance(values, dict):
        raise FormError("args: must be an object of field name to value")
    by_name = {f["name"]: f for f in fields}
    params: dict[str, Any] = {}
    for name, text in values.items():
        field = by_name.get(name)
        if field is None:
            raise FormError(f"args.{name}: not a field of {algo}'s Args")
        if text is None or (isinstance(text, str) and not text.strip()):
            continue  # left empty: the script's default
        kind = field["kind"]
        if kind == "list":
            items = [t for t in str(text).replace(",", " ").split() if t]
            value: Any = [_convert(f"args.{name}", field.get("item_kind") or "str", t) for t in items]
        else:
            value = _convert(f"args.{name}", kind if kind in ("bool", "int", "float", "literal") else "str",
                             text, field.get("choices"))
        if value != field.get("default"):
            params[name] = value
    return {"algo_params": params} if params else {}
