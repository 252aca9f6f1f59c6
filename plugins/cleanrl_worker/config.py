"""MOSAIC's documented config API for the CleanRL worker (``cleanrl_worker.config``), as names
over :mod:`mosaic_core.config`: one implementation of loading, merging and validating.

``WorkerConfig`` (alias ``CleanRLWorkerConfig``): required ``run_id``, ``algo``, ``env_id``,
``total_timesteps``; optional ``seed``, ``worker_id``, ``extras``; ``raw``, the whole payload as
loaded (in memory only: never in ``to_dict``, ``config.json`` or equality);
``with_overrides(algo=, env_id=, total_timesteps=, seed=, worker_id=, extras=)`` merges
``extras`` (the override wins per key); ``to_dict`` / ``from_dict``.

A config is read as a run reads it (:func:`mosaic_core.resolve_config`): flat or nested at
``metadata.worker.config``; in a flat config ``algorithm`` is ``algo`` and other keys outside
the schema are extras keys (``mode``, ``agent_id``…) or the algorithm's hyperparameters
(``extras.algo_params``); a missing ``run_id`` is generated, a missing ``env_id`` or
``total_timesteps`` is the algorithm script's own default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic_core import (
    ConfigError,
    WorkerConfig,
    find_worker,
    load_worker,
    parse_json,
    plugin_host,
    read_config_file,
    resolve_config,
    unwrap_config,
    worker_option_defaults,
)

CleanRLWorkerConfig = WorkerConfig
WORKER_NAME = "cleanrl"  # this worker's name (its metadata's)

__all__ = [
    "WorkerConfig",
    "CleanRLWorkerConfig",
    "load_worker_config",
    "load_worker_config_from_string",
    "parse_worker_config",
]


def parse_worker_config(payload: Any, source: str | None = None, raw: Any = None) -> WorkerConfig:
    """A validated config from a flat worker config or a trainer payload holding
    ``metadata.worker.config``; a missing or bad field is a ConfigError naming it (exit 2).
    A ``worker`` key (as ``mosaic submit``'s files carry) must name this worker. ``algo`` is not
    checked here (as MOSAIC's parser did not): the runtime resolves it, with its registry. ``raw``:
    the payload ``payload`` was read from, when not ``payload`` itself."""
    item = find_worker(WORKER_NAME)
    worker = load_worker(item)
    data = _this_workers(unwrap_config(payload, source), source)
    config, _problems = resolve_config(
        item,
        worker,
        plugin_host(),
        data=data,
        raw=payload if raw is None else raw,
        source=source,
        options=worker_option_defaults(worker),
        known_algorithms=False,
    )
    return config


def load_worker_config(path: str | Path) -> WorkerConfig:
    """:func:`parse_worker_config` of a JSON file (strict JSON, UTF-8)."""
    loaded = read_config_file(path)
    return parse_worker_config(dict(loaded), str(path), raw=loaded.raw)


def _this_workers(data: Any, source: str | None) -> Any:
    if not isinstance(data, dict) or "worker" not in data:
        return data
    data = dict(data)
    worker = data.pop("worker")
    if worker != WORKER_NAME:
        raise ConfigError(f"the config is for worker {worker!r}, not {WORKER_NAME!r}", field="worker", source=source)
    return data


def load_worker_config_from_string(text: str, source: str = "<string>") -> WorkerConfig:
    """:func:`parse_worker_config` of JSON text."""
    return parse_worker_config(parse_json(text, "the config", source), source)
