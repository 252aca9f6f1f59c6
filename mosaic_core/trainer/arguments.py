"""``metadata.worker.arguments``: the worker CLI flags MOSAIC's daemon put on the worker's
command line, read with the parsers ``python -m <worker>.cli`` uses (the host's flags, then the
worker's own).

- ``--algo``, ``--env-id``, ``--total-timesteps``, ``--seed``, ``--worker-id``, ``--run-id``,
  ``--extras``: folded into the config as the CLI folds them (flags win; ``--extras`` per key);
- ``--dry-run`` (``--emit-summary``): the submission is validated and answered, never run;
- ``--grpc``, ``--grpc-target``: every daemon run registers with the daemon that started it;
- ``--num-cpus``: the run's CPU budget, passed on to its command line;
- the worker's own flags and, for a worker that takes them, its algorithm script's flags:
  checked as the CLI checks them, then passed on to the run's command line;
- the host flags the daemon sets for every run (``--config``, ``--runs-dir``…), ``--help``,
  and anything the worker does not have: refused in one line naming the flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mosaic_core.config import is_secret_key, parse_extras_json
from mosaic_core.errors import ConfigError, UsageError
from mosaic_core.worker import Worker

FIELD = "metadata.worker.arguments"
OVERRIDES = ("algo", "env_id", "total_timesteps", "seed", "worker_id", "run_id")
HONOURED = frozenset({*OVERRIDES, "extras", "dry_run", "emit_summary", "grpc", "grpc_target", "num_cpus"})


@dataclass(frozen=True)
class WorkerArguments:
    overrides: dict[str, Any] = field(default_factory=dict)  # config fields the flags set
    extras: dict[str, Any] | None = None  # --extras
    dry_run: bool = False
    grpc_target: str | None = None
    options: dict[str, Any] | None = None  # the worker's own flags, parsed (None: none given, their defaults)
    passed_on: tuple[str, ...] = ()  # flags for the run's command line (--num-cpus, the worker's own)

    def apply(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with the flags' values, as the CLI merges them."""
        merged = {**config, **self.overrides}
        base = config.get("extras")
        if self.extras is not None and isinstance(base, dict | None):
            merged["extras"] = {**(base or {}), **self.extras}
        return merged


def _refuse(message: str) -> ConfigError:
    return ConfigError(f"{FIELD}: {message}", field=FIELD, source="config_json")


def _host_parser(worker_name: str) -> argparse.ArgumentParser:
    from mosaic_core import launchers
    from mosaic_core.stages.flags import host_parser

    parser = host_parser(f"mosaic run --worker {worker_name}", worker_name, "")
    launchers.add_arguments(parser, launchers.active())
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    try:
        return parser.parse_known_args(argv)
    except UsageError as exc:
        raise _refuse(str(exc)) from None


def host_overrides(arguments: Sequence[str]) -> dict[str, Any]:
    """The config fields the host flags among ``arguments`` set (to choose the worker by them)."""
    if not arguments:
        return {}
    ns, _ = _parse(_host_parser("WORKER"), _without_help(arguments))
    return {name: getattr(ns, name) for name in OVERRIDES if getattr(ns, name) is not None}


def read_arguments(arguments: Sequence[str], worker: Worker, worker_name: str) -> WorkerArguments:
    """The flags as the daemon honours them; ConfigError naming the first it cannot."""
    if not arguments:
        return WorkerArguments()
    parser = _host_parser(worker_name)
    ns, rest = _parse(parser, _without_help(arguments))
    given = _honoured_host_flags(parser, ns)
    if ns.emit_summary and not ns.dry_run:
        raise _refuse("--emit-summary needs --dry-run")
    options = _worker_flags(worker, worker_name, rest)
    _refuse_secret_flags(rest)
    return WorkerArguments(
        overrides={name: getattr(ns, name) for name in OVERRIDES if getattr(ns, name) is not None},
        extras=parse_extras_json(ns.extras) if ns.extras else None,
        dry_run=ns.dry_run,
        grpc_target=ns.grpc_target if "grpc_target" in given else None,
        options=options,
        passed_on=(*(("--num-cpus", str(ns.num_cpus)) if ns.num_cpus is not None else ()), *rest),
    )


def _honoured_host_flags(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> set[str]:
    """The host flags given (their dests); one the daemon sets for every run is refused."""
    defaults, _ = parser.parse_known_args([])
    given = {dest for dest, value in vars(ns).items() if value != getattr(defaults, dest, None)}
    owned = sorted(given - HONOURED)
    if owned:
        flag = next((a.option_strings[0] for a in parser._actions if a.dest == owned[0] and a.option_strings), owned[0])
        raise _refuse(f"{flag} is the daemon's to set for every run it starts; leave it out")
    return given


def _worker_flags(worker: Worker, worker_name: str, rest: list[str]) -> dict[str, Any]:
    """The worker's own flags in ``rest`` as ``options`` (``mosaic run``'s), and the script's
    flags for a worker that takes them; anything else is refused."""
    from mosaic_core.stages.flags import OneLineParser

    own = OneLineParser(prog=f"mosaic run --worker {worker_name}", add_help=False, allow_abbrev=False)
    worker.add_arguments(own)  # type: ignore[arg-type]  # a parser serves as the worker's group
    options, extra = _parse(own, rest)
    if extra and not worker.accepts_extra_argv:
        raise _refuse(
            f"unrecognized argument(s) {' '.join(extra)}: worker {worker_name!r} has no such flag "
            f"(`mosaic run --worker {worker_name} --help` lists them)"
        )
    return {**vars(options), "restart": False, **({"extra_argv": extra} if worker.accepts_extra_argv else {})}


def _without_help(arguments: Sequence[str]) -> list[str]:
    if "-h" in arguments or "--help" in arguments:
        raise _refuse("--help prints the worker's help and runs nothing; leave it out")
    return list(arguments)


def _refuse_secret_flags(passed_on: list[str]) -> None:
    """A secret would be on the run's command line, which every local user can read."""
    for token in passed_on:
        name = token.split("=", 1)[0]
        if name.startswith("--") and is_secret_key(name[2:].replace("-", "_")):
            raise _refuse(
                f"{name} would put a secret on the run's command line, which every user of this machine can "
                "read; give it in extras or environment (kept off disk and off command lines)"
            )
