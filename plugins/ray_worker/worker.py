"""The RLlib worker's interface to the host (:class:`mosaic_core.worker.Worker`): its extras keys,
validation (against RLlib's config class and gymnasium's registry, in the worker's environment),
and the launch plan of :mod:`ray_worker.train`.

RLlib's options go under ``extras.algo_params`` (``lr``, ``train_batch_size_per_learner``,
``num_env_runners``, ``model_config``...), each checked at dry run; a top-level extras key that no
plugin owns is refused (naming ``algo_params`` when it is an RLlib option). The original MOSAIC's
option names (RLlib's old API stack: ``num_workers``…) are read as RLlib 2.60's, a framework other
than torch refused, and a local cluster's env runners fitted to its CPUs (:mod:`ray_worker.config`);
a config without an env or a budget gets the worker's (:meth:`RLlibWorker.config_defaults`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mosaic_core import (
    ChildEvent,
    CodePath,
    ConfigError,
    ExtrasKey,
    Launch,
    RunContext,
    UsageError,
    Worker,
    WorkerConfig,
    contract,
)
from mosaic_core.procs import python_command
from ray_worker.catalog import ALGORITHMS, ask_configs, check_answers, local_cluster_cpus, not_run_here, ray_address
from ray_worker.checkpoints import CHECKPOINT_MARK, LAYOUT, multiagent_setup, problem
from ray_worker.config import DEFAULT_ENVS, DEFAULT_TOTAL_TIMESTEPS, fit_env_runners, in_our_names
from ray_worker.multiagent import is_multiagent, setup, single_agent_problem
from ray_worker.presets import preset_params

OWN_KEYS = [
    ExtrasKey(
        "algo_params",
        "RLlib options of the algorithm's config (lr, gamma, train_batch_size_per_learner, "
        "num_env_runners, num_envs_per_env_runner, model_config...), checked at dry run",
    ),
    ExtrasKey(
        "ray_address",
        "an existing Ray cluster (HOST:PORT or ray://HOST:PORT; default $RAY_ADDRESS, else a "
        "local cluster of the run's own)",
    ),
    ExtrasKey("preset", "hyperparameters from RLlib's tuned examples (--preset): tuned"),
    ExtrasKey(
        "policies",
        'a multi-agent env\'s policies: "shared" (default; one for every agent), "separate" (one per '
        "agent) or an object AGENT_ID: POLICY_NAME",
    ),
    ExtrasKey(
        "self_play",
        "a two-player game (or an MPE env's opposing sides) trained against a pool of its own past "
        'policies: true, or {"pool_size": 5, "snapshot_every": 5} (iterations between snapshots)',
    ),
]
# The run contract's keys (mode, checkpoint_*, eval_*, torch_threads...) are the core's: it checks
# them and writes them as the training program's flags (contract.host_flags).


def latest_checkpoint(path: Path) -> Path | None:
    """An RLlib checkpoint directory as given, or the newest one of a run directory."""
    if (path / CHECKPOINT_MARK).is_file():
        return path
    found = contract.newest_checkpoint(path, LAYOUT)
    return found.path if found is not None else None


def _mode(extras: dict[str, Any]) -> Any:
    return contract.normalize_mode(extras.get("mode"))


def _checkpoint_key(extras: dict[str, Any]) -> str | None:
    """The key naming the checkpoint to load, in the modes that load one."""
    return contract.checkpoint_key(extras) if _mode(extras) in contract.CHECKPOINT_MODES else None


def _checkpoint(config: WorkerConfig, key: str) -> Path:
    """The checkpoint to load: RLlib unpickles it (cloudpickle), so it is code and must be the
    owner's (:func:`mosaic_core.runstore.trust.check_code_checkpoint`)."""
    from mosaic_core.runstore.trust import check_code_checkpoint

    value = str(config.extras.get(key))  # given, a path: the host checked it (contract.standard_key_problems)
    found = latest_checkpoint(Path(value).expanduser().resolve())
    if found is None:
        raise ConfigError(f"extras.{key}: no RLlib checkpoint at {value}", field=f"extras.{key}")
    try:
        check_code_checkpoint(found, f"extras.{key}: RLlib checkpoint")
    except UsageError as exc:
        raise ConfigError(str(exc), field=f"extras.{key}") from None
    wrong = problem(found, config.algo, config.env_id)
    if wrong:
        raise ConfigError(f"extras.{key}: {wrong}", field=f"extras.{key}")
    return found


def _multiagent_problems(extras: dict[str, Any], env_id: str) -> list[str]:
    """``extras.policies`` and ``extras.self_play``: of the right shape, for a multi-agent env only."""
    if not is_multiagent(env_id):
        wrong = single_agent_problem(extras, env_id)
        return [wrong] if wrong else []
    try:
        setup(extras)
    except ConfigError as exc:
        return [str(exc)]
    return []


class RLlibWorker(Worker):
    def extras_keys(self) -> list[ExtrasKey]:
        return OWN_KEYS

    def enjoy_extras(self, *, video_format: str | None, live: bool) -> dict[str, Any] | None:
        """An MP4 of the first evaluation episode (when the RLlib environment has an encoder: the
        plan says so otherwise); no GIF, no --live."""
        return contract.mp4_enjoy_extras(video_format, live)

    def checkpoint_layout(self, config: WorkerConfig) -> contract.CheckpointLayout:
        return LAYOUT

    def check_checkpoint(self, checkpoint: contract.Checkpoint, config: WorkerConfig) -> str | None:
        """An RLlib checkpoint of this algorithm and env, complete, of a format this worker reads
        (its JSON files only: the pickles are not opened)."""
        path = latest_checkpoint(Path(checkpoint.path))
        return (
            problem(path, config.algo, config.env_id)
            if path is not None
            else f"no RLlib checkpoint at {checkpoint.path}"
        )

    def policy_server(
        self, checkpoint: contract.Checkpoint, config: WorkerConfig, *, agent: str, python: str
    ) -> list[str] | None:
        """:mod:`ray_worker.serve` in the worker's environment, serving the module the run maps to
        ``agent`` (a single-agent run's one module for any seat). RLlib's module files are pickles:
        the checkpoint must be the user's own (as a resume's)."""
        from mosaic_core.runstore.trust import check_code_checkpoint

        path = latest_checkpoint(Path(checkpoint.path))
        if path is None:
            raise UsageError(f"no RLlib checkpoint at {checkpoint.path}")
        check_code_checkpoint(path, "RLlib checkpoint")
        agents = multiagent_setup(path).get("agents") or {}
        if is_multiagent(config.env_id) and agent not in agents:
            raise UsageError(
                f"{config.env_id} run has no policy for agent {agent!r} (its agents: {', '.join(agents) or 'none'})"
            )
        return python_command(python, "-m", "ray_worker.serve", "--checkpoint", str(path), "--agent", agent)

    def child_events(self) -> list[ChildEvent]:
        return [
            ChildEvent(
                "eval_result",
                "extras.eval_every_checkpoint: a checkpoint's evaluation (global_step, mean, std, iqm, episodes)",
            )
        ]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--preset",
            metavar="NAME",
            help="hyperparameters from RLlib's tuned examples for this algo and env (tuned); "
            "extras.algo_params win over it",
        )

    def code_paths(self, data: dict[str, Any]) -> list[CodePath]:
        """The checkpoint a resume or an evaluation loads: RLlib checkpoints are pickles, i.e. code."""
        extras = table if isinstance(table := data.get("extras"), dict) else {}
        key = _checkpoint_key(extras)
        value = extras.get(key) if key else None
        return [CodePath(f"extras.{key}", value)] if isinstance(value, str) and value and "\0" not in value else []

    def config_defaults(self, data: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        """The algorithm's first env (CartPole-v1; Pendulum-v1 for SAC) and, in training, the
        original's budget."""
        defaults: dict[str, Any] = {}
        algo = data.get("algo")
        if isinstance(algo, str):  # one it does not run is refused by name, whatever the env
            defaults["env_id"] = DEFAULT_ENVS.get(algo.upper(), DEFAULT_ENVS["PPO"])
        if _mode(data.get("extras") or {}) == "train":  # resume and evaluate need no budget
            defaults["total_timesteps"] = DEFAULT_TOTAL_TIMESTEPS
        return defaults

    def validate(self, config: WorkerConfig, options: dict[str, Any]) -> list[str]:
        problems = [problem for problem in (not_run_here(config.algo),) if problem]
        extras = config.extras
        if isinstance(extras.get("algo_params", {}), dict):
            try:
                in_our_names(extras.get("algo_params", {}))
            except ConfigError as exc:
                problems.append(str(exc))
        if not isinstance(extras.get("algo_params", {}), dict):
            problems.append("extras.algo_params must be an object of RLlib options")
        problems += _multiagent_problems(extras, config.env_id)
        key = _checkpoint_key(extras)
        if key and isinstance(extras.get(key), str) and extras[key]:  # whose it is, before any environment starts
            try:
                _checkpoint(config, key)
            except ConfigError as exc:
                problems.append(str(exc))
        return problems

    def gpu_request(self, config: WorkerConfig) -> str | None:
        """RLlib uses GPUs only when asked (``num_gpus_per_learner``): a daemon without one refuses the run."""
        params = config.extras.get("algo_params")
        gpus = params.get("num_gpus_per_learner") if isinstance(params, dict) else None
        return "extras.algo_params.num_gpus_per_learner" if isinstance(gpus, (int, float)) and gpus > 0 else None

    def algorithm_names(self, data: dict[str, Any]) -> list[str]:
        return list(ALGORITHMS)

    def algorithms(self, python: str) -> list[dict[str, Any]]:
        return [{"algo": algo, "description": text} for algo, text in ALGORITHMS.items()]

    def plan(self, config: WorkerConfig, run: RunContext) -> Launch:
        algo = config.algo  # RLlib's spelling (the host's rule, mosaic_core.algonames)
        extras = config.extras
        for key in run.worker_extras:  # keys no plugin owns: RLlib's options live under algo_params
            raise ConfigError(
                f"extras.{key} is not a key of the rllib worker; RLlib options go under "
                f'extras.algo_params (e.g. {{"algo_params": {{"{key}": ...}}}})',
                field=f"extras.{key}",
            )
        preset_name = run.options.get("preset") or extras.get("preset")
        preset = preset_params(preset_name, algo, config.env_id) if preset_name else {}
        given, notes = in_our_names(extras.get("algo_params") or {})
        params = {**preset, **given}
        address = ray_address(extras)
        if address:
            check_answers(address)
        else:
            params, fitted = fit_env_runners(params, local_cluster_cpus())
            notes += fitted
        teams = ["--setup", json.dumps(setup(extras), sort_keys=True)] if is_multiagent(config.env_id) else []
        answer = ask_configs(
            run.python, ["check", "--algo", algo, "--env", config.env_id, "--params", json.dumps(params), *teams]
        )
        if answer["problems"]:
            raise ConfigError("; ".join(answer["problems"]), source=config.source)
        mode = _mode(extras)
        key = _checkpoint_key(extras)
        command = [
            *python_command(run.python, "-m", "ray_worker.train", keep_environment=True),
            *contract.host_flags(config, checkpoint=_checkpoint(config, key) if key else None),
            "--env",
            config.env_id,
            "--params",
            json.dumps(params, sort_keys=True),
            *teams,
            *(["--ray-address", address] if address else []),
        ]
        if extras.get("eval_capture_video") is True and contract.video_encoder(run.python) is None:
            raise ConfigError(contract.no_video_encoder("rllib"), source=config.source)  # before the run starts
        summary = answer["summary"]
        envs = summary.get("num_envs_per_env_runner")
        where = address or "a local Ray cluster"
        return Launch(
            command=command,
            num_envs=envs if isinstance(envs, int) and envs > 0 else None,
            summary={
                "headline": f"RLlib {algo} on {config.env_id} ({mode}, {summary.get('num_env_runners')} "
                f"env runner(s), {where})",
                "rllib": summary,
                **({"preset": {"name": preset_name, "applied": preset}} if preset_name else {}),
            },
            started_payload={"rllib": {"algo": algo, "mode": mode, "ray_address": address or "local"}},
            notes=tuple(notes),
        )
