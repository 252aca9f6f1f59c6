"""The worker-config ``extras`` keys the analytics plugin consumes, and their validation.

The plugin owns them (:data:`OWNED`, declared through ``mosaic_extras_keys``), so no worker
ever forwards them as script flags: ``track_wandb``, ``wandb_*`` (``wandb_project_name``,
``wandb_entity``, ``wandb_run_name``, ``wandb_api_key``, ``wandb_email``, ``wandb_mode``), ``tensorboard_dir``,
``checkpoints_dir``, ``notes``, ``metrics_interval_s``. (The ``optuna_*`` keys are the sweep
plugin's.)

Paths are checked before the run directory exists, with the semantics of
:meth:`mosaic_core.runs.RunDirectory.inside`: relative to the run directory and never
escaping it (``../x``, ``/etc`` are refused). The manifest checks them again, resolved.
"""

from __future__ import annotations

import math
import posixpath
from typing import Any

from mosaic_core import ExtrasKey

DEFAULT_METRICS_INTERVAL_S = 1.0
MIN_METRICS_INTERVAL_S = 0.05
PATH_KEYS = ("tensorboard_dir", "checkpoints_dir")
STRING_KEYS = (
    "wandb_project_name",
    "wandb_project",
    "wandb_entity",
    "wandb_run_name",
    "wandb_api_key",
    "wandb_run_path",
    "wandb_email",
    "wandb_http_proxy",
    "wandb_https_proxy",
)
PROXY_KEYS = ("wandb_http_proxy", "wandb_https_proxy")
WANDB_MODES = ("online", "offline", "disabled")
OWNED = [
    ExtrasKey("track_wandb", "log the run to W&B (the script's --track)", bookkeeping=True),
    ExtrasKey("wandb", "reserved for W&B settings", bookkeeping=True),
    ExtrasKey("wandb_", "W&B settings (the keys below)", prefix=True, bookkeeping=True),
    ExtrasKey("wandb_project_name", "W&B project (the script's --wandb-project-name)", bookkeeping=True),
    ExtrasKey("wandb_project", "the same as wandb_project_name (MOSAIC's documentation uses both)", bookkeeping=True),
    ExtrasKey("wandb_entity", "W&B entity (the script's --wandb-entity)", bookkeeping=True),
    ExtrasKey("wandb_run_name", "W&B run name", bookkeeping=True),
    ExtrasKey("wandb_api_key", "W&B API key: reaches the script only through its environment", bookkeeping=True),
    ExtrasKey("wandb_email", "the W&B account's email: the script's WANDB_EMAIL", bookkeeping=True),
    ExtrasKey("wandb_mode", "online, offline or disabled", bookkeeping=True),
    ExtrasKey(
        "wandb_use_vpn_proxy",
        "route W&B through a proxy: wandb_http(s)_proxy, else WANDB_VPN_HTTP(S)_PROXY, "
        "WANDB_HTTP(S)_PROXY, HTTP(S)_PROXY from the host's environment",
        bookkeeping=True,
    ),
    ExtrasKey("wandb_http_proxy", "the HTTP proxy W&B uses (http://host:port)", bookkeeping=True),
    ExtrasKey("wandb_https_proxy", "the HTTPS proxy W&B uses (http://host:port)", bookkeeping=True),
    ExtrasKey(
        "wandb_run_path",
        "a W&B run path (entity/project/run_id), recorded in the manifest and analytics.json (artifacts.wandb.run_path)",
        bookkeeping=True,
    ),
    ExtrasKey("tensorboard_dir", "where the script's TensorBoard files go, inside the run directory", bookkeeping=True),
    ExtrasKey("checkpoints_dir", "where checkpoints are looked for, inside the run directory", bookkeeping=True),
    ExtrasKey("notes", "free text kept in the manifest (and W&B notes)", bookkeeping=True, run_notes=True),
    ExtrasKey(
        "metrics_interval_s", "seconds between metrics events (default 1)", bookkeeping=True, metrics_interval=True
    ),
]


def escapes(path: str) -> bool:
    """True when ``path`` is absolute or climbs out of the directory it is relative to."""
    if path.startswith(("/", "\\", "~")):
        return True
    normal = posixpath.normpath(path.replace("\\", "/"))
    return normal == ".." or normal.startswith("../")


def tracking_enabled(extras: dict[str, Any]) -> bool:
    return extras.get("track_wandb") is True


def metrics_interval(extras: dict[str, Any]) -> float:
    value = extras.get("metrics_interval_s")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return max(float(value), MIN_METRICS_INTERVAL_S)
    return DEFAULT_METRICS_INTERVAL_S


def _path_problem(key: str, value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return f"extras.{key}: must be a non-empty relative path, got {value!r}"
    if "\x00" in value:
        return f"extras.{key}: contains a NUL character"
    if escapes(value):
        return (
            f"extras.{key}: {value!r} points outside the run directory; "
            "give a path relative to the run directory, without '..'"
        )
    return None


def validate(extras: dict[str, Any]) -> list[str]:
    """Problems with the analytics keys of ``extras``, each naming its key."""
    problems: list[str] = []
    track = extras.get("track_wandb")
    if track is not None and not isinstance(track, bool):
        problems.append(f"extras.track_wandb: must be true or false, got {track!r}")
    for key in STRING_KEYS:
        value = extras.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            problems.append(f"extras.{key}: must be a non-empty string, got {type(value).__name__}")
        elif isinstance(value, str) and any(c in value for c in "\x00\n\r"):
            problems.append(f"extras.{key}: must be one line without NUL characters")
    vpn = extras.get("wandb_use_vpn_proxy")
    if vpn is not None and not isinstance(vpn, bool):
        problems.append(f"extras.wandb_use_vpn_proxy: must be true or false, got {vpn!r}")
    for key in PROXY_KEYS:
        value = extras.get(key)
        if isinstance(value, str) and value.strip() and not value.startswith(("http://", "https://", "socks5://")):
            problems.append(f"extras.{key}: {value!r} is not a proxy URL (http://host:port)")
    mode = extras.get("wandb_mode")
    if mode is not None and mode not in WANDB_MODES:
        problems.append(f"extras.wandb_mode: {mode!r} is not one of {', '.join(WANDB_MODES)}")
    for key in PATH_KEYS:
        if extras.get(key) is not None:
            problem = _path_problem(key, extras[key])
            if problem:
                problems.append(problem)
    interval = extras.get("metrics_interval_s")
    if interval is not None and (
        isinstance(interval, bool)
        or not isinstance(interval, (int, float))
        or not math.isfinite(interval)
        or interval <= 0
    ):
        problems.append(f"extras.metrics_interval_s: must be a number of seconds > 0, got {interval!r}")
    notes = extras.get("notes")
    if notes is not None and not isinstance(notes, str):
        problems.append(f"extras.notes: must be a string, got {type(notes).__name__}")
    return problems
