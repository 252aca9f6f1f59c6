"""The training-process side of the host: patch points and the context hooks receive.

A worker's launcher calls :func:`install` in the child before it runs the algorithm. The
host describes the run in the ``MOSAIC_CHILD`` environment variable (JSON), so every
process of the run finds it: env workers that are forked inherit the installed patches,
and those that are spawned re-install them through ``mosaic_core/_boot/sitecustomize.py``,
which the host puts on the child's ``PYTHONPATH``.

Patch points:
- ``gymnasium.make``: plugins add kwargs (:func:`~mosaic_core.hookspecs.mosaic_env_make_kwargs`)
  and wrap the new env (:func:`~mosaic_core.hookspecs.mosaic_wrap_env`);
- ``SummaryWriter.add_scalar`` of ``torch.utils.tensorboard`` and ``tensorboardX``:
  patched when the script imports them (an import hook; nothing heavy is imported here)
  and reported through :func:`~mosaic_core.hookspecs.mosaic_on_scalar`.
"""

from __future__ import annotations

import importlib.abc
import json
import multiprocessing
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from mosaic_core.channel import ChannelSender

if TYPE_CHECKING:
    from mosaic_core.plugins import PluginHost

ENV_VAR = "MOSAIC_CHILD"
LIFECYCLE_KIND = "lifecycle"  # side-channel messages the host turns into lifecycle events
_WRITER_MODULES = ("torch.utils.tensorboard.writer", "tensorboardX.writer")


@dataclass(frozen=True)
class FrameInfo:
    """What is known about the moment a frame was rendered."""

    global_step: int
    env_index: int
    last_reward: float
    rolling_return: float | None
    step_rate_hz: float
    episode_count: int


@dataclass
class ChildContext:
    """What training-process hooks receive about the run they are part of."""

    run_id: str
    run_dir: Path
    extras: dict[str, Any]
    channel: ChannelSender = field(repr=False)
    algo: str = ""
    env_id: str = ""
    num_envs: int | None = None

    def publish(self, kind: str, payload: dict[str, Any], reliable: bool = False) -> bool:
        """Send a message to the host (see :mod:`mosaic_core.channel`)."""
        return self.channel.send(kind, payload, reliable=reliable)

    def describe(self) -> str:
        """The JSON a host puts in ``MOSAIC_CHILD`` for this context."""
        return json.dumps(
            {
                "run_id": self.run_id,
                "run_dir": str(self.run_dir),
                "extras": self.extras,
                "channel": self.channel.address,
                "algo": self.algo,
                "env_id": self.env_id,
                "num_envs": self.num_envs,
            }
        )

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> "ChildContext | None":
        raw = (environ if environ is not None else os.environ).get(ENV_VAR)
        if not raw:
            return None
        spec = json.loads(raw)
        return cls(
            run_id=spec["run_id"],
            run_dir=Path(spec["run_dir"]),
            extras=spec.get("extras") or {},
            channel=ChannelSender(spec.get("channel")),
            algo=spec.get("algo", ""),
            env_id=spec.get("env_id", ""),
            num_envs=spec.get("num_envs"),
        )


_state: dict[str, Any] = {}


def current() -> ChildContext | None:
    """The context of this training process, or None when not run by a MOSAIC host."""
    return _state.get("child")


def plugins() -> "PluginHost | None":
    """The plugin host of this training process (None before :func:`install`)."""
    return _state.get("host")


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


def install(host: "PluginHost | None" = None) -> ChildContext | None:
    """Install the patch points in this process once; returns the context (or None)."""
    if "child" in _state:
        return _state["child"]
    child = ChildContext.from_environ()
    if child is None:
        return None
    if host is None:
        from mosaic_core.plugins import load_plugin_host

        host = load_plugin_host()
    _state.update(child=child, host=host, make_calls=0)
    host.child_setup(child)
    _patch_gym_make(child, host)
    after_import(_WRITER_MODULES, lambda module: _patch_writer_module(module, child, host))
    return child


def env_index_hint() -> int | None:
    """This env's index in its vector env, when it can be known.

    In an ``AsyncVectorEnv`` worker the process name ends with the index
    (``Worker<AsyncVectorEnv>-3``); in one process, ``gym.make`` calls are counted in order
    (``SyncVectorEnv`` makes its envs in index order).
    """
    name = multiprocessing.current_process().name
    match = re.search(r"Worker<\w+>-(\d+)$", name)
    if match:
        return int(match.group(1))
    return None


def _patch_gym_make(child: ChildContext, host: "PluginHost") -> None:
    import gymnasium

    original = gymnasium.make
    if getattr(original, "__mosaic_patched__", False):
        return

    def make(env_id: Any, *args: Any, **kwargs: Any) -> Any:
        name = env_id if isinstance(env_id, str) else getattr(env_id, "id", str(env_id))
        index = env_index_hint()
        if index is None:
            index = _state["make_calls"]
            _state["make_calls"] += 1
        for key, value in host.env_make_kwargs(child, name, index, dict(kwargs)).items():
            if kwargs.get(key) is None:  # the script's own values win; None means "not given"
                kwargs[key] = value
        env = original(env_id, *args, **kwargs)
        return host.wrap_env(child, env, name, index)

    make.__mosaic_patched__ = True  # type: ignore[attr-defined]
    make.__wrapped__ = original  # type: ignore[attr-defined]
    gymnasium.make = make
    import gymnasium.envs.registration as registration

    registration.make = make


def after_import(module_names: tuple[str, ...] | str, callback: Callable[[Any], None]) -> None:
    """Call ``callback(module)`` once each named module is imported in this process.

    Modules already imported are handled now; the others through an import hook, so
    nothing heavy is imported here. Plugins use it to patch libraries the script imports
    (e.g. ``wandb.init``).
    """
    names = (module_names,) if isinstance(module_names, str) else tuple(module_names)
    pending = []
    for name in names:
        if name in sys.modules:
            callback(sys.modules[name])
        else:
            pending.append(name)
    if pending:
        sys.meta_path.insert(0, _AfterImport(frozenset(pending), callback))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of the named modules to run a callback."""

    def __init__(self, names: frozenset[str], callback: Callable[[Any], None]):
        self._names, self._callback = names, callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self._names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _CallbackLoader(spec.loader, self._callback)
                return spec
        return None


class _CallbackLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, callback: Callable[[Any], None]):
        self._loader, self._callback = loader, callback

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        self._callback(module)


def relocate_logdir(logdir: Any, tensorboard_dir: str | None) -> Any:
    """Where a writer's relative log dir goes when ``extras.tensorboard_dir`` is set.

    CleanRL has no flag for it and writes ``runs/<run_name>``: that becomes
    ``<tensorboard_dir>/<run_name>`` (any other relative path goes below it too).
    Absolute paths and unset directories are left alone. The host has already checked
    that ``tensorboard_dir`` stays inside the run directory.
    """
    if not tensorboard_dir or not isinstance(logdir, (str, os.PathLike)) or os.path.isabs(logdir):
        return logdir
    parts = Path(logdir).parts
    return str(Path(tensorboard_dir, *(parts[1:] if parts[:1] == ("runs",) else parts)))


def _patch_writer_module(module: Any, child: ChildContext, host: "PluginHost") -> None:
    writer = getattr(module, "SummaryWriter", None)
    if writer is None or getattr(writer.add_scalar, "__mosaic_patched__", False):
        return
    tensorboard_dir = child.extras.get("tensorboard_dir")
    if isinstance(tensorboard_dir, str) and tensorboard_dir:
        original_init = writer.__init__

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if args:
                args = (relocate_logdir(args[0], tensorboard_dir), *args[1:])
            for key in ("log_dir", "logdir"):
                if key in kwargs:
                    kwargs[key] = relocate_logdir(kwargs[key], tensorboard_dir)
            original_init(self, *args, **kwargs)

        writer.__init__ = __init__
    original = writer.add_scalar
    on_scalar = host.on_scalar

    def add_scalar(self: Any, tag: str, scalar_value: Any, global_step: Any = None, *args: Any, **kwargs: Any) -> Any:
        try:
            value = float(scalar_value)
        except (TypeError, ValueError):
            value = None
        if value is not None:
            on_scalar(child, tag, value, None if global_step is None else int(global_step))
        return original(self, tag, scalar_value, global_step, *args, **kwargs)

    add_scalar.__mosaic_patched__ = True  # type: ignore[attr-defined]
    add_scalar.__wrapped__ = original  # type: ignore[attr-defined]
    writer.add_scalar = add_scalar
