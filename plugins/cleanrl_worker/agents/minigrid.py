"""Actor-critic CNNs for MiniGrid/BabyAI's 7x7x3 image observations and discrete actions.

A MiniGrid image cell is three small integer codes: object (0-10), colour (0-5) and state
(0-2) (``minigrid.core.constants``).

:class:`MinigridAgent` is MOSAIC's documented agent. Its encoder :class:`MinigridCNN` takes
``(B, 7, 7, 3)``, permutes it to ``(B, 3, 7, 7)``, scales it to [0, 1], then three
``Conv2d(·, ·, 3, padding=1)`` (3→32→64→64) each with ReLU, flatten (64·7·7 = 3136) and
``Linear(3136, 128)``. The agent adds an actor and a critic head, each
``Linear(128, 128) → ReLU → Linear(128, out)``. Orthogonal init throughout.

Scaling divides each channel by its largest code, so every cell lands in [0, 1] with its codes
spread over the whole range; dividing by 255 (the Box's bound) would squeeze them into
[0, 0.04].

:class:`CompactMinigridAgent` is the bundled PPO's earlier, smaller CNN: raw codes, three
``Conv2d(·, ·, 2)`` without padding (7→6→5→4), ``Linear(1024, 128) → ReLU`` and linear heads.
"""

import torch
import torch.nn as nn
from torch.distributions.categorical import Categorical

from cleanrl_worker.agents.layers import layer_init

OBSERVATION_SHAPE = (7, 7, 3)  # MiniGrid/BabyAI's default partial view: the shape these CNNs are built for
MAX_CODES = (10.0, 5.0, 2.0)  # largest object, colour and state code in MiniGrid's encoding
FEATURES = 128


class MinigridCNN(nn.Module):
    """``(B, 7, 7, 3)`` codes → ``(B, 128)`` features."""

    def __init__(self, observation_shape=(7, 7, 3)):
        super().__init__()
        height, width, channels = observation_shape
        self.register_buffer("scale", torch.tensor(MAX_CODES[:channels]), persistent=False)
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(channels, 32, 3, padding=1)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 3, padding=1)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, padding=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * height * width, FEATURES)),
        )

    def forward(self, x):
        return self.network((x / self.scale).permute(0, 3, 1, 2))


def head(out, std):
    return nn.Sequential(
        layer_init(nn.Linear(FEATURES, FEATURES)),
        nn.ReLU(),
        layer_init(nn.Linear(FEATURES, out), std=std),
    )


class MinigridAgent(nn.Module):
    """:class:`MinigridCNN` shared by an actor head and a critic head (MOSAIC's ``agents.minigrid``)."""

    def __init__(self, envs):
        super().__init__()
        self.cnn = MinigridCNN(envs.single_observation_space.shape)
        self.actor = head(envs.single_action_space.n, std=0.01)
        self.critic = head(1, std=1.0)

    def get_value(self, x):
        return self.critic(self.cnn(x))

    def get_logits(self, x):
        return self.actor(self.cnn(x))

    def get_action_and_value(self, x, action=None):
        hidden = self.cnn(x)
        probs = Categorical(logits=self.actor(hidden))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


class CompactMinigridAgent(nn.Module):
    """The bundled PPO's earlier CNN: 2x2 convolutions on raw codes, linear heads."""

    def __init__(self, envs):
        super().__init__()
        height, width, channels = envs.single_observation_space.shape
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(channels, 32, 2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 2)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * (height - 3) * (width - 3), FEATURES)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(FEATURES, envs.single_action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(FEATURES, 1), std=1)

    def features(self, x):
        return self.network(x.permute(0, 3, 1, 2))

    def get_value(self, x):
        return self.critic(self.features(x))

    def get_logits(self, x):
        return self.actor(self.features(x))

    def get_action_and_value(self, x, action=None):
        hidden = self.features(x)
        probs = Categorical(logits=self.actor(hidden))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)
