"""Plan a CleanRL launch: resolve the algorithm, build and validate its argv and command
line. Pure planning: nothing runs and nothing is written here, so the dry run and the real
run take exactly the same decisions.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mosaic_core import (
    THREAD_VARS,
    CodePath,
    ConfigError,
    Launch,
    RunContext,
    TrackingSettings,
    UsageError,
    WorkerConfig,
    contract,
)
from mosaic_core.procs import python_command  # -P: the run directory (its cwd) never on its sys.path
from mosaic_core.toolkit import redact

# eval_* keys the worker owns that are also flags of the bundled scripts (evaluation during training)
TRAINING_EVAL_KEYS = ("eval_frequency", "eval_episodes")


# Modes that run a program of the worker's own instead of an algorithm script (named as algorithms).
MODE_PROGRAMS = {"policy_eval": "cleanrl_worker.policy_eval", "interactive": "cleanrl_worker.interactive"}
PROGRAM_OF_MODE = {"evaluate": "policy_eval", "interactive": "interactive"}


def mode_program(mode: str) -> Any:
    """The worker's own program for ``mode``, described like a resolved algorithm."""
    import importlib.util

    from cleanrl_worker.registry import ResolvedAlgorithm

    module = MODE_PROGRAMS[mode]
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:  # a module of this package: only a broken install
        raise UsageError(f"mode {mode}: cannot find its program {module}; reinstall mosaic-rl")
    return ResolvedAlgorithm(
        name=mode,
        script=Path(spec.origin),
        source="mode",
        checkout_root=None,
        detail=f"the worker's {mode} program ({module})",
    )


# The worker flags a run's config records (as extras), so `--from RUN` and later lookups see them.
RECORDED_FLAGS = {"preset": "--preset", "experiment_name": "--name"}


def recorded_options(data: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """``--preset``/``--name`` as the extras keys that record them; a different value in the
    config's extras is an error naming both."""
    extras = table if isinstance(table := data.get("extras"), dict) else {}
    recorded = {}
    for key, flag in RECORDED_FLAGS.items():
        value = options.get(flag.removeprefix("--"))
        if value is None:
            continue
        if extras.get(key) not in (None, value):
            raise UsageError(f"{flag} {value} and extras.{key} {extras[key]!r} disagree; give it once")
        recorded[key] = value
    return recorded


def mode_defaults(data: dict[str, Any], interactive: bool) -> dict[str, Any]:
    """In policy_eval and interactive modes no algorithm or budget is needed from the user;
    in training, the env is the script's own ``env_id`` default, and the budget the preset's
    (``extras.preset``), else the script's own ``total_timesteps`` default."""
    extras = table if isinstance(table := data.get("extras"), dict) else {}
    mode = "interactive" if interactive else extras.get("mode")
    mode = contract.normalize_mode(mode) if isinstance(mode, str) else None  # a malformed one: validation says
    if mode == "evaluate":  # the contract's: no budget
        return {"algo": PROGRAM_OF_MODE[mode]}
    if mode == "interactive":  # the worker's own mode steps on request: the core still asks for a budget
        return {"algo": PROGRAM_OF_MODE[mode], "total_timesteps": 1}
    algo = data.get("algo")
    if not isinstance(algo, str) or not algo:
        return {}
    found: dict[str, Any] = {}
    if data.get("env_id") in (None, ""):
        env_id = _script_default(algo, extras.get("cleanrl_home"), "env_id")
        if isinstance(env_id, str) and env_id:
            found["env_id"] = env_id
    env_id = data.get("env_id") or found.get("env_id")
    if data.get("total_timesteps") in (None, "") and extras.get("preset") and env_id:
        from cleanrl_worker.presets import find_preset

        budget = find_preset(str(extras["preset"]), algo, str(env_id)).total_timesteps
        if budget:
            return {**found, "total_timesteps": budget}
    if data.get("total_timesteps") in (None, ""):
        default = _script_default(algo, extras.get("cleanrl_home"), "total_timesteps")
        if isinstance(default, int) and not isinstance(default, bool) and default > 0:
            found["total_timesteps"] = default
    return found


def _script_default(algo: str, cleanrl_home: Any, name: str) -> Any:
    """The literal default of ``name`` in the script ``algo`` resolves to (None if unknown)."""
    from cleanrl_worker.registry import resolve
    from cleanrl_worker.script_args import resolved_value

    try:
        return resolved_value(resolve(algo, cleanrl_home=cleanrl_home).script, [], name)
    except (UsageError, OSError):
        return None  # the plan reports a bad algorithm itself


def command_line_flags(extra_argv: list[str], from_extras: list[str]) -> list[str]:
    """Script flags typed after the host's (``--learning-rate 1e-3``), refused when the same
    flag also comes from extras: one value per flag, said once."""

    def names(argv: list[str]) -> dict[str, str]:
        found = {}
        for item in argv:
            if item.startswith("--") and len(item) > 2:
                flag = item.split("=", 1)[0]
                found[flag.replace("--no-", "--", 1).replace("_", "-")] = flag
        return found

    given, extras = names(extra_argv), names(from_extras)
    both = sorted(set(given) & set(extras))
    if both:
        raise UsageError(f"{given[both[0]]} is given on the command line and in extras; give it once")
    return list(extra_argv)


def _mode(config: WorkerConfig) -> str:
    """The run's mode: the contract's or the worker's ``interactive`` (the host checked it)."""
    return str(config.extras.get("mode") or "train")


def _existing_file(config: WorkerConfig, key: str, directory: bool = False) -> Path:
    """The file ``extras.<key>`` names; with ``directory``, a run directory names its newest
    checkpoint (as ``mosaic evaluate RUN`` picks it), so the dry run checks what the run loads."""
    value = config.extras.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(
            f"extras.{key} is required for mode {config.extras.get('mode')!r}",
            field=f"extras.{key}",
            source=config.source,
        )
    path = Path(value).expanduser().resolve()
    if directory and path.is_dir():
        return _newest_checkpoint(config, key, path)
    if not path.is_file():
        raise ConfigError(f"extras.{key}: no such file {path}", field=f"extras.{key}", source=config.source)
    return path


def _newest_checkpoint(config: WorkerConfig, key: str, run_dir: Path) -> Path:
    from cleanrl_worker.checkpoint_header import CHECKPOINTS, FORMAT

    newest = contract.newest_checkpoint(run_dir, contract.CheckpointLayout(CHECKPOINTS, FORMAT))
    if newest is None:
        raise ConfigError(
            f"extras.{key}: no checkpoint in {run_dir} (a run directory's are {CHECKPOINTS.format(step='N')})",
            field=f"extras.{key}",
            source=config.source,
        )
    return newest.path


def base_flags(config: WorkerConfig, with_budget: bool = True) -> list[str]:
    flags = [f"--env-id={config.env_id}"]
    if with_budget:
        flags.append(f"--total-timesteps={config.total_timesteps}")
    if config.seed is not None:
        flags.append(f"--seed={config.seed}")
    return flags


EVAL_FLAGS = {
    "eval_episodes": int,
    "eval_batch_size": int,
    "eval_gamma": float,
    "eval_repeat": int,
    "eval_max_episode_steps": int,
}


def eval_flags(config: WorkerConfig) -> list[str]:
    """``policy_eval`` flags from ``extras.checkpoint_path`` (or its old name ``policy_path``) and
    the ``eval_*`` extras."""
    flags = [f"--policy-path={_existing_file(config, contract.checkpoint_key(config.extras), directory=True)}"]
    for key, kind in EVAL_FLAGS.items():
        value = config.extras.get(key)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind is int and not isinstance(value, int))
        ):
            raise ConfigError(
                f"extras.{key} must be a number ({kind.__name__}), got {value!r}",
                field=f"extras.{key}",
                source=config.source,
            )
        flags.append(f"--{key.replace('_', '-')}={value}")
    for key in ("eval_capture_video", "eval_deterministic", "eval_realtime"):
        if config.extras.get(key):
            flags.append(f"--{key.replace('_', '-')}")
    video_format = config.extras.get("eval_video_format")
    if video_format is not None:
        if video_format not in ("gif", "mp4"):
            raise ConfigError(
                f"extras.eval_video_format must be gif or mp4, got {video_format!r}",
                field="extras.eval_video_format",
                source=config.source,
            )
        flags.append(f"--eval-video-format={video_format}")
    return flags


def _episodes_total(extras: dict[str, Any]) -> int:
    """The episodes a policy_eval run plays (its program's defaults: 10 episodes, 1 round)."""
    return (_positive_int(extras.get("eval_episodes")) or 10) * (_positive_int(extras.get("eval_repeat")) or 1)


def _positive_int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _algorithm_summary(algorithm: Any) -> dict[str, Any]:
    from cleanrl_worker.registry import RESOLUTION_ORDER

    return {
        "name": algorithm.name,
        "source": algorithm.source,
        "script": str(algorithm.script),
        "checkout_root": str(algorithm.checkout_root) if algorithm.checkout_root else None,
        "detail": algorithm.detail,
        "resolution_order": list(RESOLUTION_ORDER),
    }


def plan_launch(config: WorkerConfig, run: RunContext) -> Launch:
    """Every decision of a launch, or a ConfigError/UsageError naming what is wrong."""
    from cleanrl_worker import gym029_compat, upstream_eval
    from cleanrl_worker.envcheck import check_env, check_env_cached
    from cleanrl_worker.extras_flags import check_extras_flags, mosaic_flags
    from cleanrl_worker.flags import extras_to_flags
    from cleanrl_worker.registry import entrypoint_of, resolve
    from cleanrl_worker.script_args import check_script_argv, resolved_value

    mode = "interactive" if run.options.get("interactive") else _mode(config)
    if mode in PROGRAM_OF_MODE and run.options.get("extra_argv"):
        raise UsageError(f"unrecognized arguments for mode {mode}: {' '.join(run.options['extra_argv'])}")
    if mode in PROGRAM_OF_MODE:
        algorithm = mode_program(PROGRAM_OF_MODE[mode])
    else:
        algorithm = resolve(config.algo, cleanrl_home=config.extras.get("cleanrl_home"), cwd=Path.cwd())
    script_extras = {**run.worker_extras, "algo_params": config.extras.get("algo_params")}
    if mode in ("train", "resume"):  # evaluation during training, and the contract's keys the script reads
        script_extras.update({k: config.extras[k] for k in TRAINING_EVAL_KEYS if k in config.extras})
        script_extras.update(contract_flags(algorithm.script, config.extras))
        script_extras.update(mosaic_flags(algorithm.script, config))  # use_cuda, total_frames
    notes: list[str] = []
    num_envs = applied = experiment = None
    env_notes: list[str] = []
    # A dry run checks afresh; a real run asks the cache first (no gymnasium import once it knows).
    check = check_env if run.dry_run else check_env_cached
    if mode in PROGRAM_OF_MODE:
        check(config.env_id, None, "mode")  # the id exists; the checkpoint's spaces are checked when it loads
    if mode == "evaluate":
        script_argv = base_flags(config, with_budget=False) + eval_flags(config)
        command = python_command(
            sys.executable, "-m", MODE_PROGRAMS["policy_eval"], *script_argv, keep_environment=True
        )
    elif mode == "interactive":
        script_argv = base_flags(config, with_budget=False)
        if config.extras.get("policy_path"):
            script_argv.append(f"--policy-path={_existing_file(config, 'policy_path')}")
        if config.extras.get("interactive_render", True):
            script_argv += ["--render"]
        command = python_command(
            sys.executable, "-m", MODE_PROGRAMS["interactive"], *script_argv, keep_environment=True
        )
    else:
        check_extras_flags(algorithm.script, script_extras, config)
        from_extras = extras_to_flags(script_extras, source=config.source)
        typed = command_line_flags(run.options.get("extra_argv") or [], from_extras)
        applied = preset_for(config, from_extras + typed)
        from_preset = extras_to_flags(applied.flags, source=str(applied.preset.file)) if applied else []
        script_argv = base_flags(config) + from_preset + from_extras + typed + tracking_flags(run) + run.plugin_args
        saving = save_flags(algorithm.script, script_argv, bool(run.options.get("no_save")))
        script_argv += saving
        experiment = plan_experiment(config, run, mode)
        if mode == "resume":
            script_argv.append(
                f"--resume-from={_existing_file(config, contract.checkpoint_key(config.extras), directory=True)}"
            )
        elif experiment and experiment.get("checkpoint"):
            script_argv.append(f"--resume-from={experiment['checkpoint']}")
        notes += check_script_argv(algorithm.script, script_argv)
        env_notes = check(config.env_id, algorithm.name, algorithm.source)
        notes += filter(None, [gym029_compat.dry_run_note(algorithm.script, config.extras)])
        num_envs = _positive_int(resolved_value(algorithm.script, script_argv, "num_envs"))
        command = python_command(sys.executable, "-m", "cleanrl_worker.launch", keep_environment=True)
        if algorithm.checkout_root:
            command += ["--root", str(algorithm.checkout_root)]
        skipped = upstream_eval.skipped_model(algorithm, script_argv, saving)
        if skipped:
            command += ["--skip-eval-of", skipped]
            notes.append(upstream_eval.dry_run_note(skipped))
        elif final := upstream_eval.final_model(algorithm, script_argv):
            command += ["--record-eval-of", final]
        command += [str(algorithm.script), "--", *script_argv]
    module, function = entrypoint_of(algorithm)
    env_check = "; ".join(env_notes) or f"env {config.env_id} and its spaces checked"
    headline = f"{algorithm.name} from {algorithm.source} ({algorithm.script})"
    summary = {
        "mode": mode,
        "algorithm": _algorithm_summary(algorithm),
        "argv": script_argv,
        "headline": headline,
        # MOSAIC's dry-run fields, beside ours
        "status": "dry-run",
        "module": module,
        "callable": function,
        "extras": redact(config.extras),
        "env_check": env_check,
    }
    started = {"algo_source": algorithm.source, "script": str(algorithm.script), "argv": script_argv}
    if mode == "evaluate":  # what a progress display counts: episodes, not steps
        started["progress"] = {"unit": "episodes", "total": _episodes_total(config.extras), "event": "eval_batch"}
    if mode not in PROGRAM_OF_MODE and applied:
        summary["preset"] = started["preset"] = applied.summary()
        summary["headline"] += f"; {applied.headline()}"
    if mode not in PROGRAM_OF_MODE and experiment:
        summary["experiment"] = started["experiment"] = experiment
        summary["headline"] += f"; {experiment['decision']}"
        notes.append(experiment["decision"])
    code = (CodePath("algo", str(algorithm.script)),) if algorithm.source in ("script", "checkout") else ()
    return Launch(
        command=command,
        cwd=run.run_dir,
        num_envs=num_envs,
        summary=summary,
        started_payload=started,
        passthrough_stdio=mode == "interactive",
        notes=notes,
        code_paths=code,
        env=torch_threads_env(config.extras),
    )


def torch_threads_env(extras: dict[str, Any]) -> dict[str, str]:
    """``extras.torch_threads`` as the thread variables torch reads when a script imports it (the
    scripts have no flag of their own for it): it wins over the run's thread budget."""
    threads = extras.get("torch_threads")
    return {name: str(threads) for name in THREAD_VARS[:3]} if threads is not None else {}


def contract_flags(script: Path, extras: dict[str, Any]) -> dict[str, Any]:
    """The contract's standard keys (checked by the host) that the script's ``Args`` reads as flags
    (the bundled algorithms': ``checkpoint_frequency``, ``save_replay_buffer``, ``eval_every_checkpoint``,
    ``eval_episodes``); a script without them never sees them."""
    from cleanrl_worker.script_args import NoArgsClassError, read_script_args

    given = {key.name: extras[key.name] for key in contract.STANDARD_KEYS if extras.get(key.name) is not None}
    if not given:
        return {}
    try:
        fields = read_script_args(script).fields
    except NoArgsClassError:
        return {}
    return {key: value for key, value in given.items() if key in fields}


SAVE_SPELLINGS = {"--save-model": True, "--save_model": True, "--no-save-model": False, "--no-save_model": False}


def save_flags(script: Path, argv: list[str], no_save: bool) -> list[str]:
    """A run keeps its final model (RL Zoo's default): ``--save-model`` for a script whose
    ``Args`` has ``save_model`` and no flag set it; ``--no-save`` (the worker's flag) turns it
    off, and disagrees with an explicit ``save_model: true``."""
    from cleanrl_worker.script_args import NoArgsClassError, read_script_args

    try:
        if "save_model" not in read_script_args(script).fields:
            return []
    except NoArgsClassError:
        return []
    given = [SAVE_SPELLINGS[a.split("=", 1)[0]] for a in argv if a.split("=", 1)[0] in SAVE_SPELLINGS]
    if no_save and any(given):
        raise UsageError("--no-save and save_model true disagree; give one")
    if given:
        return []
    return ["--no-save-model"] if no_save else ["--save-model"]


def tracking_flags(run: RunContext) -> list[str]:
    """The published tracking settings as CleanRL's flags (values glued with ``=``, so none can
    become a flag); W&B's directory, key, mode and run name reach the script through the
    analytics plugin's environment and ``wandb.init`` wrapper."""
    settings = run.setting(TrackingSettings)
    if settings is None:
        return []
    argv = ["--track"]
    for value, flag in ((settings.project, "--wandb-project-name"), (settings.entity, "--wandb-entity")):
        if value:
            argv.append(f"{flag}={value}")
    return argv


def preset_for(config: WorkerConfig, given_argv: list[str]) -> Any:
    """The preset ``extras.preset`` names for this algo and env, less the fields extras or the
    command line set (:class:`cleanrl_worker.presets.Applied`), or None without a preset."""
    name = config.extras.get("preset")
    if name is None:
        return None
    from cleanrl_worker.presets import apply_preset, find_preset, given_fields

    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"extras.preset must be a preset name, got {name!r}", field="extras.preset", source=config.source
        )
    return apply_preset(find_preset(name, config.algo, config.env_id), given_fields(given_argv))


def plan_experiment(config: WorkerConfig, run: RunContext, mode: str) -> dict[str, Any] | None:
    """What ``extras.experiment_name`` (``--name``) decides for this run (None without a name)."""
    name = config.extras.get("experiment_name")
    if name is None:
        return None
    from cleanrl_worker.experiments import decide

    return decide(config, run.directory.root, restart=bool(run.options.get("restart")), explicit=mode != "train")


def gpu_request(extras: dict[str, Any]) -> str | None:
    """The extras key that asks for a GPU explicitly, or None (CleanRL's ``cuda`` flag is on by
    default but falls back to the CPU, so only an explicit request counts)."""
    params = table if isinstance(table := extras.get("algo_params"), dict) else {}
    for where, values in (("extras", extras), ("extras.algo_params", params)):
        for key in ("cuda", "use_cuda"):
            if values.get(key) is True:
                return f"{where}.{key}"
        device = values.get("device")
        if isinstance(device, str) and device.lower().startswith(("cuda", "gpu")):
            return f"{where}.device"
        for key in ("gpu", "gpus", "num_gpus", "requires_gpu"):
            value = values.get(key)
            if value is True or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
                return f"{where}.{key}"
    return None
