"""The worker interface: the few typed questions the host asks a worker.

The host owns a run from flags to terminal event (:mod:`mosaic_core.pipeline`); a worker
only says what to launch. Subclass :class:`Worker` (or write any object with a ``plan``
method) and name it in your :class:`~mosaic_core.capabilities.WorkerMetadata`::

    class RandomWorker(Worker):
        def plan(self, config, run):
            return Launch(command=[sys.executable, "-m", "my_pkg.loop", "--env-id", config.env_id])

Everything else — config files, ``--extras``, validation by plugins, the run directory,
supervision, signals, heartbeats, FastLane, the metric bridge, the manifest, curriculum,
gRPC registration and daemon submission — comes from the host.
"""

from __future__ import annotations

import argparse
import importlib
from typing import TYPE_CHECKING, Any

from mosaic_core.errors import UsageError

if TYPE_CHECKING:
    from mosaic_core.config import WorkerConfig
    from mosaic_core.entrypoints import LoadedEntryPoint
    from mosaic_core.runs import RunContext
    from mosaic_core.types import ExtrasKey, Launch

REQUIRED = ("plan",)
OPTIONAL = ("add_arguments", "extras_keys", "config_defaults", "validate", "gpu_request", "algorithms")


class Worker:
    """Base class of a worker; every method but :meth:`plan` is optional.

    ``accepts_extra_argv``: when true, command-line arguments after the host's and the
    worker's own flags are not an error; they reach :meth:`plan` as ``run.options["extra_argv"]``
    (the CleanRL worker passes them to the script, checked against its ``Args``).
    """

    accepts_extra_argv = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the worker's own flags to ``mosaic run --worker NAME``. Their parsed values
        reach :meth:`config_defaults`, :meth:`validate` and :meth:`plan` as ``options``
        (``run.options`` in ``plan``), keyed by ``dest``."""

    def extras_keys(self) -> list[ExtrasKey]:
        """The ``extras`` keys this worker reads itself (:class:`mosaic_core.types.ExtrasKey`).
        They and the plugins' keys are kept out of ``run.worker_extras`` (the keys nobody
        claims, which e.g. the CleanRL worker turns into script flags); a key claimed by the
        worker and by a plugin is an error naming both."""
        return []

    def config_defaults(self, data: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        """Values for config fields the user left out (``data`` is the merged raw config),
        e.g. a mode that needs no algorithm; an ``"extras"`` object fills extras keys the user
        left out (e.g. a worker flag recorded in the config). Plugins' defaults come after."""
        return {}

    def validate(self, config: WorkerConfig, options: dict[str, Any]) -> list[str]:
        """Problems with ``config`` for this worker, each a sentence naming the field."""
        return []

    def gpu_request(self, config: WorkerConfig) -> str | None:
        """The config field that asks for a GPU (e.g. ``"extras.cuda"``), or None. A daemon on a
        host without one refuses such a run (a worker whose capabilities say ``requires_gpu``
        is refused there whatever the config)."""
        return None

    def algorithms(self, python: str) -> list[dict[str, Any]]:
        """What ``mosaic algos --worker NAME`` lists: one object per algorithm with ``algo``,
        ``description`` and, optionally, ``envs`` (the env ids it has settings for). ``python``
        is the interpreter of the worker's environment (ask it what only that environment knows)."""
        return []

    def plan(self, config: WorkerConfig, run: RunContext) -> Launch:
        """How to start the training process (called for dry runs too: start nothing here).

        ``run`` carries the run id, the run directory (not created yet), ``run.options`` (the
        worker's own flags), ``run.plugin_args`` (argv items plugins contribute: place them on
        the training program's command line if it understands them) and
        ``run.worker_extras`` (the extras nobody claims: this worker's to interpret).
        Raise :class:`mosaic_core.errors.ConfigError` for a config this worker cannot run."""
        raise NotImplementedError


def load_worker(item: LoadedEntryPoint) -> Any:
    """The worker object named by an active ``mosaic.workers`` entry point's metadata.

    A wrong target or a missing method is a :class:`UsageError` naming the worker and its
    distribution (exit 2)."""
    metadata = item.obj
    where = f"worker {metadata.name!r} ({item.distribution} {item.version})"
    module_name, _, attr = metadata.worker.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
        worker = target() if isinstance(target, type) else target
    except Exception as exc:
        raise UsageError(f"{where}: cannot load {metadata.worker}: {type(exc).__name__}: {exc}") from exc
    missing = [name for name in REQUIRED if not callable(getattr(worker, name, None))]
    if missing:
        raise UsageError(f"{where}: {metadata.worker} has no {', '.join(missing)}() method "
                         "(see mosaic_core.worker.Worker)")
    return worker


def call_optional(worker: Any, method: str, *args: Any, default: Any = None) -> Any:
    """Call one of the worker's optional methods, or return ``default`` when it has none."""
    function = getattr(worker, method, None)
    return default if function is None else function(*args)
