"""The XuanCe worker's interface to the host (:class:`mosaic_core.worker.Worker`): its extras keys,
validation against XuanCe's configs, and the launch plan of :mod:`xuance_worker.train`.

Extras the worker does not own (nor a plugin) are XuanCe config keys (``learning_rate``,
``parallels``, ``vectorize``...), checked against the algorithm's YAML config for the env."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mosaic_core import ConfigError, WorkerConfig
from mosaic_core.procs import python_command
from mosaic_core import ExtrasKey, Launch, RunContext, Worker
from xuance_worker.catalog import ALGORITHMS

MODES = ("train", "resume_training", "policy_eval")
OWN_KEYS = [
    ExtrasKey("mode", "train (default), resume_training or policy_eval"),
    ExtrasKey("checkpoint_path", "resume_training: a checkpoint (.pth) or a run directory (its latest checkpoint)"),
    ExtrasKey("policy_path", "policy_eval: a checkpoint (.pth) or a run directory (its latest checkpoint)"),
    ExtrasKey("checkpoint_frequency", "save a checkpoint every N env steps (default: only at the end)"),
    ExtrasKey("eval_episodes", "policy_eval: episodes to play (default 5)"),
    ExtrasKey("torch_threads", "torch threads of the training process (default 1: XuanCe's networks are small)"),
    ExtrasKey("algo_params", "XuanCe config keys as an object, over the top-level ones (how `mosaic sweep` "
                             "passes a trial's parameters)"),
]
CHECKPOINTS = "checkpoints"


def _positive_int(extras: dict[str, Any], key: str) -> int | None:
    value = extras.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"extras.{key} must be a positive integer, got {value!r}", field=f"extras.{key}")
    return value


def latest_checkpoint(path: Path) -> Path | None:
    """A ``.pth`` file as given, or the newest one under a run directory's ``checkpoints/``."""
    if path.is_file():
        return path
    found = sorted((path / CHECKPOINTS).glob("*.pth"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _checkpoint(config: WorkerConfig, key: str) -> Path:
    value = config.extras.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"extras.{key} is required for mode {config.extras.get('mode')!r}", field=f"extras.{key}")
    found = latest_checkpoint(Path(value).expanduser().resolve())
    if found is None:
        raise ConfigError(f"extras.{key}: no checkpoint (.pth) at {value}", field=f"extras.{key}")
    check_obs_rms(found, f"extras.{key}")
    return found


OBS_RMS = "obs_rms.npy"  # XuanCe saves observation statistics beside a checkpoint with pickle


def check_obs_rms(checkpoint: Path, what: str) -> None:
    """The ``.pth`` is weights only (XuanCe's ``torch.load(weights_only=True)``), but XuanCe reads
    the ``obs_rms.npy`` beside it with ``allow_pickle=True``: that file is code, and is loaded
    only when the owner made it (:func:`mosaic_core.runstore.trust.check_code_checkpoint`)."""
    from mosaic_core import UsageError
    from mosaic_core.runstore.trust import check_code_checkpoint

    stats = checkpoint.parent / OBS_RMS
    if os.path.lexists(stats):
        try:
            check_code_checkpoint(stats, f"{what}: XuanCe's pickled {OBS_RMS}")
        except UsageError as exc:
            raise ConfigError(str(exc), field=what if what.startswith("extras.") else None) from None


class XuanCeWorker(Worker):
    def extras_keys(self) -> list[ExtrasKey]:
        return OWN_KEYS

    def config_defaults(self, data: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        """No defaults (a curriculum is refused by the host: the capabilities say no env switching)."""
        return {}

    def validate(self, config: WorkerConfig, options: dict[str, Any]) -> list[str]:
        problems = []
        mode = config.extras.get("mode", "train")
        if mode not in MODES:
            problems.append(f"extras.mode {mode!r} is not one of {', '.join(MODES)}")
        if not isinstance(config.extras.get("algo_params", {}), dict):
            problems.append("extras.algo_params must be an object of XuanCe config keys")
        return problems

    def algorithm_names(self, data: dict[str, Any]) -> list[str]:
        return list(ALGORITHMS)

    def algorithms(self, python: str) -> list[dict[str, Any]]:
        """The seven algorithms and the envs XuanCe has a config for (asked in the worker's environment)."""
        from xuance_worker.catalog import ask_configs

        args = ["list"] + [f"--algo={algo}" for algo in ALGORITHMS]
        pairs = ask_configs(python, args)["pairs"]
        return [{"algo": algo, "description": text, "envs": pairs.get(algo, [])} for algo, text in ALGORITHMS.items()]

    def plan(self, config: WorkerConfig, run: RunContext) -> Launch:
        from xuance_worker.catalog import ask_configs, split_env_id

        env = split_env_id(config.env_id)
        overrides = {**run.worker_extras, **config.extras.get("algo_params", {})}
        answer = ask_configs(run.python, ["check", "--algo", config.algo, "--env", env,
                                          "--overrides", json.dumps(overrides)])
        if answer["problems"]:
            raise ConfigError("; ".join(answer["problems"]), source=config.source)
        extras = config.extras
        mode = extras.get("mode", "train")
        command = [*python_command(run.python, "-m", "xuance_worker.train", keep_environment=True), "--algo", config.algo, "--env", env,
                   "--total-timesteps", str(config.total_timesteps), "--mode", mode,
                   "--overrides", json.dumps(overrides, sort_keys=True)]
        if config.seed is not None:
            command += ["--seed", str(config.seed)]
        if mode != "train":
            key = "checkpoint_path" if mode == "resume_training" else "policy_path"
            command += ["--checkpoint", str(_checkpoint(config, key))]
        for key in ("checkpoint_frequency", "eval_episodes", "torch_threads"):
            value = _positive_int(extras, key)
            if value is not None:
                command += [f"--{key.replace('_', '-')}", str(value)]
        summary = answer["summary"]
        parallels = summary.get("parallels")
        return Launch(command=command, num_envs=parallels if isinstance(parallels, int) and parallels > 0 else None,
                      summary={"headline": f"{summary.get('agent')} on {env} ({mode}, {parallels} envs, "
                                           f"{summary.get('vectorize')})", "xuance": summary},
                      started_payload={"xuance": {"agent": summary.get("agent"), "env": env, "mode": mode}})

