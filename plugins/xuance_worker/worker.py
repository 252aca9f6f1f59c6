"""The XuanCe worker's interface to the host (:class:`mosaic_core.worker.Worker`): its extras keys,
validation against XuanCe's configs, and the launch plan of :mod:`xuance_worker.train`.

Extras the worker does not own (nor a plugin) are XuanCe config keys (``learning_rate``,
``parallels``, ``vectorize``...), checked against the algorithm's YAML config for the env. The run
contract's keys (``mode``, ``checkpoint_path``, ``eval_*``, ``torch_threads``...:
:data:`mosaic_core.contract.STANDARD_KEYS`) are the core's: it checks them and writes them as the
training program's flags (:func:`mosaic_core.contract.host_flags`).
The original MOSAIC's names (``backend``, an on-policy agent's ``batch_size``) are read or refused by
:func:`xuance_worker.config.in_our_names`; a config without an env or a budget gets the worker's
(:meth:`XuanCeWorker.config_defaults`). Checkpoints: :mod:`xuance_worker.checkpoints`; a run's
policy in an arena seat: :mod:`xuance_worker.serve`."""

from __future__ import annotations

import json
from typing import Any

from mosaic_core import ChildEvent, ConfigError, ExtrasKey, Launch, RunContext, Worker, WorkerConfig, contract
from mosaic_core.procs import python_command
from xuance_worker.catalog import ALGORITHMS
from xuance_worker.checkpoints import LAYOUT, resolve
from xuance_worker.config import DEFAULT_ENV, DEFAULT_TOTAL_TIMESTEPS, in_our_names

OWN_KEYS = [
    ExtrasKey(
        "algo_params",
        "XuanCe config keys as an object, over the top-level ones (how `mosaic sweep` passes a trial's parameters)",
    ),
]
STANDARD = {key.name for key in contract.STANDARD_KEYS}


def mode_of(extras: dict[str, Any]) -> Any:
    return contract.normalize_mode(extras.get("mode"))


def _problems(extras: dict[str, Any]) -> list[str]:
    """What this worker cannot do with the run contract's keys (their values are the host's to check)."""
    if extras.get("save_replay_buffer") is True:
        return [
            "extras.save_replay_buffer: the xuance worker does not keep XuanCe's replay buffers in its "
            "checkpoints (an off-policy run refills its buffer after a resume)"
        ]
    return []


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

    def policy_server(
        self, checkpoint: contract.Checkpoint, config: WorkerConfig, *, agent: str, python: str
    ) -> list[str] | None:
        """:mod:`xuance_worker.serve` in the worker's environment: the policy of the agent ``agent``
        (the seat's name, one of the run's agent ids), rebuilt from the checkpoint alone."""
        return [python, "-m", "xuance_worker.serve", "--checkpoint", str(checkpoint.path), "--agent", agent]

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
        key = contract.checkpoint_key(extras)
        checkpoint = (
            resolve(extras.get(key), key, config.algo, env, resume=mode == "resume")
            if mode in contract.CHECKPOINT_MODES
            else None
        )
        if extras.get("eval_capture_video") is True and contract.video_encoder(run.python) is None:
            raise ConfigError(contract.no_video_encoder("xuance"), source=config.source)
        command = [
            *python_command(run.python, "-m", "xuance_worker.train", keep_environment=True),
            *contract.host_flags(config, checkpoint=checkpoint),
            "--env",
            env,
            "--overrides",
            json.dumps(overrides, sort_keys=True),
        ]
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
