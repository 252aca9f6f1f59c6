"""A replay buffer for the off-policy algorithms (dqn, c51, sac, td3, ddpg).

Stores transitions in preallocated tensors on the training device, so sampling a batch
copies nothing between host and device; each ``add`` moves one step's data there once.
Samples carry the field names of stable-baselines3's ``ReplayBufferSamples``
(``observations``, ``actions``, ``next_observations``, ``dones``, ``rewards``; the last two
shaped ``(batch, 1)``), so CleanRL-style update code reads the same.

Timeouts: store ``terminations`` as ``dones`` (not truncations), and the real last
observation as ``next_obs`` (:func:`cleanrl_worker.gymcompat.real_next_obs`), so an episode
cut by a time limit still bootstraps. Pass ``valid`` to skip transitions that are not real
(gymnasium 1.x autoreset steps, :class:`cleanrl_worker.gymcompat.Autoreset`).

``optimize_memory_usage`` (for image observations, as stable-baselines3's option of that name
that CleanRL's Atari scripts use): no separate next-observation store; a transition's next
observation is the next slot's observation, so once the buffer is full the oldest slot cannot be sampled. Only for one
sub-env; at an episode's end the next slot holds the next episode's first observation, which
matters only for truncated episodes (terminated ones do not bootstrap). Storage is allocated
uninitialised, so the memory of a large buffer is taken as it fills.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from cleanrl_worker.gymcompat import shape_of
from mosaic_core.child import emit_event


class ReplayBufferSamples(NamedTuple):
    observations: torch.Tensor
    actions: torch.Tensor
    next_observations: torch.Tensor
    dones: torch.Tensor
    rewards: torch.Tensor


def _torch_dtype(space: gym.Space) -> torch.dtype:
    if isinstance(space, gym.spaces.Discrete):
        return torch.long
    return torch.uint8 if space.dtype == np.uint8 else torch.float32


class ReplayBuffer:
    """A circular buffer of ``buffer_size`` transitions; the oldest are overwritten first."""

    def __init__(
        self,
        buffer_size: int,
        observation_space: gym.Space,
        action_space: gym.Space,
        device: torch.device | str = "cpu",
        seed: int | None = None,
        optimize_memory_usage: bool = False,
    ):
        if buffer_size <= 0:
            raise ValueError(f"buffer_size must be > 0, got {buffer_size}")
        self.buffer_size, self.device = buffer_size, torch.device(device)
        obs_shape = shape_of(observation_space)
        # discrete actions are kept as (batch, 1), as stable-baselines3 does (``q.gather(1, actions)``)
        self._action_shape = (1,) if isinstance(action_space, gym.spaces.Discrete) else shape_of(action_space)
        obs_dtype = _torch_dtype(observation_space)

        def storage(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
            return torch.empty((buffer_size, *shape), dtype=dtype, device=self.device)  # only filled slots are read

        self.optimize_memory_usage = optimize_memory_usage
        self.observations = storage(obs_shape, obs_dtype)
        self.next_observations = None if optimize_memory_usage else storage(obs_shape, obs_dtype)
        self.actions = storage(self._action_shape, _torch_dtype(action_space))
        self.rewards = storage((), torch.float32)
        self.dones = storage((), torch.float32)
        self.pos, self.size = 0, 0
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(seed if seed is not None else torch.seed())

    def __len__(self) -> int:
        return self.size

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        dones: np.ndarray,
        valid: np.ndarray | None = None,
    ) -> None:
        """Add one vector step (one row per sub-env; rows where ``valid`` is False are skipped)."""
        if valid is not None and not valid.all():
            keep = np.flatnonzero(valid)
            obs, next_obs, actions, rewards, dones = (
                obs[keep],
                next_obs[keep],
                actions[keep],
                rewards[keep],
                dones[keep],
            )
        count = len(obs)
        if count == 0:
            return
        actions = np.asarray(actions).reshape(count, *self._action_shape)
        index = (torch.arange(count) + self.pos) % self.buffer_size
        if self.device.type != "cpu":
            index = index.to(self.device)
        next_store, next_index = self.next_observations, index
        if next_store is None:  # optimize_memory_usage: the next observation is the next slot's
            if count != 1:
                raise ValueError("optimize_memory_usage stores one sub-env's transitions, got a step of several")
            next_store, next_index = self.observations, (index + 1) % self.buffer_size
        stores = (
            (self.observations, obs, index),
            (next_store, next_obs, next_index),
            (self.actions, actions, index),
            (self.rewards, rewards, index),
            (self.dones, dones, index),
        )
        for store, values, where in stores:
            store[where] = torch.as_tensor(np.asarray(values), dtype=store.dtype).to(self.device, non_blocking=True)
        self.pos = (self.pos + count) % self.buffer_size
        self.size = min(self.size + count, self.buffer_size)

    def sample(self, batch_size: int) -> ReplayBufferSamples:
        """``batch_size`` transitions drawn uniformly, with replacement."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        if self.optimize_memory_usage and self.size == self.buffer_size:
            # the slot about to be overwritten lost its observation to the newest next observation
            index = (
                torch.randint(1, self.buffer_size, (batch_size,), device=self.device, generator=self._generator)
                + self.pos
            ) % self.buffer_size
        else:
            index = torch.randint(0, self.size, (batch_size,), device=self.device, generator=self._generator)
        if self.next_observations is None:  # optimize_memory_usage
            next_observations = self.observations[(index + 1) % self.buffer_size]
        else:
            next_observations = self.next_observations[index]
        return ReplayBufferSamples(
            observations=self.observations[index],
            actions=self.actions[index],
            next_observations=next_observations,
            dones=self.dones[index].unsqueeze(1),
            rewards=self.rewards[index].unsqueeze(1),
        )

    def saved_bytes(self) -> int:
        """What :meth:`state_dict` holds: the filled part of the buffer, in bytes."""
        stores = (self.observations, self.next_observations, self.actions, self.rewards, self.dones)
        return sum(store[: self.size].numel() * store.element_size() for store in stores if store is not None)

    def state_dict(self) -> dict[str, object]:
        """The filled part of the buffer, its position and its sampling generator's state:
        tensors and numbers only (a checkpoint that loads with ``weights_only=True``)."""
        filled = slice(0, self.size)
        stores = {
            "observations": self.observations,
            "next_observations": self.next_observations,
            "actions": self.actions,
            "rewards": self.rewards,
            "dones": self.dones,
        }
        return {
            "buffer_size": self.buffer_size,
            "pos": self.pos,
            "size": self.size,
            "generator": self._generator.get_state(),
            **{name: store[filled].cpu().clone() for name, store in stores.items() if store is not None},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Refill from :meth:`state_dict` (same buffer size); raises ValueError when it does not fit."""
        if state.get("buffer_size") != self.buffer_size:
            raise ValueError(
                f"the saved replay buffer holds {state.get('buffer_size')} transitions, "
                f"this run's --buffer-size is {self.buffer_size}"
            )
        size = int(state["size"])
        for name in ("observations", "next_observations", "actions", "rewards", "dones"):
            store = getattr(self, name)
            if store is not None:
                store[:size] = state[name].to(self.device)
        self.pos, self.size = int(state["pos"]), size
        self._generator.set_state(state["generator"])


def refill_note(learning_starts: int, from_step: int, why: str) -> str:
    """What a resume without the replay buffer does, in one line (said at the stop and at the resume)."""
    return (
        f"the replay buffer is not in the checkpoint ({why}): a resume from step {from_step} refills it with "
        f"the restored policy for learning_starts={learning_starts} steps before it trains again, so its "
        "returns after the resume differ from an uninterrupted run's"
    )


class KeptReplay:
    """A run's replay buffer in its checkpoints (``--save-replay-buffer``, on by default, up to
    ``--save-replay-buffer-max-mb``): what a save keeps, and what a resume gets back. Without the
    buffer the stop and the resume each say, in one line (:func:`refill_note`), what the resume does."""

    def __init__(self, buffer: ReplayBuffer, args: Any):
        self.buffer, self.args = buffer, args

    def left_out(self) -> str | None:
        """Why the buffer stays out of this run's checkpoints, or None when it is kept."""
        if not self.args.save_replay_buffer:
            return "--no-save-replay-buffer"
        size_mb = self.buffer.saved_bytes() / 1e6
        if size_mb > self.args.save_replay_buffer_max_mb:
            return f"{size_mb:,.0f} MB, over --save-replay-buffer-max-mb {self.args.save_replay_buffer_max_mb:,.0f}"
        return None

    def for_save(self, path: str, steps_done: int, state: dict[str, Any], stopping: bool) -> ReplayBuffer | None:
        """The buffer to save beside ``state`` at ``path`` (None: left out, the reason in ``state`` and,
        for the run's own checkpoints, at the terminal; as a note when the run is being stopped)."""
        why = self.left_out()
        if why is None:
            return self.buffer
        state["replay_left_out"] = why
        if str(path).startswith("checkpoints/"):
            note = refill_note(self.args.learning_starts, steps_done, why)
            print(note, file=sys.stderr)
            if stopping:  # the person who stopped the run reads it at the terminal
                emit_event("note", {"text": note})
        return None

    def resume(self, checkpoint: dict[str, Any], start_step: int) -> int:
        """Refill the buffer from a checkpoint that kept it; the step learning starts after (the
        checkpoint's ``learning_starts`` when it kept the buffer, else that many steps past the resume).
        Raises ValueError when the saved buffer does not fit this run's."""
        if "replay_buffer" in checkpoint:  # trains on at once, as the run would have
            self.buffer.load_state_dict(checkpoint["replay_buffer"])
            return self.args.learning_starts
        why = (checkpoint.get("training_state") or {}).get("replay_left_out", "it was saved without one")
        emit_event("note", {"text": "resuming: " + refill_note(self.args.learning_starts, start_step, why)})
        return start_step + self.args.learning_starts
