"""The original MOSAIC's config API for the XuanCe worker (``xuance_worker.config``), as names over
the host's (:mod:`mosaic_core.facade`): one implementation of loading, merging and validating.

``XuanCeWorkerConfig`` is our worker config (``run_id``, ``algo``, ``env_id`` as
``FAMILY/SCENARIO``, ``total_timesteps``, ``seed``, ``worker_id``, ``extras`` holding XuanCe's
config keys), not the original's dataclass of ``method``/``env``/``running_steps``/``dl_toolbox``
fields. Fields a config leaves out come from the worker's defaults (:data:`DEFAULT_ENV`,
:data:`DEFAULT_TOTAL_TIMESTEPS`), as in a run.

The original's names of XuanCe settings are read here as ours (:func:`in_our_names`), or refused
in one line naming both: the seeds' ``{"algorithm": "mappo", "learning_rate": 5e-4,
"batch_size": 256, "backend": "torch"}`` runs as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mosaic_core
from mosaic_core import ConfigError, WorkerConfig
from xuance_worker.configs import MINIBATCH, ON_POLICY

XuanCeWorkerConfig = WorkerConfig
WORKER_NAME = "xuance"
# XuanCe's own configs for every algorithm the worker runs are on MPE's simple_spread.
DEFAULT_ENV = "mpe/simple_spread_v3"
DEFAULT_TOTAL_TIMESTEPS = 1_000_000  # the original's running_steps default
# The original's names of the deep-learning backend (its config's dl_toolbox, the seeds' backend).
BACKEND_KEYS = ("backend", "dl_toolbox")

__all__ = [
    "XuanCeWorkerConfig",
    "WorkerConfig",
    "load_worker_config",
    "load_worker_config_from_string",
    "parse_worker_config",
    "in_our_names",
]


def parse_worker_config(payload: Any, source: str | None = None) -> WorkerConfig:
    """A validated config from a flat worker config or a trainer payload holding
    ``metadata.worker.config``; a missing or bad field is a ConfigError naming it (exit 2); a
    missing ``run_id`` is generated, a missing env or budget is the worker's default."""
    return mosaic_core.parse_worker_config(WORKER_NAME, payload, source)


def load_worker_config(path: str | Path) -> WorkerConfig:
    """:func:`parse_worker_config` of a JSON file (strict JSON, UTF-8)."""
    return mosaic_core.load_worker_config(WORKER_NAME, path)


def load_worker_config_from_string(text: str, source: str = "<string>") -> WorkerConfig:
    """:func:`parse_worker_config` of JSON text."""
    return mosaic_core.load_worker_config_from_string(WORKER_NAME, text, source)


def in_our_names(algo: str, settings: dict[str, Any], where: str = "extras") -> tuple[dict[str, Any], list[str]]:
    """XuanCe config keys as the run gives them (the extras and ``extras.algo_params``), with the
    original's names read as ours, and one note per setting whose meaning differs from the
    original's; a ConfigError (exit 2) for a setting this worker cannot honour, naming it under
    ``where`` (``extras`` or ``extras.algo_params``).

    ``backend`` / ``dl_toolbox``: ``"torch"`` is what the worker runs (XuanCe's PyTorch
    implementations), so it is accepted; any other is refused. ``batch_size`` for an on-policy
    agent (MAPPO, IPPO, COMA), which XuanCe derives (``buffer_size // n_minibatch``) and so
    ignored when the original passed it: here it is the agent's minibatch size."""
    settings = dict(settings)
    for key in BACKEND_KEYS:
        value = settings.pop(key, "torch")
        if value != "torch":
            raise ConfigError(
                f"{where}.{key} {value!r}: the original MOSAIC gave it to XuanCe as its dl_toolbox; this "
                'worker runs XuanCe\'s PyTorch implementations only: give "torch" or leave it out',
                field=f"{where}.{key}",
            )
    notes = []
    if MINIBATCH in settings and algo in ON_POLICY:
        notes.append(
            f"{MINIBATCH} {settings[MINIBATCH]}: XuanCe's {algo} derives its minibatch size (buffer_size // "
            "n_minibatch) and ignored the key the original MOSAIC passed; here it is the minibatch size"
        )
    return settings, notes
