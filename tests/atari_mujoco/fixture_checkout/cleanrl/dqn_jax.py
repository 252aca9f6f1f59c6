# Fixture: a Flax Q-network trained with Optax on CartPole (JAX on the CPU), as upstream's JAX scripts do.
import os
import random
import time
from dataclasses import dataclass

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import optax
import tyro
from flax.training.train_state import TrainState
from torch.utils.tensorboard import SummaryWriter


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    seed: int = 1
    env_id: str = "CartPole-v1"
    total_timesteps: int = 500
    learning_rate: float = 2.5e-4
    gamma: float = 0.99


class QNetwork(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.action_dim)(nn.relu(nn.Dense(64)(x)))


if __name__ == "__main__":
    args = tyro.cli(Args)
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    writer = SummaryWriter(f"runs/{run_name}")
    random.seed(args.seed)
    env = gym.wrappers.RecordEpisodeStatistics(gym.make(args.env_id))
    obs, _ = env.reset(seed=args.seed)
    network = QNetwork(action_dim=env.action_space.n)
    state = TrainState.create(
        apply_fn=network.apply,
        params=network.init(jax.random.PRNGKey(args.seed), obs),
        tx=optax.adam(args.learning_rate),
    )

    @jax.jit
    def update(state, obs, action, reward, next_obs, done):
        target = reward + args.gamma * (1 - done) * network.apply(state.params, next_obs).max()

        def loss(params):
            return (network.apply(params, obs)[action] - target) ** 2

        value, grads = jax.value_and_grad(loss)(state.params)
        return state.apply_gradients(grads=grads), value

    for global_step in range(args.total_timesteps):
        q = network.apply(state.params, obs)
        action = env.action_space.sample() if random.random() < 0.5 else int(jnp.argmax(q))
        next_obs, reward, terminated, truncated, info = env.step(action)
        state, loss = update(state, obs, action, reward, next_obs, float(terminated))
        obs = next_obs
        if terminated or truncated:
            print(f"global_step={global_step}, episodic_return={info['episode']['r']}")
            writer.add_scalar("charts/episodic_return", float(info["episode"]["r"]), global_step)
            writer.add_scalar("losses/td_loss", float(loss), global_step)
            obs, _ = env.reset()
    writer.close()
