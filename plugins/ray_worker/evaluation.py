"""Evaluation of an RLlib policy by the run contract (``mosaic.eval/1``): episodes played by an env
runner of its own (one env, no Ray actor), one reset seed per episode
(:func:`mosaic_core.contract.eval_seeds`), with the policy's weights and connector states and
normalisation frozen (``MeanStdFilter`` and its kind stop updating).

Two sources: a training algorithm (``--eval-every-checkpoint``: its env runners, connector
statistics and random generators are left as they were), or a checkpoint (``mosaic evaluate``:
the env runner is built from the checkpoint's own config, its connectors' saved states and its
learner's module weights, in this process without starting Ray, so an evaluation costs the
episodes, not a cluster)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mosaic_core import contract

WORKER = "rllib"


def _runner(config: Any) -> Any:
    """An env runner of ``config``'s (copied) with one env, here, unseeded: an env runner seeds the
    process's global generators (random, numpy, torch) at its start."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    config = config.copy(copy_frozen=False)
    config.env_runners(num_env_runners=0, num_envs_per_env_runner=1).debugging(seed=None)
    return SingleAgentEnvRunner(config=config)


def _frozen(runner: Any) -> Any:
    for piece in getattr(runner._env_to_module, "connectors", ()):
        if hasattr(piece, "_update_stats"):  # MeanStdFilter: normalisation frozen
            piece._update_stats = False
    return runner


def algorithm_runner(algo: Any) -> Any:
    """The training algorithm's policy in an env runner of its own."""
    runner = _runner(algo.config)
    runner.set_state(algo.env_runner.get_state())  # the module's weights, the connectors' statistics
    return _frozen(runner)


def checkpoint_runner(checkpoint: Path) -> tuple[Any, int | None]:
    """A single-agent run's policy at ``checkpoint``, in an env runner of the checkpoint's config,
    without Ray; and the run's training seed. Loading unpickles the checkpoint (the config, the
    module's class): the caller checked whose it is (``train.check_checkpoint``)."""
    import pickle

    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.core.rl_module.rl_module import RLModule

    saved = pickle.loads((checkpoint / "env_runner" / "class_and_ctor_args.pkl").read_bytes())
    config = saved["ctor_args_and_kwargs"][1]["config"]  # the env runners' config, as training ran them
    runner = _runner(config)
    runner.restore_from_path(str(checkpoint / "env_runner"))  # the connectors' states
    module = RLModule.from_checkpoint(str(checkpoint / "learner_group" / "learner" / "rl_module" / DEFAULT_MODULE_ID))
    runner.module.set_state(module.get_state())  # the learner's weights, which training synced to its runners
    return _frozen(runner), config.seed


def _recording(runner: Any, frames: list[Any]) -> None:
    """``runner``'s env 0 rendered (``rgb_array``) after its reset and after each of its steps."""
    from ray_worker.fastlane import render_first

    def rendered(method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            results = method(*args, **kwargs)
            image = render_first(runner.env)
            if image is not None:
                frames.append(image)
            return results

        return call

    runner._try_env_reset = rendered(runner._try_env_reset)
    runner._try_env_step = rendered(runner._try_env_step)


def _stop_recording(runner: Any) -> None:
    for name in ("_try_env_reset", "_try_env_step"):
        runner.__dict__.pop(name, None)  # the class's own methods again


def play(
    runner: Any, seeds: Sequence[int], deterministic: bool, video: Path | None = None
) -> tuple[list[float], list[int]]:
    """One episode per seed on ``runner`` (stopped at the end); (returns, lengths). ``video``: the
    first episode as an MP4 there."""
    returns: list[float] = []
    lengths: list[int] = []
    frames: list[Any] = []
    try:
        for seed in seeds:
            runner._seed = int(seed)  # the reset seed of the episode that sample() starts
            if video is not None and not returns:
                _recording(runner, frames)
            episodes = runner.sample(num_episodes=1, explore=not deterministic)
            if video is not None and not returns:
                _stop_recording(runner)
                contract.write_mp4(video, frames)
            returns.append(sum(float(e.get_return()) for e in episodes))
            lengths.append(sum(len(e) for e in episodes))
    finally:
        runner.stop()
    return returns, lengths


def evaluate(
    runner: Any,
    *,
    algo_name: str,
    env_id: str,
    checkpoint: str,
    global_step: int,
    episodes: int,
    training_seed: int | None,
    eval_seed: int | None,
    deterministic: bool,
    video: Path | None = None,
) -> dict[str, Any]:
    """The ``mosaic.eval/1`` result of ``episodes`` episodes on ``runner`` (``video``: the first as an MP4)."""
    seeds = contract.eval_seeds(episodes, training_seed, eval_seed)
    returns, lengths = play(runner, seeds, deterministic, video)
    return contract.eval_result(
        worker=WORKER,
        algo=algo_name,
        env_id=env_id,
        checkpoint=checkpoint,
        global_step=global_step,
        returns=returns,
        lengths=lengths,
        seeds=seeds,
        deterministic=deterministic,
    )


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """What an ``eval_result`` event carries of a result."""
    return {key: result[key] for key in ("global_step", "checkpoint", "mean", "std", "iqm", "episodes", "protocol")}


def evaluate_checkpoint(ns: Any, checkpoint: Path) -> None:
    """Mode ``evaluate`` of a single-agent run, without Ray: ``--eval-episodes`` episodes of the
    checkpoint, ``mosaic.eval/1`` to ``--eval-out``."""
    from ray_worker.checkpoints import saved_step
    from ray_worker.configs import register_creator

    register_creator(ns.env)  # the checkpoint's config names its env by the creator's registered name
    runner, training_seed = checkpoint_runner(checkpoint)
    # The first seed: --eval-seed, else --seed (`mosaic evaluate` passes the first evaluation seed as the
    # run's seed), else the training seed of the checkpoint + 1,000,000.
    first = ns.eval_seed if ns.eval_seed is not None else ns.seed
    result = evaluate(
        runner,
        algo_name=ns.algo,
        env_id=ns.env,
        checkpoint=str(checkpoint),
        global_step=saved_step(checkpoint),
        episodes=ns.eval_episodes,
        training_seed=training_seed,
        eval_seed=first,
        deterministic=ns.eval_deterministic,
        video=Path(ns.video).absolute() if ns.video else None,
    )
    write_evaluation(ns, checkpoint, result)


def evaluate_multiagent(ns: Any, checkpoint: Path) -> None:
    """Mode ``evaluate`` of a multi-agent run: its policies play without Ray (:mod:`ray_worker.matchplay`;
    against ``random`` in a two-player turn-based game)."""
    from ray_worker.checkpoints import saved_step
    from ray_worker.matchplay import evaluate as play_evaluation

    first = ns.eval_seed if ns.eval_seed is not None else ns.seed
    result = play_evaluation(
        checkpoint,
        algo_name=ns.algo,
        env_id=ns.env,
        global_step=saved_step(checkpoint),
        seeds=contract.eval_seeds(ns.eval_episodes, None, first),
        video=Path(ns.video).absolute() if ns.video else None,
    )
    write_evaluation(ns, checkpoint, result)


def write_evaluation(ns: Any, checkpoint: Path, result: dict[str, Any]) -> None:
    """``result`` to ``--eval-out`` and ``eval_summary.json`` (what `mosaic enjoy` reads), and a line on stderr."""
    import json
    import sys

    path = contract.write_eval(Path(ns.eval_out).absolute(), result)
    returns = [e["return"] for e in result["episodes"]]
    Path("eval_summary.json").write_text(
        json.dumps(
            {
                "status": "completed",
                "episodes": len(returns),
                "checkpoint": str(checkpoint),
                "algo": ns.algo,
                "env_id": ns.env,
                "return": {"mean": result["mean"], "std": result["std"]},
                "episode_returns": returns,
                "episode_lengths": [e["length"] for e in result["episodes"]],
                **({"outcomes": result["outcomes"]} if "outcomes" in result else {}),
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    won = result.get("outcomes")
    against = (
        f", against random {won['win']['count']} won, {won['draw']['count']} drawn, {won['loss']['count']} lost "
        f"(win rate 95 % CI {won['win']['ci95'][0]:.2f}-{won['win']['ci95'][1]:.2f})"
        if won
        else ""
    )
    print(
        f"rllib worker: {len(returns)} episodes, mean return {result['mean']:.2f} "
        f"(std {result['std']:.2f}, IQM {result['iqm']:.2f}){against}: {path}",
        file=sys.stderr,
    )
