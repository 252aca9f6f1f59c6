"""The submit form: built from any worker's declared options (``Worker.describe_options``,
a :class:`mosaic_core.types.WorkerForm`) and capabilities, and the parsing of what the page
sends back into a worker config for ``SubmitRun``.

The dashboard knows no worker: it loads the installed worker the daemon names and asks it
(the CleanRL worker answers with its algorithms and the fields of a script's ``Args``). Only
values that differ from a default are sent, under the extras key the worker names (e.g.
``extras.algo_params``). Bad input raises :class:`FormError` naming the field.
"""

from __future__ import annotations

from typing import Any

from mosaic_core import ConfigError, MosaicError, WorkerForm
from mosaic_core.toolkit import check_run_id

TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


class FormError(ValueError):
    """Malformed form input; the message names the field."""


def worker_form(name: str, algo: str | None) -> WorkerForm:
    """What installed worker ``name`` offers for ``algo`` (None: its default); FormError if it
    cannot say (an unknown algo, an unreadable script: the worker's message)."""
    from mosaic_core.toolkit import find_worker, load_worker

    try:
        form = load_worker(find_worker(name)).describe_options(algo or None)
    except MosaicError as exc:
        raise FormError(f"algo: {exc}" if algo else f"worker: {exc}") from None
    if not isinstance(form, WorkerForm):
        raise FormError(f"worker: {name!r} described its options as {type(form).__name__}, not a WorkerForm")
    return form


def form_schema(worker: dict[str, Any], algo: str | None) -> dict[str, Any]:
    """What the page needs to draw the form for ``worker`` (a daemon WorkerInfo as a dict)."""
    metadata = worker.get("metadata") or {}
    form = worker_form(str(worker.get("name")), algo)
    return {
        "worker": worker.get("name"),
        "capabilities": metadata.get("capabilities") or {},
        "algos": list(form.algos),
        "algo": form.algo,
        "fields": [o.to_dict() for o in form.options],
        "script": form.source,
        "extras_key": form.extras_key,
    }


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


def live_frames_keys() -> list[str]:
    """The extras keys that, set to true, ask for live frames (declared ``ExtrasKey(live_frames=True)``
    by the plugin that publishes them): the form's "live frames" box sets them."""
    from mosaic_core.toolkit import plugin_host

    return [key.name for _plugin, key in plugin_host().extras_keys() if key.live_frames and not key.prefix]


def parse_submission(form: Any, described: WorkerForm | None) -> dict[str, Any]:
    """The worker config (with ``worker``) for a submitted form, whose options ``described``
    says (:func:`worker_form`); FormError names a bad field."""
    if not isinstance(form, dict):
        raise FormError("the form must be sent as a JSON object")
    worker = form.get("worker")
    if not isinstance(worker, str) or not worker:
        raise FormError("worker: required (one of the daemon's workers)")
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
    if form.get("live_frames") not in (None, False, "", "false"):
        config["extras"].update(dict.fromkeys(live_frames_keys(), True))
    described = described or WorkerForm()
    params = _option_values(form.get("args") or {}, [o.to_dict() for o in described.options], str(algo or worker))
    if params and described.extras_key:
        config["extras"][described.extras_key] = params
    else:
        config["extras"].update(params)
    return config


def _option_values(values: Any, fields: list[dict[str, Any]], algo: str) -> dict[str, Any]:
    if not isinstance(values, dict):
        raise FormError("args: must be an object of field name to value")
    by_name = {f["name"]: f for f in fields}
    params: dict[str, Any] = {}
    for name, text in values.items():
        field = by_name.get(name)
        if field is None:
            raise FormError(f"args.{name}: not an option of {algo}")
        if text is None or (isinstance(text, str) and not text.strip()):
            continue  # left empty: the script's default
        kind = field["kind"]
        if kind == "list":
            items = [t for t in str(text).replace(",", " ").split() if t]
            value: Any = [_convert(f"args.{name}", field.get("item_kind") or "str", t) for t in items]
        else:
            value = _convert(
                f"args.{name}",
                kind if kind in ("bool", "int", "float", "literal") else "str",
                text,
                field.get("choices"),
            )
        if value != field.get("default"):
            params[name] = value
    return params
