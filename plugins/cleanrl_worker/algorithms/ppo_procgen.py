# PPO for Procgen games, CleanRL style: the IMPALA CNN on 64x64 RGB observations, gymnasium envs
# (`procgen-<game>-v0`, cleanrl_worker.procgen_compat), made with gym.make so MOSAIC's patch points see them.
# Docs of the algorithm: https://docs.cleanrl.dev/rl-algorithms/ppo/#ppo_procgenpy
import os
import random
import sys
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from torch.distributions.categorical import Categorical

from cleanrl_worker import checkpoint, gymcompat, procgen_compat, resumestate, stopping
from cleanrl_worker.evaluation import evaluate_saved_model

ALGO = "ppo_procgen"


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
    env_id: str = "procgen-starpilot-v0"
    """the id of the environment"""
    total_timesteps: int = 10000000
    """total timesteps of the experiments"""
    learning_rate: float = 5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 64
    """the number of parallel game environments"""
    num_steps: int = 256
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = False
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.999
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 8
    """the number of mini-batches"""
    update_epochs: int = 3
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
    checkpoint_frequency: int = 0
    """save a checkpoint every N global steps to `checkpoints/` (the run directory's; 0 = never)"""
    resume_from: str | None = None
    """path of a .cleanrl_model checkpoint to continue training from"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


def make_eval_env(env_id, render_mode=None):
    procgen_compat.register()
    return gym.make(env_id, render_mode=render_mode)


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = gym.wrappers.RecordVideo(make_eval_env(env_id, render_mode="rgb_array"), f"videos/{run_name}")
        else:
            env = make_eval_env(env_id)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return thunk


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)

    def forward(self, x):
        return x + self.conv1(nn.functional.relu(self.conv0(nn.functional.relu(x))))


class ConvSequence(nn.Module):
    def __init__(self, input_shape, out_channels):
        super().__init__()
        self.input_shape, self.out_channels = input_shape, out_channels
        self.conv = nn.Conv2d(input_shape[0], out_channels, kernel_size=3, padding=1)
        self.res_block0 = ResidualBlock(out_channels)
        self.res_block1 = ResidualBlock(out_channels)

    def forward(self, x):
        x = nn.functional.max_pool2d(self.conv(x), kernel_size=3, stride=2, padding=1)
        return self.res_block1(self.res_block0(x))

    def get_output_shape(self):
        _c, h, w = self.input_shape
        return (self.out_channels, (h + 1) // 2, (w + 1) // 2)


class Agent(nn.Module):
    """The IMPALA CNN (three conv sequences of 16, 32, 32 channels) with policy and value heads."""

    def __init__(self, envs):
        super().__init__()
        h, w, c = envs.single_observation_space.shape
        shape = (c, h, w)
        conv_seqs = []
        for out_channels in [16, 32, 32]:
            conv_seq = ConvSequence(shape, out_channels)
            shape = conv_seq.get_output_shape()
            conv_seqs.append(conv_seq)
        self.network = nn.Sequential(
            *conv_seqs, nn.Flatten(), nn.ReLU(), nn.Linear(shape[0] * shape[1] * shape[2], 256), nn.ReLU()
        )
        self.actor = layer_init(nn.Linear(256, envs.single_action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(256, 1), std=1)

    def _hidden(self, x):
        return self.network(x.permute((0, 3, 1, 2)) / 255.0)  # "bhwc" -> "bchw"

    def get_value(self, x):
        return self.critic(self._hidden(x))

    def get_logits(self, x):
        return self.actor(self._hidden(x))

    def get_action_and_value(self, x, action=None):
        hidden = self._hidden(x)
        probs = Categorical(logits=self.actor(hidden))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def policy_models(envs, args=None):
    return {"agent": Agent(envs)}


def policy(models, args, device, generator, deterministic=False):
    agent = models["agent"]

    @torch.inference_mode()
    def act(obs):
        logits = agent.get_logits(torch.as_tensor(np.asarray(obs), dtype=torch.float32, device=device))
        if deterministic:
            return logits.argmax(dim=1).cpu().numpy()
        return torch.multinomial(logits.softmax(dim=1), 1, generator=generator).squeeze(1).cpu().numpy()

    return act


if __name__ == "__main__":
    args = tyro.cli(Args)
    if not args.env_id.startswith(procgen_compat.PREFIX):
        print(
            f"error: {ALGO} trains on Procgen envs such as procgen-starpilot-v0; {args.env_id} is not one",
            file=sys.stderr,
        )
        raise SystemExit(2)
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

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

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

    agent = policy_models(envs)["agent"].to(device)
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

    def save(path, iteration):
        state = resumestate.training_state(envs, next_obs=next_obs, next_done=next_done, autoreset=autoreset._resetting)
        return checkpoint.save_checkpoint(
            path,
            algo=ALGO,
            args=args,
            envs=envs,
            models={"agent": agent},
            optimizers={"optimizer": optimizer},
            global_step=global_step,
            iteration=iteration,
            run_name=run_name,
            training_state=state,
        )

    # TRY NOT TO MODIFY: start the game
    start_step = global_step
    start_time = time.time()
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.Tensor(np.asarray(next_obs)).to(device)
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
            next_obs, next_done = torch.Tensor(np.asarray(next_obs)).to(device), torch.Tensor(ended).to(device)

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
        if stop.requested:
            break

    finished = args.num_iterations if not stop.requested else iteration
    if not os.path.exists(resumestate.layout_path(global_step)):  # the run's last state, resumable (the contract's)
        save(resumestate.layout_path(global_step), finished)
    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}{checkpoint.SUFFIX}"
        save(model_path, finished)
        print(f"model saved to {model_path}")
        if not stop.requested:  # a stop has the grace period only: no evaluation
            evaluate_saved_model(model_path, args=args, run_name=run_name, writer=writer, device=device)

        if args.upload_model:
            print("warning: --upload-model is not supported by the bundled algorithms; skipped", file=sys.stderr)

    envs.close()
    writer.close()
    stop.exit(completed=global_step >= args.num_iterations * args.batch_size)  # stopped in its last iteration
