"""The env wrapper that decides when a frame is due, renders it, and hands it to ``on_frame``.

Throttling happens before rendering: an env renders only when a frame is due, so between
frames a step costs a clock read and a few additions.

Single mode: the probe env renders when ``interval_ms`` has passed since its last frame.

Render budget: rendering may take at most ``render_budget`` (default 5 %) of the process's
time. The cost of the last frame (single) or of the last tick's tiles rendered in this
process (grid; all of them with SyncVectorEnv) stretches the next interval when needed.

Grid mode: tiles must show one moment. Every env counts its *clock*: one tick per vector
step it takes part in (a ``step`` call, plus an autoreset ``reset`` that gymnasium 1.x makes
in place of a step). Envs of a vector env are stepped in lockstep, so clocks agree across
envs, also across ``AsyncVectorEnv``'s env processes. The leader (env 0) decides when a
frame is due and writes "render at clock c + 1" into the segment header; every grid env
renders when its clock reaches that value and tags its tile with it. The next vector step
starts only after every env finished the current one, so every env sees the request in
time; readers tile only frames with the same tag (see :meth:`FastLaneReader.tiles`).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np

from mosaic_core import FrameInfo
from mosaic_fastlane.frames import as_frame, downscale
from mosaic_fastlane.segment import FastLaneError, SegmentMissing, UntrustedSegment, open_segment
from mosaic_fastlane.writer import SlotWriter

if TYPE_CHECKING:
    from mosaic_core import ChildContext
    from mosaic_fastlane.settings import Settings

AUTORESET_REPLACES_STEP = int(gymnasium.__version__.split(".")[0]) >= 1
ROLLING_EPISODES = 100
RATE_SMOOTHING = 0.3

_warned: set[str] = set()
active: dict[int, EnvPublisher] = {}  # env index -> publisher, in this process
_render_seconds = [0.0]  # time spent rendering and publishing in this process, all envs


def warn_once(child: ChildContext | None, key: str, message: str) -> None:
    """One line on stderr per kind of failure and process; the host also hears of it."""
    if key in _warned:
        return
    _warned.add(key)
    print(f"mosaic fastlane: {message}", file=sys.stderr, flush=True)
    if child is not None:
        child.publish("fastlane", {"error": message})


class EnvPublisher:
    """Per-env state: episode statistics, throttle, and (lazily) the slot writer."""

    def __init__(
        self,
        child: ChildContext,
        settings: Settings,
        env_index: int,
        render: Callable[[], Any],
        emit_frame: Callable[[np.ndarray, FrameInfo], None],
    ):
        self.child, self.settings, self.env_index = child, settings, env_index
        self.slot = settings.slot_of(env_index)
        self.grid = settings.mode == "grid"
        self.leader = not self.grid or env_index == 0
        self.interval = settings.interval_ms / 1000.0
        self.vector_size = settings.num_envs or child.num_envs or 1
        self._render, self._emit = render, emit_frame
        self.writer: SlotWriter | None = None
        self.disabled = False
        self.clock = self.steps = self.episode_count = self.frames_rendered = 0
        self.last_reward, self._episode_return, self._ended = 0.0, 0.0, False
        self._returns: deque[float] = deque(maxlen=ROLLING_EPISODES)
        self._next_due = 0.0
        self._rate, self._rate_mark = 0.0, (time.monotonic(), 0)
        self.pending_tick = 0
        self._spent_mark = _render_seconds[0]
        active[env_index] = self

    # ------------------------------------------------------------------ env calls
    def after_step(self, reward: Any, done: bool) -> None:
        if not self.steps:
            self._rate_mark = (time.monotonic(), 0)  # rates count from the first step, not from creation
        self.steps += 1
        self.clock += 1
        self.last_reward = float(reward)
        self._episode_return += self.last_reward
        if done:
            self._returns.append(self._episode_return)
            self.episode_count += 1
            self._episode_return = 0.0
        self._ended = done
        if not self.disabled:
            self._maybe_render()

    def after_reset(self) -> None:
        counts = self._ended and AUTORESET_REPLACES_STEP
        self._ended, self._episode_return = False, 0.0
        if counts:
            self.clock += 1
            if not self.disabled:
                self._maybe_render()

    def _maybe_render(self) -> None:
        if not self.grid:
            now = time.monotonic()
            if now >= self._next_due:
                self._render_frame(self.clock)
                self._next_due = now + self._gap()
            return
        writer = self.writer or self._attach()
        if writer is None:
            return
        if self.clock == writer.render_at():
            self._render_frame(self.clock)
        if self.leader:
            now = time.monotonic()
            if now >= self._next_due:
                self._next_due = now + self._gap()
                writer.request_render_at(self.clock + 1)

    def _gap(self) -> float:
        """Seconds until the next frame: the interval, stretched to keep within the render budget."""
        spent = _render_seconds[0] - self._spent_mark
        self._spent_mark = _render_seconds[0]
        return max(self.interval, spent / self.settings.render_budget)

    # ------------------------------------------------------------------ frames
    def _render_frame(self, tick: int) -> None:
        started = time.perf_counter()
        try:
            self._render_and_emit(tick)
        finally:
            spent = time.perf_counter() - started
            if self.frames_rendered:  # the first render pays one-time set-up (e.g. pygame): no budget
                _render_seconds[0] += spent
            self.frames_rendered += 1
            if self.writer is not None:
                self.writer.add_busy(spent)

    def _render_and_emit(self, tick: int) -> None:
        image = self._render()
        if not isinstance(image, np.ndarray):
            self.disable(
                "render-none",
                f"env {self.env_index} rendered {type(image).__name__}, not an RGB array; no frames from it",
            )
            return
        frame = downscale(as_frame(image), self.settings.max_dim)
        now = time.monotonic()
        start, steps = self._rate_mark
        if now > start and self.steps > steps:
            rate = (self.steps - steps) * self.vector_size / (now - start)
            self._rate = rate if not self._rate else self._rate + RATE_SMOOTHING * (rate - self._rate)
            self._rate_mark = (now, self.steps)
        rolling = sum(self._returns) / len(self._returns) if self._returns else None
        info = FrameInfo(
            global_step=self.steps * self.vector_size,
            env_index=self.env_index,
            last_reward=self.last_reward,
            rolling_return=rolling,
            step_rate_hz=self._rate,
            episode_count=self.episode_count,
        )
        self.pending_tick = tick
        try:
            self._emit(frame, info)
        except Exception as exc:  # a broken frame consumer must never stop training
            warn_once(self.child, f"consumer:{type(exc).__name__}", f"a frame consumer failed: {exc}")

    def write(self, frame: np.ndarray, info: FrameInfo) -> None:
        """FastLane's own ``on_frame`` consumer: copy the frame into this env's slot."""
        writer = self.writer or self._attach()
        if writer is None:
            return
        try:
            writer.publish(
                frame,
                tick=self.pending_tick,
                global_step=info.global_step,
                episode_count=info.episode_count,
                last_reward=info.last_reward,
                rolling_return=info.rolling_return,
                step_rate_hz=info.step_rate_hz,
            )
        except (OSError, ValueError, FastLaneError) as exc:
            self.disable("publish", f"publishing a frame failed ({exc}); FastLane is off for env {self.env_index}")

    def _attach(self) -> SlotWriter | None:
        if self.disabled:
            return None
        try:
            mapping = open_segment(
                name=self.settings.segment,
                directory=Path(self.settings.shm_dir),
                writable=True,
                host_pid=self.settings.host_pid,
            )
            try:
                self.writer = SlotWriter(mapping, self.slot, self.env_index)
            except BaseException:
                mapping.close()
                raise
        except (SegmentMissing, UntrustedSegment) as exc:
            # The host creates the segment before starting us and warns itself when it cannot;
            # anything else at the name (another user's file, a FIFO…) is what it warned about.
            self.disabled = True
            self.child.publish("fastlane", {"error": f"{exc}; no frames from env {self.env_index}"})
            return None
        except (FastLaneError, OSError) as exc:
            self.disable("attach", f"{exc}; FastLane is off for this process (training goes on)")
            return None
        return self.writer

    def disable(self, key: str, message: str) -> None:
        self.disabled = True
        warn_once(self.child, key, message)

    def close(self) -> None:
        if active.get(self.env_index) is self:
            del active[self.env_index]
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        self.disabled = True


class FastLaneWrapper(gymnasium.Wrapper):
    """Publishes this env's frames and metrics through FastLane; everything else passes through."""

    def __init__(self, env: gymnasium.Env, publisher: EnvPublisher):
        super().__init__(env)
        self.fastlane = publisher

    def step(self, action: Any) -> Any:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.fastlane.after_step(reward, bool(terminated or truncated))
        return observation, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> Any:
        result = self.env.reset(**kwargs)
        self.fastlane.after_reset()
        return result

    def close(self) -> Any:
        self.fastlane.close()
        return self.env.close()


def is_wrapped(env: Any) -> bool:
    """Whether ``env`` or anything it wraps is already a FastLaneWrapper."""
    while env is not None:
        if isinstance(env, FastLaneWrapper):
            return True
        env = getattr(env, "env", None)
    return False
