"""Checkpoints of the bundled algorithms: one ``.cleanrl_model`` file, one format for all.

A checkpoint is ``torch.save`` of a dict holding only tensors and plain values, so it loads
with ``torch.load(..., weights_only=True)`` (no code runs when a file is read)::

    format          "mosaic.cleanrl_model"
    format_version  1
    algo            bundled algorithm name, e.g. "ppo" (its module rebuilds the agent)
    env_id          e.g. "CartPole-v1"
    observation_space, action_space
                    {"type": "Box", "shape": [...], "dtype": "float32", "low": ..., "high": ...}
                    or {"type": "Discrete", "n": 2, "start": 0}  (low/high: a number when uniform)
    models          {name: state_dict or tensor}, e.g. {"agent": ...}, {"actor": ..., "qf1": ...}
    optimizers      {name: optimizer state_dict}
    global_step     env steps done (CleanRL's global_step)
    iteration       last finished iteration (PPO) or global_step (off-policy)
    args            the script's Args as a dict
    normalization   None, or running statistics of NormalizeObservation / NormalizeReward per
                    sub-env ({"observation": [{"mean", "var", "count"}], "reward": [...],
                    "observation_clip": 10.0, "epsilon": 1e-8})
    versions        {"torch", "gymnasium", "numpy", "python"} that wrote it
    evaluation      (best.cleanrl_model only) the periodic evaluation that made it the best:
                    {"global_step", "mean_return", "std_return", "episodes", "seed", "path"}

The agent's architecture is whatever ``policy_models(envs, args)`` builds from the saved
``args`` (e.g. PPO's ``agent_arch``; a checkpoint written before a field existed gets the
network that was used then).

Resume state rides along as data: ``run_name``, ``training_state`` (RNGs, envs, loop:
:mod:`cleanrl_worker.resumestate`) and, for the off-policy algorithms, ``replay_buffer``
(:class:`cleanrl_worker.replay.KeptReplay`). Files are written to a temporary name and renamed,
so a reader never sees half a checkpoint. After each save the host (when there is one) is
asked to emit ``checkpoint_saved``.

Each bundled algorithm module defines, at top level, what :func:`load_policy` needs to act
from a checkpoint alone: ``policy_models(envs, args)`` (untrained modules keyed as in ``models``; ``envs`` only
needs ``single_observation_space`` / ``single_action_space``, ``args`` is the saved dict),
``policy(models, args, device, generator, deterministic)`` (→ a function from an observation
batch to an action batch) and ``make_eval_env(env_id, render_mode=None)``.
"""

from __future__ import annotations

import functools
import importlib
import os
import platform
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn

import gymnasium as gym
import numpy as np
import torch

from cleanrl_worker.checkpoint_header import FORMAT, FORMAT_VERSION, SUFFIX  # noqa: F401 (re-exported)
from mosaic_core import UsageError
from mosaic_core.child import emit_event


class CheckpointError(UsageError):
    """A checkpoint cannot be read or does not fit what it is used for (exit code 2)."""


# Spaces --------------------------------------------------------------------------------------


def _bound(values: np.ndarray) -> Any:
    flat = np.asarray(values).ravel()
    return flat[0].item() if flat.size and (flat == flat[0]).all() else np.asarray(values).tolist()


def describe_space(space: gym.Space) -> dict[str, Any]:
    """A plain description of a Box or Discrete space (others: type and repr only)."""
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    return {"type": type(space).__name__, "repr": repr(space)}


def space_from_description(description: dict[str, Any]) -> gym.Space:
    if description["type"] == "Discrete":
        return gym.spaces.Discrete(description["n"], start=description.get("start", 0))
    if description["type"] == "Box":
        shape, dtype = tuple(description["shape"]), np.dtype(description["dtype"])
        low = np.broadcast_to(np.asarray(description["low"], dtype=dtype), shape)
        high = np.broadcast_to(np.asarray(description["high"], dtype=dtype), shape)
        return gym.spaces.Box(low=low, high=high, shape=shape, dtype=dtype.type)
    raise CheckpointError(f"cannot rebuild a {description['type']} space from a checkpoint")


def _same_space(description: dict[str, Any], space: gym.Space) -> bool:
    ours = describe_space(space)
    keys = ("type", "n", "start") if ours["type"] == "Discrete" else ("type", "shape", "dtype")
    return all(description.get(key) == ours.get(key) for key in keys)


def library_versions() -> dict[str, str]:
    return {
        "torch": str(torch.__version__),
        "gymnasium": str(gym.__version__),
        "numpy": str(np.__version__),
        "python": platform.python_version(),
    }


# Save ----------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def save_checkpoint(
    path: str | Path,
    *,
    algo: str,
    args: Any,
    envs: Any,
    models: dict[str, Any],
    optimizers: dict[str, torch.optim.Optimizer],
    global_step: int,
    iteration: int,
    normalization: dict[str, Any] | None = None,
    evaluation: dict[str, Any] | None = None,
    run_name: str | None = None,
    training_state: dict[str, Any] | None = None,
    replay_buffer: Any = None,
) -> Path:
    """Write a checkpoint atomically, then ask the host to emit ``checkpoint_saved``.

    ``evaluation`` (for the best model of periodic evaluation) is stored in the file and sent
    in the event. ``run_name`` (the TensorBoard folder's name), ``training_state`` (RNG, env and
    loop state: :mod:`cleanrl_worker.resumestate`) and ``replay_buffer`` (a
    :class:`cleanrl_worker.replay.ReplayBuffer`, whose size is printed) make a resume exact.
    """
    path = Path(path)
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "algo": algo,
        "env_id": args.env_id,
        "observation_space": describe_space(envs.single_observation_space),
        "action_space": describe_space(envs.single_action_space),
        "models": {
            name: m.detach().clone() if isinstance(m, torch.Tensor) else m.state_dict() for name, m in models.items()
        },
        "optimizers": {name: opt.state_dict() for name, opt in optimizers.items()},
        "global_step": int(global_step),
        "iteration": int(iteration),
        "args": {key: _plain(value) for key, value in vars(args).items()},
        "normalization": normalization,
        "versions": library_versions(),
    }
    if evaluation is not None:
        payload["evaluation"] = {key: _plain(value) for key, value in evaluation.items()}
    if run_name is not None:
        payload["run_name"] = run_name
    if training_state is not None:
        payload["training_state"] = training_state
    if replay_buffer is not None:
        payload["replay_buffer"] = replay_buffer.state_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    size = path.stat().st_size
    if replay_buffer is not None:
        print(
            f"replay buffer saved with {len(replay_buffer)} transitions in {path} ({size / 1e6:.1f} MB)",
            file=sys.stderr,
        )
    event = {
        "path": os.path.relpath(path),
        "global_step": int(global_step),
        "step": int(global_step),
        "format": FORMAT,
        "algo": algo,
        "size_bytes": size,
    }
    if evaluation is not None:
        event["evaluation"] = payload["evaluation"]
    emit_event("checkpoint_saved", event)
    return path


# Load ----------------------------------------------------------------------------------------


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_checkpoint(path: str | Path, *, map_location: Any = "cpu") -> dict[str, Any]:
    """Read and check a checkpoint's format; raises :class:`CheckpointError` naming the problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path}: no such file")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises many kinds for a damaged file
        reason = str(exc).strip().splitlines()[0].split(". ")[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(
            f"checkpoint {path}: not a readable .cleanrl_model file, truncated or corrupt ({reason[:160]})"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        what = "holds only model weights (an upstream CleanRL file?)" if isinstance(ckpt, dict) else "is not a dict"
        raise CheckpointError(f"checkpoint {path}: {what}, not a MOSAIC checkpoint (format {FORMAT!r})")
    if ckpt.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path}: format version {ckpt['format_version']} is newer than "
            f"this code reads ({FORMAT_VERSION})"
        )
    missing = [key for key in ("algo", "env_id", "models", "global_step") if key not in ckpt]
    if missing:
        raise CheckpointError(f"checkpoint {path}: incomplete, missing {', '.join(missing)}")
    return ckpt


def check_compatible(ckpt: dict[str, Any], path: str | Path, *, algo: str, env_id: str, envs: Any = None) -> None:
    """Raise :class:`CheckpointError` unless ``ckpt`` was made by ``algo`` on ``env_id`` (and its spaces)."""
    if ckpt["algo"] != algo:
        raise CheckpointError(f"checkpoint {path} was saved by algo {ckpt['algo']!r}, not {algo!r}")
    if ckpt["env_id"] != env_id:
        raise CheckpointError(f"checkpoint {path} was trained on env {ckpt['env_id']!r}, not {env_id!r}")
    if envs is not None:
        for name, space in (("observation", envs.single_observation_space), ("action", envs.single_action_space)):
            if not _same_space(ckpt[f"{name}_space"], space):
                raise CheckpointError(
                    f"checkpoint {path}: {name} space {ckpt[f'{name}_space']} does not "
                    f"match env {env_id}'s {describe_space(space)}"
                )


def fail(message: str) -> NoReturn:
    """For scripts, before their first step: refuse the config in one line, exit code 2, no
    traceback; under a MOSAIC host a configuration error (:func:`mosaic_core.child.refuse_config`)."""
    from mosaic_core.child import refuse_config

    refuse_config(message)


def open_for_resume(path: str, *, algo: str, args: Any) -> dict[str, Any]:
    """For scripts: load ``--resume-from``, check algo, env and steps left; exit 2 with one line if not."""
    try:
        ckpt = load_checkpoint(path)
        check_compatible(ckpt, path, algo=algo, env_id=args.env_id)
    except CheckpointError as exc:
        fail(f"--resume-from: {exc}")
    if ckpt["global_step"] >= args.total_timesteps:
        fail(
            f"--resume-from: checkpoint {path} is at global_step {ckpt['global_step']}, already at or past "
            f"--total-timesteps {args.total_timesteps}: raise --total-timesteps to train further"
        )
    return ckpt


def restore_training(
    ckpt: dict[str, Any],
    path: str,
    *,
    envs: Any,
    models: dict[str, Any],
    optimizers: Mapping[str, torch.optim.Optimizer],
) -> None:
    """For scripts: load weights and optimizer states; exit 2 with one line if they do not fit.

    Learning rates stay those of the new run's ``Args`` (schedules set them from the step).
    """
    try:
        check_compatible(ckpt, path, algo=ckpt["algo"], env_id=ckpt["env_id"], envs=envs)
        for name, model in models.items():
            if name not in ckpt["models"]:
                raise CheckpointError(f"checkpoint {path} has no model {name!r}")
            if isinstance(model, torch.Tensor):
                model.data.copy_(ckpt["models"][name])
            else:
                model.load_state_dict(ckpt["models"][name])
        for name, optimizer in optimizers.items():
            learning_rates = [group["lr"] for group in optimizer.param_groups]
            optimizer.load_state_dict(ckpt["optimizers"][name])
            for group, lr in zip(optimizer.param_groups, learning_rates):
                group["lr"] = lr
    except CheckpointError as exc:
        fail(f"--resume-from: {exc}")
    except (RuntimeError, KeyError, ValueError) as exc:
        fail(f"--resume-from: checkpoint {path} does not fit this model (changed sizes?): {_one_line(exc)}")


# Acting from a checkpoint alone ---------------------------------------------------------------


@dataclass(frozen=True)
class LoadedPolicy:
    act: Callable[[np.ndarray], np.ndarray]
    make_env: Callable[..., gym.Env]
    algo: str
    env_id: str
    global_step: int
    gamma: float
    checkpoint: dict[str, Any]


def algorithm_module(algo: str) -> Any:
    """The bundled algorithm module named ``algo`` (CheckpointError when there is none)."""
    if not algo.isidentifier():
        raise CheckpointError(f"checkpoint names algo {algo!r}, which is not a bundled algorithm")
    try:
        return importlib.import_module(f"cleanrl_worker.algorithms.{algo}")
    except ModuleNotFoundError:
        raise CheckpointError(f"checkpoint names algo {algo!r}, which is not a bundled algorithm") from None


def load_policy(
    path: str | Path, *, device: str | torch.device = "cpu", seed: int = 0, deterministic: bool = False
) -> LoadedPolicy:
    """Rebuild a bundled algorithm's agent from a checkpoint: load, find the module, build, load weights.

    The policy draws its randomness from generators seeded with ``seed`` (the same seed gives
    the same actions for the same observations); ``deterministic`` takes the greedy / mean action.
    Observation normalisation saved in the checkpoint is applied to the observations.
    """
    device = torch.device(device)
    ckpt = load_checkpoint(path, map_location=device)
    module = algorithm_module(ckpt["algo"])
    spaces = SimpleNamespace(
        single_observation_space=space_from_description(ckpt["observation_space"]),
        single_action_space=space_from_description(ckpt["action_space"]),
    )
    models = module.policy_models(spaces, ckpt.get("args", {}))
    try:
        for name, model in models.items():
            model.load_state_dict(ckpt["models"][name])
            model.to(device).eval()
    except (RuntimeError, KeyError) as exc:
        raise CheckpointError(
            f"checkpoint {path}: models do not fit {ckpt['algo']}'s agent: {_one_line(exc)}"
        ) from None
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    act = module.policy(models, ckpt.get("args", {}), device, generator, deterministic)
    normalization = ckpt.get("normalization") or {}
    if normalization.get("observation"):
        act = normalize_observations(act, normalization)
    return LoadedPolicy(
        act=act,
        make_env=functools.partial(module.make_eval_env, ckpt["env_id"]),
        algo=ckpt["algo"],
        env_id=ckpt["env_id"],
        global_step=int(ckpt["global_step"]),
        gamma=float(ckpt.get("args", {}).get("gamma", 0.99)),
        checkpoint=ckpt,
    )


def normalize_observations(act: Callable[[np.ndarray], np.ndarray], normalization: dict[str, Any]) -> Callable:
    """``act`` behind the observation normalisation ``normalization`` records (as saved in checkpoints)."""
    from cleanrl_worker.gymcompat import merge_stats

    stats = merge_stats(normalization["observation"])
    mean, std = np.asarray(stats["mean"]), np.sqrt(np.asarray(stats["var"]) + normalization.get("epsilon", 1e-8))
    clip = normalization.get("observation_clip", 10.0)

    def normalized(obs: np.ndarray) -> np.ndarray:
        return act(np.clip((obs - mean) / std, -clip, clip).astype(np.float32))

    return normalized
