"""What a run asks of FastLane: extras and environment variables, checked and resolved.

FastLane is **on** for a run when ``extras.fastlane`` is true, or when any ``fastlane_*``
key is given and ``fastlane_video_mode`` is not ``off``; ``extras.fastlane = false`` (or
mode ``off``) turns it off whatever else is set. Keys:

- ``fastlane`` (bool): switch.
- ``fastlane_video_mode``: ``single`` (default: one probe env), ``grid`` (tiles), ``off``.
- ``fastlane_slot`` (int >= 0, default 0): which env publishes in single mode.
- ``fastlane_grid_limit`` (int >= 1, default 16): at most this many envs tiled in grid mode.
- ``fastlane_record`` (int >= 1): also save every Nth published frame as PNG under
  ``videos/fastlane/`` in the run directory.

Environment: ``CLEANRL_FASTLANE_INTERVAL_MS`` (ms between frames, > 0, default 100),
``CLEANRL_FASTLANE_MAX_DIM`` (longest side in pixels, 16-4096, default 512) and
``CLEANRL_FASTLANE_RENDER_BUDGET`` (0 < share <= 1, default 0.05): the most of a training
process's time rendering may take; when frames cost more, the interval stretches (1 = never).
The host hands the resolved settings to the training process in ``MOSAIC_FASTLANE`` (JSON).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeGuard

MODES = ("single", "grid", "off")
KEYS = ("fastlane", "fastlane_video_mode", "fastlane_slot", "fastlane_grid_limit", "fastlane_record")
INTERVAL_VAR = "CLEANRL_FASTLANE_INTERVAL_MS"
MAX_DIM_VAR = "CLEANRL_FASTLANE_MAX_DIM"
BUDGET_VAR = "CLEANRL_FASTLANE_RENDER_BUDGET"
CHILD_VAR = "MOSAIC_FASTLANE"
DEFAULT_INTERVAL_MS = 100.0
DEFAULT_MAX_DIM = 512
DEFAULT_RENDER_BUDGET = 0.05
DEFAULT_GRID_LIMIT = 16
MAX_DIM_RANGE = (16, 4096)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def known_num_envs(extras: Mapping[str, Any]) -> int | None:
    """``num_envs`` when the config says it (``algo_params.num_envs`` or ``extras.num_envs``)."""
    params = extras.get("algo_params")
    for value in ((params or {}).get("num_envs") if isinstance(params, dict) else None, extras.get("num_envs")):
        if _is_int(value) and value > 0:
            return value
    return None


def is_enabled(extras: Mapping[str, Any]) -> bool:
    if extras.get("fastlane") is False or extras.get("fastlane_video_mode") == "off":
        return False
    return extras.get("fastlane") is True or any(key.startswith("fastlane_") for key in extras)


def problems(extras: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[str]:
    """Every problem with the FastLane keys of ``extras`` (and its env vars when enabled)."""
    environ = os.environ if environ is None else environ
    found = []  # an unknown fastlane_* key is refused by the host (the plugin declares its keys)
    if "fastlane" in extras and not isinstance(extras["fastlane"], bool):
        found.append(f"extras.fastlane: must be true or false, got {extras['fastlane']!r}")
    mode = extras.get("fastlane_video_mode", "single")
    if mode not in MODES:
        found.append(f"extras.fastlane_video_mode: {mode!r} is not one of {', '.join(MODES)}")
    num_envs = known_num_envs(extras)
    if "fastlane_slot" in extras:
        slot = extras["fastlane_slot"]
        if not _is_int(slot) or slot < 0:
            found.append(f"extras.fastlane_slot: must be an integer >= 0, got {slot!r}")
        elif num_envs is not None and slot >= num_envs:
            found.append(f"extras.fastlane_slot: {slot} is outside the run's {num_envs} env(s) (0..{num_envs - 1})")
    for key in ("fastlane_grid_limit", "fastlane_record"):
        if key in extras and (not _is_int(extras[key]) or extras[key] < 1):
            found.append(f"extras.{key}: must be an integer >= 1, got {extras[key]!r}")
    if is_enabled(extras):
        for name, check in (
            (INTERVAL_VAR, _interval_problem),
            (MAX_DIM_VAR, _max_dim_problem),
            (BUDGET_VAR, _budget_problem),
        ):
            raw = environ.get(name)
            if raw is not None and raw.strip() != "":
                problem = check(raw)
                if problem:
                    found.append(f"{name}: {raw!r} {problem}")
    return found


def _interval_problem(raw: str) -> str | None:
    try:
        value = float(raw)
    except ValueError:
        return "is not a number of milliseconds"
    return None if math.isfinite(value) and value > 0 else "must be a number of milliseconds > 0"


def _budget_problem(raw: str) -> str | None:
    try:
        value = float(raw)
    except ValueError:
        return "is not a number"
    return None if 0 < value <= 1 else "must be a share of time, > 0 and <= 1"


def _max_dim_problem(raw: str) -> str | None:
    try:
        value = int(raw)
    except ValueError:
        return "is not a whole number of pixels"
    low, high = MAX_DIM_RANGE
    return None if low <= value <= high else f"must be between {low} and {high} pixels"


@dataclass(frozen=True)
class Settings:
    """Resolved settings the host passes to the training process."""

    mode: str
    segment: str
    shm_dir: str
    slot: int = 0
    grid_limit: int = DEFAULT_GRID_LIMIT
    slots: int = 1
    interval_ms: float = DEFAULT_INTERVAL_MS
    max_dim: int = DEFAULT_MAX_DIM
    record_every: int = 0
    num_envs: int | None = None
    render_budget: float = DEFAULT_RENDER_BUDGET
    host_pid: int = 0  # the host that creates the segment; training processes map no other's

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings | None:
        raw = (os.environ if environ is None else environ).get(CHILD_VAR)
        if not raw:
            return None
        try:
            return cls(**json.loads(raw))
        except (ValueError, TypeError):
            return None

    def publishes(self, env_index: int | None) -> bool:
        """Whether the env with this index renders and publishes frames."""
        if env_index is None or self.mode == "off":
            return False
        if self.mode == "single":
            return env_index == self.slot
        return env_index < self.slots

    def slot_of(self, env_index: int) -> int:
        return 0 if self.mode == "single" else env_index


def resolve(
    extras: Mapping[str, Any],
    segment: str,
    shm_dir: str,
    num_envs: int | None = None,
    environ: Mapping[str, str] | None = None,
    host_pid: int = 0,
) -> Settings:
    """Settings for a run whose config passed :func:`problems`."""
    environ = os.environ if environ is None else environ
    mode = extras.get("fastlane_video_mode", "single") if is_enabled(extras) else "off"
    num_envs = num_envs or known_num_envs(extras)
    grid_limit = extras.get("fastlane_grid_limit", DEFAULT_GRID_LIMIT)
    slots = 1 if mode != "grid" else min(grid_limit, num_envs or grid_limit)
    interval = environ.get(INTERVAL_VAR, "").strip()
    max_dim = environ.get(MAX_DIM_VAR, "").strip()
    if mode == "off" or _interval_problem(interval):
        interval = ""  # off runs ignore the variables; problems() reports bad ones of live runs
    if mode == "off" or _max_dim_problem(max_dim):
        max_dim = ""
    budget = environ.get(BUDGET_VAR, "").strip()
    if mode == "off" or _budget_problem(budget):
        budget = ""
    return Settings(
        mode=mode,
        segment=segment,
        shm_dir=shm_dir,
        slot=extras.get("fastlane_slot", 0),
        grid_limit=grid_limit,
        slots=slots,
        interval_ms=float(interval) if interval else DEFAULT_INTERVAL_MS,
        max_dim=int(max_dim) if max_dim else DEFAULT_MAX_DIM,
        record_every=extras.get("fastlane_record", 0),
        num_envs=num_envs,
        render_budget=float(budget) if budget else DEFAULT_RENDER_BUDGET,
        host_pid=host_pid,
    )
