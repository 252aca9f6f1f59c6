# SAC for continuous actions, CleanRL style.
# Docs of the algorithm: https://docs.cleanrl.dev/rl-algorithms/sac/#sac_continuous_actionpy
#
# Resume: checkpoints keep the replay buffer (up to --save-replay-buffer-max-mb; its size is said at
# each save), with the RNG, env and loop state: a resumed run is the run it would have been (where the
# env's state is plain data: see cleanrl_worker.resumestate). Without the buffer (--no-save-replay-buffer,
# or a larger one) a resumed run refills it with the restored policy and learning starts again
# `learning_starts` steps after the resumed step; that is said at the stop and at the resume.
import functools
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tyro

from cleanrl_worker import checkpoint, gymcompat, resumestate, stopping
from cleanrl_worker.evaluation import PeriodicEvaluation, evaluate_saved_model
from cleanrl_worker.replay import KeptReplay, ReplayBuffer

ALGO = "sac_continuous_action"


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
    env_id: str = "Hopper-v4"
    """the environment id of the task"""
    total_timesteps: int = 1000000
    """total timesteps of the experiments"""
    num_envs: int = 1
    """the number of parallel game environments"""
    buffer_size: int = int(1e6)
    """the replay memory buffer size"""
    gamma: float = 0.99
    """the discount factor gamma"""
    tau: float = 0.005
    """target smoothing coefficient (default: 0.005)"""
    batch_size: int = 256
    """the batch size of sample from the reply memory"""
    learning_starts: int = int(5e3)
    """timestep to start learning"""
    policy_lr: float = 3e-4
    """the learning rate of the policy network optimizer"""
    q_lr: float = 1e-3
    """the learning rate of the Q network network optimizer"""
    policy_frequency: int = 2
    """the frequency of training policy (delayed)"""
    target_network_frequency: int = 1  # Denis Yarats' implementation delays this by 2.
    """the frequency of updates for the target nerworks"""
    alpha: float = 0.2
    """Entropy regularization coefficient."""
    autotune: bool = True
    """automatic tuning of the entropy coefficient"""

    # MOSAIC additions
    eval_frequency: int = 0
    """evaluate the greedy policy every N global steps on separately seeded envs, keep the best model (0 = never)"""
    eval_episodes: int = 10
    """episodes per evaluation during training"""
    checkpoint_frequency: int = 0
    """save a checkpoint every N global steps to `checkpoints/` (0 = at the end and on a stop only)"""
    save_replay_buffer: bool = True
    """keep the replay buffer in checkpoints (a resume then trains on it at once, exactly as without the stop)"""
    save_replay_buffer_max_mb: float = 1024.0
    """keep the replay buffer only up to this size (MB); a larger one is left out, and the resume refills it"""
    resume_from: str | None = None
    """path of a .cleanrl_model checkpoint to continue training from"""


def make_eval_env(env_id, render_mode=None):
    return gym.make(env_id, render_mode=render_mode)


def make_env(env_id, seed, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env.action_space.seed(seed)
        return env

    return thunk


# ALGO LOGIC: initialize agent here:
class SoftQNetwork(nn.Module):
    def __init__(self, env):
        super().__init__()
        self.fc1 = nn.Linear(
            np.array(env.single_observation_space.shape).prod() + np.prod(env.single_action_space.shape),
            256,
        )
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 1)

    def forward(self, x, a):
        x = torch.cat([x, a], 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


LOG_STD_MAX = 2
LOG_STD_MIN = -5


class Actor(nn.Module):
    def __init__(self, env):
        super().__init__()
        self.fc1 = nn.Linear(np.array(env.single_observation_space.shape).prod(), 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc_mean = nn.Linear(256, np.prod(env.single_action_space.shape))
        self.fc_logstd = nn.Linear(256, np.prod(env.single_action_space.shape))
        # action rescaling
        self.register_buffer(
            "action_scale",
            torch.tensor((env.single_action_space.high - env.single_action_space.low) / 2.0, dtype=torch.float32),
        )
        self.register_buffer(
            "action_bias",
            torch.tensor((env.single_action_space.high + env.single_action_space.low) / 2.0, dtype=torch.float32),
        )

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        mean = self.fc_mean(x)
        log_std = self.fc_logstd(x)
        log_std = torch.tanh(log_std)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)  # From SpinUp / Denis Yarats

        return mean, log_std

    def get_action(self, x):
        mean, log_std = self(x)
        std = log_std.exp()
        normal = torch.distributions.Normal(mean, std)
        x_t = normal.rsample()  # for reparameterization trick (mean + std * N(0,1))
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        # Enforcing Action Bound
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
        log_prob = log_prob.sum(1, keepdim=True)
        mean = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob, mean


def policy_models(envs, args=None):
    return {"actor": Actor(envs)}


def policy(models, args, device, generator, deterministic=False):
    actor = models["actor"]

    @torch.inference_mode()
    def act(obs):
        mean, log_std = actor(torch.as_tensor(obs, dtype=torch.float32, device=device))
        if not deterministic:
            mean = mean + log_std.exp() * torch.randn(mean.shape, generator=generator, device=device)
        return (torch.tanh(mean) * actor.action_scale + actor.action_bias).cpu().numpy()

    return act


if __name__ == "__main__":
    args = tyro.cli(Args)
    if args.num_envs != 1:
        checkpoint.fail(f"{ALGO}: --num-envs {args.num_envs} is not supported, only 1 (as in CleanRL's {ALGO}.py)")
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    resumed = checkpoint.open_for_resume(args.resume_from, algo=ALGO, args=args) if args.resume_from else None
    run_name = resumed.get("run_name", run_name) if resumed else run_name  # one TensorBoard folder per run
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
        [make_env(args.env_id, args.seed + i, i, args.capture_video, run_name) for i in range(args.num_envs)]
    )
    gymcompat.require_action_space(envs, gym.spaces.Box, ALGO, args.env_id)

    actor = Actor(envs).to(device)
    qf1 = SoftQNetwork(envs).to(device)
    qf2 = SoftQNetwork(envs).to(device)
    qf1_target = SoftQNetwork(envs).to(device)
    qf2_target = SoftQNetwork(envs).to(device)
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    q_optimizer = optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=args.q_lr)
    actor_optimizer = optim.Adam(list(actor.parameters()), lr=args.policy_lr)
    models: dict[str, Any] = {
        "actor": actor,
        "qf1": qf1,
        "qf2": qf2,
        "qf1_target": qf1_target,
        "qf2_target": qf2_target,
    }
    optimizers = {"q_optimizer": q_optimizer, "actor_optimizer": actor_optimizer}

    # Automatic entropy tuning
    if args.autotune:
        target_entropy = -torch.prod(torch.Tensor(envs.single_action_space.shape).to(device)).item()
        log_alpha = torch.zeros(1, requires_grad=True, device=device)
        a_optimizer = optim.Adam([log_alpha], lr=args.q_lr)
        models["log_alpha"], optimizers["a_optimizer"] = log_alpha, a_optimizer

    start_step, learning_starts = 0, args.learning_starts
    if resumed and args.resume_from:
        checkpoint.restore_training(resumed, args.resume_from, envs=envs, models=models, optimizers=optimizers)
        start_step = resumed["global_step"]
    alpha = log_alpha.exp().item() if args.autotune else args.alpha

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
    writer = resumestate.summary_writer(run_name, start_step if resumed else None)
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n%s" % ("\n".join([f"|{key}|{value}|" for key, value in vars(args).items()])),
    )

    rb = ReplayBuffer(args.buffer_size, envs.single_observation_space, envs.single_action_space, device, seed=args.seed)
    autoreset = gymcompat.Autoreset(args.num_envs)

    kept = KeptReplay(rb, args)

    def save(path, steps_done, best=None):
        state = None if best else resumestate.training_state(envs, obs=obs, autoreset=autoreset._resetting)
        return checkpoint.save_checkpoint(
            path,
            algo=ALGO,
            args=args,
            envs=envs,
            models=models,
            optimizers=optimizers,
            global_step=steps_done,
            iteration=steps_done,
            evaluation=best,
            run_name=run_name,
            training_state=state,
            replay_buffer=None if best else kept.for_save(path, steps_done, state, stop.requested),
        )

    start_time = time.time()

    # TRY NOT TO MODIFY: start the game
    obs, _ = envs.reset(seed=args.seed)
    if resumed:  # the buffer, RNGs, envs and loop as they were at the save: the run goes on as if never stopped
        try:
            learning_starts = kept.resume(resumed, start_step)
        except (ValueError, KeyError, RuntimeError) as exc:
            checkpoint.fail(f"--resume-from: {args.resume_from}: {exc}")
        loop = resumestate.restore_training_state(resumed.get("training_state"), envs)
        if loop:
            obs, autoreset._resetting = loop["obs"], loop["autoreset"]
    stop = stopping.StopOnSignal()  # a cancel ends the loop at a step boundary; the model is saved first
    for global_step in range(start_step, args.total_timesteps):
        # ALGO LOGIC: put action logic here
        if global_step < args.learning_starts:
            actions = np.array([envs.single_action_space.sample() for _ in range(envs.num_envs)])
        else:
            with torch.no_grad():
                actions, _, _ = actor.get_action(torch.Tensor(obs).to(device))
            actions = actions.cpu().numpy()

        # TRY NOT TO MODIFY: execute the game and log data.
        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        valid = autoreset.step(terminations, truncations)

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        for _, episodic_return, episodic_length in gymcompat.episodes(infos):
            print(f"global_step={global_step}, episodic_return={episodic_return}")
            writer.add_scalar("charts/episodic_return", episodic_return, global_step)
            writer.add_scalar("charts/episodic_length", episodic_length, global_step)

        # TRY NOT TO MODIFY: save data to reply buffer; handle the last observation of an episode
        real_next_obs = gymcompat.real_next_obs(next_obs, np.logical_or(terminations, truncations), infos)
        rb.add(obs, real_next_obs, actions, rewards, terminations, valid)

        # TRY NOT TO MODIFY: CRUCIAL step easy to overlook
        obs = next_obs

        # ALGO LOGIC: training.
        if global_step > learning_starts:
            data = rb.sample(args.batch_size)
            with torch.no_grad():
                next_state_actions, next_state_log_pi, _ = actor.get_action(data.next_observations)
                qf1_next_target = qf1_target(data.next_observations, next_state_actions)
                qf2_next_target = qf2_target(data.next_observations, next_state_actions)
                min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - alpha * next_state_log_pi
                next_q_value = data.rewards.flatten() + (1 - data.dones.flatten()) * args.gamma * (
                    min_qf_next_target
                ).view(-1)

            qf1_a_values = qf1(data.observations, data.actions).view(-1)
            qf2_a_values = qf2(data.observations, data.actions).view(-1)
            qf1_loss = F.mse_loss(qf1_a_values, next_q_value)
            qf2_loss = F.mse_loss(qf2_a_values, next_q_value)
            qf_loss = qf1_loss + qf2_loss

            # optimize the model
            q_optimizer.zero_grad()
            qf_loss.backward()
            q_optimizer.step()

            if global_step % args.policy_frequency == 0:  # TD 3 Delayed update support
                for _ in range(
                    args.policy_frequency
                ):  # compensate for the delay by doing 'actor_update_interval' instead of 1
                    pi, log_pi, _ = actor.get_action(data.observations)
                    qf1_pi = qf1(data.observations, pi)
                    qf2_pi = qf2(data.observations, pi)
                    min_qf_pi = torch.min(qf1_pi, qf2_pi)
                    actor_loss = ((alpha * log_pi) - min_qf_pi).mean()

                    actor_optimizer.zero_grad()
                    actor_loss.backward()
                    actor_optimizer.step()

                    if args.autotune:
                        with torch.no_grad():
                            _, log_pi, _ = actor.get_action(data.observations)
                        alpha_loss = (-log_alpha.exp() * (log_pi + target_entropy)).mean()

                        a_optimizer.zero_grad()
                        alpha_loss.backward()
                        a_optimizer.step()
                        alpha = log_alpha.exp().item()

            # update the target networks
            if global_step % args.target_network_frequency == 0:
                for param, target_param in zip(qf1.parameters(), qf1_target.parameters()):
                    target_param.data.copy_(args.tau * param.data + (1 - args.tau) * target_param.data)
                for param, target_param in zip(qf2.parameters(), qf2_target.parameters()):
                    target_param.data.copy_(args.tau * param.data + (1 - args.tau) * target_param.data)

            if global_step % 100 == 0:
                writer.add_scalar("losses/qf1_values", qf1_a_values.mean().item(), global_step)
                writer.add_scalar("losses/qf2_values", qf2_a_values.mean().item(), global_step)
                writer.add_scalar("losses/qf1_loss", qf1_loss.item(), global_step)
                writer.add_scalar("losses/qf2_loss", qf2_loss.item(), global_step)
                writer.add_scalar("losses/qf_loss", qf_loss.item() / 2.0, global_step)
                if global_step % args.policy_frequency == 0:
                    writer.add_scalar("losses/actor_loss", actor_loss.item(), global_step)
                writer.add_scalar("losses/alpha", alpha, global_step)
                sps = int((global_step - start_step) / (time.time() - start_time))
                print("SPS:", sps)
                writer.add_scalar("charts/SPS", sps, global_step)
                if args.autotune and global_step % args.policy_frequency == 0:
                    writer.add_scalar("losses/alpha_loss", alpha_loss.item(), global_step)

        if args.checkpoint_frequency and (global_step + 1) % args.checkpoint_frequency == 0:
            save(resumestate.layout_path(global_step + 1), global_step + 1)

        if evaluation.due(global_step + 1):
            greedy = policy({"actor": actor}, vars(args), device, None, deterministic=True)
            if evaluation.run(greedy, global_step + 1, writer):  # the best mean return so far
                save(evaluation.best_path, global_step + 1, best=evaluation.best)
        if stop.requested:
            break

    steps_done = global_step + 1 if stop.requested else args.total_timesteps
    if not os.path.exists(resumestate.layout_path(steps_done)):  # the run's last state, resumable (the contract's)
        save(resumestate.layout_path(steps_done), steps_done)
    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}{checkpoint.SUFFIX}"
        save(model_path, global_step + 1 if stop.requested else args.total_timesteps)
        print(f"model saved to {model_path}")
        if not stop.requested:  # a stop has the grace period only: no evaluation
            evaluate_saved_model(model_path, args=args, run_name=run_name, writer=writer, device=device)
        if args.upload_model:
            print("warning: --upload-model is not supported by the bundled algorithms; skipped", file=sys.stderr)

    envs.close()
    writer.close()
    stop.exit(completed=stop.requested and global_step + 1 >= args.total_timesteps)  # stopped in its last step
