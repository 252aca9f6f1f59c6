"""The original MOSAIC's config API for the RLlib worker (``ray_worker.config``), as names over the
host's (:mod:`mosaic_core.facade`): one implementation of loading, merging and validating.

``RayWorkerConfig`` is our flat worker config (``run_id``, ``algo``, ``env_id``, ``total_timesteps``,
``seed``, ``worker_id``, ``extras`` with RLlib's options under ``extras.algo_params``), not the
original's nested dataclass (``environment``, ``training``, ``resources``… sections). Fields a
config leaves out come from the worker's defaults (:data:`DEFAULT_ENVS`,
:data:`DEFAULT_TOTAL_TIMESTEPS`), as in a run.

The original's option names (RLlib's old API stack) are read as RLlib 2.60's (:func:`in_our_names`),
or refused in one line naming both: the seeds' ``{"algorithm": "PPO", "num_workers": 8,
"num_envs_per_worker": 4, "framework": "torch"}`` runs as written. A local cluster gets no more
env runners than it has CPUs (:func:`fit_env_runners`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, TypeGuard

import mosaic_core
from mosaic_core import ConfigError, WorkerConfig

RayWorkerConfig = WorkerConfig
WORKER_NAME = "rllib"
# Each algorithm's first env: CartPole (discrete) for all but SAC, whose classic env is Pendulum.
DEFAULT_ENVS = {
    "PPO": "CartPole-v1",
    "APPO": "CartPole-v1",
    "IMPALA": "CartPole-v1",
    "DQN": "CartPole-v1",
    "SAC": "Pendulum-v1",
}
DEFAULT_TOTAL_TIMESTEPS = 1_000_000  # the original's training.total_timesteps default
# The original's names (RLlib's old API stack, its ResourceConfig) -> RLlib 2.60's new API stack.
RENAMED = {
    "num_workers": "num_env_runners",
    "num_rollout_workers": "num_env_runners",
    "num_envs_per_worker": "num_envs_per_env_runner",
    "num_cpus_per_worker": "num_cpus_per_env_runner",
    "num_gpus_per_worker": "num_gpus_per_env_runner",
    "sgd_minibatch_size": "minibatch_size",
    "num_sgd_iter": "num_epochs",
}
FRAMEWORK = "framework"  # the worker runs RLlib's PyTorch implementations: "torch" only

__all__ = [
    "RayWorkerConfig",
    "WorkerConfig",
    "load_worker_config",
    "load_worker_config_from_string",
    "parse_worker_config",
    "in_our_names",
    "fit_env_runners",
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


def in_our_names(params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``extras.algo_params`` with the original's names read as RLlib 2.60's (one note naming
    them); ``framework: "torch"`` accepted (what the worker runs); a ConfigError (exit 2) for
    another framework, or for a setting given under both names."""
    params = dict(params)
    framework = params.pop(FRAMEWORK, "torch")
    if framework != "torch":
        raise ConfigError(
            f"extras.algo_params.{FRAMEWORK} {framework!r}: the original MOSAIC passed it to RLlib; this "
            'worker runs RLlib\'s PyTorch implementations only: give "torch" or leave it out',
            field=f"extras.algo_params.{FRAMEWORK}",
        )
    read = []
    for old, new in RENAMED.items():
        if old not in params:
            continue
        if new in params:
            raise ConfigError(
                f"extras.algo_params.{old} (the original's name of {new}) and .{new} are both given; give {new}",
                field=f"extras.algo_params.{old}",
            )
        params[new] = params.pop(old)
        read.append(f"{old} as {new}")
    notes = [f"RLlib's old API names read as RLlib 2.60's: {', '.join(read)}"] if read else []
    return params, notes


def fit_env_runners(params: dict[str, Any], cpus: int) -> tuple[dict[str, Any], list[str]]:
    """``params`` whose env runners fit a local cluster of ``cpus`` CPUs, and a note when they
    did not: Ray starts no more runners than the CPUs they ask for (one each unless
    ``num_cpus_per_env_runner`` says otherwise), and RLlib waits for the others forever. The
    runners are cut to what fits and the envs spread over them, so as many envs sample as asked."""
    runners, per_runner = params.get("num_env_runners"), params.get("num_cpus_per_env_runner", 1)
    if not _count(runners) or not isinstance(per_runner, (int, float)) or isinstance(per_runner, bool):
        return params, []
    fits = runners if per_runner <= 0 else max(1, int(cpus // per_runner))
    if runners <= fits:
        return params, []
    envs = params.get("num_envs_per_env_runner", 1)
    envs = envs if _count(envs) else 1
    spread = math.ceil(runners * envs / fits)
    note = (
        f"num_env_runners {runners}: the run's local Ray cluster has {cpus} CPUs, so {fits} env runner(s) "
        f"sample {spread} envs each (the {runners * envs} asked for; more runners would never start); "
        "extras.ray_address joins a larger cluster"
    )
    return {**params, "num_env_runners": fits, "num_envs_per_env_runner": spread}, [note]


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
