"""The XuanCe worker's training program: ``python -m xuance_worker.train`` in the worker's environment.

XuanCe is imported here, in the training process. The config is XuanCe's own (``get_arguments``:
``basic.yaml`` + ``<algo>/<family>/<scenario>.yaml``, XuanCe's or the worker's own,
:mod:`xuance_worker.configs`) updated by ``--overrides`` (the run's extras, checked by the plan; kept
in each checkpoint's ``meta.json``) and by what the run decides: steps, seed, where TensorBoard files and
checkpoints go (the run directory, the working directory here). The agent is built as XuanCe's
runner builds it, ``REGISTRY_Agents[config.agent](config, envs, callback=...)``, with
:class:`xuance_worker.callback.MosaicCallback` for per-agent metrics and frames.

The host's fields are the run contract's (:func:`mosaic_core.contract.add_host_arguments`). Modes:

- ``train``; ``resume``: everything ``--checkpoint`` keeps (:mod:`xuance_worker.state`) is
  restored, XuanCe's step counter included, and training goes on to ``--total-timesteps``
  (the checkpoint's budget when not given), so the learning-rate schedule ends where the
  uninterrupted run's ends. A resume in the run that wrote the checkpoint goes on writing its
  TensorBoard folder, steps from the checkpoint's on purged (``purge_step``).
- ``evaluate``: ``--eval-episodes`` episodes, each in a one-env vector env seeded with its
  :func:`mosaic_core.contract.eval_seeds` seed, written to ``--eval-out`` (``mosaic.eval/1``,
  per-agent returns). XuanCe's off-policy agents always play greedily in evaluation.

Checkpoints (:mod:`xuance_worker.checkpoints`): every ``--checkpoint-frequency`` steps, at the end
and on a stop, each announced with ``checkpoint_saved {path, step, format}``. XuanCe updates the
model only when a rollout is complete, so a checkpoint is labelled with the step of the last
update: an on-policy run's partial rollout is not kept, and after a resume it is collected again
(the updates then fall on the same steps as without the interruption). With
``--eval-every-checkpoint`` each periodic and final checkpoint is evaluated (an ``eval_result``
event, ``eval.json`` in the checkpoint), the training RNG states left as they were.

Stopping (:class:`mosaic_core.contract.StopOnSignal`: SIGTERM, SIGUSR1, SIGINT): at the end of
the current vector step a checkpoint is saved, then the process ends as killed by the signal.
Threads: torch uses ``--torch-threads`` (default 1: torch's default threading made MAPPO 40x
slower on a busy machine, and XuanCe's small networks gain nothing from a second thread: with
two, MAPPO's layer norms took twice as long and the run was 6 % slower on an idle 2-core machine).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import shutil
import signal
import sys
import time
from argparse import Namespace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mosaic_core import contract
from mosaic_core.child import Stopped

XUANCE_WORKER = "xuance"
TENSORBOARD = "tensorboard"
CHECKPOINTS = "checkpoints"  # XuanCe's model_dir (the worker saves its own checkpoints there)
LEGACY_SUMMARY = "eval_summary.json"  # what `mosaic enjoy` reads until it reads eval.json


def parse_args(argv: list[str] | None) -> Namespace:
    parser = argparse.ArgumentParser(prog="python -m xuance_worker.train")
    contract.add_host_arguments(parser)
    parser.add_argument("--env", required=True, help="FAMILY/SCENARIO, e.g. mpe/simple_spread_v3")
    parser.add_argument("--overrides", default="{}", help="a JSON object of XuanCe config keys")
    return parser.parse_args(argv)


def build_config(ns: Namespace, budget: int) -> _Config:
    from xuance.common import get_arguments

    from xuance_worker import boardgames
    from xuance_worker.configs import config_file, configs_root, worker_defaults

    boardgames.register()  # the env family of the worker's own board-game configs
    family, scenario = ns.env.split("/", 1)
    overrides = {**worker_defaults(ns.env), **json.loads(ns.overrides)}
    overrides.update(
        running_steps=max(1, budget),
        log_dir=TENSORBOARD,
        model_dir=CHECKPOINTS,
        logger="tensorboard",
        distributed_training=False,
        render_mode="rgb_array",
        render=False,
    )  # render: XuanCe's own test videos; frames come from the callback
    if ns.seed is not None:
        overrides.update(seed=ns.seed, env_seed=ns.seed)
    if ns.mode == "evaluate":  # one env: each episode is played in an env of its own seed
        overrides.update(parallels=1, vectorize="DummyVecMultiAgentEnv")
    path = config_file(configs_root(), ns.algo, ns.env)
    config = get_arguments(ns.algo, family, scenario, config_path=str(path), parser_args=Namespace(**overrides))
    config.agent_name = ns.algo
    return _Config(**vars(config))


class _Config(SimpleNamespace):
    """XuanCe's config, with one fix: XuanCe 1.4.4's COMA learner sets ``huber_delta = None``
    (with ``use_huber_loss = False``) and still builds ``nn.HuberLoss(delta=None)``, which torch
    2.13 refuses; the unused delta is kept a number here."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "huber_delta" and value is None:
            value = 1.0
        super().__setattr__(name, value)


class Stop(contract.StopOnSignal):
    """The run contract's stop; a signal before the training loop starts ends the process at once
    (nothing new to save yet: envs and the model are still being built)."""

    looping = False

    def _received(self, signum: int, frame: Any) -> None:
        super()._received(signum, frame)
        if not self.looping:
            self._reraise(signum)


class Session:
    """One training process's agent, config and callback, and what saving and evaluating need."""

    def __init__(
        self, ns: Namespace, config: _Config, agent: Any, callback: Any, budget: int, training_seed: int | None
    ):
        self.ns, self.config, self.agent, self.callback, self.budget = ns, config, agent, callback, budget
        self.training_seed = training_seed  # evaluation seeds start past it

    def resumable_step(self) -> int:
        """The step whose state the agent holds: XuanCe's counter, less an on-policy rollout
        not yet trained on (the model is the last update's; those steps are collected again)."""
        from xuance.common.memory_tools_marl import MARL_OnPolicyBuffer, MARL_OnPolicyBuffer_RNN

        agent = self.agent
        memory = getattr(agent, "memory", None)
        if isinstance(memory, MARL_OnPolicyBuffer) and not isinstance(memory, MARL_OnPolicyBuffer_RNN):
            return int(agent.current_step) - int(memory.size) * int(agent.n_envs)
        return int(agent.current_step)

    def checkpoint(self, reason: str) -> Path | None:
        """Save (see :func:`xuance_worker.state.save`) and announce it; evaluate it when asked."""
        from mosaic_core.child import emit_event
        from xuance_worker import state
        from xuance_worker.checkpoints import LAYOUT

        agent = self.agent
        step = int(agent.current_step) if reason == "final" else self.resumable_step()
        log_dir = Path(agent.log_dir).relative_to(Path.cwd()).as_posix() if hasattr(agent, "log_dir") else None
        path = state.save(
            agent,
            Path.cwd(),
            step,
            {
                "algo": self.ns.algo,
                "env": self.ns.env,
                "total_timesteps": self.budget,
                "seed": self.config.seed,
                "log_dir": log_dir,
                "overrides": json.loads(self.ns.overrides),  # the config keys a policy server rebuilds it with
                "reason": reason,
                "saved": time.time(),
            },
        )
        if path is None:
            return None
        emit_event(
            "checkpoint_saved",
            {"path": str(path), "step": step, "global_step": step, "format": LAYOUT.format, "reason": reason},
        )
        if self.ns.eval_every_checkpoint and reason != "cancelled":
            self.evaluate_checkpoint(path, step)
        return path

    def evaluate_checkpoint(self, path: Path, step: int) -> None:
        from mosaic_core.child import emit_event
        from xuance_worker import state

        rng = state.rng_state()  # training goes on as it would have without the evaluation
        try:
            result = self.play(path, step)
        finally:
            state.set_rng_state(rng)
        contract.write_eval(path / contract.EVAL_FILE, result)
        emit_event(
            "eval_result",
            {
                "global_step": step,
                "checkpoint": str(path),
                "mean": result["mean"],
                "std": result["std"],
                "iqm": result["iqm"],
                "episodes": len(result["episodes"]),
                "deterministic": result["protocol"]["deterministic"],
            },
        )

    def play(self, checkpoint: Path, step: int, video: Path | None = None) -> dict[str, Any]:
        """The evaluation protocol: one episode per seed, each in a one-env vector env built with
        that seed (XuanCe seeds an env when it builds it), torch/numpy/python seeded too. ``video``:
        the first episode's frames (``rgb_array``) written there as an MP4."""
        from xuance.environment import make_envs

        from xuance_worker import state

        ns, agent = self.ns, self.agent
        seeds = contract.eval_seeds(ns.eval_episodes, training_seed=self.training_seed, eval_seed=ns.eval_seed)
        options: dict[str, Any] = {}
        deterministic = True  # XuanCe's off-policy agents play greedily in test mode, always
        if "deterministic_policy" in inspect.signature(agent.test).parameters:
            deterministic = options["deterministic_policy"] = bool(ns.eval_deterministic)
        returns: list[float] = []
        lengths: list[int] = []
        per_agent: list[dict[str, float]] = []
        self.callback.evaluating = True
        try:
            for seed in seeds:
                state.seed_everything(seed)
                envs = make_envs(
                    _Config(
                        **{**vars(self.config), "parallels": 1, "env_seed": seed, "vectorize": "DummyVecMultiAgentEnv"}
                    )
                )
                self.callback.eval_episodes.clear()
                self.callback.recording = [] if video is not None and not returns else None
                agent.test(test_episodes=1, test_envs=envs, close_envs=True, **options)
                if video is not None and self.callback.recording is not None:
                    contract.write_mp4(video, self.callback.recording)
                scores, length = self.callback.eval_episodes[0]
                returns.append(sum(scores.values()))
                lengths.append(length)
                per_agent.append(scores)
        finally:
            self.callback.evaluating, self.callback.recording = False, None
        return contract.eval_result(
            worker=XUANCE_WORKER,
            algo=ns.algo,
            env_id=ns.env,
            checkpoint=str(checkpoint),
            global_step=step,
            returns=returns,
            lengths=lengths,
            seeds=seeds,
            deterministic=deterministic,
            agent_returns=per_agent,
        )


def train(session: Session, stop: Stop) -> None:
    """Train in chunks (one per checkpoint) up to the budget, XuanCe's step counter being the
    run's. A stop leaves XuanCe's loop as Stopped (or as the error a subprocess env's env processes,
    ended by the host's signal, make): a checkpoint is saved, then Stopped."""
    agent, budget = session.agent, session.budget
    every = session.ns.checkpoint_frequency or budget
    try:
        while agent.current_step < budget:
            target = min(budget, (agent.current_step // every + 1) * every)
            agent.train(max(1, -(-(target - agent.current_step) // agent.n_envs)))
            if agent.current_step < budget:
                session.checkpoint("periodic")
    except Exception as exc:
        if not stop.requested:
            raise
        session.checkpoint("cancelled")
        raise Stopped() from exc
    session.checkpoint("final")


def evaluate(session: Session, checkpoint: Path, meta: dict[str, Any]) -> None:
    """``--eval-out`` in the run contract's schema (and ``eval_summary.json`` for ``mosaic enjoy``)."""
    video = Path(session.ns.video) if session.ns.video else None
    result = session.play(checkpoint, int(meta["global_step"]), video=video)
    contract.write_eval(Path(session.ns.eval_out), result)
    agents = sorted({k for e in result["episodes"] for k in e["agents"]})
    legacy = {
        "status": "completed",
        "episodes": len(result["episodes"]),
        "checkpoint": str(checkpoint),
        "return": {"mean": result["mean"], "std": result["std"]},
        "agents": {k: sum(e["agents"][k] for e in result["episodes"]) / len(result["episodes"]) for k in agents},
        "episode_returns": [e["return"] for e in result["episodes"]],
    }
    contract.write_eval(Path(LEGACY_SUMMARY), legacy)


def reopen_tensorboard(agent: Any, checkpoint: Path, meta: dict[str, Any]) -> None:
    """A resume in the run that wrote ``checkpoint``: XuanCe's writer goes on in that run's
    TensorBoard folder (not a new one beside it), its steps from the checkpoint's on purged."""
    from torch.utils.tensorboard import SummaryWriter

    run_dir = Path.cwd().resolve()
    previous = meta.get("log_dir")
    if not isinstance(previous, str) or checkpoint.resolve().parent.parent != run_dir:
        return
    folder = run_dir / previous
    if Path(previous).is_absolute() or ".." in Path(previous).parts or folder.is_symlink() or not folder.is_dir():
        return
    fresh = Path(agent.log_dir)
    agent.writer.close()
    if fresh.parent == folder.parent and fresh != folder:
        shutil.rmtree(fresh, ignore_errors=True)  # the empty folder XuanCe made for this process
    agent.writer = SummaryWriter(str(folder), purge_step=int(meta["global_step"]))
    agent.log_dir = str(folder)


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    from mosaic_core import pin_process_threads

    threads = pin_process_threads(ns.torch_threads)
    # Every torch.load in this process reads weights only, XuanCe's own calls without the argument too.
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    os.environ.setdefault("TQDM_DISABLE", "1")  # XuanCe's progress bars: the host shows progress
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # MPE renders off-screen (rgb_array) through pygame
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("SDL_NO_SIGNAL_HANDLERS", "1")  # SDL would swallow the host's SIGTERM
    from mosaic_core import child

    child.connect()  # patch points before XuanCe imports its SummaryWriter
    stop = Stop()  # a stop from here on ends the process as the contract says, the imports' too
    child.preload("torch", "torch._dynamo", "xuance.environment", "xuance.torch.agents")  # what run() imports
    completed = False
    try:
        run(ns, threads, stop)
        completed = True  # a stop after the final checkpoint: the run did its whole budget
    except Exception:
        if not stop.requested:
            raise
    # Stopped: the checkpoint is saved, envs and logs closed. The interpreter's last collection of
    # torch's and XuanCe's objects took 5-8 s on a busy 2-core machine, past a short grace period:
    # frozen objects are left to the exit (which the signal makes at once).
    gc.freeze()
    stop.exit(completed=completed)
    return 0


def keep_minibatch_size(agent: Any, overrides: dict[str, Any]) -> None:
    """A ``batch_size`` the run gives is also an on-policy agent's minibatch size: XuanCe derives
    that one (``buffer_size // n_minibatch``) and would ignore the key (checked by the plan:
    :func:`xuance_worker.configs.minibatch_problems`)."""
    from xuance_worker.configs import MINIBATCH

    if MINIBATCH in overrides and getattr(agent, "on_policy", False):
        agent.batch_size = int(overrides[MINIBATCH])


def run(ns: Namespace, threads: int, stop: Stop) -> None:
    """Build XuanCe's envs and agent, then train or evaluate (Stopped on a stop)."""
    import torch

    torch.set_num_threads(threads)
    from xuance.environment import make_envs
    from xuance.torch.agents import REGISTRY_Agents

    from mosaic_core.child import refuse_config
    from xuance_worker import state
    from xuance_worker.callback import MosaicCallback
    from xuance_worker.checkpoints import read_meta

    checkpoint = Path(ns.checkpoint).absolute() if ns.checkpoint else None
    if ns.mode != "train" and checkpoint is None:
        refuse_config(f"--checkpoint is required in mode {ns.mode}")
    if ns.video and ns.mode != "evaluate":
        refuse_config(f"--video: a video is recorded in mode evaluate only, not {ns.mode}")
    if ns.video and contract.video_encoder() is None:
        refuse_config(contract.no_video_encoder("xuance"))
    meta: dict[str, Any] = {}
    if checkpoint is not None:
        try:
            meta = read_meta(checkpoint)
        except ValueError as exc:
            refuse_config(f"--checkpoint {checkpoint}: {exc}")
    budget = ns.total_timesteps or int(meta.get("total_timesteps") or 0)
    if ns.mode != "evaluate" and budget <= 0:
        refuse_config(f"mode {ns.mode} needs --total-timesteps (the budget), or a checkpoint that records one")
    config = build_config(ns, budget)
    callback = MosaicCallback(stop=stop)
    envs = make_envs(config)
    agent = None
    try:
        agent = REGISTRY_Agents[config.agent](config, envs, callback=callback)
        keep_minibatch_size(agent, json.loads(ns.overrides))
        if checkpoint is not None:
            try:
                state.load(agent, checkpoint, everything=ns.mode == "resume")
            except ValueError as exc:
                refuse_config(f"--checkpoint: {exc}")
        if ns.mode == "resume":
            assert checkpoint is not None  # refused above without one
            reopen_tensorboard(agent, checkpoint, meta)
        callback.attach(agent)
        trained_with = meta.get("seed") if ns.mode == "evaluate" and isinstance(meta.get("seed"), int) else config.seed
        session = Session(ns, config, agent, callback, budget, trained_with)
        stop.looping = True
        if stop.requested:
            raise Stopped()
        if ns.mode == "evaluate":
            assert checkpoint is not None  # refused above without one
            evaluate(session, checkpoint, meta)
        else:
            train(session, stop)
    finally:
        for signum in contract.STOP_SIGNALS:  # cleaning up: a second signal waits
            signal.signal(signum, signal.SIG_IGN)
        try:
            if agent is not None:
                agent.finish()
            envs.close()
        except Exception:  # a subprocess env whose env processes the host's signal already ended
            if not stop.requested:
                raise


if __name__ == "__main__":
    sys.exit(main())
