"""One batched evaluation loop for every bundled algorithm (and for policy evaluation mode).

:func:`evaluate` runs a policy (observation batch → action batch) on ``num_envs`` copies of
an env in a ``SyncVectorEnv`` until ``episodes`` episodes have ended, and reports each
episode's raw return, length and discounted return. Episodes are shared out to the envs in
advance (env ``i`` runs episodes ``i, i + num_envs, …``), so short episodes are not
over-represented, and results come in that episode order. Env ``i`` is seeded with
``seed + i``: the same seed and a deterministic policy give the same results.

The env factory is called as ``make_env(render_mode=None)`` (``"rgb_array"`` for the env
that records video) and returns a single env that gives raw rewards: put observation
normalisation in the policy, not in the env.

:class:`PeriodicEvaluation` is evaluation during training (``--eval-frequency N``,
``--eval-episodes K``): every N env steps the algorithm hands it its greedy policy, which
plays K episodes on a separate vector env seeded with ``seed + EVAL_SEED_OFFSET`` (the same
episodes each time, so evaluations compare like with like, and never the training envs'
seeds). The mean return goes to TensorBoard as ``eval/mean_return`` (with
``eval/std_return`` and ``eval/mean_length``) at the global step, every evaluation to
``runs/<run_name>/eval_history.json`` (rewritten atomically), and when the mean return is the
best so far the algorithm saves ``runs/<run_name>/best.cleanrl_model``. Evaluation draws no
random numbers from the training generators, so training goes exactly as without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from cleanrl_worker.gymcompat import Autoreset
from mosaic_core.child import evaluation_envs

EVAL_SEED_OFFSET = 10_000  # evaluation env i is seeded with seed + EVAL_SEED_OFFSET + i
HISTORY_SCHEMA = "mosaic.eval_history/1"
SAVED_MODEL_EPISODES = 10  # as upstream CleanRL evaluates the model it saves
SAVED_MODEL_EVALUATION = "cleanrl --save-model"  # eval.json's evaluated_by for the evaluation at the end
EVENT_KEYS = ("global_step", "checkpoint", "mean", "std", "iqm", "episodes", "protocol")  # eval_result's payload

Policy = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class EvaluationResult:
    returns: list[float]
    lengths: list[int]
    discounted_returns: list[float]

    def summary(self) -> dict[str, Any]:
        """Mean, std, min and max of the returns, mean length and mean discounted return."""
        returns = np.asarray(self.returns, dtype=np.float64)
        return {
            "episodes": len(self.returns),
            "mean_return": float(returns.mean()),
            "std_return": float(returns.std()),
            "min_return": float(returns.min()),
            "max_return": float(returns.max()),
            "mean_length": float(np.mean(self.lengths)),
            "mean_discounted_return": float(np.mean(self.discounted_returns)),
        }


def evaluate(
    policy: Policy,
    make_env: Callable[..., gym.Env],
    *,
    episodes: int = 10,
    num_envs: int = 10,
    seed: int = 0,
    gamma: float = 0.99,
    max_episode_steps: int | None = None,
    capture_video: bool = False,
    video_dir: str | Path | None = None,
) -> EvaluationResult:
    """Run ``policy`` for ``episodes`` episodes on a vector env of ``num_envs`` envs."""
    if episodes <= 0 or num_envs <= 0:
        raise ValueError(f"episodes and num_envs must be > 0, got {episodes} and {num_envs}")
    if capture_video and video_dir is None:
        raise ValueError("capture_video needs a video_dir")
    num_envs = min(num_envs, episodes)
    quota = np.array([episodes // num_envs + (i < episodes % num_envs) for i in range(num_envs)])

    def thunk(index: int) -> Callable[[], gym.Env]:
        def make() -> gym.Env:
            record = capture_video and index == 0
            env = make_env(render_mode="rgb_array" if record else None)
            if max_episode_steps is not None:
                env = gym.wrappers.TimeLimit(env, max_episode_steps)
            if record:
                try:
                    # env 0's first episode only: the vector env's autoreset starts a second one
                    env = gym.wrappers.RecordVideo(env, video_folder=str(video_dir), episode_trigger=lambda n: n == 0)
                except gym.error.DependencyNotInstalled as exc:
                    raise RuntimeError(f"capture_video needs moviepy (pip install moviepy): {exc}") from None
            return env

        return make

    with evaluation_envs():  # not training's envs: a curriculum does not count them
        envs = gym.vector.SyncVectorEnv([thunk(i) for i in range(num_envs)])
    try:
        obs, _ = envs.reset(seed=seed)
        autoreset = Autoreset(num_envs)
        finished = np.zeros(num_envs, dtype=np.int64)
        ret, disc, discount = np.zeros(num_envs), np.zeros(num_envs), np.ones(num_envs)
        length = np.zeros(num_envs, dtype=np.int64)
        results: dict[tuple[int, int], tuple[float, int, float]] = {}
        while (finished < quota).any():
            obs, rewards, terminations, truncations, _ = envs.step(policy(obs))
            active = autoreset.step(terminations, truncations) & (finished < quota)
            rewards = np.where(active, rewards, 0.0)
            ret += rewards
            disc += discount * rewards
            discount = np.where(active, discount * gamma, discount)
            length += active
            for index in np.flatnonzero(active & (terminations | truncations)):
                results[(int(finished[index]), int(index))] = (
                    float(ret[index]),
                    int(length[index]),
                    float(disc[index]),
                )
                finished[index] += 1
                ret[index] = disc[index] = length[index] = 0
                discount[index] = 1.0
    finally:
        envs.close()
    ordered = [results[key] for key in sorted(results)]
    return EvaluationResult(
        returns=[r for r, _, _ in ordered],
        lengths=[n for _, n, _ in ordered],
        discounted_returns=[d for _, _, d in ordered],
    )


def write_scalars(writer: Any, result: EvaluationResult) -> None:
    """CleanRL's ``eval/episodic_return`` per episode index, plus ``eval/discounted_return``."""
    for index, (raw, discounted) in enumerate(zip(result.returns, result.discounted_returns)):
        writer.add_scalar("eval/episodic_return", raw, index)
        writer.add_scalar("eval/discounted_return", discounted, index)


def evaluate_saved_model(model_path: str, *, args: Any, run_name: str, writer: Any, device: Any) -> None:
    """CleanRL's evaluation of the model it saves at the end (``--save-model``): 10 episodes, one per
    env, sampled actions, as upstream's, on the run contract's evaluation seeds
    (:func:`mosaic_core.contract.eval_seeds`: disjoint from training's, those ``mosaic evaluate``
    plays), recorded by :func:`record_saved_model_evaluation`."""
    from cleanrl_worker.checkpoint import load_policy
    from mosaic_core import contract

    seeds = contract.eval_seeds(SAVED_MODEL_EPISODES, args.seed)
    loaded = load_policy(model_path, device=device, seed=args.seed)
    result = evaluate(
        loaded.act,
        loaded.make_env,
        episodes=len(seeds),
        num_envs=len(seeds),
        seed=seeds[0],
        gamma=args.gamma,
        capture_video=args.capture_video,
        video_dir=f"videos/{run_name}-eval",
    )
    record_saved_model_evaluation(writer, result, loaded, model_path, seeds)


def record_saved_model_evaluation(
    writer: Any, result: EvaluationResult, loaded: Any, model_path: str, seeds: list[int]
) -> None:
    """The saved model's evaluation (:func:`evaluate_saved_model`, env i's one episode on ``seeds[i]``): its scalars as CleanRL
    logs them (:func:`write_scalars`) and, in a MOSAIC run, the run's evaluation where ``mosaic
    evaluate`` puts its own, ``evaluations/saved-model-STEP/eval.json`` (``mosaic.eval/1``): the
    run's score is then its mean return (:mod:`mosaic_core.runstore.score`). Announced as an
    ``eval_result`` event."""
    from mosaic_core import contract
    from mosaic_core.child import current, emit_event

    write_scalars(writer, result)
    child = current()
    if child is None:  # a script run by hand: its files stay as CleanRL's
        return
    summary = contract.eval_result(
        worker="cleanrl",
        algo=loaded.algo,
        env_id=loaded.env_id,
        checkpoint=os.path.abspath(model_path),
        global_step=loaded.global_step,
        returns=result.returns,
        lengths=result.lengths,
        seeds=seeds[: len(result.returns)],
        deterministic=False,
        extra={"evaluated_by": SAVED_MODEL_EVALUATION},
    )
    folder = Path(child.run_dir) / "evaluations" / f"saved-model-{loaded.global_step}"
    os.makedirs(folder, mode=0o700, exist_ok=True)
    contract.write_eval(folder / contract.EVAL_FILE, summary)
    emit_event("eval_result", {key: summary[key] for key in EVENT_KEYS} | {"path": str(folder / contract.EVAL_FILE)})


class PeriodicEvaluation:
    """Evaluation every ``args.eval_frequency`` env steps (0: never) of ``args.eval_episodes`` episodes.

    Made before training starts: bad values end the script with one ``error:`` line and exit
    code 2 before anything is written. ``make_env(render_mode=None)`` makes one evaluation env.
    """

    def __init__(self, args: Any, run_name: str, make_env: Callable[..., gym.Env]):
        from cleanrl_worker.checkpoint import fail

        if args.eval_frequency < 0:
            fail(f"--eval-frequency must be >= 0 (0 = no evaluation during training), got {args.eval_frequency}")
        if args.eval_episodes < 1:
            fail(f"--eval-episodes must be >= 1, got {args.eval_episodes}")
        self.frequency, self.episodes = args.eval_frequency, args.eval_episodes
        self.seed = args.seed + EVAL_SEED_OFFSET
        self.gamma = float(getattr(args, "gamma", 0.99))
        self.make_env = make_env
        self.next_step = self.frequency
        folder = Path("runs") / run_name
        self.best_path, self.history_path = folder / "best.cleanrl_model", folder / "eval_history.json"
        self.best: dict[str, Any] | None = None
        self.history: list[dict[str, Any]] = []

    def due(self, global_step: int) -> bool:
        """True once ``global_step`` reaches the next multiple of the frequency (a resumed run:
        at its first check, then at multiples again)."""
        return self.frequency > 0 and global_step >= self.next_step

    def run(self, act: Policy, global_step: int, writer: Any) -> bool:
        """Evaluate the greedy policy ``act`` now; True when its mean return is the best so far.

        The caller then saves the model to :attr:`best_path` with ``evaluation=self.best``.
        """
        from mosaic_core.toolkit import write_json_atomic

        result = evaluate(act, self.make_env, episodes=self.episodes, seed=self.seed, gamma=self.gamma)
        summary = result.summary()
        entry = {"global_step": int(global_step), **summary, "returns": result.returns}
        writer.add_scalar("eval/mean_return", summary["mean_return"], global_step)
        writer.add_scalar("eval/std_return", summary["std_return"], global_step)
        writer.add_scalar("eval/mean_length", summary["mean_length"], global_step)
        improved = self.best is None or summary["mean_return"] > self.best["mean_return"]
        if improved:
            self.best = {
                "global_step": int(global_step),
                "mean_return": summary["mean_return"],
                "std_return": summary["std_return"],
                "episodes": self.episodes,
                "seed": self.seed,
                "path": str(self.best_path),
            }
        self.history.append(entry)
        self.next_step = (global_step // self.frequency + 1) * self.frequency
        write_json_atomic(
            self.history_path,
            {
                "schema": HISTORY_SCHEMA,
                "eval_frequency": self.frequency,
                "eval_episodes": self.episodes,
                "seed": self.seed,
                "deterministic": True,
                "gamma": self.gamma,
                "best": self.best,
                "evaluations": self.history,
            },
        )
        print(
            f"eval: global_step={global_step}, mean_return={summary['mean_return']:.2f} "
            f"± {summary['std_return']:.2f}" + (" (best so far)" if improved else "")
        )
        return improved


def evaluate_checkpoint(
    policy: Policy, make_env: Callable[..., gym.Env], *, algo: str, args: Any, global_step: int, path: str
) -> dict[str, Any]:
    """``extras.eval_every_checkpoint``: the greedy policy of the checkpoint just saved, played by
    the run contract's protocol (``args.eval_episodes`` episodes, one env each, seeds from
    :func:`mosaic_core.contract.eval_seeds`, disjoint from training's), announced as an
    ``eval_result`` event with the ``mosaic.eval/1`` summary."""
    from mosaic_core import contract
    from mosaic_core.child import emit_event

    seeds = contract.eval_seeds(args.eval_episodes, args.seed)
    result = evaluate(policy, make_env, episodes=len(seeds), num_envs=len(seeds), seed=seeds[0], gamma=args.gamma)
    summary = contract.eval_result(
        worker="cleanrl",
        algo=algo,
        env_id=args.env_id,
        checkpoint=os.path.abspath(path),
        global_step=global_step,
        returns=result.returns,
        lengths=result.lengths,
        seeds=seeds,
        deterministic=True,
    )
    event = {key: summary[key] for key in EVENT_KEYS}
    emit_event("eval_result", event)
    return event
