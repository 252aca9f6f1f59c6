"""Actor-critic MLPs for vector observations and discrete actions.

:class:`MLPAgent` is MOSAIC's documented agent: one trunk ``Linear(obs, 64) → Tanh →
Linear(64, 64) → Tanh`` shared by an actor head ``Linear(64, actions)`` and a critic head
``Linear(64, 1)``. :class:`SeparateMLPAgent` is CleanRL ppo.py's agent: actor and critic are
two separate networks of that shape. Orthogonal init in both, with CleanRL's gains (√2 in the
trunk, 0.01 for the actor's output, 1 for the critic's).
"""

import numpy as np
import torch.nn as nn
from torch.distributions.categorical import Categorical

from cleanrl_worker.agents.layers import layer_init


def trunk(obs_dim):
    return nn.Sequential(
        layer_init(nn.Linear(obs_dim, 64)),
        nn.Tanh(),
        layer_init(nn.Linear(64, 64)),
        nn.Tanh(),
    )


class MLPAgent(nn.Module):
    """Shared trunk, separate actor and critic heads (MOSAIC's ``agents.mlp.MLPAgent``)."""

    def __init__(self, envs):
        super().__init__()
        obs_dim = int(np.prod(envs.single_observation_space.shape))
        self.trunk = trunk(obs_dim)
        self.actor = layer_init(nn.Linear(64, envs.single_action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(64, 1), std=1.0)

    def get_value(self, x):
        return self.critic(self.trunk(x))

    def get_logits(self, x):
        return self.actor(self.trunk(x))

    def get_action_and_value(self, x, action=None):
        hidden = self.trunk(x)
        probs = Categorical(logits=self.actor(hidden))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


class SeparateMLPAgent(nn.Module):
    """CleanRL ppo.py's agent: actor and critic each a trunk plus a head, nothing shared."""

    def __init__(self, envs):
        super().__init__()
        obs_dim = int(np.prod(envs.single_observation_space.shape))
        self.critic = nn.Sequential(*trunk(obs_dim), layer_init(nn.Linear(64, 1), std=1.0))
        self.actor = nn.Sequential(*trunk(obs_dim), layer_init(nn.Linear(64, envs.single_action_space.n), std=0.01))

    def get_value(self, x):
        return self.critic(x)

    def get_logits(self, x):
        return self.actor(x)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)
