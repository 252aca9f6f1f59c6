"""The training-program API: what a training process (an algorithm, a worker's training
program, a plugin's code inside the run) calls to talk to the MOSAIC host.

Every call is a no-op outside a MOSAIC run, and inside one installs the run's patch points and
plugins on first use (in any process of the run), so a program runs the same with and without
a host. Programs whose envs and loggers bypass the patch points (PettingZoo, EnvPool, a Ray env
runner, a library's own logger) report through :func:`report_scalar`, :func:`publish_frame` and
:func:`env_switch`. What is not named in ``__all__`` here is private (the patch points live in
``mosaic_core._patchpoints``) and may change.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import IO, Any, NoReturn

from mosaic_core import _patchpoints
from mosaic_core._patchpoints import current, plugins
from mosaic_core.childenv import LIFECYCLE_KIND, REFUSAL_KIND
from mosaic_core.types import ChildContext, EnvSwitch, FrameInfo

__all__ = [
    "ChildContext",
    "FrameInfo",
    "current",
    "plugins",
    "connect",
    "publish",
    "emit_event",
    "refuse_config",
    "report_scalar",
    "scalars_reported",
    "frame_wanted",
    "publish_frame",
    "evaluation_envs",
    "env_switch",
    "EnvSwitch",
    "HostCancel",
    "Stopped",
    "FRAME_CHECK_S",
    "protocol_stdout",
    "preload",
]


def preload(*modules: str) -> None:
    """Import ``modules`` with Python's cyclic garbage collector paused, then freeze what exists
    (:func:`gc.freeze`): a training process's start-up. Importing torch makes a few million
    long-lived objects, and with the collector on, its collections scan them again and again: 40 %
    of the import's CPU, a third of a short CleanRL PPO run's (bench/startup_gc.py). Frozen, no later
    collection scans them. Call it with what the program imports anyway, where it would import it:
    after setting what those libraries read when imported (Ray reads its environment variables then)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for name in modules:
            importlib.import_module(name)
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def connect() -> ChildContext | None:
    """Join the MOSAIC run now: install the patch points and run every plugin's child setup,
    before the program imports what they patch (a library that binds its SummaryWriter early);
    returns the run's context, or None outside a MOSAIC run. Optional otherwise: the first
    import of gymnasium or a TensorBoard writer, or any call here, does it."""
    return _patchpoints.install()


def publish(kind: str, payload: dict[str, Any], reliable: bool = False) -> bool:
    """Send a message to the host when run by one; a no-op (False) otherwise.

    Algorithms use this for events the host should emit, e.g.
    ``publish("checkpoint_saved", {"path": ..., "global_step": ...}, reliable=True)``.
    """
    child = current()
    return child.publish(kind, payload, reliable) if child else False


def emit_event(event: str, payload: dict[str, Any]) -> bool:
    """Ask the host to emit a lifecycle event (e.g. ``checkpoint_saved``, ``curriculum_stage``).

    Delivered reliably (waits up to a second); a no-op (False) when not run by a host.
    The host emits it with the run's id and next ``seq``; terminal events are refused.
    """
    return publish(LIFECYCLE_KIND, {"event": event, "payload": payload}, reliable=True)


def refuse_config(message: str) -> NoReturn:
    """End the training process over a config it cannot train with, found before its first
    step (a network that does not fit the env's observations, a checkpoint for another env):
    the host reports it as a configuration error (``mosaic: error: ...``, one line, exit 2,
    ``run_failed`` with ``error_kind: config``), not as a crash with a traceback. Outside a
    MOSAIC run: ``error: ...`` on stderr and exit code 2 all the same."""
    message = " ".join(str(message).split())
    ready = _patchpoints.ready()
    if ready is not None:
        ready[0].publish(REFUSAL_KIND, {"error": message}, True)
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def report_scalar(tag: str, value: float, step: int | None = None, agent: str | None = None) -> None:
    """Report a metric (it reaches the live metric bridge, curriculum and every other
    ``mosaic_on_scalar`` plugin). ``agent``: the agent id of a per-agent value in a
    multi-agent run (e.g. each agent's episode score; the team's value has no agent)."""
    ready = _patchpoints.ready()
    if ready is not None:
        ready[1].on_scalar(
            ready[0], tag, float(value), None if step is None else int(step), None if agent is None else str(agent)
        )


def scalars_reported() -> None:
    """The program has reported what it has for now (the values of an iteration that ends, say),
    after a burst of :func:`report_scalar`: plugins that send scalars in batches send them now, so
    the host sees them without waiting for the next one (the live metric bridge sends only when a
    scalar finds its batch due). Cheap; call it once per burst, not after each scalar."""
    ready = _patchpoints.ready()
    if ready is not None:
        ready[1].scalars_reported(ready[0])


@contextlib.contextmanager
def evaluation_envs() -> Iterator[None]:
    """Envs made inside this block evaluate a policy rather than train it: their steps are not
    training's (a curriculum does not count them), and they are a fresh set: the first made in the
    block is env 0 to plugins (FastLane's single mode shows env 0). A no-op outside a MOSAIC run.

    .. code-block:: python

        with evaluation_envs():
            envs = gym.vector.SyncVectorEnv([make_env] * 10)
    """
    ready = _patchpoints.ready()
    if ready is None:
        yield
        return
    child, before = ready[0], ready[0].evaluating
    calls = _patchpoints._state.get("make_calls")  # a fresh set of envs: its first is env 0 to plugins
    child.evaluating = True
    if calls is not None:
        _patchpoints._state["make_calls"] = 0
    try:
        yield
    finally:
        child.evaluating = before
        if calls is not None:
            _patchpoints._state["make_calls"] = calls


FRAME_CHECK_S = 0.05  # a "no" from the consumers holds this long (FastLane's own interval is longer)
_frames_refused_until: dict[int, float] = {}


def frame_wanted(env_index: int = 0) -> bool:
    """Whether a frame consumer (FastLane) wants a frame of env ``env_index`` now: render only
    then, so rendering costs nothing between frames. False outside a MOSAIC run. Cheap enough
    to ask for every env after every step: the consumers are asked at most every
    :data:`FRAME_CHECK_S` per env while they say no."""
    ready = _patchpoints.ready()
    if ready is None:
        return False
    index, now = int(env_index), time.monotonic()  # a numpy index is the same env
    if now < _frames_refused_until.get(index, 0.0):
        return False
    wanted = ready[1].frame_wanted(ready[0], index)
    if not wanted:
        _frames_refused_until[index] = now + FRAME_CHECK_S
    return wanted


def publish_frame(
    frame: Any,
    *,
    env_index: int = 0,
    global_step: int = 0,
    reward: float = 0.0,
    rolling_return: float | None = None,
    step_rate_hz: float = 0.0,
    episode_count: int = 0,
    agent_rewards: dict[str, float] | None = None,
) -> None:
    """Hand a rendered RGB frame (``HxWx3`` uint8) of env ``env_index`` to every
    ``mosaic_on_frame`` consumer (FastLane's shared memory, its PNG recorder…), with what is
    known about that moment; ``agent_rewards`` maps agent ids to their last rewards (the
    team's is ``reward``). Frames of one vector step share ``global_step``, which FastLane's
    grid mode uses to tile them together. Ask :func:`frame_wanted` first."""
    ready = _patchpoints.ready()
    if ready is None:
        return
    info = FrameInfo(
        global_step=int(global_step),
        env_index=int(env_index),
        last_reward=float(reward),
        rolling_return=None if rolling_return is None else float(rolling_return),
        step_rate_hz=float(step_rate_hz),
        episode_count=int(episode_count),
        agent_rewards=None if agent_rewards is None else {str(k): float(v) for k, v in agent_rewards.items()},
    )
    ready[1].on_frame(ready[0], frame, info)


def env_switch() -> EnvSwitch | None:
    """The run's env switches (a curriculum's stages) for a program whose envs bypass
    ``gym.make`` (EnvPool, an env runner of its own): an :class:`~mosaic_core.types.EnvSwitch`,
    or None outside a MOSAIC run or when no plugin switches this run's envs. Envs made through
    ``gym.make`` need nothing: the plugins switch them themselves.

    .. code-block:: python

        switch = env_switch()
        stage = switch.stage() if switch else 0
        envs = make(switch.env_id(stage) if switch else env_id)
        ...  # after each rollout: report it; a new stage starts in fresh envs
        switch.report(stage, steps=n, returns=finished_returns)
    """
    ready = _patchpoints.ready()
    return None if ready is None else ready[1].env_switch(ready[0])


class Stopped(Exception):
    """The host cancelled the run (raised by :class:`HostCancel` in the training process)."""


class HostCancel:
    """The host's cancel (SIGTERM; SIGINT at a terminal) for a program that trains in-process, as
    the RLlib and XuanCe workers do. :meth:`install` it first. Until :meth:`looping`, a signal
    raises :class:`Stopped` at once (the program is still building its envs and model); from then
    on it only records :attr:`signal`, and the training loop stops at its next safe point through
    :meth:`check` (saving a checkpoint first, say): a library's loop may swallow an exception
    raised anywhere else (XuanCe's bare ``except:``)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._looping = False

    def install(self) -> HostCancel:
        """Handle SIGTERM and SIGINT (again after a library installed its own, as ``ray.init`` does)."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: Any) -> None:
        first = self.signal is None
        self.signal = signum
        if first and not self._looping:
            raise Stopped()

    @property
    def requested(self) -> bool:
        return self.signal is not None

    def looping(self) -> None:
        """The training loop starts: from now on a signal waits for :meth:`check`."""
        self._looping = True
        self.check()

    def check(self) -> None:
        """Raise :class:`Stopped` if the host has cancelled the run."""
        if self.signal is not None:
            raise Stopped()

    def exit_code(self) -> int:
        """128 + the signal, as a shell reports a process a signal ended."""
        return 128 + int(self.signal or signal.SIGTERM)


def protocol_stdout() -> IO[str]:
    """For a program that answers on stdout in JSON lines (a worker's policy server, its interactive
    session): a line-buffered stream to the real stdout for the protocol's lines; file descriptor 1
    and ``sys.stdout`` then go to stderr, so what a library prints never mixes into them."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", buffering=1)
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return out
