"""Private: the patch points of a training process (not part of the public surface; the training
program's API is :mod:`mosaic_core.child`).

The host describes the run in the ``MOSAIC_CHILD`` environment variable
(:mod:`mosaic_core.childenv`), so every process of the run finds it, and puts
``mosaic_core/_boot`` on the child's ``PYTHONPATH``: its ``sitecustomize`` calls
:func:`install_lazily`, which installs the patch points the first time the process imports
``gymnasium`` or a TensorBoard writer. A process of the run that never imports them (a
W&B service, a compiler, a shell tool) pays nothing. A training program may install them
itself first (:func:`mosaic_core.child.connect`).

Order of :func:`install`: the patch points first, then every plugin's
:func:`~mosaic_core.hookspecs.mosaic_child_setup`, so one plugin's failing setup costs only
that plugin (its failure is reported to the host and listed in the run's manifest).

Patch points:
- ``gymnasium.make``: plugins add kwargs (:func:`~mosaic_core.hookspecs.mosaic_env_make_kwargs`)
  and wrap the new env (:func:`~mosaic_core.hookspecs.mosaic_wrap_env`);
- ``SummaryWriter.add_scalar`` of ``torch.utils.tensorboard`` and ``tensorboardX``:
  reported through :func:`~mosaic_core.hookspecs.mosaic_on_scalar` (as is
  :func:`mosaic_core.child.report_scalar`, for programs without a SummaryWriter).
"""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import multiprocessing
import os
import re
import signal
import sys
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mosaic_core.childenv import CHILD_VAR, FAILURE_KIND, child_from_environ
from mosaic_core.types import ChildContext, HookFailure

if TYPE_CHECKING:
    from mosaic_core.plugins import PluginHost

_WRITER_MODULES = ("torch.utils.tensorboard.writer", "tensorboardX.writer")
_TRIGGERS = ("gymnasium", *_WRITER_MODULES)

_state: dict[str, Any] = {}


def current() -> ChildContext | None:
    """The context of this training process, or None when not run by a MOSAIC host."""
    return _state.get("child")


def plugins() -> PluginHost | None:
    """The plugin host of this training process (None before :func:`install`)."""
    return _state.get("host")


def ready() -> tuple[ChildContext, PluginHost] | None:
    """The run's context and plugin host, installing them on first use in a process of the run;
    None outside a MOSAIC run (or when installing failed once)."""
    child = current()
    if child is None and "failed" not in _state and os.environ.get(CHILD_VAR):
        try:
            child = install()
        except Exception as exc:  # never stop training over the side channel
            _state["failed"] = True
            print(f"mosaic: could not install patch points: {type(exc).__name__}: {exc}", file=sys.stderr)
    host = plugins()
    return (child, host) if child is not None and host is not None else None


def install(host: PluginHost | None = None) -> ChildContext | None:
    """Install the patch points in this process once, then run every plugin's
    ``mosaic_child_setup``; returns the context (None when not run by a host)."""
    if "child" in _state:
        installed: ChildContext | None = _state["child"]
        return installed
    child = child_from_environ()
    if child is None:
        return None
    if host is None:
        from mosaic_core.plugins import listed_plugin_host, load_plugin_host

        # The plugins the host selected for this run; a scan of installed metadata otherwise.
        host = listed_plugin_host(child.plugins) if child.plugins is not None else load_plugin_host()
    host.where = "training process"
    host.on_failure = lambda failure: _report_failure(child, failure)
    _state.update(child=child, host=host, make_calls=0)
    after_import("gymnasium", lambda _module: _patch_gym_make(child, host))
    after_import(_WRITER_MODULES, lambda module: _patch_writer_module(module, child, host))
    host.child_setup(child)
    if child.host_pid and os.getppid() == child.host_pid:  # the training process itself
        from mosaic_core.hostwatch import watch_host

        watch_host(child, host)
    return child


def install_lazily() -> None:
    """Install on the first import of ``gymnasium`` or a TensorBoard writer in this process
    (what ``mosaic_core/_boot/sitecustomize.py`` calls); nothing is imported until then."""
    if "child" in _state or "lazy" in _state:
        return
    _state["lazy"] = True

    def trigger(_module: Any) -> None:
        try:
            install()
        except Exception as exc:  # never stop a process of the run from importing
            print(f"mosaic: could not install patch points: {type(exc).__name__}: {exc}", file=sys.stderr)

    after_import(_TRIGGERS, trigger, once=True)


def _report_failure(child: ChildContext, failure: HookFailure) -> None:
    print(f"mosaic: warning: {failure.describe()}; its contribution is dropped", file=sys.stderr)
    child.publish(FAILURE_KIND, {"plugin": failure.plugin, "hook": failure.hook, "error": failure.error}, reliable=True)


def env_index_hint() -> int | None:
    """This env's index in its vector env, when it can be known.

    In an ``AsyncVectorEnv`` env process the process name ends with the index
    (``Worker<AsyncVectorEnv>-3``); in one process, ``gym.make`` calls are counted in order
    (``SyncVectorEnv`` makes its envs in index order).
    """
    name = multiprocessing.current_process().name
    match = re.search(r"Worker<\w+>-(\d+)$", name)
    if match:
        return int(match.group(1))
    return None


def restart_env_indices() -> None:
    """Count ``gym.make`` calls from 0 again: for a program that closes its envs and makes a
    fresh set (policy evaluation, batch after batch), so the first env of each set is env 0 to
    plugins (FastLane's single mode publishes env 0). A no-op outside a MOSAIC run."""
    if "make_calls" in _state:
        _state["make_calls"] = 0


def _patch_gym_make(child: ChildContext, host: PluginHost) -> None:
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
    # a wrapper that forwards what it gets: gymnasium's own signature is the one callers see
    gymnasium.make = make  # type: ignore[assignment]
    import gymnasium.envs.registration as registration

    registration.make = make  # type: ignore[assignment]


def after_import(module_names: tuple[str, ...] | str, callback: Callable[[Any], None], once: bool = False) -> None:
    """Call ``callback(module)`` once each named module is imported in this process
    (with ``once=True``: only for the first of them).

    Modules already imported are handled now; the others through an import hook, so
    nothing heavy is imported here. Plugins use it to patch libraries the script imports
    (e.g. ``wandb.init``, ``SummaryWriter``).
    """
    names = (module_names,) if isinstance(module_names, str) else tuple(module_names)
    pending = []
    for name in names:
        if name in sys.modules:
            callback(sys.modules[name])
            if once:
                return
        else:
            pending.append(name)
    if pending:
        sys.meta_path.insert(0, _AfterImport(frozenset(pending), callback, once))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of the named modules to run a callback."""

    def __init__(self, names: frozenset[str], callback: Callable[[Any], None], once: bool = False):
        self._names, self._callback, self._once = names, callback, once

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self._names:
            return None
        if self._once:  # one shot: from now on this finder matches nothing
            self._names = frozenset()
        finders = sys.meta_path
        later = finders[finders.index(self) + 1 :] if self in finders else finders
        for finder in later:  # only the finders after this one: several hooks chain, never loop
            if not hasattr(finder, "find_spec"):
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


def _writer_dir(writer: Any) -> str | None:
    """A SummaryWriter's directory: ``log_dir`` (torch) or ``logdir`` (tensorboardX)."""
    directory = getattr(writer, "log_dir", None) or getattr(writer, "logdir", None)
    return str(directory) if isinstance(directory, (str, os.PathLike)) else None


_writers: weakref.WeakSet[Any] = weakref.WeakSet()
# Held by each add_scalar under way; set once the process is ending (the writers closing), after which
# add_scalar writes nothing.
_writing = threading.RLock()
_stopping = threading.Event()


def _closed_at_exit(writer: Any) -> None:
    """Have ``writer``'s pending events written when the process ends, a stopped run's too (a
    writer flushes only every ten events or two minutes: a run stopped early kept none)."""
    if writer in _writers:
        return
    if not _writers:
        from mosaic_core.contract import at_stop_exit

        atexit.register(_close_writers)
        at_stop_exit(_close_writers)
        _close_on_sigterm()
    _writers.add(writer)


def _close_writers() -> None:
    """Close each writer, as a script's own ``writer.close()`` at its end would: closing writes what a
    writer holds. A flush does not, in tensorboardX: it writes only what the writer's thread has taken
    from its queue, and on a busy machine the last scalars are still in it. The process is ending:
    from now on add_scalar writes nothing."""
    _stopping.set()
    if not _writing.acquire(timeout=5):  # an add_scalar that never returns: the writers stay as they are
        return
    try:
        for writer in list(_writers):
            try:
                writer.close()
            except Exception:  # a broken writer: the others still close
                pass
    finally:
        _writing.release()


def _close_on_sigterm() -> None:
    """A program that leaves SIGTERM (the host's stop) to the default, as CleanRL's scripts do,
    would die with its writers' events unwritten: close them first, then end as signalled. A
    program's own handler, set before or after, is left alone."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, functools.partial(_on_sigterm, os.getpid()))


def _on_sigterm(pid: int, signum: int, _frame: Any) -> None:
    signal.signal(signum, signal.SIG_DFL)
    if os.getpid() != pid:  # a forked env process: its copies of the writers have no thread
        os.kill(os.getpid(), signum)
        return
    _stopping.set()
    # The closing waits in a thread: where the signal came, this thread may be in an add_scalar.
    threading.Thread(target=_close_then_end, args=(signum,), name="mosaic-close-writers", daemon=True).start()


def _close_then_end(signum: int) -> None:
    try:
        _close_writers()  # once the add_scalar under way, if any, has returned
    finally:  # whatever the closing met, the stop ends the process
        os.kill(os.getpid(), signum)


def _patch_writer_module(module: Any, child: ChildContext, host: PluginHost) -> None:
    writer = getattr(module, "SummaryWriter", None)
    if writer is None or getattr(writer.add_scalar, "__mosaic_patched__", False):
        return
    original = writer.add_scalar
    on_scalar = host.on_scalar

    def add_scalar(self: Any, tag: str, scalar_value: Any, global_step: Any = None, *args: Any, **kwargs: Any) -> Any:
        try:
            value = float(scalar_value)
        except (TypeError, ValueError):
            value = None
        if _stopping.is_set():  # the process is ending: its writers are closing
            return None
        _closed_at_exit(self)
        with _writing:
            written = original(self, tag, scalar_value, global_step, *args, **kwargs)
        if value is not None:  # reported once written: a stop that follows it finds it in the file
            step = None if global_step is None else int(global_step)
            on_scalar(child, tag, value, step, None, _writer_dir(self))
        return written

    add_scalar.__mosaic_patched__ = True  # type: ignore[attr-defined]
    add_scalar.__wrapped__ = original  # type: ignore[attr-defined]
    writer.add_scalar = add_scalar
