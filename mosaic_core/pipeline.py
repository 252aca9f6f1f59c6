"""The run pipeline, the same for every worker: ``mosaic run --worker NAME``, the worker's own
console scripts (``cleanrl-worker``) and the daemon's spawned runs all enter here. It calls the
stages (:mod:`mosaic_core.stages`) in order, each once:

    flags      argv -> host flags, the worker's own flags, the launcher chosen
    resolve    -> Request (config file, --from, an existing run) -> Resolved (config, defaults)
    validate   -> Validated (host, plugins, worker; every problem in one line)
    plan       -> Prepared (run directory, resume, worker.plan = Launch, child env)
    trust      (the code a run would execute: a daemon's policy, imported runs refused)
    [dry run: summary, stop]
    launch     run directory, config.json -> the launcher (the local Supervisor by default)
    follow     heartbeats, an optional gRPC session -> manifest -> one terminal event

Exit codes: 0 success, the training process's code on failure, 2 usage/config, 130 cancelled.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from mosaic_core import hostsignals, launchers, procs
from mosaic_core.cli.errors import run_cli_command
from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.jsontext import dumps
from mosaic_core.plugins import PluginHost, plugin_host
from mosaic_core.stages.flags import DEFAULT_GRPC_TARGET, HostOptions, host_parser, worker_option_defaults
from mosaic_core.stages.launch import execute
from mosaic_core.stages.plan import Prepared, plan
from mosaic_core.stages.resolve import Request, request_from_flags, resolve, resolve_config
from mosaic_core.stages.validate import validate
from mosaic_core.types import CodePath
from mosaic_core.worker import Worker, load_worker
from mosaic_core.workers import find_worker

__all__ = [
    "DEFAULT_GRPC_TARGET",
    "HostOptions",
    "Prepared",
    "execute",
    "host_parser",
    "main",
    "prepare",
    "prepare_from_flags",
    "resolve_config",
    "run_worker",
    "worker_option_defaults",
]


def prepare(
    worker_item: LoadedEntryPoint,
    worker: Worker,
    host: PluginHost,
    *,
    data: dict[str, Any] | None = None,
    raw: Any = None,
    source: str | None = None,
    overrides: dict[str, Any] | None = None,
    extras: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    runs_dir: str | None = None,
    quiet: bool = False,
    dry_run: bool = True,
    num_cpus: int | None = None,
    check_code: Callable[[list[CodePath]], None] | None = None,
    existing: str | None = None,
) -> Prepared:
    """Config, validation and the worker's plan: every decision of a run, nothing started.
    ``mosaic run`` and the daemon's SubmitRun both come through here (the fields:
    :class:`~mosaic_core.stages.resolve.Request`)."""
    request = Request(
        worker_item,
        worker,
        data=data,
        raw=raw,
        source=source,
        overrides=dict(overrides or {}),
        extras=extras,
        options=dict(options or {}),
        runs_dir=runs_dir,
        quiet=quiet,
        dry_run=dry_run,
        num_cpus=num_cpus,
        check_code=check_code,
        existing=existing,
    )
    return prepare_request(request, host)


def prepare_request(request: Request, host: PluginHost) -> Prepared:
    """The stages from a request to a prepared run: resolve, validate, plan (trust inside each)."""
    resolved = resolve(request, host)
    return plan(request, validate(request, resolved, host), host)


def prepare_from_flags(
    worker_item: LoadedEntryPoint,
    worker: Any,
    ns: argparse.Namespace,
    options: dict[str, Any],
    host: PluginHost,
    config_data: dict[str, Any] | None = None,
) -> Prepared:
    """``config_data``: the ``--config`` file's contents when read already (a pipe reads once)."""
    return prepare_request(request_from_flags(worker_item, worker, ns, options, config_data), host)


def dry_run(prepared: Prepared, emit_summary: bool) -> int:
    if emit_summary:
        print(dumps(prepared.summary(), indent=2, default=str))
    else:
        headline = prepared.launch.summary.get("headline") or " ".join(prepared.launch.command)
        print(f"dry run ok: {prepared.run.worker}: {headline}", file=sys.stderr)
    return 0


def run_worker(
    worker_name: str, argv: list[str], prog: str | None = None, config_data: dict[str, Any] | None = None
) -> int:
    """Parse ``argv`` for worker ``worker_name`` and run (or dry-run) the job (``config_data``:
    the ``--config`` file's contents when read already). Raises MosaicError for anything the
    user can fix; :func:`main` turns that into one line."""
    item = find_worker(worker_name)
    worker = load_worker(item)
    parser = host_parser(prog or f"mosaic run --worker {worker_name}", worker_name, item.obj.description)
    own = parser.add_argument_group(f"{worker_name} worker")
    installed = launchers.active()
    launchers.add_arguments(parser, installed)
    before = {action.dest for action in parser._actions}
    worker.add_arguments(own)
    ns, extra = parser.parse_known_args(argv)
    if extra and not worker.accepts_extra_argv:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if ns.emit_summary and not ns.dry_run:
        parser.error("--emit-summary needs --dry-run")
    options = {dest: value for dest, value in vars(ns).items() if dest not in before}
    options["restart"] = ns.restart  # the host's flag; a worker may read it too (CleanRL's --name EXP)
    if worker.accepts_extra_argv:
        options["extra_argv"] = extra
    choice = launchers.select(ns, installed)  # an unknown launcher, two chosen: say so before anything
    if not ns.dry_run:
        choice.check(ns.num_cpus)  # a cluster that does not answer, no sbatch: one line, nothing started
    # A launcher's slow start (joining a Ray cluster, an actor's process on its node) goes on while the run is prepared.
    early = None if ns.dry_run else launchers.start_early(choice, ns.num_cpus)
    try:
        host = plugin_host()
        prepared = prepare_from_flags(item, worker, ns, options, host, config_data)
        prepared.launcher = choice
        prepared.num_cpus = ns.num_cpus
        launcher_dests = set(launchers.settings_of(ns, installed)) | {"launcher"}
        prepared.worker_argv = launchers.strip_options(argv, parser, (before | launcher_dests) - {"help"})
        if ns.dry_run:
            return dry_run(prepared, ns.emit_summary)
        return execute(prepared, HostOptions.from_namespace(ns), host, early)
    finally:
        if early is not None:
            early.close()


def main(worker_name: str, argv: list[str] | None = None, prog: str | None = None) -> int:
    """A console-script entry: :func:`run_worker` with errors as one line and an exit code."""
    procs.keep_cwd_off_child_paths()
    argv = list(sys.argv[1:] if argv is None else argv)
    with hostsignals.guarded():  # signalled before its run directory exists, a run leaves nothing
        return run_cli_command(lambda: run_worker(worker_name, argv, prog), verbose="--verbose" in argv)
