"""The XuanCe callback of a MOSAIC run (training process): per-agent metrics and frames.

XuanCe calls :class:`MosaicCallback` from its training loop (``on_train_step`` after every vector
step, ``on_train_episode_info`` when an env's episode ends) and from evaluation
(``on_test_step``). From there:

- episode scores: the team return (sum over agents) as ``charts/episodic_return`` and each
  agent's as the same tag with ``agent=`` (:func:`mosaic_core.child.report_scalar`), plus
  ``charts/episodic_length``; XuanCe logs its own episode rewards through ``add_scalars``, which
  the host's ``add_scalar`` patch does not see. The same values go to the run's TensorBoard
  files (per agent as ``TAG/AGENT``), written past the patch so nothing is reported twice.
  Losses: :meth:`MosaicCallback.log_infos` takes the place of the agent's own ``log_infos``:
  XuanCe's ``AGENT/NAME`` values (e.g. ``agent_0/actor_loss``) are reported as ``losses/NAME``
  of that agent, the others as ``losses/NAME``; TensorBoard keeps XuanCe's names.
- the stop (:class:`mosaic_core.contract.StopOnSignal`): checked where a vector step ends
  (``on_train_step_end``, after the update the step triggered), XuanCe's state is whole there;
  :class:`mosaic_core.child.Stopped` leaves XuanCe's loop (no bare ``except:`` around the call).
- evaluation episodes (``on_test_step``) are kept in :attr:`MosaicCallback.eval_episodes`.
- frames: only when a frame consumer wants one (:func:`mosaic_core.child.frame_wanted`, per env
  index: cheap, a "no" holds 50 ms; asking the plugins every env after every step took 2 % of
  MAPPO's time in a profile), rendered from that env alone (``rgb_array``) and published with
  each agent's reward.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from xuance.common import MultiAgentBaseCallback

from mosaic_core import child as mosaic_child

report = mosaic_child.report_scalar


def _raw_add_scalar(writer: Any) -> Any:
    """``writer.add_scalar`` without the host's patch (the callback reports its values itself)."""
    method = type(writer).add_scalar
    return getattr(method, "__wrapped__", method).__get__(writer)


class MosaicCallback(MultiAgentBaseCallback):
    """Reports XuanCe's per-agent episode results and publishes frames. ``writer``: the agent's
    SummaryWriter (set once the agent exists). Steps are XuanCe's own ``current_step``, which a
    resume restores: the global step of the run."""

    def __init__(self, stop: Any = None):
        super().__init__()
        self.stop = stop  # a contract.StopOnSignal: training stops at the next vector step's end
        self.writer: Any = None
        self.episodes = 0
        self.eval_episodes: list[tuple[dict[str, float], int]] = []  # (returns per agent, length)
        self.evaluating = False  # XuanCe's own test scores are not the run's metrics then
        self.recording: list[Any] | None = None  # an evaluation episode's frames, for its video
        self._add_scalar: Any = None
        self._agent_keys: tuple[str, ...] = ()
        self._log_infos: Any = None
        self._rnn = False
        self._clock = (time.monotonic(), 0)  # for steps per second
        self.sps = 0.0

    def attach(self, agent: Any) -> None:
        """Hook into a built XuanCe agent: its writer, its agent keys, its ``log_infos``."""
        self.writer = getattr(agent, "writer", None)
        self._add_scalar = _raw_add_scalar(self.writer) if self.writer is not None else None
        self._agent_keys = tuple(str(k) for k in getattr(agent, "agent_keys", ()))
        self._log_infos = agent.log_infos
        agent.log_infos = self.log_infos
        self._rnn = bool(getattr(agent, "use_rnn", False))
        self._clock = (time.monotonic(), int(agent.current_step))  # steps per second of the training loop

    def check_stop(self) -> None:
        """Raise :class:`mosaic_core.child.Stopped` once a stop is asked for."""
        if self.stop is not None and self.stop.requested:
            raise mosaic_child.Stopped()

    def log_infos(self, info: dict[str, Any], x_index: int) -> None:
        """XuanCe's ``log_infos``: scalars reported (losses per agent) and written to TensorBoard
        past the host's patch; dicts (``add_scalars``) left to XuanCe."""
        if self.evaluating:
            return
        step = int(x_index)
        rest = {}
        for key, value in info.items():
            if value is None:
                continue
            if isinstance(value, dict) or self._add_scalar is None:
                rest[key] = value
                continue
            value = float(value)
            self._add_scalar(key, value, step)
            owner, _, name = key.partition("/")
            if name and owner in self._agent_keys:
                report(f"losses/{name}", value, step, agent=owner)
            elif key == "learning_rate":
                report("charts/learning_rate", value, step)
            else:
                report(f"losses/{key}", value, step)
        if rest:
            self._log_infos(rest, step)

    # -- metrics -----------------------------------------------------------------------------
    def _episode(self, info: dict[str, Any], step: int) -> None:
        scores = {str(k): float(v) for k, v in info["episode_score"].items()}
        team = float(sum(scores.values()))
        length = int(info.get("episode_step", 0))
        report("charts/episodic_return", team, step)
        report("charts/episodic_length", length, step)
        for agent, score in scores.items():
            report("charts/episodic_return", score, step, agent=agent)
        if self._add_scalar is not None:
            self._add_scalar("charts/episodic_return", team, step)
            self._add_scalar("charts/episodic_length", length, step)
            for agent, score in scores.items():
                self._add_scalar(f"charts/episodic_return/{agent}", score, step)
        self.episodes += 1
        started, first = self._clock
        if step > first and time.monotonic() > started:
            self.sps = (step - first) / (time.monotonic() - started)
            report("charts/SPS", self.sps, step)

    def on_train_episode_info(self, **kwargs: Any) -> None:
        env_index = kwargs["env_id"]
        self._episode(kwargs["infos"][env_index], int(kwargs["current_step"]))

    # -- frames ------------------------------------------------------------------------------
    def _frames(self, envs: Any, rewards: list[dict[str, Any]], step: int) -> None:
        wanted = [i for i in range(envs.num_envs) if mosaic_child.frame_wanted(i)]
        if not wanted:
            return
        singles = getattr(envs, "envs", None)  # DummyVecMultiAgentEnv: render only the wanted envs
        if singles is not None:
            images = [singles[i].render("rgb_array") for i in wanted]
        else:  # SubprocVecMultiAgentEnv renders every env at once
            every = envs.render("rgb_array")
            images = [every[i] for i in wanted]
        for index, image in zip(wanted, images):
            if image is None:
                continue
            agent_rewards = {str(k): float(np.sum(v)) for k, v in rewards[index].items()}
            mosaic_child.publish_frame(
                np.ascontiguousarray(image, dtype=np.uint8),
                env_index=index,
                global_step=step,
                reward=float(sum(agent_rewards.values())),
                agent_rewards=agent_rewards,
                episode_count=self.episodes,
                step_rate_hz=self.sps,
            )

    def on_train_step(self, current_step: int, **kwargs: Any) -> None:
        self._frames(kwargs["envs"], kwargs["rewards"], int(current_step))

    def on_train_step_end(self, current_step: int, **kwargs: Any) -> None:
        """The safe point: the vector step is counted, an update it triggered is done."""
        self.check_stop()

    def on_train_epochs_end(self, current_step: int, **kwargs: Any) -> None:
        if self._rnn:  # recurrent policies train whole episodes: their loop ends a step only at the end
            self.check_stop()

    def on_test_step(self, *args: Any, **kwargs: Any) -> None:
        """Evaluation: each finished episode's returns per agent and length are kept (not reported
        as training metrics: the evaluation's result is its own record)."""
        self.check_stop()
        envs, step = kwargs["envs"], int(kwargs.get("current_step") or 0)
        self._frames(envs, kwargs["rewards"], step)
        if self.recording is not None:
            singles = getattr(envs, "envs", None)
            image = singles[0].render("rgb_array") if singles is not None else envs.render("rgb_array")[0]
            if image is not None:
                self.recording.append(np.asarray(image))
        terminals, truncations, infos = kwargs["terminals"], kwargs["truncations"], kwargs["infos"]
        for i in range(envs.num_envs):
            if all(terminals[i].values()) or truncations[i]:
                scores = {str(k): float(v) for k, v in infos[i]["episode_score"].items()}
                self.eval_episodes.append((scores, int(infos[i].get("episode_step", 0))))
