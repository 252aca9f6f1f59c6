"""Plan a CleanRL launch: resolve the algorithm, build and validate its argv, the child's
environment and command line. Pure planning: nothing runs and nothing is written here, so the
dry run and the real run take exactly the same decisions.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core.config import WorkerConfig, redact
from mosaic_core.errors import ConfigError
from mosaic_core.plugins import PluginHost
from mosaic_core.runs import RunContext

MODES = ("train", "resume_training", "policy_eval")


@dataclass
class LaunchPlan:
    config: WorkerConfig
    algorithm: Any  # cleanrl_worker.registry.ResolvedAlgorithm
    script_argv: list[str]
    command: list[str]
    env: dict[str, str]
    cwd: Path
    mode: str
    num_envs: int | None = None  # the script's vector-env width, when known (for plugins' step counts)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        from cleanrl_worker.registry import RESOLUTION_ORDER

        algo = self.algorithm
        return {
            "run_id": self.config.run_id,
            "mode": self.mode,
            "algorithm": {"name": algo.name, "source": algo.source, "script": str(algo.script),
                          "checkout_root": str(algo.checkout_root) if algo.checkout_root else None,
                          "detail": algo.detail, "resolution_order": list(RESOLUTION_ORDER)},
            "argv": self.script_argv,
            "num_envs": self.num_envs,
            "command": self.command,
            "cwd": str(self.cwd),
            "env": redact(self.env),
            "config": self.config.to_dict(),
            "notes": self.notes,
        }


# Modes that run a program of the worker's own instead of an algorithm script.
MODE_PROGRAMS = {"policy_eval": "cleanrl_worker.policy_eval", "interactive": "cleanrl_worker.interactive"}


def mode_program(mode: str) -> Any:
    """The worker's own program for ``mode``, described like a resolved algorithm."""
    import importlib.util

    from cleanrl_worker.registry import ResolvedAlgorithm

    module = MODE_PROGRAMS[mode]
    return ResolvedAlgorithm(name=mode, script=Path(importlib.util.find_spec(module).origin), source="mode",
                             checkout_root=None, detail=f"the worker's {mode} program ({module})")


def mode_defaults(data: dict[str, Any], interactive: bool) -> dict[str, Any]:
    """In policy_eval and interactive modes no algorithm or budget is needed from the user."""
    extras = data.get("extras") if isinstance(data.get("extras"), dict) else {}
    mode = "interactive" if interactive else extras.get("mode")
    return {"algo": mode, "total_timesteps": 1} if mode in MODE_PROGRAMS else {}


def _mode(config: WorkerConfig) -> str:
    mode = config.extras.get("mode", "train") or "train"
    if mode not in MODES:
        raise ConfigError(f"extras.mode {mode!r} is not one of {', '.join(MODES)}", field="extras.mode",
                          source=config.source)
    return mode


def _existing_file(config: WorkerConfig, key: str) -> Path:
    value = config.extras.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"extras.{key} is required for mode {config.extras.get('mode')!r}",
                          field=f"extras.{key}", source=config.source)
    path = Path(value).expanduser().resolve()
    if not path.is_file():
        raise ConfigError(f"extras.{key}: no such file {path}", field=f"extras.{key}", source=config.source)
    return path


def base_flags(config: WorkerConfig, with_budget: bool = True) -> list[str]:
    flags = ["--env-id", config.env_id]
    if with_budget:
        flags += ["--total-timesteps", str(config.total_timesteps)]
    if config.seed is not None:
        flags += ["--seed", str(config.seed)]
    return flags


EVAL_FLAGS = {"eval_episodes": int, "eval_batch_size": int, "eval_gamma": float, "eval_repeat": int,
              "eval_max_episode_steps": int}


def eval_flags(config: WorkerConfig) -> list[str]:
    """``policy_eval`` flags from ``extras.policy_path`` and the ``eval_*`` extras."""
    flags = ["--policy-path", str(_existing_file(config, "policy_path"))]
    for key, kind in EVAL_FLAGS.items():
        value = config.extras.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
            raise ConfigError(f"extras.{key} must be a number ({kind.__name__}), got {value!r}",
                              field=f"extras.{key}", source=config.source)
        flags += [f"--{key.replace('_', '-')}", str(value)]
    for key in ("eval_capture_video", "eval_deterministic"):
        if config.extras.get(key):
            flags.append(f"--{key.replace('_', '-')}")
    return flags


def _positive_int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def plan_launch(config: WorkerConfig, run: RunContext, host: PluginHost, interactive: bool = False) -> LaunchPlan:
    """Every decision of a launch, or a ConfigError/UsageError listing what is wrong."""
    from cleanrl_worker import gym029_compat
    from cleanrl_worker.flags import extras_to_flags
    from cleanrl_worker.registry import resolve
    from cleanrl_worker.script_args import check_script_argv, resolved_value

    problems = host.validate_config(config)
    if problems:
        where = f" in {config.source}" if config.source else ""
        raise ConfigError(f"invalid config{where}: " + "; ".join(problems))
    mode = "interactive" if interactive else _mode(config)
    if mode in MODE_PROGRAMS:
        algorithm = mode_program(mode)
    else:
        algorithm = resolve(config.algo, cleanrl_home=config.extras.get("cleanrl_home"), cwd=Path.cwd())
    script_argv = base_flags(config) + extras_to_flags(config.extras, source=config.source) + host.build_args(config)
    notes: list[str] = []
    num_envs = None
    if mode == "policy_eval":
        script_argv = base_flags(config, with_budget=False) + eval_flags(config)
        command = [sys.executable, "-m", MODE_PROGRAMS[mode], *script_argv]
    elif mode == "interactive":
        script_argv = base_flags(config, with_budget=False)
        if config.extras.get("policy_path"):
            script_argv += ["--policy-path", str(_existing_file(config, "policy_path"))]
        if config.extras.get("interactive_render", True):
            script_argv += ["--render"]
        command = [sys.executable, "-m", MODE_PROGRAMS[mode], *script_argv]
    else:
        if mode == "resume_training":
            script_argv += ["--resume-from", str(_existing_file(config, "checkpoint_path"))]
        notes += check_script_argv(algorithm.script, script_argv)
        notes += filter(None, [gym029_compat.dry_run_note(algorithm.script, config.extras)])
        num_envs = _positive_int(resolved_value(algorithm.script, script_argv, "num_envs"))
        command = [sys.executable, "-m", "cleanrl_worker.launch"]
        if algorithm.checkout_root:
            command += ["--root", str(algorithm.checkout_root)]
        command += [str(algorithm.script), "--", *script_argv]
    return LaunchPlan(config=config, algorithm=algorithm, script_argv=script_argv, command=command, num_envs=num_envs,
                      env=host.child_env(run), cwd=run.run_dir, mode=mode, notes=notes)
