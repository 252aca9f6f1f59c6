"""``mosaic daemon``, ``mosaic submit``, ``mosaic cancel``: the trainer daemon's commands.

Import-light on purpose: grpc and the daemon are imported inside ``run`` only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic_core.cli.commands import CliCommand
from mosaic_core.errors import ConfigError
from mosaic_core.jsontext import dumps
from mosaic_core.trainer.protocol import DEFAULT_LISTEN, is_loopback  # no grpc there

if TYPE_CHECKING:
    from mosaic_core.trainer.daemon import TrainerDaemon


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default=DEFAULT_LISTEN, help=f"daemon address HOST:PORT (default {DEFAULT_LISTEN})")
    parser.add_argument("--state-dir", help="the daemon's state dir: its client.token is sent (default var/trainer)")
    parser.add_argument("--token-file", help="a file holding the daemon's client token (wins over $MOSAIC_TOKEN)")


def _token(ns: argparse.Namespace) -> str | None:
    from mosaic_core.trainer.auth import find_token

    return find_token(ns.token_file, ns.state_dir)


# ---------------------------------------------------------------------- daemon
def _configure_daemon(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        help=f"HOST:PORT to serve on (default {DEFAULT_LISTEN}, loopback only; port 0 picks one)",
    )
    parser.add_argument(
        "--state-dir", default="var/trainer", help="runs, configs, logs and the state database (default var/trainer)"
    )
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=None,
        help="runs executing at once; more wait in a queue (default: one per usable CPU)",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=90.0,
        help="seconds of silence after which a run is failed and stopped",
    )
    parser.add_argument("--grace-period", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument(
        "--on-shutdown",
        choices=("cancel", "wait"),
        default="cancel",
        help="on SIGTERM/SIGINT: cancel running runs (default) or wait for them",
    )
    parser.add_argument("--gpus", type=int, default=None, help="GPUs this host offers (default: detected)")
    parser.add_argument(
        "--allow-scripts",
        action="append",
        default=[],
        metavar="DIR",
        help="a submitted algo may be a .py script inside DIR (absolute; repeatable); "
        "by default only installed algorithms run",
    )
    parser.add_argument(
        "--allow-any-script",
        action="store_true",
        help="a submitted algo may be any .py script this user can read (trusted clients only)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="no client token: anyone who can reach the port may submit and cancel (loopback only)",
    )
    # Where submitted runs execute (--launcher, --ray-address…): passed on on each run's `mosaic run` command line.
    from mosaic_core import launchers  # here: `mosaic --help` and the other commands need none of it

    launchers.add_arguments(parser)


def _run_daemon(ns: argparse.Namespace) -> int:
    from mosaic_core import launchers
    from mosaic_core.trainer.daemon import DaemonOptions, serve

    choice = launchers.select(ns)  # each spawned `mosaic run` gets choice.argv() on its command line
    choice.check(command="mosaic daemon")
    options = DaemonOptions(
        state_dir=Path(ns.state_dir),
        listen=ns.listen,
        max_concurrent=ns.max_concurrent,
        heartbeat_timeout=ns.heartbeat_timeout,
        grace_period=ns.grace_period,
        on_shutdown=ns.on_shutdown,
        gpus=ns.gpus,
        insecure=ns.insecure,
        allow_scripts=tuple(Path(d) for d in ns.allow_scripts),
        allow_any_script=ns.allow_any_script,
        launcher_argv=tuple(choice.argv()),
        log=lambda message: print(f"mosaic daemon: {message}", file=sys.stderr, flush=True),
    )

    return serve(options, on_ready=lambda daemon: _announce_ready(daemon, choice, options.max_concurrent))


def _announce_ready(daemon: TrainerDaemon, choice: Any, max_concurrent: int | None) -> None:
    """The ``daemon_ready`` line on stdout; where it listens, who may call it and its warnings on stderr."""
    token_file = str(daemon.state_dir / "client.token") if daemon.token else None
    print(
        json.dumps(
            {
                "event": "daemon_ready",
                "listen_address": daemon.address,
                "pid": daemon.pid,
                "state_dir": str(daemon.state_dir),
                "token_file": token_file,
            }
        ),
        flush=True,
    )
    print(
        f"mosaic daemon: listening on {daemon.address} (state dir {daemon.state_dir}, "
        f"{max_concurrent} concurrent runs, {daemon.gpus} GPU(s)); Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )

    def say(text: str) -> None:
        print(f"mosaic daemon: {text}", file=sys.stderr, flush=True)

    if not choice.local:
        say(f"runs execute through the {choice.name!r} launcher")
    if token_file:
        say(
            f"clients need the token in {token_file} (mosaic submit --state-dir {daemon.state_dir}, "
            "or $MOSAIC_TOKEN, sent as 'authorization: Bearer <token>')"
        )
    else:
        say("warning: --insecure: anyone on this machine can submit code to run as this user, cancel and watch runs")
    host = daemon.address.rsplit(":", 1)[0]
    if not is_loopback(host):
        say(
            f"warning: {host} is reachable beyond this machine and the protocol has no TLS: the token "
            "crosses the network in clear"
        )


# ---------------------------------------------------------------------- submit / cancel
def _configure_submit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "config",
        help="worker config JSON (flat, or MOSAIC's trainer payload: metadata.worker.config with its "
        "module, arguments, metadata.ui and environment; docs/daemon.md); "
        'an optional "worker" key picks the worker (default: the module\'s, the one '
        "installed, or $MOSAIC_DEFAULT_WORKER)",
    )
    parser.add_argument("--run-id", default="", help="run id (wins over the file's)")
    _target(parser)


def _run_submit(ns: argparse.Namespace) -> int:
    from mosaic_core.trainer.client import submit

    try:
        text = Path(ns.config).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the config: {exc.strerror}", source=ns.config) from None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", source=ns.config
        ) from None
    reply = submit(ns.target, text, run_id=ns.run_id, token=_token(ns))
    for note in reply.notes:
        print(f"mosaic: note: {note}", file=sys.stderr)
    answer: dict[str, object] = {"run_id": reply.run_id, "digest": reply.digest}
    if reply.dry_run:  # metadata.worker.arguments held --dry-run: validated, nothing started
        answer.update(dry_run=True, summary=json.loads(reply.summary_json))
    print(dumps(answer, indent=2 if reply.dry_run else None))
    return 0


def _configure_cancel(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help="the run to stop")
    _target(parser)


def _run_cancel(ns: argparse.Namespace) -> int:
    from mosaic_core.trainer.client import cancel, list_runs, record_to_dict

    token = _token(ns)
    cancel(ns.target, ns.run_id, token=token)
    record = next((r for r in list_runs(ns.target, token=token) if r.run_id == ns.run_id), None)
    print(dumps(record_to_dict(record) if record is not None else {"run_id": ns.run_id}))
    return 0


COMMANDS = [
    CliCommand("daemon", "serve the gRPC trainer daemon (runs submitted jobs)", _configure_daemon, _run_daemon),
    CliCommand("submit", "submit a worker config to a trainer daemon", _configure_submit, _run_submit),
    CliCommand("cancel", "cancel a run on a trainer daemon", _configure_cancel, _run_cancel),
]
