"""RLlib's algorithm configs and gymnasium's registry, asked in the worker's environment: whether an
env id exists and whether ``extras.algo_params`` names options of the algorithm's config class.

The host's plan runs ``python -m ray_worker.configs check ...`` there (one short subprocess,
about 3 s: importing RLlib's config class is most of it), so the dry run, the daemon and sweeps
refuse a bad config before a Ray cluster starts; the training program builds its config with
:func:`build_config`.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import sys
from typing import Any

from mosaic_core.child import preload

# RLlib's config class of each algorithm this worker runs.
CONFIG_CLASSES = {
    "PPO": "ray.rllib.algorithms.ppo:PPOConfig",
    "APPO": "ray.rllib.algorithms.appo:APPOConfig",
    "IMPALA": "ray.rllib.algorithms.impala:IMPALAConfig",
    "DQN": "ray.rllib.algorithms.dqn:DQNConfig",
    "SAC": "ray.rllib.algorithms.sac:SACConfig",
}
# Options MOSAIC sets itself: each has a MOSAIC way to say it.
RESERVED = {
    "env": "use --env-id",
    "seed": "use --seed",
    "framework": "the worker runs RLlib's PyTorch implementations",
    "framework_str": "the worker runs RLlib's PyTorch implementations",
    "callbacks_class": "the worker's callbacks report to MOSAIC",
    "callbacks": "the worker's callbacks report to MOSAIC",
    "enable_rl_module_and_learner": "the worker runs RLlib's new API stack",
    "enable_env_runner_and_connector_v2": "the worker runs RLlib's new API stack",
    "api_stack": "the worker runs RLlib's new API stack",
    "logger_config": "TensorBoard files go to the run directory",
}
DISCRETE_ONLY = ("DQN",)
# Options without a setter that RLlib sets through one of its config methods.
SET_THROUGH = {"model_config": "rl_module"}


def config_class(algo: str) -> type:
    module, _, name = CONFIG_CLASSES[algo].partition(":")
    return getattr(importlib.import_module(module), name)


def option_names(config: Any) -> list[str]:
    """The options of an ``AlgorithmConfig`` instance: its public, non-callable attributes."""
    names = set()
    for name in dir(config):
        if name.startswith("_") or name in RESERVED:
            continue
        try:
            value = getattr(config, name)
        except Exception:  # a property that needs a built config
            continue
        prop = getattr(type(config), name, None)
        settable = not isinstance(prop, property) or prop.fset is not None or name in SET_THROUGH
        if not callable(value) and settable:
            names.add(name)
    return sorted(names)


def env_problem(env_id: str) -> str | None:
    import gymnasium

    from ray_worker.multiagent import is_multiagent

    if is_multiagent(env_id):
        from ray_worker.pettingzoo_envs import module_of

        try:
            module_of(env_id)
            return None
        except ImportError:
            return f"env id {env_id!r} is not a PettingZoo env of the rllib worker's environment (pettingzoo 1.24.3)"

    from ray_worker.envs import env_spec

    try:
        env_spec(env_id)
        return None
    except gymnasium.error.Error:
        close = difflib.get_close_matches(env_id, list(gymnasium.registry), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"env id {env_id!r} is not registered in the rllib worker's environment (gymnasium 1.2.2){hint}"


def action_space_problems(algo: str, env_id: str) -> list[str]:
    import gymnasium

    env = gymnasium.make(env_id)
    try:
        space = env.action_space
    finally:
        env.close()
    if isinstance(space, gymnasium.spaces.Discrete):
        return []
    return [
        f"{algo} needs discrete actions; {env_id} has {type(space).__name__} actions (use SAC, PPO, APPO or IMPALA)"
    ]


def param_problems(config: Any, params: dict[str, Any]) -> list[str]:
    known = option_names(config)
    found = []
    for key in params:
        if key in RESERVED:
            found.append(f"extras.algo_params.{key}: {RESERVED[key]}")
        elif key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            found.append(f"extras.algo_params.{key} is not an option of RLlib's {type(config).__name__}{hint}")
    return found


def build_config(
    algo: str, env_id: str, params: dict[str, Any], seed: int | None = None, setup: dict[str, Any] | None = None
) -> Any:
    """The algorithm's config on the new API stack for ``env_id``, updated by ``params``; a
    multi-agent env's modules and mapping from ``setup`` (:mod:`ray_worker.teams`)."""
    from ray_worker import envs, pettingzoo_envs
    from ray_worker.multiagent import is_multiagent
    from ray_worker.teams import SETUP_KEY, configure

    env, env_config = (pettingzoo_envs if is_multiagent(env_id) else envs).rllib_env(env_id)
    config = config_class(algo)()
    config.environment(env).framework("torch")
    params = dict(params)
    for key, method in SET_THROUGH.items():
        if key in params:
            getattr(config, method)(**{key: params.pop(key)})
    config.update_from_dict(params)
    config.env_config = {**dict(config.env_config or {}), **env_config}  # the id the creator makes
    if is_multiagent(env_id):
        config.env_config[SETUP_KEY] = configure(config, env_id, setup or {})
    if seed is not None:
        config.debugging(seed=seed)
    return config


def register_creator(env_id: str) -> None:
    """Register the env creator of ``env_id`` (PettingZoo's, Atari's) with Ray's env registry: a
    checkpoint's config names its env by the creator's registered name."""
    from ray_worker import envs, pettingzoo_envs
    from ray_worker.multiagent import is_multiagent

    (pettingzoo_envs if is_multiagent(env_id) else envs).rllib_env(env_id)


def check(algo: str, env_id: str, params: dict[str, Any], setup: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"problems": [...], "summary": {...}}`` for ``algo`` on ``env_id`` with ``params`` (and a
    multi-agent env's ``setup``)."""
    from ray_worker.multiagent import is_multiagent
    from ray_worker.teams import setup_problems

    problems = []
    problem = env_problem(env_id)
    if problem:
        problems.append(problem)
    elif is_multiagent(env_id):
        problems += setup_problems(algo, env_id, setup or {})
    elif algo in DISCRETE_ONLY:
        problems += action_space_problems(algo, env_id)
    config = config_class(algo)()
    problems += param_problems(config, params)
    summary: dict[str, Any] = {}
    if not problems:
        try:
            config = build_config(algo, env_id, params, setup=setup)
            config.validate()
        except Exception as exc:  # RLlib's own word on a value it refuses
            text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            problems.append(f"RLlib refuses extras.algo_params for {algo}: {text}")
        summary = {
            key: getattr(config, key, None)
            for key in (
                "train_batch_size_per_learner",
                "num_env_runners",
                "num_envs_per_env_runner",
                "lr",
                "gamma",
                "num_learners",
                "num_gpus_per_learner",
            )
        }
        summary = {k: v for k, v in summary.items() if isinstance(v, (int, float, str, bool)) or v is None}
    return {"problems": problems, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ray_worker.configs")
    sub = parser.add_subparsers(dest="command", required=True)
    checking = sub.add_parser("check")
    checking.add_argument("--algo", required=True, choices=sorted(CONFIG_CLASSES))
    checking.add_argument("--env", required=True)
    checking.add_argument("--params", default="{}")
    checking.add_argument("--setup", default="{}", help="a multi-agent env's policies or self_play (JSON)")
    ns = parser.parse_args(argv)
    import logging

    logging.disable(logging.WARNING)  # RLlib's deprecation chatter: the answer is the JSON line
    # RLlib's config class is most of the answer's time: imported with the collector paused, then
    # frozen (3.1 → 1.8 CPU-s for PPO's)
    preload(CONFIG_CLASSES[ns.algo].partition(":")[0])
    print(json.dumps(check(ns.algo, ns.env, json.loads(ns.params), json.loads(ns.setup)), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
