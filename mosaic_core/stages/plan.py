"""Stage 3, plan: the run directory (usable; a resumed run's decision), the run's context, the
worker's plan (:class:`~mosaic_core.types.Launch`, its code held to trust), and the training
process's environment. The result, :class:`Prepared`, is what a dry run shows and a real run
executes; nothing is written yet."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from mosaic_core import launchers
from mosaic_core.config import FIELDS, WorkerConfig, redact, redact_payload
from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.environments import preflight
from mosaic_core.errors import PluginError, UsageError
from mosaic_core.plugins import PluginHost
from mosaic_core.resume import Resume
from mosaic_core.runs import RunContext, RunDirectory
from mosaic_core.stages import trust
from mosaic_core.stages.resolve import Request
from mosaic_core.stages.validate import Validated
from mosaic_core.threads import ThreadBudget
from mosaic_core.threads import budget as thread_budget
from mosaic_core.types import Launch


@dataclass
class Prepared:
    """A validated, planned run: everything a dry run shows and a real run executes."""

    worker_item: LoadedEntryPoint
    run: RunContext
    launch: Launch
    env: dict[str, str]  # the launch's env plus the plugins' child env plus the thread budget's
    threads: ThreadBudget | None = None
    worker_argv: list[str] = field(default_factory=list)  # the worker's own flags from the command line
    launcher: launchers.LauncherChoice = field(default_factory=launchers.LauncherChoice)  # where it executes
    num_cpus: int | None = None  # --num-cpus: the CPUs the run may use (its thread budget; a launcher asks for them)
    restart: bool = False  # --restart of an existing run: its directory is cleared when it starts

    @property
    def config(self) -> WorkerConfig:
        return self.run.config

    def summary(self) -> dict[str, Any]:
        """What a dry run's ``--emit-summary`` prints: the worker's summary, then the host's
        fields, among them the config's own at the top level as MOSAIC printed them (``raw``
        shown redacted, its ``environment`` values masked)."""
        launch = self.launch
        config = self.config.to_dict()
        host = {
            **{name: config[name] for name in FIELDS},
            "raw": redact_payload(self.config.raw),
            "worker": self.run.worker,
            "config": config,
            "command": list(launch.command),
            "cwd": str(launch.cwd or self.run.run_dir),
            "env": redact(self.env),
            "num_envs": launch.num_envs,
            "plugin_args": self.run.plugin_args,
            "notes": list(launch.notes),
            "worker_extras": sorted(self.run.worker_extras),
            "python": self.run.python,
            "threads": self.threads.record() if self.threads else None,
        }
        return {**launch.summary, **host}


@dataclass(frozen=True)
class _Place:
    """Where the run is recorded, and how it continues an earlier attempt (``resume``)."""

    directory: RunDirectory
    config: WorkerConfig
    resume: Resume | None


def plan(request: Request, validated: Validated, host: PluginHost) -> Prepared:
    """The run's place, context and plan, and the environment its training process gets."""
    place = _place(request, validated.config)
    run = _run_context(request, validated, place, host)
    launch = _ask_worker(request.worker_item, request, run)
    if launch.code_paths:
        trust.check_code(list(launch.code_paths), request.check_code)
    plugin_env = host.child_env(run)
    clash = sorted(set(plugin_env) & set(launch.env))
    if clash:
        raise PluginError(
            f"environment variable(s) {', '.join(clash)} set by both worker {request.worker_item.name!r} "
            "and a plugin's mosaic_child_env"
        )
    threads = thread_budget(request.num_cpus)
    env = {**threads.environment(os.environ, launch.env), **launch.env, **plugin_env}
    return Prepared(request.worker_item, run, launch, env, threads, restart=request.existing == "restart")


def _place(request: Request, config: WorkerConfig) -> _Place:
    """The run directory, usable; an existing run continued decides how (:mod:`mosaic_core.resume`)."""
    directory = RunDirectory.for_run(request.runs_dir, config.run_id)
    directory.check_usable(existing_ok=request.existing is not None)
    if request.existing != "resume":
        return _Place(directory, config, None)
    from mosaic_core.resume import decide

    asked = request.overrides.get("total_timesteps")
    resume = decide(request.worker_item, request.worker, config, directory.path, asked)
    config = config.with_overrides(total_timesteps=resume.total_timesteps, extras=resume.extras())
    return _Place(directory, config, resume)


def _run_context(request: Request, validated: Validated, place: _Place, host: PluginHost) -> RunContext:
    item, worker = request.worker_item, request.worker
    python = preflight(item.obj, item.distribution).python  # a worker environment that is missing: said first
    return RunContext(
        config=place.config,
        directory=place.directory,
        worker=item.name,
        quiet=request.quiet,
        options=request.options,
        plugin_args=host.build_args(place.config),
        worker_extras=validated.worker_extras,
        dry_run=request.dry_run,
        python=python,
        settings=validated.settings,
        worker_events=validated.events,
        checkpoint_layout=worker.checkpoint_layout(place.config),
        resume=place.resume,
    )


def _ask_worker(item: LoadedEntryPoint, request: Request, run: RunContext) -> Launch:
    """The worker's plan of the run; a worker that fails or answers something else is named."""
    try:
        launch = request.worker.plan(run.config, run)
    except (UsageError, PluginError):
        raise
    except Exception as exc:
        raise UsageError(
            f"worker {item.name!r} ({item.distribution} {item.version}) failed to "
            f"plan the run: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(launch, Launch):
        raise UsageError(
            f"worker {item.name!r} ({item.distribution}) returned "
            f"{type(launch).__name__} from plan(); expected mosaic_core.types.Launch"
        )
    return launch
