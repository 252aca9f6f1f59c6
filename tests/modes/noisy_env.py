"""An env that prints to stdout on every reset and step (``tests.modes.noisy_env:NoisyCartPole-v0``):
interactive mode must keep such output out of its protocol stream."""

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class NoisyCartPole(CartPoleEnv):
    def reset(self, **kwargs):
        print("noisy: reset")
        return super().reset(**kwargs)

    def step(self, action):
        print("noisy: step", flush=True)
        return super().step(action)


if "NoisyCartPole-v0" not in gym.registry:
    gym.register("NoisyCartPole-v0", entry_point=NoisyCartPole, max_episode_steps=500)
