"""``mosaic``: the host's command line.

Built-in commands: ``workers``, ``plugins``, ``run --worker NAME ...`` (handed to the worker
found by entry point), the trainer daemon's commands, and whatever plugins add through
``mosaic_cli_commands``. Start-up imports nothing heavy: commands import what they need
when they run.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
from typing import Any

from mosaic_core import __version__, hostsignals, procs
from mosaic_core.cli.commands import CliCommand
from mosaic_core.cli.errors import run_cli_command
from mosaic_core.errors import UsageError
from mosaic_core.jsontext import dumps


# ------------------------------------------------------------------------------ workers
def _configure_workers(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub = parser.add_subparsers(dest="workers_action", metavar="ACTION")
    install = sub.add_parser(
        "install",
        help="build a worker's own environment (its dependency bundle); idempotent",
        description="Build the worker's own Python environment from package registries under "
        "$MOSAIC_VENVS (default ~/.local/share/mosaic/venvs); its runs execute there.",
    )
    install.add_argument("name", help="the worker (see `mosaic workers`)")
    install.add_argument("--extras", help="optional requirement groups the worker declares, e.g. atari,mujoco")
    install.add_argument("--force", action="store_true", help="rebuild even when the environment is ready")


def _run_workers(ns: argparse.Namespace) -> int:
    if ns.workers_action == "install":
        return _install_worker(ns)
    items = _workers()
    if ns.json:
        print(dumps([_worker_record(i) for i in items], indent=2))
        return 0
    from mosaic_core.cli.console import print_table

    rows = []
    for item in items:
        meta = item.obj
        if meta is None:
            rows.append((item.name, "", item.distribution, f"[red]{item.status}[/red]: {item.error}", *[""] * 8))
            continue
        caps = meta.capabilities
        found = _environment(item)
        rows.append(
            (
                meta.name,
                meta.version,
                item.distribution,
                item.status,
                found["state"] if found["state"] in ("host", "ready") else f"[yellow]{found['detail']}[/yellow]",
                ", ".join(caps.supported_paradigms),
                ", ".join(caps.action_spaces),
                ", ".join(caps.observation_spaces),
                ", ".join(caps.env_families),
                "yes" if caps.supports_checkpointing else "no",
                "required" if caps.requires_gpu else "no",
                f"{caps.estimated_memory_mb} MB",
            )
        )
    print_table("MOSAIC workers", WORKER_COLUMNS, rows)
    return 0


WORKER_COLUMNS = (
    "worker",
    "version",
    "distribution",
    "status",
    "environment",
    "paradigms",
    "actions",
    "observations",
    "env families",
    "ckpt",
    "gpu",
    "memory",
)


def _worker_record(item: Any) -> dict[str, Any]:
    record = {
        "name": item.name,
        "entry_point": item.value,
        "plugin": item.plugin or None,  # the mosaic.plugins entry point providing it (None: a deprecated group's)
        "distribution": item.distribution,
        "distribution_version": item.version,
        "status": item.status,
    }
    if item.obj is not None:
        record.update(item.obj.to_dict())
        record["environment_status"] = _environment(item)
    if item.error:
        record["error"] = item.error
    return record


def _environment(item: Any) -> dict[str, Any]:
    """Whether the worker's runs can execute now (its own environment built, or the host's)."""
    from mosaic_core.environments import status

    try:
        found = status(item.obj, item.distribution)
    except Exception as exc:  # a broken environment root never breaks the listing
        return {"state": "broken", "python": "", "path": None, "detail": str(exc)}
    return {
        "state": found.state,
        "python": found.python,
        "path": str(found.path) if found.path else None,
        "detail": found.detail or found.describe(),
        "extras": list(found.extras),
    }


def _install_worker(ns: argparse.Namespace) -> int:
    from mosaic_core.environments import install
    from mosaic_core.workers import find_worker

    extras = tuple(e.strip() for e in ns.extras.split(",")) if ns.extras is not None else ()
    if "" in extras:
        raise UsageError(
            f"--extras {ns.extras!r}: an empty name; give the worker's extras separated by commas, "
            "e.g. atari,mujoco (`mosaic workers --json` lists them)"
        )
    item = find_worker(ns.name)
    found = install(item.obj, item.distribution, extras, force=ns.force)
    if found.state == "host":
        print(
            f"worker {item.name!r} has no environment of its own: its runs execute in the host's venv", file=sys.stderr
        )
    return 0


# ------------------------------------------------------------------------------ plugins
def _configure_plugins(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--extras",
        action="store_true",
        help="list the extras keys each plugin owns (keys nobody owns go to the worker)",
    )


def _run_extras(host: Any, as_json: bool) -> int:
    from mosaic_core.contract import STANDARD_KEYS
    from mosaic_core.stages.resolve import CORE_OWNER
    from mosaic_core.worker import load_worker
    from mosaic_core.workers import discover_workers

    owned = [*host.extras_keys(), *((CORE_OWNER, key) for key in STANDARD_KEYS)]
    standard = {key.name for key in STANDARD_KEYS}
    for item in discover_workers():
        if item.status == "active":
            owned += [
                (f"worker {item.name}", key)
                for key in load_worker(item).extras_keys() or []
                if key.name not in standard
            ]
    rows = [
        {"key": str(key), "plugin": owner, "prefix": key.prefix, "help": key.help}
        for owner, key in sorted(owned, key=lambda pk: (str(pk[1]), pk[0]))
    ]
    if as_json:
        print(dumps(rows, indent=2))
        return 0
    from rich.table import Table

    from mosaic_core.cli.console import console

    table = Table(title="extras keys and who reads them (any other key is the worker's to interpret, e.g. as a flag)")
    for column in ("key", "owner", "what"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["key"], row["plugin"], row["help"])
    console().print(table)
    return 0


def _provided_by(host: Any) -> dict[str, dict[str, Any]]:
    """Per plugin: the workers it provides (each with the hooks it has for its own runs) and launchers."""
    from mosaic_core import launchers
    from mosaic_core.errors import MosaicError
    from mosaic_core.workers import discover_workers

    provided: dict[str, dict[str, Any]] = {}
    for item in discover_workers(host):
        if item.plugin and item.status == "active":
            try:
                host.use_worker(item.name)
            except MosaicError:  # its run hooks fail to load: listed, without them
                pass
            hooks = host.worker_hooks.get(item.name)
            own = host.hooks_of(hooks.name) if hooks is not None and hooks.status == "active" else []
            entry = provided.setdefault(item.plugin, {"workers": {}, "launchers": []})
            entry["workers"][item.name] = own
    for item in launchers.discover():
        if item.plugin and item.status == "active":
            provided.setdefault(item.plugin, {"workers": {}, "launchers": []})["launchers"].append(item.name)
    return provided


def _run_plugins(ns: argparse.Namespace) -> int:
    from mosaic_core.plugins import plugin_host

    host = plugin_host()
    if ns.extras:
        return _run_extras(host, ns.json)
    provides = _provided_by(host)
    records: list[dict[str, Any]] = [
        {
            "name": i.name,
            "module": i.value,
            "distribution": i.distribution,
            "version": i.version,
            "status": i.status,
            "hooks": host.hooks_of(i.name),
            **provides.get(i.name, {"workers": {}, "launchers": []}),
            "error": i.error,
        }
        for i in host.loaded
    ]
    if ns.json:
        print(dumps(records, indent=2))
        return 0
    from rich.table import Table

    from mosaic_core.cli.console import console

    table = Table(title="MOSAIC plugins")
    for column in ("plugin", "distribution", "version", "status", "hooks", "provides", "error"):
        table.add_column(column)
    for r in records:
        hooks = ", ".join(h.removeprefix("mosaic_") for h in r["hooks"])
        provided = [
            f"worker {name}" + (f" (its runs: {', '.join(h.removeprefix('mosaic_') for h in own)})" if own else "")
            for name, own in r["workers"].items()
        ] + [f"launcher {name}" for name in r["launchers"]]
        table.add_row(
            r["name"], r["distribution"], r["version"], r["status"], hooks, "; ".join(provided), r["error"] or ""
        )
    console().print(table)
    return 0


# ------------------------------------------------------------------------------ resume
def _configure_resume(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="the run's id, or any unique prefix of it")
    parser.add_argument("--runs-dir", help="runs root (default var/trainer/runs, or $MOSAIC_RUNS_DIR)")
    parser.add_argument(
        "--total-timesteps", type=int, help="a new budget (default: the run's own); a completed run's: more than it had"
    )
    parser.add_argument("--grace-period", type=float, help="seconds between SIGTERM and SIGKILL on cancel")
    parser.add_argument("--json", action="store_true", help="JSON lines on stdout even at a terminal")
    parser.add_argument("--quiet", action="store_true", help="no progress or human lines at a terminal")
    parser.add_argument("--dry-run", action="store_true", help="say what would resume; run nothing")


def _run_resume(ns: argparse.Namespace) -> int:
    """``mosaic resume RUN``: the run's own ``mosaic run --run-id ID`` again (mosaic_core.resume)."""
    from pathlib import Path

    from mosaic_core.config import read_config_file
    from mosaic_core.pipeline import run_worker
    from mosaic_core.runs import default_runs_root, find_run_dir

    root = Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root()
    run_dir = find_run_dir(root, ns.run)
    worker = read_config_file(run_dir / "config.json", run_file=True).get("worker")
    if not isinstance(worker, str) or not worker:
        raise UsageError(f"run {run_dir.name}: its config.json names no worker; it cannot be resumed")
    argv = ["--run-id", run_dir.name, "--runs-dir", str(root)]
    for flag, value in (("--total-timesteps", ns.total_timesteps), ("--grace-period", ns.grace_period)):
        if value is not None:
            argv += [flag, str(value)]
    argv += [flag for flag, on in (("--json", ns.json), ("--quiet", ns.quiet), ("--dry-run", ns.dry_run)) if on]
    with hostsignals.guarded():  # signalled before the run goes on, it leaves its directory as it was
        return run_worker(worker, argv, prog="mosaic resume")


def _evaluate() -> Any:
    from mosaic_core.cli import evaluate

    return evaluate


def _enjoy() -> Any:
    from mosaic_core.cli import enjoy

    return enjoy


def _algos() -> Any:
    from mosaic_core.cli import algos

    return algos


BUILTIN = [
    CliCommand("workers", "list installed workers and their capabilities", _configure_workers, _run_workers),
    CliCommand("plugins", "list plugins: distribution, version, hooks, status", _configure_plugins, _run_plugins),
    CliCommand(
        "algos",
        "what a worker can run (a list, and the worker's own views, e.g. show ALGO: its flags)",
        lambda parser: _algos().configure(parser),
        lambda ns: _algos().run(ns),
    ),
    CliCommand(
        "enjoy",
        "play a trained policy (any worker): per-episode returns, a video, or live frames",
        lambda parser: _enjoy().configure(parser),
        lambda ns: _enjoy().run(ns),
    ),
    CliCommand(
        "evaluate",
        "play a run's checkpoint (any worker): episodes, seeds disjoint from training's, eval.json",
        lambda parser: _evaluate().configure(parser),
        lambda ns: _evaluate().run(ns),
    ),
    CliCommand(
        "resume",
        "continue a run from its newest checkpoint (the same as re-running it with its --run-id)",
        _configure_resume,
        _run_resume,
    ),
]


def _commands(chosen: str | None = None) -> list[CliCommand]:
    """Every command, sorted by name; only the built-in ones when ``chosen`` is one of them (a
    built-in command needs no plugin loaded: a plugin's command of that name is ignored anyway);
    for ``chosen == ""`` (``mosaic --help``: nothing runs) the plugins' from the help cache."""
    try:
        from mosaic_core.trainer.commands import COMMANDS as TRAINER_COMMANDS
    except ImportError:  # the daemon's commands are optional in a partial install
        TRAINER_COMMANDS = []
    commands = {c.name: c for c in [*BUILTIN, *TRAINER_COMMANDS]}
    if chosen in commands:
        return [commands[name] for name in sorted(commands)]
    from mosaic_core.cli import listcache

    listed = listcache.cached_commands() if chosen == "" else None
    for command in _plugin_commands() if listed is None else listed:
        if command.name in commands or command.name == "run":
            print(
                f"mosaic: warning: plugin command {command.name!r} clashes with a built-in one; ignored",
                file=sys.stderr,
            )
            continue
        commands[command.name] = command
    return [commands[name] for name in sorted(commands)]


def _plugin_commands() -> list[CliCommand]:
    """The plugins' commands (every plugin loaded), their lines kept for ``mosaic --help``."""
    from mosaic_core.cli import listcache
    from mosaic_core.plugins import plugin_host

    try:
        host = plugin_host()
        found = host.cli_commands()
    except Exception as exc:  # one broken plugin never breaks the CLI (--help included)
        print(f"mosaic: warning: plugin commands unavailable: {exc}", file=sys.stderr)
        return []
    if not host.load_failures() and not host.failures:  # a broken plugin is loaded (and named) each time
        listcache.store_commands(found, _packages(host))
    return found


def _packages(host: Any) -> set[str]:
    """The top-level packages of the plugins ``host`` loaded."""
    return {item.value.partition(".")[0].partition(":")[0] for item in host.loaded}


def _workers() -> list[Any]:
    """The installed workers: from the list cache, else discovered (every plugin loaded) and kept
    when every one loaded (a failure is found and said each time)."""
    from mosaic_core.cli import listcache

    cached = listcache.cached_workers()
    if cached is not None:
        return cached
    from mosaic_core.plugins import plugin_host
    from mosaic_core.workers import discover_workers

    host = plugin_host()
    items = discover_workers(host)
    if all(i.status == "active" for i in items) and not host.load_failures() and not host.failures:
        listcache.store_workers(items, _packages(host) | {i.value.partition(".")[0].partition(":")[0] for i in items})
    return items


def run_command(name: str, argv: list[str], needed_by: str) -> int:
    """Run ``mosaic NAME ARGV...`` in this process: how one plugin uses a command another plugin
    contributes (``sweep best --plot`` draws through ``mosaic plot``) without importing it."""
    command = next((c for c in _commands() if c.name == name), None)
    if command is None:
        raise UsageError(f"{needed_by} needs the `mosaic {name}` command, which no installed plugin provides")
    parser = argparse.ArgumentParser(prog=f"mosaic {name}")
    command.configure(parser)
    return command.run(parser.parse_args(argv))


def build_parser(commands: list[CliCommand], chosen: str | None = None) -> argparse.ArgumentParser:
    """The ``mosaic`` parser. Only the subcommand named ``chosen`` gets its arguments (each
    other one is listed with its help line): argparse parses a single subcommand, and some
    commands' arguments cost entry-point scans. None configures all of them."""
    parser = argparse.ArgumentParser(
        prog="mosaic",
        description="MOSAIC: run reinforcement-learning training jobs through installed workers and plugins.",
        epilog="Train: mosaic run --algo ppo --env CartPole-v1 --total-timesteps 50000\n"
        "Help for a worker's flags: mosaic run [--worker NAME] --help",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mosaic {__version__}")
    parser.add_argument("--verbose", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser(
        "run",
        help="run a training job: mosaic run [--worker NAME] [worker flags...] (default: "
        "$MOSAIC_DEFAULT_WORKER, else the one installed worker that runs --algo)",
    )
    for command in commands:
        parser_of = sub.add_parser(command.name, help=command.help, description=command.help)
        if chosen is None or command.name == chosen:
            command.configure(parser_of)
    return parser


def _chosen_command(argv: list[str]) -> str:
    """The subcommand ``argv`` names: its first word (the top level's own options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), "")


def _run_worker(argv: list[str], verbose: bool) -> int:
    from mosaic_core.pipeline import run_worker
    from mosaic_core.workers import discover_workers

    worker, rest = None, []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--worker" and i + 1 < len(argv):
            worker = argv[i + 1]
            i += 2
            continue
        if arg.startswith("--worker="):
            worker = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    config_data = None
    if worker is None:
        from mosaic_core.choice import worker_for_argv

        try:
            worker, config_data = worker_for_argv(rest)
        except UsageError:
            if not any(a in ("-h", "--help") for a in rest):
                raise
            names = ", ".join(i.name for i in discover_workers() if i.status == "active") or "none"
            print(
                f"usage: mosaic run [--worker NAME] [worker flags...]\n\ninstalled workers: {names}\n"
                "worker flags: mosaic run --worker NAME --help"
            )
            return 0
    return run_worker(worker, rest, prog=f"mosaic run --worker {worker}", config_data=config_data)


def main(argv: list[str] | None = None) -> int:
    # Ctrl-C (SIGINT) stops every command, also when a non-interactive shell started this one in
    # the background with SIGINT ignored (a long-running server would otherwise be deaf to it).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    procs.keep_cwd_off_child_paths()
    if argv is None:  # the console script: the process ends with the command
        procs.allow_exit_at_once()
    argv = list(sys.argv[1:] if argv is None else argv)
    return procs.command_ended(_command(argv))


def _command(argv: list[str]) -> int:
    verbose = "--verbose" in argv
    if argv[:1] == ["run"] or (argv[:1] == ["--verbose"] and argv[1:2] == ["run"]):
        rest = argv[argv.index("run") + 1 :]
        with hostsignals.guarded():  # signalled before its run directory exists, a run leaves nothing
            return run_cli_command(lambda: _run_worker(rest, verbose), verbose=verbose)
    chosen = _chosen_command(argv)
    commands = _commands(chosen)
    parser = build_parser(commands, chosen=chosen)
    ns = parser.parse_args(argv)
    if ns.command is None:
        parser.print_help()
        return 2
    command = next(c for c in commands if c.name == ns.command)
    gc.freeze()  # what start-up made lives as long as the process: the collector skips it from now on
    return run_cli_command(lambda: command.run(ns), verbose=ns.verbose)


if __name__ == "__main__":
    sys.exit(main())
