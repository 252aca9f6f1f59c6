"""The XuanCe worker's interface to the host (:class:`mosaic_core.worker.Worker`): its extras keys,
validation against XuanCe's configs, and the launch plan of :mod:`xuance_worker.train`.

Extras the worker does not own (nor a plugin) are XuanCe config keys (``learning_rate``,
``parallels``, ``vectorize``...), checked against the algorithm's YAML config for the env. The run
contract's keys (``mode``, ``checkpoint_path``, ``eval_*``...: :data:`mosaic_core.contract.STANDARD_KEYS`)
are the core's; the worker checks their values and passes them as the training program's flags.
The original MOSAIC's names (``backend``, an on-policy agent's ``batch_size``) are read or refused by
:func:`xuance_worker.config.in_our_names`; a config without an env or a budget gets the worker's
(:meth:`XuanCeWorker.config_defaults`). Checkpoints: :mod:`xuance_worker.checkpoints`."""

from __future__ import annotations

import json
from typing import Any

from mosaic_core import ChildEvent, ConfigError, ExtrasKey, Launch, RunContext, Worker, WorkerConfig, contract
from mosaic_core.procs import python_command
from xuance_worker.catalog import ALGORITHMS
from xuance_worker.checkpoints import LAYOUT, resolve
from xuance_worker.config import DEFAULT_ENV, DEFAULT_TOTAL_TIMESTEPS, in_our_names

# The run contract's keys (mode, checkpoint_path, eval_*...) are the core's (contract.STANDARD_KEYS).
OWN_KEYS = [
    ExtrasKey("torch_threads", "torch threads of the training process (default 1: XuanCe's networks are small)"),
    ExtrasKey(
        "algo_params",
        "XuanCe config keys as an object, over the top-level ones (how `mosaic sweep` passes a trial's parameters)",
    ),
    ExtrasKey(
        "eval_capture_video",
        "evaluate: record the first episode as video.mp4 in the evaluation's folder (mosaic evaluate --video)",
    ),
]
VIDEO_FILE = "video.mp4"
STANDARD = {key.name for key in contract.STANDARD_KEYS}
POSITIVE = ("checkpoint_frequency", "eval_episodes", "torch_threads")
FLAGS = ("eval_deterministic", "eval_every_checkpoint", "eval_capture_video")


def mode_of(extras: dict[str, Any]) -> Any:
    return contract.normalize_mode(extras.get("mode"))


def _problems(extras: dict[str, Any]) -> list[str]:
    """What is wrong with the run contract's extras, each naming its key."""
    problems = []
    mode = mode_of(extras)
    if mode not in contract.MODES:
        problems.append(
            f"extras.mode {mode!r} is not one of {', '.join(contract.MODES)} "
            "(resume_training and policy_eval are read as resume and evaluate)"
        )
    for key in POSITIVE:
        value = extras.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            problems.append(f"extras.{key} must be a positive integer, got {value!r}")
    seed = extras.get("eval_seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        problems.append(f"extras.eval_seed must be a non-negative integer, got {seed!r}")
    for key in FLAGS:
        if not isinstance(extras.get(key, False), bool):
            problems.append(f"extras.{key} must be true or false, got {extras[key]!r}")
    if extras.get("eval_capture_video") and mode != "evaluate":
        problems.append("extras.eval_capture_video: a video is recorded in mode evaluate only")
    if extras.get("save_replay_buffer"):
        problems.append(
            "extras.save_replay_buffer: the xuance worker does not keep XuanCe's replay buffers in its "
            "checkpoints (an off-policy run refills its buffer after a resume)"
        )
    return problems


def _host_flags(extras: dict[str, Any], mode: str) -> list[str]:
    """The run contract's extras as the training program's flags (contract.add_host_arguments)."""
    flags = []
    for key in POSITIVE:
        if extras.get(key) is not None:
            flags += [f"--{key.replace('_', '-')}", str(extras[key])]
    if extras.get("eval_seed") is not None:
        flags += ["--eval-seed", str(extras["eval_seed"])]
    if extras.get("eval_deterministic"):
        flags.append("--eval-deterministic")
    if extras.get("eval_every_checkpoint") and mode != "evaluate":
        flags.append("--eval-every-checkpoint")
    return flags


class XuanCeWorker(Worker):
    def extras_keys(self) -> list[ExtrasKey]:
        return OWN_KEYS

    def child_events(self) -> list[ChildEvent]:
        return [
            ChildEvent(
                "eval_result",
                "extras.eval_every_checkpoint: the evaluation of a checkpoint just saved "
                "(global_step, mean, std, iqm, episodes; schema mosaic.eval/1's summary)",
            )
        ]

    def enjoy_extras(self, *, video_format: str | None, live: bool) -> dict[str, Any] | None:
        """An MP4 of the first evaluation episode (OpenCV, which XuanCe brings, writes it); no GIF, no --live."""
        return contract.mp4_enjoy_extras(video_format, live)

    def checkpoint_layout(self, config: WorkerConfig) -> contract.CheckpointLayout:
        return LAYOUT

    def config_defaults(self, data: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        """XuanCe's MPE simple_spread (every algorithm has a config for it) and, in training, the
        original's budget (a curriculum is refused by the host: the capabilities say no env switching)."""
        defaults: dict[str, Any] = {"env_id": DEFAULT_ENV}
        if mode_of(data.get("extras") or {}) == "train":  # resume and evaluate need no budget
            defaults["total_timesteps"] = DEFAULT_TOTAL_TIMESTEPS
        return defaults

    def validate(self, config: WorkerConfig, options: dict[str, Any]) -> list[str]:
        problems = _problems(config.extras)
        params = config.extras.get("algo_params", {})
        if not isinstance(params, dict):
            problems.append("extras.algo_params must be an object of XuanCe config keys")
            params = {}
        for where, settings in (("extras", config.extras), ("extras.algo_params", params)):
            try:
                in_our_names(config.algo, settings, where)
            except ConfigError as exc:
                problems.append(str(exc))
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
        # The contract's keys are the host's; until it claims them they arrive unclaimed: not XuanCe's.
        unclaimed = {k: v for k, v in run.worker_extras.items() if k not in STANDARD}
        overrides, notes = in_our_names(config.algo, {**unclaimed, **config.extras.get("algo_params", {})})
        answer = ask_configs(
            run.python, ["check", "--algo", config.algo, "--env", env, "--overrides", json.dumps(overrides)]
        )
        if answer["problems"]:
            raise ConfigError("; ".join(answer["problems"]), source=config.source)
        extras = config.extras
        mode = mode_of(extras)
        command = [
            *python_command(run.python, "-m", "xuance_worker.train", keep_environment=True),
            "--algo",
            config.algo,
            "--env",
            env,
            "--total-timesteps",
            str(config.total_timesteps or 0),
            "--mode",
            mode,
            "--overrides",
            json.dumps(overrides, sort_keys=True),
        ]
        if config.seed is not None:
            command += ["--seed", str(config.seed)]
        if mode != "train":
            key = (
                "policy_path"
                if mode == "evaluate" and "checkpoint_path" not in extras and "policy_path" in extras
                else "checkpoint_path"
            )  # policy_path: evaluate's old name
            command += ["--checkpoint", str(resolve(extras.get(key), key, config.algo, env, resume=mode == "resume"))]
        command += _host_flags(extras, mode)
        if extras.get("eval_capture_video"):
            if contract.video_encoder(run.python) is None:
                raise ConfigError(contract.no_video_encoder("xuance"), source=config.source)
            command += ["--video", VIDEO_FILE]
        summary = answer["summary"]
        parallels = 1 if mode == "evaluate" else summary.get("parallels")
        return Launch(
            command=command,
            num_envs=parallels if isinstance(parallels, int) and parallels > 0 else None,
            summary={
                "headline": f"{summary.get('agent')} on {env} ({mode}, {parallels} envs, {summary.get('vectorize')})",
                "xuance": summary,
            },
            started_payload={"xuance": {"agent": summary.get("agent"), "env": env, "mode": mode}},
            notes=tuple(notes),
        )
