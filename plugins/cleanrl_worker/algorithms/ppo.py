# PPO for discrete actions, CleanRL style: vector observations (MLP) or MiniGrid/BabyAI images (CNN).
# Docs of the algorithm: https://docs.cleanrl.dev/rl-algorithms/ppo/#ppopy
import functools
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro

from cleanrl_worker import checkpoint, gymcompat, resumestate, stopping
from cleanrl_worker.agents.minigrid import OBSERVATION_SHAPE, CompactMinigridAgent, MinigridAgent
from cleanrl_worker.agents.mlp import MLPAgent, SeparateMLPAgent
from cleanrl_worker.evaluation import PeriodicEvaluation, evaluate_checkpoint, evaluate_saved_model

ALGO = "ppo"


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=False`"""
    cuda: bool = True
    """if toggled, cuda will be enabled by default"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "cleanRL"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of the agent performances (check out `videos` folder)"""
    save_model: bool = False
    """whether to save model into the `runs/{run_name}` folder"""
    upload_model: bool = False
    """whether to upload the saved model to huggingface"""
    hf_entity: str = ""
    """the user or org name of the model repository from the Hugging Face Hub"""

    # Algorithm specific arguments
    env_id: str = "CartPole-v1"
    """the id of the environment"""
    total_timesteps: int = 500000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 4
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""

    # MOSAIC additions
    agent_arch: Literal["auto", "documented", "original"] = "auto"
    """the network: `documented` (MOSAIC's MinigridAgent / MLPAgent), `original` (2x2 CNN / CleanRL's two MLPs), `auto`"""
    eval_frequency: int = 0
    """evaluate the greedy policy every N global steps on separately seeded envs, keep the best model (0 = never)"""
    eval_episodes: int = 10
    """episodes per evaluation during training"""
    checkpoint_frequency: int = 0
    """save a checkpoint every N global steps to `checkpoints/` (0 = at the end and on a stop only)"""
    eval_every_checkpoint: bool = False
    """evaluate each checkpoint in checkpoints/ (eval_episodes greedy episodes): an eval_result event each"""
    resume_from: str | None = None
    """path of a .cleanrl_model checkpoint to continue training from"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


def is_minigrid(env_id):
    return env_id.startswith(("MiniGrid-", "BabyAI-"))


def make_eval_env(env_id, render_mode=None):
    if is_minigrid(env_id):
        import minigrid  # noqa: F401  (registers the MiniGrid and BabyAI envs)
        from minigrid.wrappers import ImgObsWrapper

        return ImgObsWrapper(gym.make(env_id, render_mode=render_mode))
    return gym.make(env_id, render_mode=render_mode)


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = make_eval_env(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = make_eval_env(env_id)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        return env

    return thunk


# ALGO LOGIC: the agents live in cleanrl_worker/agents/ (one short file each, importable on their own):
# "documented" is MOSAIC's documented MinigridAgent / MLPAgent, "original" the networks this PPO had first.
AGENTS = {
    ("documented", "image"): MinigridAgent,
    ("documented", "vector"): MLPAgent,
    ("original", "image"): CompactMinigridAgent,
    ("original", "vector"): SeparateMLPAgent,
}
# What learned better over the same budget and seeds (bench/learning.py --agents; figures in the README).
AUTO: dict[str, Literal["documented", "original"]] = {"image": "documented", "vector": "original"}


def observation_kind(envs):
    return "image" if len(envs.single_observation_space.shape) == 3 else "vector"


def policy_models(envs, args=None):
    """A fresh agent for this observation space (images: CNN, vectors: MLP) and `agent_arch`."""
    kind = observation_kind(envs)
    arch = (args or {}).get("agent_arch", "original")  # checkpoints from before --agent-arch: original
    return {"agent": AGENTS[AUTO[kind] if arch == "auto" else arch, kind](envs)}


def policy(models, args, device, generator, deterministic=False):
    agent = models["agent"]

    @torch.inference_mode()
    def act(obs):
        logits = agent.get_logits(torch.as_tensor(obs, dtype=torch.float32, device=device))
        if deterministic:
            return logits.argmax(dim=1).cpu().numpy()
        return torch.multinomial(logits.softmax(dim=1), 1, generator=generator).squeeze(1).cpu().numpy()

    return act


if __name__ == "__main__":
    args = tyro.cli(Args)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    resumed = checkpoint.open_for_resume(args.resume_from, algo=ALGO, args=args) if args.resume_from else None
    run_name = resumed.get("run_name", run_name) if resumed else run_name  # one TensorBoard folder per run
    if resumed and resumed["iteration"] >= args.num_iterations:
        checkpoint.fail(
            f"--resume-from: checkpoint {args.resume_from} finished iteration {resumed['iteration']} "
            f"of the {args.num_iterations} that --total-timesteps {args.total_timesteps} allows"
        )
    evaluation = PeriodicEvaluation(args, run_name, functools.partial(make_eval_env, args.env_id))

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    torch.set_num_threads(1)  # small networks: more threads cost more than they give on few cores

    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup
    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],
    )
    gymcompat.require_action_space(envs, gym.spaces.Discrete, ALGO, args.env_id)
    obs_shape, action_shape = (
        gymcompat.shape_of(envs.single_observation_space),
        gymcompat.shape_of(envs.single_action_space),
    )
    shape = obs_shape
    if observation_kind(envs) == "image" and tuple(shape) != OBSERVATION_SHAPE:  # its CNNs are MiniGrid's
        checkpoint.fail(
            f"ppo's image networks are MiniGrid's CNNs (7x7x3 observations); {args.env_id} gives "
            f"{'x'.join(map(str, shape))} images: for Atari frames use --algo ppo_atari"
        )

    if args.agent_arch == "auto":  # recorded as chosen, so a checkpoint names the network it holds
        args.agent_arch = AUTO[observation_kind(envs)]
    agent = policy_models(envs, vars(args))["agent"].to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    global_step, start_iteration = 0, 1
    if resumed and args.resume_from:
        checkpoint.restore_training(
            resumed, args.resume_from, envs=envs, models={"agent": agent}, optimizers={"optimizer": optimizer}
        )
        global_step, start_iteration = resumed["global_step"], resumed["iteration"] + 1

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
    writer = resumestate.summary_writer(run_name, global_step if resumed else None)
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n%s" % ("\n".join([f"|{key}|{value}|" for key, value in vars(args).items()])),
    )

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + action_shape).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    valid = np.ones((args.num_steps, args.num_envs), dtype=bool)  # False: a gymnasium 1.x autoreset step
    autoreset = gymcompat.Autoreset(args.num_envs)

    def save(path, iteration, best=None):
        state = resumestate.training_state(envs, next_obs=next_obs, next_done=next_done, autoreset=autoreset._resetting)
        saved = checkpoint.save_checkpoint(
            path,
            algo=ALGO,
            args=args,
            envs=envs,
            models={"agent": agent},
            optimizers={"optimizer": optimizer},
            global_step=global_step,
            iteration=iteration,
            evaluation=best,
            run_name=run_name,
            training_state=None if best else state,
        )
        # (a stop has the grace period only: its checkpoint is not evaluated)
        if args.eval_every_checkpoint and str(path).startswith("checkpoints/") and not stop.requested:
            evaluate_checkpoint(
                policy({"agent": agent}, vars(args), device, None, deterministic=True),
                functools.partial(make_eval_env, args.env_id),
                algo=ALGO,
                args=args,
                global_step=global_step,
                path=str(path),
            )
        return saved

    # TRY NOT TO MODIFY: start the game
    start_step = global_step
    start_time = time.time()
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.Tensor(next_obs).to(device)
    next_done = torch.zeros(args.num_envs).to(device)
    loop = resumestate.restore_training_state(resumed.get("training_state"), envs) if resumed else None
    if loop:  # the RNGs, the envs and the loop as they were at the save: the run goes on as if never stopped
        next_obs, next_done = (
            torch.as_tensor(loop["next_obs"]).to(device),
            torch.as_tensor(loop["next_done"]).to(device),
        )
        autoreset._resetting = loop["autoreset"]
    next_checkpoint = (
        (global_step // args.checkpoint_frequency + 1) * args.checkpoint_frequency
        if args.checkpoint_frequency
        else None
    )

    stop = stopping.StopOnSignal()  # a cancel ends the loop at a step boundary; the model is saved first
    for iteration in range(start_iteration, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done

            # ALGO LOGIC: action logic
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            valid[step] = autoreset.step(terminations, truncations)
            ended = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward).to(device).view(-1)
            next_obs, next_done = torch.Tensor(next_obs).to(device), torch.Tensor(ended).to(device)

            for _, episodic_return, episodic_length in gymcompat.episodes(infos):
                print(f"global_step={global_step}, episodic_return={episodic_return}")
                writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                writer.add_scalar("charts/episodic_length", episodic_length, global_step)

        # bootstrap value if not done
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards).to(device)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        # flatten the batch
        b_obs = obs.reshape((-1,) + obs_shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + action_shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)
        b_valid = np.flatnonzero(valid.reshape(-1))  # every index on gymnasium 0.29

        # Optimizing the policy and value network
        clipfracs = []
        for _epoch in range(args.update_epochs):
            b_inds = np.random.permutation(b_valid)
            for mb_inds in np.array_split(b_inds, args.num_minibatches):
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # Value loss
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds],
                        -args.clip_coef,
                        args.clip_coef,
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
                    v_loss = 0.5 * v_loss_max.mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        sps = int((global_step - start_step) / (time.time() - start_time))
        print("SPS:", sps)
        writer.add_scalar("charts/SPS", sps, global_step)

        if next_checkpoint is not None and global_step >= next_checkpoint:
            save(resumestate.layout_path(global_step), iteration)
            next_checkpoint = (global_step // args.checkpoint_frequency + 1) * args.checkpoint_frequency

        if evaluation.due(global_step):
            greedy = policy({"agent": agent}, vars(args), device, None, deterministic=True)
            if evaluation.run(greedy, global_step, writer):  # the best mean return so far
                save(evaluation.best_path, iteration, best=evaluation.best)
        if stop.requested:
            break

    if not os.path.exists(resumestate.layout_path(global_step)):  # the run's last state, resumable (the contract's)
        save(resumestate.layout_path(global_step), iteration if stop.requested else args.num_iterations)
    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}{checkpoint.SUFFIX}"
        save(model_path, iteration if stop.requested else args.num_iterations)
        print(f"model saved to {model_path}")
        if not stop.requested:  # a stop has the grace period only: no evaluation
            evaluate_saved_model(model_path, args=args, run_name=run_name, writer=writer, device=device)

        if args.upload_model:
            print("warning: --upload-model is not supported by the bundled algorithms; skipped", file=sys.stderr)

    envs.close()
    writer.close()
    stop.exit(completed=global_step >= args.num_iterations * args.batch_size)  # stopped in its last iteration
