"""MOSAIC's documented config API for the CleanRL worker (``cleanrl_worker.config``), as names
over :mod:`mosaic_core.config`: one implementation of loading, merging and validating.

``WorkerConfig`` (alias ``CleanRLWorkerConfig``): required ``run_id``, ``algo``, ``env_id``,
``total_timesteps``; optional ``seed``, ``worker_id``, ``extras``; ``with_overrides`` merges
``extras`` (the override wins per key); ``to_dict`` / ``from_dict``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic_core.config import WorkerConfig, build_config, parse_json, read_config_file, unwrap_config

CleanRLWorkerConfig = WorkerConfig

__all__ = ["WorkerConfig", "CleanRLWorkerConfig", "load_worker_config", "load_worker_config_from_string",
           "parse_worker_config"]


def parse_worker_config(payload: Any, source: str | None = None) -> WorkerConfig:
    """A validated config from a flat worker config or a trainer payload holding
    ``metadata.worker.config``; a missing or bad field is a ConfigError naming it (exit 2)."""
    return build_config(unwrap_config(payload, source), source=source)


def load_worker_config(path: str | Path) -> WorkerConfig:
    """:func:`parse_worker_config` of a JSON file (strict JSON, UTF-8)."""
    return build_config(read_config_file(path), source=str(path))


def load_worker_config_from_string(text: str, source: str = "<string>") -> WorkerConfig:
    """:func:`parse_worker_config` of JSON text."""
    return parse_worker_config(parse_json(text, "the config", source), source)
