"""The run pipeline, the same for every worker: ``mosaic run --worker NAME``, the worker's own
console scripts (``cleanrl-worker``) and the daemon's spawned runs all enter here.

    argv / config file -> host flags + WorkerConfig -> defaults (worker, then plugins)
      -> validation (host, plugins, worker) -> worker.plan(config, run) = Launch
      -> build_args / child_env -> [dry run: summary, stop]
      -> run directory -> Supervisor (events, heartbeats, signals, logs)
      -> optional gRPC session -> build_manifest -> run_finished -> one terminal event

Exit codes: 0 success, the training process's code on failure, 2 usage/config, 130 cancelled.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import hostsignals, launchers, procs
from mosaic_core import resume as resuming
from mosaic_core.algonames import spelling, unknown_algorithm
from mosaic_core.cli.errors import run_cli_command
from mosaic_core.config import (
    FIELDS,
    REDACTED,
    RUN_ID,
    SECRET_EXTRAS_ENV,
    WorkerConfig,
    build_config,
    parse_extras_json,
    raw_payload,
    read_config_file,
    redact,
    redact_payload,
    run_metadata,
)
from mosaic_core.contract import standard_key_problems
from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.environments import preflight
from mosaic_core.errors import ConfigError, MosaicError, PluginError, UsageError
from mosaic_core.files import run_umask, write_json_atomic
from mosaic_core.jsontext import dumps
from mosaic_core.plugins import PluginHost, plugin_host
from mosaic_core.renamed import add_renamed_flag
from mosaic_core.runs import RunContext, RunDirectory, default_runs_root, find_run_dir
from mosaic_core.threads import ThreadBudget
from mosaic_core.threads import budget as thread_budget
from mosaic_core.trainer.protocol import check_target
from mosaic_core.types import ChildEvent, CodePath, ExtrasKey, Launch
from mosaic_core.worker import Worker, declare, declared_names, load_worker
from mosaic_core.workers import find_worker

DEFAULT_GRPC_TARGET = "127.0.0.1:50055"
MIN_HEARTBEAT_S = 0.1  # the daemon's own floor for the runs it starts
REGISTRATION_ENV = "MOSAIC_REGISTRATION_SECRET"  # a daemon-spawned run's proof for RegisterWorker, read once


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``mosaic: error: ...``, exit 2), not a screen of usage."""

    def error(self, message: str) -> Any:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def host_parser(prog: str, worker_name: str, description: str) -> argparse.ArgumentParser:
    """The flags every worker's runs share (the worker config's fields and the host's options: the
    CLI reference, `docs/reference/cli.md`); a worker adds its own after them."""
    parser = OneLineParser(
        prog=prog,
        description=description,
        allow_abbrev=False,
        epilog="Lifecycle events are printed as JSON lines on stdout (at a terminal: "
        "human lines; --json for JSON there too).",
    )
    run = parser.add_argument_group("run")
    run.add_argument(
        "--config",
        help="worker config JSON (flat, nested at metadata.worker.config, or a run's config.json to repeat it)",
    )
    run.add_argument(
        "--from",
        dest="from_run",
        metavar="RUN_ID",
        help="repeat a recorded run (its config.json; an id prefix is enough) with a new run id",
    )
    run.add_argument("--algo", help="algorithm (the worker says which names it knows)")
    run.add_argument("--env-id", "--env", dest="env_id", help="environment id (--env: the same)")
    run.add_argument("--total-timesteps", type=int, help="environment steps to train for")
    run.add_argument("--seed", type=int)
    run.add_argument("--worker-id", help="the training program's name to a daemon (default WORKER-worker-RUN_ID[:8])")
    add_renamed_flag(run, "--program-id", "--worker-id")
    run.add_argument(
        "--run-id",
        help="run id (letters, digits, - and _); a ULID is generated when absent; an existing "
        "run's id continues that run from its newest checkpoint",
    )
    run.add_argument(
        "--restart",
        action="store_true",
        help="with the --run-id of an existing run: start it over (its directory is cleared)",
    )
    run.add_argument("--runs-dir", help="runs root (default var/trainer/runs, or $MOSAIC_RUNS_DIR)")
    run.add_argument("--extras", help="JSON object merged into the config's extras (wins per key)")
    host = parser.add_argument_group("host")
    host.add_argument("--dry-run", action="store_true", help="resolve and validate everything; run nothing")
    host.add_argument("--emit-summary", action="store_true", help="with --dry-run: print the resolved launch as JSON")
    host.add_argument("--grpc", action="store_true", help="register with a trainer daemon before running")
    host.add_argument(
        "--grpc-target",
        default=DEFAULT_GRPC_TARGET,
        help=f"trainer daemon address (HOST:PORT; default {DEFAULT_GRPC_TARGET})",
    )
    host.add_argument(
        "--token-file",
        help="with --grpc, started by hand: a file holding the daemon's client token (else $MOSAIC_TOKEN, "
        "else var/trainer/client.token)",
    )
    host.add_argument(
        "--heartbeat-interval",
        type=float,
        default=30.0,
        help=f"seconds between heartbeats (at least {MIN_HEARTBEAT_S})",
    )
    host.add_argument("--grace-period", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL on cancel")
    host.add_argument(
        "--num-cpus",
        type=int,
        metavar="N",
        help="CPUs the run may use: its thread budget (OMP_NUM_THREADS and the like; default: the "
        "launcher's share, or 1 for a lone run; your own OMP_NUM_THREADS wins)",
    )
    host.add_argument(
        "--json",
        action="store_true",
        help="print lifecycle events as JSON lines on stdout even at a terminal (always in events.jsonl)",
    )
    host.add_argument("--quiet", action="store_true", help="no progress or human lines at a terminal")
    host.add_argument("--verbose", action="store_true", help="show tracebacks")
    return parser


@dataclass(frozen=True)
class HostOptions:
    """The host flags that shape a run's execution (``--grpc``, ``--heartbeat-interval``, …)."""

    grpc: bool = False
    grpc_target: str = DEFAULT_GRPC_TARGET
    token_file: str | None = None  # --token-file: the daemon's client token, for a run started by hand
    heartbeat_interval: float = 30.0
    grace_period: float = 10.0
    quiet: bool = False
    json: bool = True  # JSON lines on stdout (a terminal gets human lines unless --json)

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> HostOptions:
        return cls(
            grpc=ns.grpc,
            grpc_target=ns.grpc_target,
            token_file=ns.token_file,
            heartbeat_interval=ns.heartbeat_interval,
            grace_period=ns.grace_period,
            quiet=ns.quiet,
            json=ns.json or not _isatty(sys.stdout),
        )


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


def check_host_options(ns: argparse.Namespace) -> None:
    if ns.token_file and not ns.grpc:
        raise UsageError("--token-file needs --grpc (it is the trainer daemon's client token)")
    if ns.grpc:  # a dry run checks the address a run would dial
        check_target(ns.grpc_target, "--grpc-target")
    if ns.num_cpus is not None and ns.num_cpus < 1:
        raise UsageError(f"--num-cpus must be at least 1, got {ns.num_cpus}")
    for flag, value in (("--heartbeat-interval", ns.heartbeat_interval), ("--grace-period", ns.grace_period)):
        if not value == value or value <= 0 or value == float("inf"):  # NaN, zero, negative, infinite
            raise UsageError(f"{flag} must be a positive number of seconds, got {value}")
    if ns.heartbeat_interval < MIN_HEARTBEAT_S:  # 1e-300 would write a heartbeat every few microseconds
        raise UsageError(
            f"--heartbeat-interval must be at least {MIN_HEARTBEAT_S} seconds, got {ns.heartbeat_interval}"
        )


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
    ``mosaic run`` and the daemon's SubmitRun both come through here. ``dry_run`` (a dry run,
    a daemon's submission) asks the worker for its thorough checks too (``run.dry_run``).
    ``check_code`` (a daemon's script policy) sees the worker's ``code_paths`` before anything
    reads those files, and the plan's ``Launch.code_paths`` after. ``existing`` (``"resume"`` or
    ``"restart"``): the run id names an existing run to continue (:mod:`mosaic_core.resume`) or
    start over. ``raw``: the whole payload ``data`` was read from (:attr:`WorkerConfig.raw`)."""
    options = dict(options or {})
    claimed = claimed_keys(worker_item.name, worker, host)
    code = code_check(worker_item, worker, check_code)
    config, problems = resolve_config(
        worker_item,
        worker,
        host,
        data=data,
        raw=raw,
        source=source,
        overrides=overrides,
        extras=extras,
        options=options,
        claimed=claimed,
        code=code,
    )
    code(config.to_dict(redacted=False))
    events = declare(worker_item, "child_events()", worker.child_events, ChildEvent)
    worker_extras, unknown_keys = split_extras(claimed, config.extras)
    problems += unknown_keys + standard_key_problems(config.extras, getattr(worker, "modes", ()))
    problems += host.validate_config(config) + list(worker.validate(config, options) or [])
    if problems:
        where = f" in {config.source}" if config.source else ""
        raise ConfigError(f"invalid config{where}: " + "; ".join(problems))
    directory = RunDirectory.for_run(runs_dir, config.run_id)
    directory.check_usable(existing_ok=existing is not None)
    resume = None
    if existing == "resume":
        from mosaic_core.resume import decide

        resume = decide(worker_item, worker, config, directory.path, (overrides or {}).get("total_timesteps"))
        config = config.with_overrides(total_timesteps=resume.total_timesteps, extras=resume.extras())
    environment = preflight(worker_item.obj, worker_item.distribution)
    run = RunContext(
        config=config,
        directory=directory,
        worker=worker_item.name,
        quiet=quiet,
        options=options,
        plugin_args=host.build_args(config),
        worker_extras=worker_extras,
        dry_run=dry_run,
        python=environment.python,
        settings=honoured_settings(worker_item, worker, host, config),
        worker_events=frozenset(event.name for event in events),
        checkpoint_layout=worker.checkpoint_layout(config),
        resume=resume,
    )
    try:
        launch = worker.plan(config, run)
    except (UsageError, PluginError):
        raise
    except Exception as exc:
        raise UsageError(
            f"worker {worker_item.name!r} ({worker_item.distribution} {worker_item.version}) failed to "
            f"plan the run: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(launch, Launch):
        raise UsageError(
            f"worker {worker_item.name!r} ({worker_item.distribution}) returned "
            f"{type(launch).__name__} from plan(); expected mosaic_core.types.Launch"
        )
    if check_code is not None:
        check_code(list(launch.code_paths))  # Launch checks its own code_paths are CodePaths
    refuse_untrusted_code(list(launch.code_paths))
    plugin_env = host.child_env(run)
    clash = sorted(set(plugin_env) & set(launch.env))
    if clash:
        raise PluginError(
            f"environment variable(s) {', '.join(clash)} set by both worker {worker_item.name!r} "
            "and a plugin's mosaic_child_env"
        )
    threads = thread_budget(num_cpus)
    return Prepared(
        worker_item,
        run,
        launch,
        {**threads.environment(os.environ, launch.env), **launch.env, **plugin_env},
        threads,
        restart=existing == "restart",
    )


def code_check(
    worker_item: LoadedEntryPoint, worker: Worker, check_code: Callable[[list[CodePath]], None] | None
) -> Callable[[dict[str, Any]], list[CodePath]]:
    """The check of a config's code paths (the worker's ``code_paths``): declared well by every
    run, untrusted imports refused, and held to a daemon's policy (``check_code``) first, so its
    refusal never tells whether a file exists."""

    def code(mapping: dict[str, Any]) -> list[CodePath]:
        paths = declare(worker_item, "code_paths(data)", lambda: worker.code_paths(mapping), CodePath)
        if check_code is not None:
            check_code(paths)
        refuse_untrusted_code(paths)
        return paths

    return code


def resolve_config(
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
    claimed: list[tuple[str, ExtrasKey]] | None = None,
    code: Callable[[dict[str, Any]], list[CodePath]] | None = None,
    known_algorithms: bool = True,
) -> tuple[WorkerConfig, list[str]]:
    """A run's config, and the problems found on the way (an algorithm the worker does not run):
    file data, flags and ``--extras``; a flat config's keys outside the schema placed by who
    claims them (:func:`mosaic_core.config.place_loose_keys`); then the defaults, the worker's
    (e.g. the algorithm's own ``env_id``) before the plugins'. A config that cannot be built is a
    ConfigError; with an algorithm the worker does not run, that is what it names.
    ``known_algorithms=False`` leaves ``algo`` as given, unchecked (a caller with a registry of
    its own checks it)."""
    options = {} if options is None else options
    claimed = claimed_keys(worker_item.name, worker, host) if claimed is None else claimed
    code = code or code_check(worker_item, worker, None)
    problems: list[str] = []

    def defaults(merged: dict[str, Any]) -> dict[str, Any]:
        paths = code(merged)  # before any default is computed: defaults may read the files
        if known_algorithms:  # the defaults see the worker's spelling
            problems.extend(spell_algorithm(worker_item, worker, merged, paths))
        refuse_env_switches(worker_item, host, merged)  # before a plugin builds envs the worker cannot switch
        own = worker.config_defaults(merged, options) or {}
        return {**host.config_defaults(merged), **own}

    try:
        config = build_config(
            data,
            source=source,
            overrides=overrides,
            extras=extras,
            generate_run_id=True,
            defaults=defaults,
            extras_key=lambda name: any(key.matches(name) for _owner, key in claimed),
            raw=raw,
        )
    except ConfigError:
        if not problems:
            raise
        raise ConfigError("; ".join(problems), field="algo", source=source) from None  # what else is missing follows
    return config, problems


def refuse_untrusted_code(paths: list[CodePath]) -> None:
    """Nothing in an imported, untrusted run executes (:mod:`mosaic_core.runstore.trust`)."""
    from mosaic_core.runstore.trust import refuse_untrusted

    for code in paths:
        refuse_untrusted(code.path, f"{code.field} {code.path}")


def spell_algorithm(
    worker_item: LoadedEntryPoint, worker: Worker, merged: dict[str, Any], paths: list[CodePath]
) -> list[str]:
    """``merged["algo"]`` in the worker's own spelling (:mod:`mosaic_core.algonames`), or the
    problem of a name the worker does not run. A path given as ``algo`` is left as it is."""
    algo = merged.get("algo")
    if not isinstance(algo, str) or not algo or any(path.field == "algo" for path in paths):
        return []
    names = declared_names(worker_item, worker, merged)
    if names is None:
        return []
    found = spelling(algo, names)
    if found is None:
        return [unknown_algorithm(algo, names, worker_item.name)]
    merged["algo"] = found
    return []


def honoured_settings(
    worker_item: LoadedEntryPoint, worker: Worker, host: PluginHost, config: WorkerConfig
) -> tuple[Any, ...]:
    """The settings plugins published for this run; one the worker does not honour refuses
    the run in one line naming the setting, its plugin and the worker (exit 2)."""
    honoured = tuple(worker.honoured_settings() or ())
    settings = host.run_settings(config)
    for plugin, setting in settings:
        if not isinstance(setting, honoured):
            asked = getattr(setting, "requested_by", None) or f"plugin {plugin!r}"
            raise ConfigError(
                f"{asked}: worker {worker_item.name!r} cannot honour {type(setting).__name__} "
                f"(published by plugin {plugin!r}); leave it out for this worker",
                field=asked if asked.startswith("extras.") else None,
                source=config.source,
            )
    return tuple(setting for _plugin, setting in settings)


def refuse_env_switches(worker_item: LoadedEntryPoint, host: PluginHost, data: dict[str, Any]) -> None:
    """A ConfigError when the config gives an extras key that switches envs (``ExtrasKey.switches_envs``)
    and the worker's capabilities say it cannot (``supports_env_switching=False``)."""
    extras = data.get("extras")
    capabilities = getattr(worker_item.obj, "capabilities", None)
    if not isinstance(extras, dict) or getattr(capabilities, "supports_env_switching", True):
        return
    for plugin, key in host.extras_keys():
        given = next((name for name in extras if key.switches_envs and key.matches(name)), None)
        if given is not None:
            raise ConfigError(
                f"extras.{given} (plugin {plugin}) asks for env switches during the run, and the "
                f"{worker_item.name} worker cannot switch envs (its capabilities: "
                "supports_env_switching=False): train each env as its own run",
                field=f"extras.{given}",
            )


CORE_OWNER = "core (the run contract)"


def claimed_keys(worker_name: str, worker: Worker, host: PluginHost) -> list[tuple[str, ExtrasKey]]:
    """(owner, key) for every extras key the core (:data:`mosaic_core.contract.STANDARD_KEYS`),
    a plugin or the worker claims; a key claimed by a worker and a plugin is an error naming
    them. A worker declaring a standard key is not: the core's declaration wins."""
    from mosaic_core.contract import STANDARD_KEYS

    plugins = list(host.extras_keys())
    claimed = [*plugins, *((CORE_OWNER, key) for key in STANDARD_KEYS)]
    standard = {key.name for key in STANDARD_KEYS}
    for key in worker.extras_keys() or []:
        if key.name in standard:  # the core's declaration wins (workers drop theirs in time)
            continue
        owner = next(
            (plugin for plugin, theirs in plugins if theirs.matches(key.name) or key.matches(theirs.name)), None
        )
        if owner is not None:
            raise PluginError(f"extras key {str(key)!r} is claimed by both worker {worker_name!r} and plugin {owner!r}")
        claimed.append((f"worker {worker_name}", key))
    return claimed


def split_extras(claimed: list[tuple[str, ExtrasKey]], extras: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The extras nobody claims (``run.worker_extras``), and a problem for every key inside a
    claimed prefix (``wandb_*``, ``fastlane_*``…) that its owner does not know, with a
    suggestion: a misspelt setting must not vanish silently."""
    exact = {key.name: owner for owner, key in claimed if not key.prefix}
    unclaimed, problems = {}, []
    for name, value in extras.items():
        if name in exact:
            continue
        space = next(((owner, key) for owner, key in claimed if key.prefix and key.matches(name)), None)
        if space is None:
            unclaimed[name] = value
            continue
        owner, prefix = space
        known = sorted(k for k, o in exact.items() if o in (owner, CORE_OWNER) and k.startswith(prefix.name))
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]}?" if close else (f"known: {', '.join(known)}" if known else "it reads none")
        problems.append(f"extras.{name}: unknown key in the {prefix} settings of {owner}; {hint}")
    return unclaimed, problems


def prepare_from_flags(
    worker_item: LoadedEntryPoint,
    worker: Any,
    ns: argparse.Namespace,
    options: dict[str, Any],
    host: PluginHost,
    config_data: dict[str, Any] | None = None,
) -> Prepared:
    """``config_data``: the ``--config`` file's contents when read already (a pipe reads once)."""
    check_host_options(ns)
    if ns.config and ns.from_run:
        raise UsageError("give --config or --from, not both")
    source = ns.config
    existing = None
    valid_id = isinstance(ns.run_id, str) and RUN_ID.fullmatch(ns.run_id)  # else validation names what is wrong
    root = (Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root()) if valid_id else None
    if root is not None and not ns.from_run and resuming.recorded(root / ns.run_id):  # the same command again
        existing = "restart" if ns.restart else "resume"  # continues the run (or starts it over)
        if not source:
            source, config_data = str(root / ns.run_id / "config.json"), None
    if ns.from_run:
        source = str(
            find_run_dir(Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root(), ns.from_run)
            / "config.json"
        )
    if source:  # a config that came with an imported run is someone else's: it runs once trusted
        from mosaic_core.runstore.trust import refuse_untrusted

        refuse_untrusted(source, f"--from {ns.from_run}" if ns.from_run else f"--config {source}")
    if source and (config_data is None or ns.from_run):
        config_data = read_config_file(source, run_file=bool(ns.from_run))
    data = recorded_config(config_data, worker_item.name, source, ns) if source and config_data is not None else None
    raw = raw_payload(config_data) if data is not None else None
    if existing and data is not None:
        resuming.check_recorded(data, {"algo": ns.algo, "env_id": ns.env_id}, ns.run_id)
    overrides = {
        "algo": ns.algo,
        "env_id": ns.env_id,
        "total_timesteps": ns.total_timesteps,
        "seed": ns.seed,
        "worker_id": ns.worker_id,
        "run_id": ns.run_id,
    }
    extras = parse_extras_json(ns.extras) if ns.extras else None
    if os.environ.get(SECRET_EXTRAS_ENV):
        extras = {**(extras or {}), **parse_extras_json(os.environ.pop(SECRET_EXTRAS_ENV))}
    return prepare(
        worker_item,
        worker,
        host,
        data=data,
        raw=raw,
        source=source,
        overrides=overrides,
        extras=extras,
        options=options,
        runs_dir=ns.runs_dir,
        quiet=ns.quiet,
        dry_run=ns.dry_run,
        num_cpus=ns.num_cpus,
        existing=existing,
    )


def recorded_config(data: dict[str, Any], worker_name: str, source: str, ns: argparse.Namespace) -> dict[str, Any]:
    """A config file as a run records it (``config.json``) made ready to run again: its
    ``worker`` must be this one, redacted secrets (``***``) come from the environment again,
    and a run id that is already taken gives way to a new one."""
    data = dict(data)
    recorded_worker = data.pop("worker", worker_name)
    if recorded_worker != worker_name:
        raise ConfigError(
            f"the config is for worker {recorded_worker!r}, not {worker_name!r}", field="worker", source=source
        )
    extras = data.get("extras")
    if isinstance(extras, dict) and REDACTED in extras.values():
        data["extras"] = {k: v for k, v in extras.items() if v != REDACTED}
    run_id = data.get("run_id")
    if not ns.run_id and isinstance(run_id, str) and RUN_ID.fullmatch(run_id):  # else validation says what is wrong
        root = Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root()
        if (root / run_id).exists():
            data.pop("run_id")  # repeating a recorded run: it gets an id of its own
    return data


def execute(prepared: Prepared, ns: HostOptions, host: PluginHost, early: Any = None) -> int:
    """Start a prepared run: its directory and ``config.json``, an optional gRPC session, then
    the launcher its settings choose (the local Supervisor by default; ``mosaic_core.launchers``)."""
    from mosaic_core.supervisor import SupervisorOptions

    run, launch = prepared.run, prepared.launch
    for item in host.load_failures():  # named once, when the run starts; recorded in the manifest
        print(
            f"mosaic: warning: plugin {item.name!r} ({item.distribution} {item.version}) failed to load and is "
            f"not part of this run: {item.error}",
            file=sys.stderr,
        )
    for note in launch.notes:
        if not ns.quiet:
            print(f"mosaic: note: {note}", file=sys.stderr)
    run.human = not ns.json and not launch.passthrough_stdio
    options = SupervisorOptions(
        heartbeat_interval=ns.heartbeat_interval,
        grace_period=ns.grace_period,
        passthrough_stdio=launch.passthrough_stdio,
        num_envs=launch.num_envs,
        started_payload={**launch.started_payload, **run_metadata(run.config)},
        json_stdout=ns.json,
    )
    session = None
    if ns.grpc:
        session = _register(prepared, ns.grpc_target, ns.token_file)
        options.heartbeat_extra = lambda: {"grpc_heartbeat": session.heartbeat()}
        options.event_sinks.append(session.report_event)  # a daemon that did not start the run hears of it
        options.started_payload["grpc"] = {"target": ns.grpc_target, "accepted_version": session.accepted_version}
    directory = run.directory
    directory.check_usable(existing_ok=bool(run.resume or prepared.restart))  # again: time passed since the plan
    # Everything the run writes, the training process included, is private to its user (0700/
    # 0600) unless $MOSAIC_SHARE_RUNS=group lets the group read it.
    previous_umask = os.umask(run_umask())
    hostsignals.hold()  # from now on a signal cancels the run, which ends with a terminal event
    try:
        if prepared.restart and resuming.existing(directory.path):
            resuming.clear(directory.path)
        directory.create()
        record = {
            "worker": run.worker,
            "command": list(launch.command),
            "cwd": str(launch.cwd or run.run_dir),
            **launch.started_payload,
            "threads": prepared.threads.record() if prepared.threads else None,
        }
        if run.resume is not None:  # the run's config stays its own; launch.json records the attempts
            resuming.announce(run.run_id, run.resume)
            write_json_atomic(
                directory.launch,
                redact(
                    {
                        **record,
                        "resume": run.resume.payload(),
                        "attempts": resuming.attempts(directory.launch, run.resume),
                    }
                ),
            )
        else:
            directory.write_config(run.config, run.worker, record)
        job = launchers.Job(
            run,
            host,
            list(launch.command),
            prepared.env,
            launch.cwd,
            options,
            dict(prepared.launcher.settings),
            rerun_argv=rerun_argv(prepared, ns),
            num_cpus=prepared.num_cpus,
            early=early,
            launcher=prepared.launcher,
        )
        return launchers.run_job(job)
    except MosaicError:
        if run.emitter is None and run.resume is None:  # refused before it started: leave nothing (a resumed run
            shutil.rmtree(directory.path, ignore_errors=True)  # keeps its directory as it was)
        raise
    except OSError as exc:
        if run.emitter is not None:
            raise
        if run.resume is None:
            shutil.rmtree(directory.path, ignore_errors=True)  # e.g. a full disk before the run started
        raise MosaicError(
            f"cannot write run {run.run_id}'s files under {directory.root}: {exc.strerror or exc}"
        ) from None
    finally:
        os.umask(previous_umask)
        if session is not None:
            session.close()


def rerun_argv(prepared: Prepared, ns: HostOptions) -> list[str]:
    """The ``mosaic`` arguments that repeat this run elsewhere from its ``config.json`` (a
    launcher puts the file there and appends ``--config PATH --runs-dir DIR``): same run id,
    same worker flags, JSON events; secrets travel in the environment (``MOSAIC_SECRET_EXTRAS``)."""
    return [
        "run",
        "--worker",
        prepared.run.worker,
        "--run-id",
        prepared.config.run_id,
        "--json",
        "--quiet",
        "--heartbeat-interval",
        str(ns.heartbeat_interval),
        "--grace-period",
        str(ns.grace_period),
        *(["--num-cpus", str(prepared.num_cpus)] if prepared.num_cpus else []),
        *prepared.worker_argv,
    ]


def _register(prepared: Prepared, target: str, token_file: str | None = None) -> Any:
    """The run's RegisterWorker: with the secret a daemon gave the process it started, else (a
    run started by hand) with the daemon's client token, found as every ``mosaic`` call finds it."""
    from mosaic_core.trainer.auth import find_token
    from mosaic_core.trainer.client import RunSession

    config, worker = prepared.config, prepared.run.worker
    extras = config.extras
    secret = os.environ.pop(REGISTRATION_ENV, None)
    return RunSession.register(
        target,
        run_id=config.run_id,
        worker_id=config.worker_id or f"{worker}-worker-{config.run_id[:8]}",
        worker_kind=worker,
        schema_id=str(extras.get("schema_id") or f"{worker}.{config.algo}"),
        schema_version=int(extras.get("schema_version") or 1),
        supports_pause=bool(extras.get("supports_pause", False)),
        supports_checkpoint=bool(extras.get("supports_checkpoint", True)),
        registration_secret=secret,
        client_token=None if secret else find_token(token_file),
    )


def dry_run(prepared: Prepared, emit_summary: bool) -> int:
    if emit_summary:
        print(dumps(prepared.summary(), indent=2, default=str))
    else:
        headline = prepared.launch.summary.get("headline") or " ".join(prepared.launch.command)
        print(f"dry run ok: {prepared.run.worker}: {headline}", file=sys.stderr)
    return 0


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def worker_option_defaults(worker: Any) -> dict[str, Any]:
    """The worker's own flags at their defaults (for runs not started from a command line)."""
    parser = argparse.ArgumentParser(add_help=False)
    worker.add_arguments(parser)
    options = vars(parser.parse_args([]))
    if worker.accepts_extra_argv:
        options["extra_argv"] = []
    return options


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
