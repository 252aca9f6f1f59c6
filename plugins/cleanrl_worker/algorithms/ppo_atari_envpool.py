# PPO for Atari games on EnvPool, CleanRL style: EnvPool's C++ vectorised ALE (its own Atari preprocessing:
# 84x84 grayscale, 4 stacked frames, episodic life, clipped rewards) and the Nature CNN.
# Docs of the algorithm: https://docs.cleanrl.dev/rl-algorithms/ppo/#ppo_atari_envpoolpy
# EnvPool bypasses gym.make: FastLane frames and the curriculum go through MOSAIC's public API
# (mosaic_core.child; a no-op outside a MOSAIC run).
# Fast on a CPU too, where the CNN's update takes most of the time: the CNN in bfloat16 where the hardware has
# it (AMX), channels-last, observations stored as the CNN takes them, fused Adam (bench/sps.py --suite envpool).
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

from cleanrl_worker import checkpoint, resumestate, stopping
from mosaic_core import child

ALGO = "ppo_atari_envpool"


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
    bf16: bool = True
    """if toggled, the CNN runs in bfloat16 (autocast) where the device has it natively: CUDA with bf16, or a CPU
    with AMX or AVX512-BF16 (its update 2.5x faster on one thread of an AMX CPU); heads and losses stay float32"""
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
    env_id: str = "Breakout-v5"
    """the id of the environment (EnvPool's `Breakout-v5`, or `ALE/Breakout-v5`)"""
    total_timesteps: int = 10000000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 8
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
    clip_coef: float = 0.1
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
    """save a checkpoint every N global steps to `checkpoints/` (0 = at the end and on a stop only)"""
    resume_from: str | None = None
    """path of a .cleanrl_model checkpoint to continue training from (EnvPool's envs start afresh)"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


def envpool_task(env_id):
    """EnvPool's task id: `ALE/Breakout-v5` (gymnasium's spelling, as curriculum stages give it) -> `Breakout-v5`."""
    return env_id[len("ALE/") :] if env_id.startswith("ALE/") else env_id


def make_envs(env_id, num_envs, seed):
    import envpool

    envs = envpool.make(
        envpool_task(env_id), env_type="gymnasium", num_envs=num_envs, episodic_life=True, reward_clip=True, seed=seed
    )
    return envs  # it has num_envs, single_observation_space and single_action_space


class EpisodeStatistics:
    """Whole-game returns and lengths: EnvPool ends an episode at each lost life and clips rewards,
    its info keeps the raw `reward` and whether the game really `terminated`."""

    def __init__(self, num_envs):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def update(self, infos, truncations):
        self.returns += infos["reward"]
        self.lengths += 1
        over = np.logical_or(infos["terminated"], truncations)
        finished = [(i, float(self.returns[i]), int(self.lengths[i])) for i in np.flatnonzero(over)]
        self.returns[over], self.lengths[over] = 0.0, 0
        return finished


def frame_of(observation):
    """An RGB frame of one env's newest observation (84x84 grayscale)."""
    return np.repeat(np.asarray(observation[-1], dtype=np.uint8)[..., None], 3, axis=-1)


def network_input(observations, device, dtype):
    """uint8 observations (N, 4, 84, 84) as the CNN takes them: scaled to [0, 1], in the dtype it computes in, and
    channels-last (oneDNN's and cuDNN's fast layout); the rollout stores them so, the update reads them as they are."""
    x = torch.from_numpy(observations).to(device)
    return x.to(dtype=dtype, memory_format=torch.channels_last) / 255.0  # uint8 / 255.0 is 10x slower on CPU


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def native_bf16(device):
    """Whether the device computes in bfloat16 natively; elsewhere autocast would emulate it, slower than float32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    probes = [getattr(torch.cpu, name, None) for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")]
    return torch.backends.mkldnn.is_available() and any(probe is not None and probe() for probe in probes)


class Agent(nn.Module):
    """The Nature CNN on 4 stacked 84x84 grayscale frames, with policy and value heads. It takes observations as
    `network_input` makes them; with `bf16` the CNN computes in bfloat16, the heads and the losses in float32."""

    def __init__(self, envs, bf16=False):
        super().__init__()
        self.bf16 = bf16
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, envs.single_action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def hidden(self, x):
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            return self.network(x).float()

    def get_value(self, x):
        return self.critic(self.hidden(x))

    def get_action_and_value(self, x, action=None):
        hidden = self.hidden(x)
        probs = Categorical(logits=self.actor(hidden))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


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
    if args.capture_video:
        print(
            "warning: --capture-video is not supported with EnvPool (FastLane shows the frames); ignored",
            file=sys.stderr,
        )

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup: the run's env switches (a curriculum's stages, in a MOSAIC run) pick the task
    curriculum = child.env_switch()
    stage = curriculum.stage() if curriculum else 0
    env_id = curriculum.env_id(stage) if curriculum else args.env_id
    envs = make_envs(env_id, args.num_envs, args.seed)
    if not isinstance(envs.single_action_space, gym.spaces.Discrete):
        print(
            f"error: {ALGO} needs a discrete action space, but {env_id} has {envs.single_action_space}", file=sys.stderr
        )
        raise SystemExit(2)
    statistics = EpisodeStatistics(args.num_envs)

    bf16 = args.bf16 and native_bf16(device)
    input_dtype = torch.bfloat16 if bf16 else torch.float32
    agent = Agent(envs, bf16).to(device, memory_format=torch.channels_last)  # type: ignore[call-overload]  # torch's stubs leave memory_format out
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
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
    channels, height, width = envs.single_observation_space.shape  # stored channels-last, as network_input gives them
    obs = torch.zeros((args.num_steps, args.num_envs, height, width, channels), dtype=input_dtype).to(device)
    obs = obs.permute(0, 1, 4, 2, 3)
    actions = torch.zeros((args.num_steps, args.num_envs)).to(device)  # discrete: one number an env
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    valid = np.ones((args.num_steps, args.num_envs), dtype=bool)  # False: EnvPool's reset step after an end
    resetting = np.zeros(args.num_envs, dtype=bool)

    def save(path, iteration):
        # EnvPool's envs have no state to read: the RNGs and the counters only (a resume plays fresh episodes)
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
            training_state=resumestate.training_state(envs),
        )

    # TRY NOT TO MODIFY: start the game
    start_step = global_step
    start_time = time.time()
    next_obs_np, _ = envs.reset()
    next_obs = network_input(next_obs_np, device, input_dtype)
    next_done = torch.zeros(args.num_envs).to(device)
    resumestate.restore_training_state(resumed.get("training_state") if resumed else None, envs)  # the RNGs
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

        episodes = []
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
            next_obs_np, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            valid[step] = ~resetting
            resetting = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward).to(device).view(-1)
            next_obs, next_done = network_input(next_obs_np, device, input_dtype), torch.Tensor(resetting).to(device)

            for _env_index, episodic_return, episodic_length in statistics.update(infos, truncations):
                episodes.append(episodic_return)
                print(f"global_step={global_step}, episodic_return={episodic_return}")
                writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                writer.add_scalar("charts/episodic_length", episodic_length, global_step)
            if child.frame_wanted(0):
                child.publish_frame(
                    frame_of(next_obs_np[0]),
                    env_index=0,
                    global_step=global_step,
                    reward=float(infos["reward"][0]),
                    episode_count=len(episodes),
                )

        if curriculum:  # report this rollout; a new stage starts with the next one, in fresh envs
            curriculum.report(stage, steps=int(valid.sum()), returns=episodes)
            target = curriculum.stage()
            if target != stage:
                stage, env_id = target, curriculum.env_id(target)
                del envs  # EnvPool frees its threads when collected (its close() fails on gymnasium 0.29)
                envs = make_envs(env_id, args.num_envs, args.seed + 10_000 * stage)
                statistics = EpisodeStatistics(args.num_envs)
                next_obs_np, _ = envs.reset()
                next_obs = network_input(next_obs_np, device, input_dtype)
                resetting = np.zeros(args.num_envs, dtype=bool)
                next_done = torch.ones(args.num_envs).to(device)  # nothing bootstraps across the switch

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
        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)
        b_valid = np.flatnonzero(valid.reshape(-1))

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
        if args.upload_model:
            print("warning: --upload-model is not supported by the bundled algorithms; skipped", file=sys.stderr)

    writer.close()
    stop.exit(completed=global_step >= args.num_iterations * args.batch_size)  # stopped in its last iteration
