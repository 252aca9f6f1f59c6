"""Hooks in the training process (:mod:`mosaic_core.hookspecs`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mosaic_core.hookspecs.marks import ISOLATE, spec

if TYPE_CHECKING:  # pragma: no cover - typing only, keeps discovery import-light
    import numpy as np
    from numpy.typing import NDArray

    from mosaic_core.types import ChildContext, EnvSwitch, FrameInfo


__all__ = [
    "mosaic_child_setup",
    "mosaic_env_make_kwargs",
    "mosaic_wrap_env",
    "mosaic_env_switch",
    "mosaic_on_frame",
    "mosaic_frame_wanted",
    "mosaic_on_scalar",
    "mosaic_scalars_reported",
    "mosaic_host_lost",
]


# --------------------------------------------------------------------------------------
# Training process
# --------------------------------------------------------------------------------------
@spec(ISOLATE)
def mosaic_child_setup(child: ChildContext) -> None:
    """The training process is starting, before the algorithm script is imported.

    Called once in every process of the run that imports the patch points (the training
    process itself and a vector env's env processes started with ``spawn``), after the patch
    points are installed. Install process-wide state here (e.g. a FastLane writer). Return
    value ignored. Failure: isolate (only that plugin's setup is missing; the patch points and
    every other plugin's setup stay).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_child_setup(child):  # in a worker's run_hooks module: its runs only
            os.environ.setdefault("MY_LIB_THREADS", "1")
    """


@spec(ISOLATE)
def mosaic_env_make_kwargs(
    child: ChildContext, env_id: str, env_index: int | None, kwargs: dict[str, Any]
) -> dict[str, Any] | None:
    """Contribute keyword arguments to a ``gym.make`` call made by the script.

    Called for each ``gym.make`` in the training process and its env processes; ``env_index``
    is the env's index in its vector env when known (None otherwise), ``kwargs`` what the
    script passed. Return extra kwargs (e.g. ``{"render_mode": "rgb_array"}``) or None.
    The script's own kwargs win (an explicit None counts as not given, as in
    ``gym.make(env_id, render_mode=None)``). Failure: isolate (a raising plugin or a key
    another plugin already gave drops that plugin's kwargs, naming it).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_env_make_kwargs(child, env_id, env_index, kwargs):
            return {"render_mode": "rgb_array"} if env_index == 0 else None
    """


@spec(ISOLATE)
def mosaic_wrap_env(child: ChildContext, env: Any, env_id: str, env_index: int | None) -> Callable[[Any], Any] | None:
    """Offer a wrapper for an environment just created by ``gym.make``.

    Called after each ``gym.make``. Return a callable ``wrap(env) -> env`` or None. The
    callables are applied in plugin order, each to the previous result, so wrappers nest
    predictably; a plugin must not wrap an env it has already wrapped. Failure: isolate
    (a raising hook, a non-callable or a raising ``wrap`` leaves the env unwrapped by that
    plugin).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_wrap_env(child, env, env_id, env_index):
            import gymnasium as gym

            return gym.wrappers.RecordEpisodeStatistics
    """


@spec(ISOLATE)
def mosaic_env_switch(child: ChildContext) -> EnvSwitch | None:
    """The run's env switches for a training program whose envs bypass ``gym.make``, or None.

    Called in a training process when the program asks :func:`mosaic_core.child.env_switch`
    (EnvPool, an env runner of its own: envs the ``gym.make`` patch point never sees). Return an
    :class:`~mosaic_core.types.EnvSwitch` when this plugin switches this run's envs (a
    curriculum's stages), else None; the first one returned wins. Failure: isolate (the program
    trains on its first env).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_env_switch(child):
            return MyStages(child) if "my_stages" in child.extras else None
    """


@spec(ISOLATE)
def mosaic_on_frame(child: ChildContext, frame: NDArray[np.uint8], info: FrameInfo) -> None:
    """A rendered frame and its step metrics are available in the training process.

    Called by the plugin that renders (FastLane) each time it renders, with an ``HxWxC``
    uint8 array (C = 3 RGB, 4 RGBA, 1 grayscale) and a :class:`mosaic_core.types.FrameInfo`
    (global step, env index, last reward, rolling return, step rate, episode count). The
    frame is only valid during the call: copy it to keep it. Return value ignored.
    Failure: isolate (a raising implementation, ``wrapper=True`` ones included, costs only
    its plugin; the frame still reaches every other).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_on_frame(child, frame, info):
            if info.global_step % 10_000 == 0:
                np.save(child.run_dir / f"frame_{info.global_step}.npy", frame.copy())
    """


@spec(ISOLATE)
def mosaic_frame_wanted(child: ChildContext, env_index: int) -> bool | None:
    """Whether a frame of env ``env_index`` is wanted now.

    Called in the training process by a program that renders itself
    (:func:`mosaic_core.child.frame_wanted`, for envs that bypass ``gym.make``: PettingZoo,
    EnvPool, a Ray env runner), before it renders. The program renders only when some consumer
    says True, so rendering costs nothing between frames.

    Return True to ask for a frame, False or None otherwise; results combine as "any": True from
    one implementation is enough. Must be cheap (a clock read). When every implementation says no,
    ``frame_wanted`` keeps that answer for 50 ms for that env (``mosaic_core.child.FRAME_CHECK_S``),
    so programs may ask after every step. Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_frame_wanted(child, env_index):
            return env_index == 0 and time.monotonic() >= NEXT_FRAME[0]
    """


@spec(ISOLATE)
def mosaic_on_scalar(
    child: ChildContext, tag: str, value: float, step: int | None, agent: str | None, log_dir: str | None
) -> None:
    """The script wrote a scalar (``SummaryWriter.add_scalar``) in the training process.

    Called for every ``add_scalar`` of ``torch.utils.tensorboard`` and ``tensorboardX``
    writers, and for :func:`mosaic_core.child.report_scalar` (workers without a
    SummaryWriter), before the write itself, so it must be cheap (buffer, never block).
    ``agent`` is the agent id for a per-agent value of a multi-agent run (None for the
    run's own or the team's values). ``log_dir`` is the writer's directory as it was given
    (relative to the training process's working directory; None for ``report_scalar``), so a
    plugin's own curves can go beside the script's. Return value ignored. Failure: isolate (a raising
    implementation, ``wrapper=True`` ones included, costs only its plugin; the run and every
    other plugin go on).

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_on_scalar(child, tag, value, step, agent):
            if tag == "charts/episodic_return" and agent is None:
                BEST[0] = max(BEST[0], value)
    """


@spec(ISOLATE)
def mosaic_scalars_reported(child: ChildContext) -> None:
    """The training program has reported what it has for now: a burst of scalars (an RLlib
    iteration's values) ended (:func:`mosaic_core.child.scalars_reported`).

    Called in the training process by programs that report in bursts, once a burst ends. A
    plugin that holds scalars to send them in batches (:func:`mosaic_on_scalar`) sends what it
    holds now, so the host sees an iteration's values as it ends rather than with the next
    one's. Must be cheap (never block). Return value ignored. Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_scalars_reported(child):
            PENDING.send_now()
    """


@spec(ISOLATE)
def mosaic_host_lost(child: ChildContext) -> None:
    """The run's host died (e.g. ``kill -9``) while the training process was running.

    Called once, in the training process only, from MOSAIC's watchdog thread, just before it
    records the run as failed and stops the run's processes. Free what the host would have
    freed in :func:`mosaic_run_finished` and can be freed from here (e.g. a shared-memory
    segment). Must be quick. Return value ignored. Failure: isolate.

    **Example:**

    .. code-block:: python

        @hookimpl
        def mosaic_host_lost(child):
            SEGMENT.unlink()
    """
