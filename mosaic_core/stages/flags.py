"""Stage 0, the command line: the flags every worker's runs share, their checks, and the host
options they set (``docs/reference/cli.md`` is generated from :func:`host_parser`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from mosaic_core.errors import UsageError
from mosaic_core.renamed import add_renamed_flag
from mosaic_core.trainer.protocol import check_target

DEFAULT_GRPC_TARGET = "127.0.0.1:50055"
MIN_HEARTBEAT_S = 0.1  # the daemon's own floor for the runs it starts
RUN_FIELD_FLAGS = ("algo", "env_id", "total_timesteps", "seed", "worker_id", "run_id")  # flags that set a config field


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
    _add_run_flags(parser.add_argument_group("run"))
    _add_host_flags(parser.add_argument_group("host"))
    return parser


def _add_run_flags(run: argparse._ArgumentGroup) -> None:
    """What the run is: its config, its fields, its id and where it is recorded."""
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


def _add_host_flags(host: argparse._ArgumentGroup) -> None:
    """How the host runs it: a dry run, a daemon, heartbeats, CPUs, output."""
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


def check_host_options(ns: argparse.Namespace) -> None:
    """A usage error for a host flag out of range or given without the flag it needs."""
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


def worker_option_defaults(worker: Any) -> dict[str, Any]:
    """The worker's own flags at their defaults (for runs not started from a command line)."""
    parser = argparse.ArgumentParser(add_help=False)
    worker.add_arguments(parser)
    options = vars(parser.parse_args([]))
    if worker.accepts_extra_argv:
        options["extra_argv"] = []
    return options


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
