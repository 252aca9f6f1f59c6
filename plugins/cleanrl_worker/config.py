"""MOSAIC's documented config API for the CleanRL worker (``cleanrl_worker.config``), as names
over :mod:`mosaic_core.config` and :mod:`mosaic_core.facade`: one implementation of loading,
merging and validating.

``WorkerConfig`` (alias ``CleanRLWorkerConfig``): required ``run_id``, ``algo``, ``env_id``,
``total_timesteps``; optional ``seed``, ``worker_id``, ``extras``; ``raw``, the whole payload as
loaded (in memory only: never in ``to_dict``, ``config.json`` or equality);
``with_overrides(algo=, env_id=, total_timesteps=, seed=, worker_id=, extras=)`` merges
``extras`` (the override wins per key); ``to_dict`` / ``from_dict``.

A config is read as a run reads it (:func:`mosaic_core.resolve_config`): flat or nested at
``metadata.worker.config``; in a flat config ``algorithm`` is ``algo`` and other keys outside
the schema are extras keys (``mode``, ``agent_id``…) or the algorithm's hyperparameters
(``extras.algo_params``); a missing ``run_id`` is generated, a missing ``env_id`` or
``total_timesteps`` is the algorithm script's own default. ``algo`` is not checked here (as
MOSAIC's parser did not): the runtime resolves it, with its registry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mosaic_core
from mosaic_core import WorkerConfig

CleanRLWorkerConfig = WorkerConfig
WORKER_NAME = "cleanrl"  # this worker's name (its metadata's)

__all__ = [
    "WorkerConfig",
    "CleanRLWorkerConfig",
    "load_worker_config",
    "load_worker_config_from_string",
    "parse_worker_config",
]


def parse_worker_config(payload: Any, source: str | None = None) -> WorkerConfig:
    """A validated config from a flat worker config or a trainer payload holding
    ``metadata.worker.config``; a missing or bad field is a ConfigError naming it (exit 2).
    A ``worker`` key (as ``mosaic submit``'s files carry) must name this worker; a missing
    ``run_id`` is generated (a ULID), as for ``mosaic run``."""
    return mosaic_core.parse_worker_config(WORKER_NAME, payload, source, known_algorithms=False)


def load_worker_config(path: str | Path) -> WorkerConfig:
    """:func:`parse_worker_config` of a JSON file (strict JSON, UTF-8)."""
    return mosaic_core.load_worker_config(WORKER_NAME, path, known_algorithms=False)


def load_worker_config_from_string(text: str, source: str = "<string>") -> WorkerConfig:
    """:func:`parse_worker_config` of JSON text."""
    return mosaic_core.load_worker_config_from_string(WORKER_NAME, text, source, known_algorithms=False)
