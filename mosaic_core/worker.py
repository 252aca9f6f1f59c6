"""The worker interface: the few typed questions the host asks a worker.

The host owns a run from flags to terminal event (:mod:`mosaic_core.pipeline`); a worker
only says what to launch and declares what it owns. Subclass :class:`Worker` (the one model:
the host calls its methods, and the base class answers every one but :meth:`plan`) and name
it in your :class:`~mosaic_core.capabilities.WorkerMetadata`, the descriptor your plugin's
``mosaic_workers`` hook returns::

    class RandomWorker(Worker):
        def plan(self, config, run):
            return Launch(command=[run.python, "-m", "my_pkg.loop", "--env-id", config.env_id])

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
    from mosaic_core.contract import Checkpoint, CheckpointLayout
    from mosaic_core.entrypoints import LoadedEntryPoint
    from mosaic_core.runs import RunContext
    from mosaic_core.types import ChildEvent, CodePath, ExtrasKey, Launch, WorkerForm


class Worker:
    """Base class of every worker; every method but :meth:`plan` has a default.

    ``accepts_extra_argv``: when true, command-line arguments after the host's and the
    worker's own flags are not an error; they reach :meth:`plan` as ``run.options["extra_argv"]``
    (the CleanRL worker passes them to the script, checked against its ``Args``).

    ``modes``: the modes this worker adds to the run contract's (:data:`mosaic_core.contract.MODES`),
    e.g. the CleanRL worker's ``interactive``. The contract's standard extras keys are checked by the
    host (:func:`mosaic_core.contract.standard_key_problems`) and turned into the training program's
    flags by :func:`mosaic_core.contract.host_flags`: a worker checks only its own keys.
    """

    accepts_extra_argv = False
    modes: tuple[str, ...] = ()

    def add_arguments(self, parser: argparse._ArgumentGroup) -> None:
        """Add the worker's own flags to ``mosaic run --worker NAME`` (``parser`` is the host's
        argument group for them, what ``add_argument_group`` returns). Their parsed values
        reach :meth:`config_defaults`, :meth:`validate` and :meth:`plan` as ``options``
        (``run.options`` in ``plan``), keyed by ``dest``."""

    def extras_keys(self) -> list[ExtrasKey]:
        """The ``extras`` keys this worker reads itself (:class:`mosaic_core.types.ExtrasKey`).
        They and the plugins' keys are kept out of ``run.worker_extras`` (the keys nobody
        claims, which e.g. the CleanRL worker turns into script flags); a key claimed by the
        worker and by a plugin is an error naming both."""
        return []

    def child_events(self) -> list[ChildEvent]:
        """The lifecycle events this worker's training process emits through
        :func:`mosaic_core.child.emit_event` (:class:`mosaic_core.types.ChildEvent`), besides
        the host's own (``note``, ``checkpoint_saved``). An undeclared one is dropped with one
        warning per run naming it and the worker."""
        return []

    def code_paths(self, data: dict[str, Any]) -> list[CodePath]:
        """The config values naming code this run would execute from a path
        (:class:`mosaic_core.types.CodePath`, e.g. a script given as ``algo``). ``data`` is the
        config as a mapping (``algo``, ``env_id``, ``extras``…), given before the defaults are
        computed and again after. Called before anything looks at those files; a daemon refuses
        a path outside its ``--allow-scripts``. A path the plan resolves later goes into
        ``Launch.code_paths``."""
        return []

    def honoured_settings(self) -> tuple[type, ...]:
        """The setting types plugins publish (``mosaic_run_settings``, e.g.
        :class:`mosaic_core.types.TrackingSettings`) that this worker turns into its own flags
        or calls (read them in :meth:`plan` with ``run.setting(Type)``). A run that asks for
        one not listed here is refused in one line naming the setting and this worker."""
        return ()

    def checkpoint_layout(self, config: WorkerConfig) -> CheckpointLayout | None:
        """How this worker's checkpoints look in a run directory of ``config``
        (:class:`mosaic_core.contract.CheckpointLayout`: a file or directory pattern with one
        ``{step}``, the format, whether loading it runs code). The host finds the newest one to
        resume from or evaluate with it; None (the default): runs of this worker cannot be
        resumed or evaluated by the host."""
        return None

    def check_checkpoint(self, checkpoint: Checkpoint, config: WorkerConfig) -> str | None:
        """A problem with ``checkpoint`` for resuming or evaluating a run of ``config`` (truncated,
        corrupt, of a newer format, of another algorithm or env), as one sentence; None when it
        looks usable. Cheap, and running no code from the file: the host asks before it touches
        the run directory. The default: None (the training program checks it when it loads)."""
        return None

    def policy_server(
        self, checkpoint: Checkpoint, config: WorkerConfig, *, agent: str, python: str
    ) -> list[str] | None:
        """The command that serves ``checkpoint``'s policy (a run of ``config``) from a process of its
        own, for an arena's seat (``mosaic match --seat NAME=run:RUN_ID``): the seat of ``agent`` (a
        multi-agent run serves the policy it maps to that agent id), run by ``python`` (the
        interpreter of the worker's environment, as ``run.python`` in :meth:`plan`). The process
        prints one JSON line ``{"type": "ready", "observation_space": ..., "action_space": ...}``,
        then answers each ``{"cmd": "act", "observation": [...]}`` on its stdin with
        ``{"type": "act", "action": ...}`` (or ``{"type": "error", "message": ...}``) and ends at
        ``{"cmd": "stop"}`` or end of input. The observation comes flattened to one float32 list (a
        turn-based game's board, then its action mask: 1 = legal), the ready line's
        ``observation_space`` a Box of that length. Loads data only, the way evaluation does; a
        :class:`~mosaic_core.errors.UsageError` says why this checkpoint cannot take that seat.
        None (the default): its runs cannot take a seat."""
        return None

    def describe_options(self, algo: str | None) -> WorkerForm:
        """What a submit form (the dashboard's) offers for ``algo`` (None: the worker's
        default): the algorithm names it knows and their options
        (:class:`mosaic_core.types.WorkerForm`). The default: no options beyond the config's
        own fields. Raise :class:`mosaic_core.errors.MosaicError` for an unknown ``algo``."""
        from mosaic_core.types import WorkerForm

        return WorkerForm(algo=algo)

    def config_defaults(self, data: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        """Values for config fields the user left out (``data`` is the merged raw config),
        e.g. a mode that needs no algorithm; an ``"extras"`` object fills extras keys the user
        left out (e.g. a worker flag recorded in the config). Plugins' defaults come after."""
        return {}

    def validate(self, config: WorkerConfig, options: dict[str, Any]) -> list[str]:
        """Problems with ``config`` for this worker, each a sentence naming the field (the standard
        keys' are the host's, checked before)."""
        return []

    def gpu_request(self, config: WorkerConfig) -> str | None:
        """The config field that asks for a GPU (e.g. ``"extras.cuda"``), or None. A daemon on a
        host without one refuses such a run (a worker whose capabilities say ``requires_gpu``
        is refused there whatever the config)."""
        return None

    def algorithm_of_module(self, module: str) -> str | None:
        """The algorithm a trainer payload's ``metadata.worker.module`` names when it is one of this
        worker's algorithm modules (MOSAIC's GUI sent ``cleanrl.ppo`` for ``ppo``), or None. The
        host then holds ``config.algo`` to it; the worker's CLI module (``<package>.cli``) is the
        host's to recognise. The default: None (the worker names its algorithms by name only)."""
        return None

    def algorithm_names(self, data: dict[str, Any]) -> list[str] | None:
        """The algorithm names this worker runs, spelt as it spells them, for a run whose config
        (a mapping, before defaults) is ``data``: cheap to answer (no subprocess, nothing heavy
        imported). The host holds ``algo`` to them by one rule (:mod:`mosaic_core.algonames`:
        as spelt, else in any case when that names one, else refused with "did you mean") and
        gives the worker its own spelling; a run that names no worker is sent by them
        (:mod:`mosaic_core.choice`). A path given as ``algo`` (declared in :meth:`code_paths`)
        is not a name. None (the default): the worker checks ``algo`` itself."""
        return None

    def algorithms(self, python: str) -> list[dict[str, Any]]:
        """What ``mosaic algos --worker NAME`` lists: one object per algorithm with ``algo``,
        ``description`` and, optionally, ``envs`` (the env ids it has settings for). ``python``
        is the interpreter of the worker's environment (ask it what only that environment knows)."""
        return []

    def algos_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add this worker's own flags to ``mosaic algos`` (with :meth:`algos_view`); none by default."""

    def algos_view(self, ns: argparse.Namespace, python: str) -> int | None:
        """Draw ``mosaic algos [VIEW [ALGO]] --worker NAME`` this worker's own way (``ns.view``,
        ``ns.algo``, ``ns.json`` and the flags of :meth:`algos_arguments`) and return the exit
        code; None (the default): the host prints :meth:`algorithms` and knows no other view.
        Without ``--worker``, ``mosaic algos`` is the view of the one installed worker that has one."""
        return None

    def enjoy_extras(self, *, video_format: str | None, live: bool) -> dict[str, Any] | None:
        """The extras that make this worker's ``evaluate`` mode record the first episode as
        ``video_format`` (``"mp4"`` or ``"gif"``, into the evaluation's directory) and, with
        ``live``, stream its frames through FastLane at the env's pace (``mosaic enjoy``,
        ``mosaic evaluate --video``). None (the default): it can do neither."""
        return None if video_format or live else {}

    def plan(self, config: WorkerConfig, run: RunContext) -> Launch:
        """How to start the training process (called for dry runs too: start nothing here).

        ``run`` carries the run id, the run directory (not created yet), ``run.options`` (the
        worker's own flags), ``run.python`` (the interpreter of the worker's environment),
        ``run.settings`` (typed settings plugins published: ``run.setting(TrackingSettings)``),
        ``run.plugin_args`` (argv items plugins contribute: place them on the training
        program's command line if it understands them) and ``run.worker_extras`` (the extras
        nobody claims: this worker's to interpret). Raise
        :class:`mosaic_core.errors.ConfigError` for a config this worker cannot run."""
        raise NotImplementedError


def describe(item: LoadedEntryPoint) -> str:
    return f"worker {item.name!r} ({item.distribution} {item.version})"


def load_worker(item: LoadedEntryPoint) -> Worker:
    """The :class:`Worker` named by an active worker item's metadata (:func:`mosaic_core.workers.discover_workers`).

    A wrong target, or one that is not a :class:`Worker`, is a :class:`UsageError` naming the
    worker and its distribution (exit 2)."""
    metadata = item.obj
    module_name, _, attr = metadata.worker.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
        worker = target() if isinstance(target, type) else target
    except Exception as exc:
        raise UsageError(f"{describe(item)}: cannot load {metadata.worker}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(worker, Worker):
        raise UsageError(
            f"{describe(item)}: {metadata.worker} is a {type(worker).__name__}, not a "
            "mosaic_core.worker.Worker subclass"
        )
    return worker


def declared(item: LoadedEntryPoint, what: str, values: Any, kind: type) -> list[Any]:
    """A worker's declaration (``child_events()``, ``code_paths()``…) checked: a list of
    ``kind``; anything else is one line naming the worker and its distribution (exit 2)."""
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, kind) for v in values):
        raise UsageError(
            f"{describe(item)}: {what} must return a list of mosaic_core.types.{kind.__name__}, got {values!r:.120}"
        )
    return list(values)


def declare(item: LoadedEntryPoint, what: str, call: Any, kind: type) -> list[Any]:
    """Call a worker's declaring method; a raise (e.g. a descriptor rejecting a bad name) is
    one line naming the worker and its distribution (exit 2)."""
    try:
        values = call()
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"{describe(item)}: {what} failed: {type(exc).__name__}: {exc}") from exc
    return declared(item, what, values, kind)


def declared_names(item: LoadedEntryPoint, worker: Worker, data: dict[str, Any]) -> list[str] | None:
    """The worker's ``algorithm_names(data)``, checked: a list of strings, or None."""
    try:
        names = worker.algorithm_names(data)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"{describe(item)}: algorithm_names(data) failed: {type(exc).__name__}: {exc}") from exc
    if names is not None and (not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names)):
        raise UsageError(
            f"{describe(item)}: algorithm_names(data) must return a list of strings or None, got {names!r:.120}"
        )
    return None if names is None else list(names)
