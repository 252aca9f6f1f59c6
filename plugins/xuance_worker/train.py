"""The XuanCe worker's training program: ``python -m xuance_worker.train`` in the worker's environment.

XuanCe is imported here, in the training process. The config is XuanCe's own (``get_arguments``:
``basic.yaml`` + ``<algo>/<family>/<scenario>.yaml``) updated by ``--overrides`` (the run's
extras, checked by the plan) and by what the run decides: steps, seed, where TensorBoard files and
checkpoints go (the run directory, the working directory here). The agent is built as XuanCe's
runner builds it, ``REGISTRY_Agents[config.agent](config, envs, callback=...)``, with
:class:`xuance_worker.callback.MosaicCallback` for per-agent metrics and frames.

Modes: ``train``; ``resume_training`` (weights and optimiser from ``--checkpoint``, the step count
from the checkpoint's ``.json`` beside it, then the remaining steps); ``policy_eval`` (plays
``--eval-episodes`` episodes, writes ``eval_summary.json``).

Checkpoints: ``checkpoints/step_<N>.pth`` every ``--checkpoint-frequency`` steps, at the end, and
when the host cancels (SIGTERM: the current vector step finishes first), each announced with the
``checkpoint_saved`` event. Threads: torch uses ``--torch-threads`` (default 1: torch's default
threading made MAPPO 40x slower on a busy machine, and XuanCe's small networks gain nothing from a
second thread: with two, MAPPO's layer norms took twice as long and the run was 6 % slower on an
idle 2-core machine).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
from argparse import Namespace
from types import SimpleNamespace
from pathlib import Path
from typing import Any

from mosaic_core.child import HostCancel, Stopped

CHECKPOINTS = "checkpoints"
TENSORBOARD = "tensorboard"


def parse_args(argv: list[str] | None) -> Namespace:
    parser = argparse.ArgumentParser(prog="python -m xuance_worker.train")
    parser.add_argument("--algo", required=True)
    parser.add_argument("--env", required=True, help="FAMILY/SCENARIO, e.g. mpe/simple_spread_v3")
    parser.add_argument("--total-timesteps", type=int, required=True)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--mode", choices=("train", "resume_training", "policy_eval"), default="train")
    parser.add_argument("--overrides", default="{}", help="a JSON object of XuanCe config keys")
    parser.add_argument("--checkpoint", help="the .pth to resume from or to evaluate")
    parser.add_argument("--checkpoint-frequency", type=int)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--torch-threads", type=int, default=1, help="torch's threads (default 1)")
    return parser.parse_args(argv)


def build_config(ns: Namespace) -> Namespace:
    from xuance.common import get_arguments

    from xuance_worker.configs import worker_defaults

    family, scenario = ns.env.split("/", 1)
    overrides = {**worker_defaults(ns.env), **json.loads(ns.overrides)}
    overrides.update(running_steps=ns.total_timesteps, log_dir=TENSORBOARD, model_dir=CHECKPOINTS,
                     logger="tensorboard", distributed_training=False, render_mode="rgb_array",
                     render=False)  # render: XuanCe's own test videos; frames come from the callback
    if ns.seed is not None:
        overrides.update(seed=ns.seed, env_seed=ns.seed)
    config = get_arguments(ns.algo, family, scenario, parser_args=Namespace(**overrides))
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


def saved_step(checkpoint: Path) -> int:
    """Steps trained when ``checkpoint`` was saved (its ``.json`` beside it; 0 without one)."""
    try:
        return int(json.loads(checkpoint.with_suffix(".json").read_text(encoding="utf-8"))["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def check_checkpoint(agent: Any, checkpoint: Path) -> None:
    """The ``.pth`` loads weights only; the pickled ``obs_rms.npy`` beside it, which XuanCe reads
    when the config normalises observations, is checked as the plan checked it."""
    from mosaic_core.child import refuse_config
    from mosaic_core import ConfigError
    from xuance_worker.worker import check_obs_rms

    if getattr(agent, "use_obsnorm", False):
        try:
            check_obs_rms(checkpoint, "--checkpoint")
        except ConfigError as exc:
            refuse_config(str(exc))


def save(agent: Any, step: int, reason: str) -> Path:
    """``checkpoints/step_<N>.pth`` (+ its ``.json``), announced to the host."""
    from mosaic_core.child import emit_event

    folder = Path(CHECKPOINTS).absolute()
    name = f"step_{step:09d}.pth"
    agent.save_model(model_name=name, model_path=str(folder))
    path = folder / name
    path.with_suffix(".json").write_text(json.dumps({"global_step": step, "algo": agent.config.agent_name,
                                                     "env": f"{agent.config.env_name}/{agent.config.env_id}",
                                                     "reason": reason}), encoding="utf-8")
    emit_event("checkpoint_saved", {"path": str(path), "global_step": step, "reason": reason})
    return path


def train(agent: Any, ns: Namespace, offset: int, stop: HostCancel) -> None:
    """Train in chunks (one per checkpoint), stopping cleanly when the host cancels. A subprocess
    vector env's workers get the host's SIGTERM too: the error their end raises is a stop then."""
    n_envs = agent.n_envs
    remaining = max(0, ns.total_timesteps - offset)
    chunk = ns.checkpoint_frequency or remaining
    done = 0
    try:
        while done < remaining:
            steps = min(chunk, remaining - done)
            agent.train(max(1, steps // n_envs))
            done = agent.current_step
            if done < remaining:
                save(agent, offset + done, "periodic")
    except Exception as exc:
        if not stop.requested:
            raise
        save(agent, offset + agent.current_step, "cancelled")
        raise Stopped() from exc
    save(agent, offset + agent.current_step, "final")


def evaluate(agent: Any, ns: Namespace, callback: Any) -> None:
    scores = callback.eval_scores
    try:
        agent.test(test_episodes=ns.eval_episodes, test_envs=agent.train_envs, close_envs=False)
        status = "completed"
    except Stopped:
        status = "cancelled"
    import numpy as np

    teams = [sum(s.values()) for s in scores]
    agents = sorted({k for s in scores for k in s})
    summary = {"status": status, "episodes": len(teams), "checkpoint": ns.checkpoint,
               "return": {"mean": float(np.mean(teams)) if teams else None,
                          "std": float(np.std(teams)) if teams else None},
               "agents": {k: float(np.mean([s[k] for s in scores])) for k in agents},
               "episode_returns": teams}
    Path("eval_summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    if status == "cancelled":
        raise Stopped()


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
    # In XuanCe's loops the callback stops at the next vector step (XuanCe has bare ``except:``
    # clauses that would swallow an exception raised anywhere); before them, at once.
    stop = HostCancel().install()
    try:
        return run(ns, threads, stop)
    except Exception as exc:
        if not isinstance(exc, Stopped) and not stop.requested:
            raise
        print(f"xuance worker: stopped by signal {stop.signal}", file=sys.stderr)
        # Cancelled: the checkpoint, envs and logs are closed. The interpreter's last collection of
        # torch's and XuanCe's objects took 5-8 s on a busy 2-core machine, past a short grace
        # period: frozen objects are left to the exit.
        gc.freeze()
        return stop.exit_code()


def run(ns: Namespace, threads: int, stop: HostCancel) -> int:
    """Build XuanCe's envs and agent, then train or evaluate (Stopped when the host cancels)."""
    import torch

    torch.set_num_threads(threads)
    from xuance.environment import make_envs
    from xuance.torch.agents import REGISTRY_Agents

    from xuance_worker.callback import MosaicCallback

    config = build_config(ns)
    offset = saved_step(Path(ns.checkpoint)) if ns.mode == "resume_training" else 0
    callback = MosaicCallback(step_offset=offset, stop=stop)
    envs = make_envs(config)
    agent = None
    try:
        agent = REGISTRY_Agents[config.agent](config, envs, callback=callback)
        callback.attach(agent)
        if ns.checkpoint:
            check_checkpoint(agent, Path(ns.checkpoint))
            agent.load_model(ns.checkpoint)
        stop.looping()
        if ns.mode == "policy_eval":
            evaluate(agent, ns, callback)
        else:
            train(agent, ns, offset, stop)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # cleaning up: a second SIGTERM waits
        try:
            if agent is not None:
                agent.finish()
            envs.close()
        except Exception:  # a subprocess env whose workers the host's SIGTERM already ended
            if not stop.requested:
                raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
