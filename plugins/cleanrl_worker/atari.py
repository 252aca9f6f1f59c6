"""CleanRL's Atari preprocessing, built from gymnasium's own wrappers where they do the same thing.

CleanRL's ``ppo_atari.py`` / ``dqn_atari.py`` wrap each env in: episode statistics, up to 30
no-op actions at reset, frame skip 4 with max-pooling of the last two frames, a life loss
ending the (training) episode, FIRE after reset where the game needs it, rewards clipped to
their sign, 84×84 grayscale, a stack of the last 4 frames. Here:

- ``gym.wrappers.AtariPreprocessing`` does no-op reset, frame skip with max-pooling, 84×84
  and grayscale (its own ``terminal_on_life_loss`` is off: it resets the game after a lost
  life, where CleanRL's :class:`EpisodicLife` plays on from the same game);
- :class:`EpisodicLife` and :class:`FireReset` are small wrappers of ours (gymnasium has none);
- reward clipping is ``TransformReward(env, np.sign)``;
- the frame stack is ``FrameStack`` (0.29) or ``FrameStackObservation`` (1.x).

Episode statistics are recorded before the life and reward wrappers, so ``charts/episodic_return``
is the game's full score, as in CleanRL. :func:`make_eval_env` leaves life loss and reward
clipping out: evaluation plays whole games and reports raw scores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from cleanrl_worker.env_families import family_of, register_atari

if TYPE_CHECKING:
    from ale_py.env import AtariEnv

FRAME_STACK = 4


class EpisodicLife(gym.Wrapper):
    """A lost life ends the episode for the learner; the game goes on until it is really over."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = _emulator(self.env).ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any):
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:  # after a lost life: one no-op step from where the game is
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.game_over = False
        self.lives = _emulator(self.env).ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Press FIRE (then UP) after each reset, for games that wait for it to start.

    With ``after_life_loss`` also after each lost life, as the training envs do at the reset
    that :class:`EpisodicLife` turns a lost life into (evaluation plays whole games).
    """

    def __init__(self, env: gym.Env, after_life_loss: bool = False):
        super().__init__(env)
        self.after_life_loss = after_life_loss
        self.lives = 0

    def reset(self, **kwargs: Any):
        self.env.reset(**kwargs)
        obs, _, ended, info = self._fire()
        return self.env.reset(**kwargs) if ended else (obs, info)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = _emulator(self.env).ale.lives()
        if self.after_life_loss and 0 < lives < self.lives and not (terminated or truncated):
            obs, fire_reward, terminated, info = self._fire()
            reward = float(reward) + fire_reward
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def _fire(self):
        """FIRE then UP: ``(obs, reward, ended, info)``; stops early if the game ends."""
        reward = 0.0
        for action in (1, 2):
            obs, step_reward, terminated, truncated, info = self.env.step(action)
            reward += float(step_reward)
            if terminated or truncated:
                return obs, reward, True, info
        self.lives = _emulator(self.env).ale.lives()
        return obs, reward, False, info


def require_atari(env_id: str, algo: str) -> None:
    """Exit (code 2, one line on stderr) unless ``env_id`` is an ALE id."""
    family = family_of(env_id)
    if family is None or family.key != "atari":
        kind = f"a {family.title} env" if family else "not an ALE id"
        from mosaic_core.child import refuse_config

        refuse_config(f"{algo} trains on Atari (ALE) envs such as BreakoutNoFrameskip-v4; {env_id} is {kind}")


def _emulator(env: gym.Env) -> AtariEnv:
    """The ALE env under the wrappers (what ``gym.make`` of an ALE id makes)."""
    return cast("AtariEnv", env.unwrapped)


def needs_fire(env: gym.Env) -> bool:
    return "FIRE" in _emulator(env).get_action_meanings()


def _base_env(env_id: str, render_mode: str | None) -> gym.Env:
    """``gym.make`` with the emulator's own frame skip off (AtariPreprocessing skips frames)."""
    register_atari()
    kwargs: dict[str, Any] = {} if gym.spec(env_id).kwargs.get("frameskip", 1) == 1 else {"frameskip": 1}
    return gym.make(env_id, render_mode=render_mode, **kwargs)


def _preprocess(env: gym.Env) -> gym.Env:
    return gym.wrappers.AtariPreprocessing(
        env, noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False
    )


def frame_stack(env: gym.Env, size: int = FRAME_STACK) -> gym.Env:
    if hasattr(gym.wrappers, "FrameStackObservation"):  # gymnasium 1.x
        return gym.wrappers.FrameStackObservation(env, size)
    return gym.wrappers.FrameStack(env, size)


def make_training_env(env_id: str, render_mode: str | None = None) -> gym.Env:
    """One env preprocessed as CleanRL trains on it (``RecordEpisodeStatistics`` inside)."""
    env: gym.Env = gym.wrappers.RecordEpisodeStatistics(_base_env(env_id, render_mode))
    env = EpisodicLife(_preprocess(env))
    if needs_fire(env):
        env = FireReset(env)
    env = gym.wrappers.TransformReward(env, np.sign)
    return frame_stack(env)


def make_eval_env(env_id: str, render_mode: str | None = None) -> gym.Env:
    """One env preprocessed for evaluation: whole games, raw scores, the same observations."""
    env = _preprocess(_base_env(env_id, render_mode))
    if needs_fire(env):
        env = FireReset(env, after_life_loss=True)
    return frame_stack(env)
