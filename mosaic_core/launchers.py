"""Where a prepared run executes: the launcher seam (as Hydra's launchers, one per place).

``mosaic run`` prepares a run here (config, validation, the worker's plan, the run directory)
and then hands it to a launcher, which executes it and returns the exit code, having emitted
every lifecycle event of the run (exactly one terminal event) through ``job.run.emit``.

- ``local`` (built in, the default): the :class:`~mosaic_core.supervisor.Supervisor` runs the
  training process as a subprocess of this host.
- Others come from plugins through the ``mosaic.launchers`` entry-point group: each entry
  point names a function returning a :class:`LauncherInfo`. Discovery imports only that
  module; the launcher's ``execute`` (``"module:function"``) is imported when a run uses it,
  so a launcher's heavy dependency (Ray, a Kubernetes client) is never imported otherwise.

A launcher declares its options (:class:`LauncherOption`); each is a flag of ``mosaic run``,
``mosaic sweep run`` and ``mosaic daemon`` and an environment variable. A launcher runs a job
when one of its ``selects`` options has a value. The sweep and the daemon export the options
they were given into the environment of the ``mosaic run`` processes they spawn
(:func:`export_settings`), so their runs use the same launcher without knowing its name.

A new launcher (Slurm: ``srun`` with ``--slurm-partition``; Kubernetes: a Job per run) is one
small module: ``get_launcher_info()`` plus an ``execute(job)`` that runs the job where it
belongs, relays its events to ``job.run.emit`` and brings its run directory back to
``job.run.run_dir``; its ``run_started`` payload carries ``node`` (a short "where", shown by
``mosaic runs --target``). A launcher that knows how many runs its place takes at a time names a
``capacity(settings) -> (runs, why)`` function: ``mosaic sweep run`` without ``--workers`` runs
that many trials at a time and prints ``why``. A launcher whose start is slow and needs no prepared run
(joining a cluster, a process on a node) names a ``start_early(settings, num_cpus)``: ``mosaic run``
calls it before preparing the run (not for a dry run), so that work goes on meanwhile, and hands
what it returns to ``execute`` as ``job.early``; its ``close()`` follows the run, or a refused
preparation. ``job.rerun_argv`` is the ``mosaic run`` command line that repeats the
run anywhere this distribution is installed ("a normal supervised ``mosaic run`` there").
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from mosaic_core.entrypoints import LoadedEntryPoint, load_group
from mosaic_core.errors import PluginError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from mosaic_core.plugins import PluginHost
    from mosaic_core.runs import RunContext
    from mosaic_core.supervisor import SupervisorOptions

LAUNCHER_GROUP = "mosaic.launchers"
_FLAG = re.compile(r"--[a-z][a-z0-9-]*")
_ENV = re.compile(r"[A-Z][A-Z0-9_]*")


@dataclass(frozen=True)
class LauncherOption:
    """One setting of a launcher: a flag (``--ray-address``) and an environment variable
    (``MOSAIC_RAY_ADDRESS``) that gives its default. ``switch``: a flag without a value (the
    variable then reads ``1``). ``selects``: a value here means the launcher runs the job."""

    flag: str
    env: str
    help: str
    metavar: str | None = None
    switch: bool = False
    selects: bool = False

    def __post_init__(self) -> None:
        if not _FLAG.fullmatch(self.flag):
            raise ValueError(f"launcher option flag {self.flag!r} must look like --lower-case-words")
        if not _ENV.fullmatch(self.env):
            raise ValueError(f"launcher option {self.flag}: environment variable {self.env!r} must be UPPER_CASE")

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")


@dataclass(frozen=True)
class LauncherInfo:
    """What a ``mosaic.launchers`` entry point returns: a name, one line for ``--help``, its
    options and where its ``execute(job) -> int`` lives (``"module:function"``); optionally where
    its ``capacity(settings) -> (runs, why)`` lives: how many runs it takes at a time, and its
    ``start_early(settings, num_cpus) -> handle``: what takes time on its side and needs no
    prepared run (joining a cluster, a process on a node) begun while the run is prepared; the
    handle reaches ``execute`` as ``job.early`` and its ``close()`` (idempotent) is called after."""

    name: str
    description: str
    options: tuple[LauncherOption, ...]
    execute: str
    capacity: str | None = None
    start_early: str | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", self.name):
            raise ValueError(f"launcher name {self.name!r} must be lower-case letters, digits, - or _")
        if not any(option.selects for option in self.options):
            raise ValueError(f"launcher {self.name!r} has no option that selects it")
        for what, where in (("execute", self.execute), ("capacity", self.capacity), ("start_early", self.start_early)):
            if where is not None and ":" not in where:
                raise ValueError(f"launcher {self.name!r}: {what} must be 'module:function', got {where!r}")

    def selected(self, settings: dict[str, Any]) -> bool:
        return any(option.selects and settings.get(option.dest) not in (None, False, "") for option in self.options)

    def load(self, where: str) -> Callable[..., Any]:
        """The function at ``where`` (its execute or capacity); its module is imported now."""
        module, _, name = where.partition(":")
        try:
            return getattr(importlib.import_module(module), name)
        except ImportError as exc:
            raise UsageError(f"launcher {self.name!r} cannot run: {exc} (is its extra installed?)") from exc
        except Exception as exc:
            raise PluginError(f"launcher {self.name!r} failed to load ({where}): {type(exc).__name__}: {exc}") from exc

    def load_execute(self) -> Callable[["Job"], int]:
        return self.load(self.execute)


@dataclass
class Job:
    """A prepared run handed to a launcher: its directory exists and holds ``config.json``."""

    run: RunContext
    host: PluginHost
    command: list[str]  # the training process (the worker's plan), for launchers that run it themselves
    env: dict[str, str]  # the launch's and plugins' env for that process (secrets included)
    cwd: Path | None
    options: SupervisorOptions
    settings: dict[str, Any]  # every launcher option's value, by dest (``ray_address``…)
    rerun_argv: list[str] = field(default_factory=list)  # `mosaic` arguments that repeat this run elsewhere
    num_cpus: int | None = None  # the run's --num-cpus (its thread budget), for launchers that place it
    early: Any = None  # what the launcher's start_early began for this run, else None

    def supervise_here(self) -> int:
        """The local launcher: the Supervisor runs the training process as our subprocess."""
        from mosaic_core.supervisor import Supervisor

        return Supervisor(self.run, self.host, list(self.command), self.env, self.options, cwd=self.cwd).execute()


def _check_info(obj: Any) -> LauncherInfo:
    if not callable(obj):
        raise TypeError(f"a {LAUNCHER_GROUP} entry point must name a function, got {type(obj).__name__}")
    info = obj()
    if not isinstance(info, LauncherInfo):
        raise TypeError(f"{getattr(obj, '__qualname__', obj)}() returned {type(info).__name__}, expected LauncherInfo")
    return info


def discover() -> list[LoadedEntryPoint]:
    """Every launcher entry point (``obj`` is its LauncherInfo when active), sorted by name.
    Two launchers declaring one flag or variable: the second is marked failed, naming both."""
    items = load_group(LAUNCHER_GROUP, check=_check_info)
    owner: dict[str, str] = {}
    for item in items:
        if item.status != "active":
            continue
        if item.obj.name != item.name:
            item.status, item.error = "failed", f"entry point name {item.name!r} differs from the launcher's name {item.obj.name!r}"
            continue
        for key in [o.flag for o in item.obj.options] + [o.env for o in item.obj.options]:
            if key in owner:
                item.status, item.error = "failed", f"{key} is declared by launcher {owner[key]!r} too"
                break
        else:
            owner.update({key: item.name for o in item.obj.options for key in (o.flag, o.env)})
    return items


def active() -> list[LauncherInfo]:
    return [item.obj for item in discover() if item.status == "active"]


def add_arguments(parser: argparse.ArgumentParser, launchers: list[LauncherInfo] | None = None) -> None:
    """Every launcher's options as flags (defaults from their environment variables)."""
    for info in active() if launchers is None else launchers:
        group = parser.add_argument_group(f"{info.name} launcher", info.description)
        for option in info.options:
            default = os.environ.get(option.env) or None
            if option.switch:
                group.add_argument(option.flag, dest=option.dest, action="store_true",
                                   default=default not in (None, "0", "false", "no"),
                                   help=f"{option.help} (${option.env})")
            else:
                group.add_argument(option.flag, dest=option.dest, default=default, metavar=option.metavar,
                                   help=f"{option.help} (${option.env})")


def settings_of(ns: argparse.Namespace, launchers: list[LauncherInfo]) -> dict[str, Any]:
    return {o.dest: getattr(ns, o.dest, None) for info in launchers for o in info.options}


def choose(settings: dict[str, Any], launchers: list[LauncherInfo]) -> LauncherInfo | None:
    """The launcher these settings select, or None (local). Two selected, or an option that
    selects given an empty value (``--ray-address ""``: never a silent local run): a UsageError."""
    for info in launchers:
        for option in info.options:
            value = settings.get(option.dest)
            if option.selects and isinstance(value, str) and not value.strip():
                raise UsageError(f"{option.flag} is empty: give a value, or leave the option out to run here")
    chosen = [info for info in launchers if info.selected(settings)]
    if len(chosen) > 1:
        raise UsageError(f"options of launchers {', '.join(repr(i.name) for i in chosen)} were given: pick one")
    return chosen[0] if chosen else None


def export_settings(ns: argparse.Namespace, launchers: list[LauncherInfo] | None = None) -> LauncherInfo | None:
    """For the sweep and the daemon: put the launcher options given on their command line into
    ``os.environ``, which the ``mosaic run`` processes they spawn inherit. Returns the chosen
    launcher (None: local)."""
    launchers = active() if launchers is None else launchers
    settings = settings_of(ns, launchers)
    chosen = choose(settings, launchers)
    for info in launchers:
        for option in info.options:
            value = settings.get(option.dest)
            if value not in (None, False, ""):
                os.environ[option.env] = "1" if value is True else str(value)
    return chosen


def run_job(job: Job, launchers: list[LauncherInfo]) -> int:
    """Execute ``job`` where its settings say: the chosen launcher's ``execute``, or here."""
    chosen = choose(job.settings, launchers)
    if chosen is None:
        return job.supervise_here()
    return chosen.load_execute()(job)


def start_early(settings: dict[str, Any], launchers: list[LauncherInfo], num_cpus: int | None) -> Any:
    """What the chosen launcher begins before the run is prepared (None: nothing, or local)."""
    chosen = choose(settings, launchers)
    if chosen is None or chosen.start_early is None:
        return None
    return chosen.load(chosen.start_early)(settings, num_cpus)


def capacity(ns: argparse.Namespace, launchers: list[LauncherInfo] | None = None) -> tuple[int, str] | None:
    """How many runs the launcher chosen by ``ns`` takes at a time and why (``runs >= 1``), or
    None: the local launcher, or one that does not say."""
    launchers = active() if launchers is None else launchers
    settings = settings_of(ns, launchers)
    chosen = choose(settings, launchers)
    if chosen is None or chosen.capacity is None:
        return None
    runs, why = chosen.load(chosen.capacity)(settings)
    return max(1, int(runs)), str(why)


def strip_options(argv: list[str], parser: argparse.ArgumentParser, dests: set[str]) -> list[str]:
    """``argv`` without the options of ``parser`` whose dest is in ``dests`` (with their values,
    ``--flag value`` and ``--flag=value`` alike): what remains are the worker's own flags."""
    takes_value = {}
    for action in parser._actions:
        if action.dest in dests:
            for flag in action.option_strings:
                takes_value[flag] = action.nargs != 0
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
            continue
        name = token.split("=", 1)[0]
        if name in takes_value:
            skip = takes_value[name] and "=" not in token
            continue
        out.append(token)
    return out
