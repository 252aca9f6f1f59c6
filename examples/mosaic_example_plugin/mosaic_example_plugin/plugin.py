"""An example third-party plugin with an extras key of its own, ``thresh_level``: when set,
it watches the run's metrics and notes (a ``note`` event, a heartbeat field, a manifest
section) the first time the episodic return reaches that level. Without the key it does
nothing, so installing it changes no one's runs."""

import math

from mosaic_core import ExtrasKey, hookimpl

KEY = "thresh_level"


def _level(run):
    return run.config.extras.get(KEY)


@hookimpl
def mosaic_extras_keys():
    return [ExtrasKey(KEY, "note when the episodic return first reaches this level")]


@hookimpl
def mosaic_validate_config(config):
    value = config.extras.get(KEY)
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
    ):
        return [f"extras.{KEY}: must be a finite number, got {value!r}"]
    return None


@hookimpl
def mosaic_on_event(run, event):
    level = _level(run)
    if level is None or event["event"] != "metrics" or KEY in run.state:
        return
    value = event["payload"].get("episodic_return")
    if isinstance(value, (int, float)) and value >= level:
        run.state[KEY] = {"level": level, "reached_at_step": event["payload"].get("global_step"), "return": value}
        run.emit("note", {"text": f"episodic return {value} reached {KEY} {level}"})


@hookimpl
def mosaic_on_heartbeat(run):
    if _level(run) is not None:
        return {KEY: run.state.get(KEY, {"level": _level(run), "reached_at_step": None})}
    return None


@hookimpl
def mosaic_build_manifest(run, status):
    if _level(run) is not None:
        return {KEY: {**run.state.get(KEY, {"level": _level(run), "reached_at_step": None}), "status_seen": status}}
    return None


@hookimpl
def mosaic_child_env(run):
    return {"MOSAIC_EXAMPLE_PLUGIN": "1"} if _level(run) is not None else None
