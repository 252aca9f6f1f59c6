"""A tiny CleanRL-style script for the analytics tests: CleanRL's Args, run_name, SummaryWriter,
tags and ``wandb.init`` call, with random actions instead of learning (no torch model)."""

import os
import signal
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import tyro


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    seed: int = 1
    track: bool = False
    wandb_project_name: str = "cleanRL"
    wandb_entity: str | None = None
    env_id: str = "CartPole-v1"
    total_timesteps: int = 2000
    num_envs: int = 2
    writer: str = "torch"
    """torch (torch.utils.tensorboard) or tensorboardx"""
    step_delay: float = 0.0
    """seconds to sleep per vector step, to make a run last"""
    save_model: bool = False
    crash_at: int = -1
    """raise at this global step (-1: never)"""
    sigterm_at: int = -1
    """send itself SIGTERM right after this global step's scalars (-1: never): a stop that comes
    before a writer's thread has written them"""


if __name__ == "__main__":
    args = tyro.cli(Args)
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.track:
        import wandb

        wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=run_name,
            monitor_gym=True,
            save_code=True,
        )
    if args.writer == "tensorboardx":
        from tensorboardX import SummaryWriter
    else:
        from torch.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(f"runs/{run_name}")
    writer.add_text(
        "hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in vars(args).items())
    )

    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.RecordEpisodeStatistics(gym.make(args.env_id)) for _ in range(args.num_envs)]
    )
    envs.reset(seed=args.seed)
    envs.action_space.seed(args.seed)
    start_time = time.time()
    for global_step in range(0, args.total_timesteps, args.num_envs):
        if global_step >= args.crash_at >= 0:
            raise RuntimeError(f"crash requested at step {global_step}")
        _obs, _rewards, _terminations, _truncations, infos = envs.step(envs.action_space.sample())
        if "final_info" in infos:  # gymnasium 0.29
            for info in infos["final_info"]:
                if info and "episode" in info:
                    writer.add_scalar("charts/episodic_return", info["episode"]["r"], global_step)
                    writer.add_scalar("charts/episodic_length", info["episode"]["l"], global_step)
        elif "_episode" in infos:  # gymnasium 1.x
            for i in np.flatnonzero(infos["_episode"]):
                writer.add_scalar("charts/episodic_return", infos["episode"]["r"][i], global_step)
                writer.add_scalar("charts/episodic_length", infos["episode"]["l"][i], global_step)
        if global_step % (16 * args.num_envs) == 0:
            writer.add_scalar("losses/value_loss", 1.0 / (1 + global_step), global_step)
            writer.add_scalar("charts/learning_rate", 2.5e-4, global_step)
            writer.add_scalar("charts/SPS", int(global_step / (time.time() - start_time + 1e-9)), global_step)
        if global_step >= args.sigterm_at >= 0:
            os.kill(os.getpid(), signal.SIGTERM)
            args.sigterm_at = -1
        if args.step_delay:
            time.sleep(args.step_delay)

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        with open(model_path, "wb") as handle:
            handle.write(b"\0" * 256)
        from mosaic_core.child import emit_event

        emit_event("checkpoint_saved", {"path": model_path, "global_step": args.total_timesteps})
    envs.close()
    writer.close()
