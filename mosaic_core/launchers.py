"""Where a prepared run executes: the launcher seam (as Hydra's launchers, one per place).

``mosaic run`` prepares a run here (config, validation, the worker's plan, the run directory)
and then hands it to a launcher, which executes it and returns the exit code, having emitted
every lifecycle event of the run (exactly one terminal event) through ``job.run.emit``.

- ``local`` (built in, the default): the :class:`~mosaic_core.supervisor.Supervisor` runs the
  training process as a subprocess of this host.
- Others come from plugins: a plugin's ``mosaic_launchers`` hook returns one :class:`Launcher`
  each (a subclass: its name, options and methods, their signatures checked when discovered).
  Its module imports nothing heavy; a method imports its cluster client when a run uses it.
  (The ``mosaic.launchers`` entry-point group, a function returning a Launcher per entry point,
  is still read, with a deprecation notice.)

A launcher is chosen by name (``--launcher NAME``, default ``local``, or ``$MOSAIC_LAUNCHER``);
an option that ``selects`` (``--ray-address``) is a shorthand for its launcher. A launcher
declares its options (:class:`LauncherOption`); each is a flag of ``mosaic run``, ``mosaic sweep
run`` and ``mosaic daemon`` and an environment variable that gives its default. The choice and
its settings are one typed value, :class:`LauncherChoice`, passed explicitly: the sweep and the
daemon put ``choice.argv()`` on the command line of every ``mosaic run`` they spawn (nothing is
written into ``os.environ``).

What a launcher provides (:class:`Launcher`): ``execute(job) -> exit code``, the run where it
belongs (a run followed elsewhere builds on :class:`mosaic_core.caller.RemoteCaller`, which owns
the signals, the cancel, the relay of its events and the one terminal event); optionally
``validate(settings, num_cpus) -> [problem]`` before anything is prepared (each problem one line
of the refusal, exit 2), ``capacity(settings) -> (runs, why)`` (``mosaic sweep run`` without
``--parallel`` runs that many trials at a time), ``start_early(settings, num_cpus)`` (slow work
that needs no prepared run, begun meanwhile: ``job.early``, closed after) and
``launch_many(settings, batch)`` (a sweep's trials as one submission: Slurm's job array). On a
node, ``python -I -m mosaic_core.node RUN_DIR`` supervises the prepared run from its
``launch.json``; ``job.rerun_argv`` is the ``mosaic run`` command line that repeats the run
anywhere this distribution is installed (a requeued Slurm job runs it: resume is the same command).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic_core.entrypoints import LoadedEntryPoint, load_group
from mosaic_core.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from mosaic_core.plugins import PluginHost
    from mosaic_core.runs import RunContext
    from mosaic_core.supervisor import SupervisorOptions

__all__ = [
    "Batch",
    "COMMON_OPTIONS",
    "Job",
    "LAUNCHER_ENV",
    "LEGACY_GROUP",
    "LOCAL",
    "Launcher",
    "LauncherChoice",
    "LauncherOption",
    "active",
    "add_arguments",
    "can_launch_many",
    "capacity",
    "check",
    "choose",
    "discover",
    "launch_many",
    "run_job",
    "select",
    "settings_of",
    "start_early",
    "strip_options",
]

LEGACY_GROUP = "mosaic.launchers"  # deprecated: a plugin's mosaic_launchers hook instead
LOCAL = "local"
LAUNCHER_ENV = "MOSAIC_LAUNCHER"
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
    run_only: bool = (
        False  # for `mosaic run` only (--detach): the sweep and the daemon, which follow their runs, refuse it
    )

    def __post_init__(self) -> None:
        if not _FLAG.fullmatch(self.flag):
            raise ValueError(f"launcher option flag {self.flag!r} must look like --lower-case-words")
        if not _ENV.fullmatch(self.env):
            raise ValueError(f"launcher option {self.flag}: environment variable {self.env!r} must be UPPER_CASE")

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")


class Launcher:
    """Where prepared runs execute besides here: subclass it, give ``name``, ``description`` and
    ``options``, and override ``execute``; the rest is optional (the base's says "nothing").
    A plugin's ``mosaic_launchers`` hook returns an instance; its module imports nothing heavy
    (a method imports its cluster client when a run uses it). Checked when discovered
    (:func:`check`): a method whose signature takes other arguments than the base's marks the
    launcher failed, one line naming its plugin. A launcher that follows its run elsewhere
    builds on :class:`mosaic_core.caller.RemoteCaller` (signals, cancel, relay, the one end)."""

    name: str = ""
    description: str = ""
    options: tuple[LauncherOption, ...] = ()

    def execute(self, job: Job) -> int:
        """Run ``job`` where this launcher runs runs, until it ended; its exit code (every
        lifecycle event emitted, exactly one terminal event)."""
        raise NotImplementedError

    def validate(self, settings: dict[str, Any], num_cpus: int | None) -> list[str]:
        """What is wrong with ``settings`` (one line each), before anything is prepared."""
        return []

    def capacity(self, settings: dict[str, Any]) -> tuple[int, str] | None:
        """How many runs this launcher's place takes at a time and why (None: it does not say)."""
        return None

    def start_early(self, settings: dict[str, Any], num_cpus: int | None) -> Any:
        """What takes time and needs no prepared run, begun while the run is prepared: the
        handle reaches ``execute`` as ``job.early``; its ``close()`` (idempotent) follows."""
        return None

    def launch_many(self, settings: dict[str, Any], batch: Batch) -> int:
        """Run ``batch`` as one submission until every command ended; the worst exit code."""
        raise NotImplementedError

    def selected(self, settings: dict[str, Any]) -> bool:
        return any(option.selects and settings.get(option.dest) not in (None, False, "") for option in self.options)

    @property
    def runs_batches(self) -> bool:
        return type(self).launch_many is not Launcher.launch_many


_CHECKED = ("execute", "validate", "capacity", "start_early", "launch_many")


def check(launcher: Launcher) -> None:
    """A ValueError naming what is wrong with ``launcher`` (its name, an option, a method that
    takes other arguments than the base's); nothing when it is sound."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", launcher.name or "") or launcher.name == LOCAL:
        raise ValueError(f"launcher name {launcher.name!r} must be lower-case letters, digits, - or _ (not 'local')")
    if type(launcher).execute is Launcher.execute:
        raise ValueError(f"launcher {launcher.name!r} has no execute(job)")
    if not isinstance(launcher.options, tuple) or not all(isinstance(o, LauncherOption) for o in launcher.options):
        raise ValueError(f"launcher {launcher.name!r}: options must be a tuple of LauncherOption")
    for method in _CHECKED:
        expected = inspect.signature(getattr(Launcher, method))
        arguments = [p for p in expected.parameters.values() if p.name != "self"]
        try:
            actual = inspect.signature(getattr(launcher, method))
            actual.bind(*arguments)
        except (TypeError, ValueError):
            wanted = ", ".join(p.name for p in arguments)
            raise ValueError(
                f"launcher {launcher.name!r}: {method} must take ({wanted}), its signature is {method}{actual}"
            ) from None


@dataclass
class Job:
    """A prepared run handed to a launcher: its directory exists and holds ``config.json``."""

    run: RunContext
    host: PluginHost
    command: list[str]  # the training process (the worker's plan), for launchers that run it themselves
    env: dict[str, str]  # the launch's and plugins' env for that process (secrets included)
    cwd: Path | None
    options: SupervisorOptions
    settings: dict[str, Any]  # the chosen launcher's option values (and the common ones), by dest
    rerun_argv: list[str] = field(default_factory=list)  # `mosaic` arguments that repeat this run elsewhere
    num_cpus: int | None = None  # the run's --num-cpus (its thread budget), for launchers that place it
    early: Any = None  # what the launcher's start_early began for this run, else None
    launcher: LauncherChoice | None = None  # where it executes (None: here)

    def supervise_here(self) -> int:
        """The local launcher: the Supervisor runs the training process as our subprocess."""
        from mosaic_core.supervisor import Supervisor

        return Supervisor(self.run, self.host, list(self.command), self.env, self.options, cwd=self.cwd).execute()

    def continue_from_checkpoint(self) -> None:
        """For a launcher running the job again after losing it (its node died): the run goes on
        from the newest checkpoint its directory holds (the run contract, as ``mosaic resume``):
        ``run.resume`` is set, ``launch.json`` records the attempt, ``command`` and ``env`` become
        the worker's plan for it and plugins' variables for a resume (``mosaic_child_env``: W&B's
        run id). A UsageError says why it cannot (then the launcher starts over)."""
        from mosaic_core.resume import continue_in_place

        launch = continue_in_place(self.run)
        self.command = list(launch.command)
        self.env = {**self.env, **launch.env, **self.host.child_env(self.run)}


def _check_legacy(obj: Any) -> Launcher:
    if not callable(obj):
        raise TypeError(f"a {LEGACY_GROUP} entry point must name a function, got {type(obj).__name__}")
    launcher = obj()
    if not isinstance(launcher, Launcher):
        raise TypeError(f"{getattr(obj, '__qualname__', obj)}() returned {type(launcher).__name__}, expected Launcher")
    return launcher


def discover() -> list[LoadedEntryPoint]:
    """Every launcher the plugins provide (then the deprecated group's): ``obj`` is its
    :class:`Launcher` when active. One that :func:`check` refuses, or that declares a flag or
    variable another launcher declared, is marked failed, its error one line naming its plugin."""
    from mosaic_core.descriptors import collect
    from mosaic_core.plugins import plugin_host

    items = collect(plugin_host(), "mosaic_launchers", Launcher, lambda: load_group(LEGACY_GROUP, check=_check_legacy))
    owner: dict[str, str] = {}
    for item in items:
        if item.status != "active":
            continue
        problem = _problem(item.obj, item.name, owner)
        if problem is not None:
            item.status, item.error = "failed", f"{item.describe()}: {problem}"
            continue
        owner.update({key: item.name for o in item.obj.options for key in (o.flag, o.env)})
    return items


def _problem(launcher: Launcher, name: str, owner: dict[str, str]) -> str | None:
    if launcher.name != name:
        return f"entry point name {name!r} differs from the launcher's name {launcher.name!r}"
    try:
        check(launcher)
    except ValueError as exc:
        return str(exc)
    for key in [o.flag for o in launcher.options] + [o.env for o in launcher.options]:
        if key in owner:
            return f"{key} is declared by launcher {owner[key]!r} too"
    return None


def active() -> list[Launcher]:
    return [item.obj for item in discover() if item.status == "active"]


COMMON_OPTIONS = (
    LauncherOption("--num-gpus", "MOSAIC_NUM_GPUS", metavar="N", help="GPUs the run asks of its launcher (default 0)"),
)


_FORMER_ENV = {"MOSAIC_NUM_GPUS": "MOSAIC_RAY_NUM_GPUS"}  # read too: its name before --num-gpus was common


def _env_default(option: LauncherOption) -> str | None:
    former = _FORMER_ENV.get(option.env)
    return os.environ.get(option.env) or (os.environ.get(former) if former else None) or None


def add_arguments(parser: argparse.ArgumentParser, launchers: list[Launcher] | None = None) -> None:
    """``--launcher NAME`` and every launcher's options as flags (defaults from their variables)."""
    installed = active() if launchers is None else launchers
    names = ", ".join([LOCAL, *(launcher.name for launcher in installed)])
    where = parser.add_argument_group("where the run executes")
    where.add_argument(
        "--launcher",
        default=os.environ.get(LAUNCHER_ENV) or None,
        metavar="NAME",
        help=f"the launcher that executes the run: {names} (default local; ${LAUNCHER_ENV})",
    )
    _add_options(where, COMMON_OPTIONS)
    for launcher in installed:
        _add_options(parser.add_argument_group(f"{launcher.name} launcher", launcher.description), launcher.options)


def _add_options(group: Any, options: tuple[LauncherOption, ...]) -> None:
    for option in options:
        default = _env_default(option)
        if option.switch:
            group.add_argument(
                option.flag,
                dest=option.dest,
                action="store_true",
                default=default not in (None, "0", "false", "no"),
                help=f"{option.help} (${option.env})",
            )
        else:
            group.add_argument(
                option.flag,
                dest=option.dest,
                default=default,
                metavar=option.metavar,
                help=f"{option.help} (${option.env})",
            )


def settings_of(ns: argparse.Namespace, launchers: list[Launcher]) -> dict[str, Any]:
    options = [*COMMON_OPTIONS, *(o for launcher in launchers for o in launcher.options)]
    return {o.dest: getattr(ns, o.dest, None) for o in options}


@dataclass(frozen=True)
class LauncherChoice:
    """Where runs execute: a launcher (None: here) and its settings, by dest (its own options
    and the common ones). Passed explicitly to whatever starts runs."""

    name: str = LOCAL
    launcher: Launcher | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.launcher is None

    def argv(self) -> list[str]:
        """The flags that make a spawned ``mosaic run`` use this launcher with these settings."""
        if self.launcher is None:
            return ["--launcher", LOCAL]
        out = ["--launcher", self.name]
        for option in (*COMMON_OPTIONS, *self.launcher.options):
            value = self.settings.get(option.dest)
            if option.switch and value:
                out.append(option.flag)
            elif not option.switch and value not in (None, ""):
                out += [option.flag, str(value)]
        return out

    def problems(self, num_cpus: int | None = None) -> list[str]:
        """What the launcher finds wrong with its settings (each one line), before anything starts."""
        if self.launcher is None:
            return []
        try:
            return [str(problem) for problem in self.launcher.validate(dict(self.settings), num_cpus) or []]
        except UsageError as exc:
            return [str(exc)]
        except ImportError as exc:
            return [_missing(self.name, exc)]

    def check(self, num_cpus: int | None = None, command: str | None = None) -> None:
        """The launcher's problems as one UsageError; ``command`` (``mosaic sweep run``, ``mosaic
        daemon``: they follow their runs) refuses the options that are for ``mosaic run`` only."""
        problems = self.problems(num_cpus)
        if command is not None and self.launcher is not None:
            problems += [
                f"{o.flag} is for `mosaic run`, not `{command}` (it follows its runs)"
                for o in self.launcher.options
                if o.run_only and self.settings.get(o.dest) not in (None, False, "")
            ]
        if problems:
            raise UsageError("; ".join(problems))


def _missing(name: str, exc: ImportError) -> str:
    return f"launcher {name!r} cannot run: {exc} (is its extra installed?)"


def select(ns: argparse.Namespace, launchers: list[Launcher] | None = None) -> LauncherChoice:
    """The launcher ``ns`` chooses: ``--launcher NAME``, else the launcher one of whose
    ``selects`` options has a value (``--ray-address``: Ray), else local. An unknown or broken
    name, an empty selecting option, or options of another launcher given on the command line
    beside ``--launcher``: a UsageError naming them."""
    launchers = active() if launchers is None else launchers
    settings = settings_of(ns, launchers)
    by_name = {launcher.name: launcher for launcher in launchers}
    name = getattr(ns, "launcher", None)
    if name is not None and name != LOCAL and name not in by_name:
        _refuse_unknown(name, by_name)
    selecting = choose(settings, launchers)
    if name is None:
        chosen = selecting
    else:
        chosen = by_name.get(name)
        given = [
            option.flag
            for other in launchers
            if other is not chosen
            for option in other.options
            if _given_here(option, settings.get(option.dest))
        ]
        if given:
            raise UsageError(
                f"--launcher {name} was chosen but {', '.join(given)} (another launcher's) was given too: pick one"
            )
    if chosen is None:
        return LauncherChoice()
    own = {o.dest for o in (*COMMON_OPTIONS, *chosen.options)}
    return LauncherChoice(chosen.name, chosen, {k: v for k, v in settings.items() if k in own})


def _refuse_unknown(name: str, by_name: dict[str, Launcher]) -> None:
    broken = {item.name: item.error for item in discover() if item.status == "failed"}
    if name in broken:
        raise UsageError(f"--launcher {name!r} is broken: {broken[name]}")
    raise UsageError(f"--launcher {name!r}: no such launcher (installed: {', '.join([LOCAL, *by_name])})")


def _given_here(option: LauncherOption, value: Any) -> bool:
    """A value given on the command line (not the default its variable gives)."""
    if value in (None, False, ""):
        return False
    default = _env_default(option)
    return (value is not True and value != default) or (value is True and default in (None, "0", "false", "no"))


def choose(settings: dict[str, Any], launchers: list[Launcher]) -> Launcher | None:
    """The launcher a selecting option chooses (``--ray-address``), or None. Two selected, or an
    option that selects given an empty value (``--ray-address ""``: never a silent local run):
    a UsageError."""
    for launcher in launchers:
        for option in launcher.options:
            value = settings.get(option.dest)
            if option.selects and isinstance(value, str) and not value.strip():
                raise UsageError(f"{option.flag} is empty: give a value, or leave the option out to run here")
    chosen = [launcher for launcher in launchers if launcher.selected(settings)]
    if len(chosen) > 1:
        raise UsageError(f"options of launchers {', '.join(repr(i.name) for i in chosen)} were given: pick one")
    return chosen[0] if chosen else None


@contextlib.contextmanager
def _extra_needed(name: str) -> Iterator[None]:
    """A launcher's method that imports what its extra installs: missing, one line (exit 2)."""
    try:
        yield
    except ImportError as exc:
        raise UsageError(_missing(name, exc)) from exc


def run_job(job: Job) -> int:
    """Execute ``job`` where its launcher says: the chosen launcher's ``execute``, or here."""
    if job.launcher is None or job.launcher.launcher is None:
        return job.supervise_here()
    with _extra_needed(job.launcher.name):
        return job.launcher.launcher.execute(job)


def start_early(choice: LauncherChoice, num_cpus: int | None) -> Any:
    """What the chosen launcher begins before the run is prepared (None: nothing, or local)."""
    if choice.launcher is None:
        return None
    with _extra_needed(choice.name):
        return choice.launcher.start_early(dict(choice.settings), num_cpus)


@dataclass(frozen=True)
class Batch:
    """Many ``mosaic`` command lines for one submission (a sweep's trials): a launcher with a
    ``launch_many`` runs them as one unit (Slurm: one job array), at most ``limit`` at a time
    (None: the launcher's setting, else all), each with ``num_cpus`` CPUs; its own files
    (scripts, the jobs' stdout, stderr and exit codes) go into ``folder``: a new folder only we
    can write, inside the checked runs root (:func:`mosaic_core.runs.job_folder` makes it)."""

    commands: tuple[tuple[str, ...], ...]
    folder: Path
    name: str
    limit: int | None = None
    num_cpus: int | None = None


def can_launch_many(choice: LauncherChoice) -> bool:
    return choice.launcher is not None and choice.launcher.runs_batches


def launch_many(choice: LauncherChoice, batch: Batch) -> int:
    """Run ``batch`` through the chosen launcher's ``launch_many`` until every command ended
    (a signal to this process cancels them all); the worst exit code (130: cancelled)."""
    if choice.launcher is None or not choice.launcher.runs_batches:
        raise UsageError(f"launcher {choice.name!r} cannot run a batch as one submission")
    with _extra_needed(choice.name):
        return int(choice.launcher.launch_many(dict(choice.settings), batch))


def capacity(choice: LauncherChoice) -> tuple[int, str] | None:
    """How many runs ``choice``'s launcher takes at a time and why (``runs >= 1``), or None:
    the local launcher, or one that does not say."""
    if choice.launcher is None:
        return None
    with _extra_needed(choice.name):
        fits = choice.launcher.capacity(dict(choice.settings))
    if fits is None:
        return None
    runs, why = fits
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
