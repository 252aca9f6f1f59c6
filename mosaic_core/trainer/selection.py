"""Which worker a submission runs through: its ``worker`` field, else ``metadata.worker.module``
(MOSAIC's payloads name the module its daemon spawned), else the choice ``mosaic run`` makes
without ``--worker`` (:func:`mosaic_core.choice.choose_worker`).

A module is either a worker's CLI module, ``<package>.cli`` of the package its ``mosaic.workers``
entry point lives in (``cleanrl_worker.cli``), or an algorithm module one worker knows
(:meth:`mosaic_core.worker.Worker.algorithm_of_module`, e.g. ``cleanrl.ppo``), which must then
agree with ``config.algo``. Anything else is refused in one line.
"""

from __future__ import annotations

from typing import Any

from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.errors import ConfigError, UsageError

SOURCE = "config_json"
FIELD = "metadata.worker.module"


def cli_module(item: LoadedEntryPoint) -> str:
    """The module ``python -m`` runs for a worker: ``cli`` in its entry point's top package."""
    return item.value.partition(":")[0].split(".")[0] + ".cli"


def choose(
    named: str | None, module: str | None, config: dict[str, Any], workers: list[LoadedEntryPoint]
) -> tuple[str, str | None]:
    """``(worker, algo)``: the worker's name and the algorithm ``module`` names (None when it
    names a worker's CLI, or nothing)."""
    active = [item for item in workers if item.status == "active"]
    if module is None:
        return (named or _default(config, workers)), None
    by_cli = [item.name for item in active if cli_module(item) == module]
    if by_cli:
        return _one_of(by_cli, named, module), None
    asked = [item for item in active if named is None or item.name == named]
    knowing = [(item.name, algo) for item in asked if (algo := _algorithm(item, module)) is not None]
    if len(knowing) == 1:
        return knowing[0]
    clis = ", ".join(cli_module(item) for item in active)
    if not knowing:
        whose = f"of worker {named!r}" if named else "any installed worker knows"
        raise ConfigError(
            f"{FIELD} {module!r} is neither a worker's CLI module ({clis}) nor an algorithm module {whose}",
            field=FIELD,
            source=SOURCE,
        )
    raise ConfigError(
        f"{FIELD} {module!r} is an algorithm module of workers {', '.join(name for name, _ in knowing)}; "
        'say which with "worker"',
        field=FIELD,
        source=SOURCE,
    )


def _one_of(names: list[str], named: str | None, module: str) -> str:
    """The worker whose CLI ``module`` is: the only one, or the one ``worker`` names."""
    if named in names or (named is None and len(names) == 1):
        return named or names[0]
    if named is None:
        raise ConfigError(
            f'{FIELD} {module} is the CLI of workers {", ".join(names)}; say which with "worker"',
            field=FIELD,
            source=SOURCE,
        )
    raise ConfigError(
        f"{FIELD} {module} is the CLI of worker {' or '.join(map(repr, names))}; the payload's worker is {named!r}",
        field=FIELD,
        source=SOURCE,
    )


def check_algorithm(module: str, algo: str, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``algo`` (the one ``module`` names) when it has none; refused when it
    names another."""
    given = config.get("algo")
    if given in (None, ""):
        return {**config, "algo": algo}
    if not isinstance(given, str) or given.lower() != algo.lower():
        raise ConfigError(
            f"{FIELD} {module} is algorithm {algo!r}; the config's algo is {given!r}", field=FIELD, source=SOURCE
        )
    return config


def _algorithm(item: LoadedEntryPoint, module: str) -> str | None:
    from mosaic_core.worker import load_worker

    return load_worker(item).algorithm_of_module(module)


def _default(config: dict[str, Any], workers: list[LoadedEntryPoint]) -> str:
    from mosaic_core.choice import choose_worker

    try:
        return choose_worker(workers, config)
    except UsageError as exc:
        raise ConfigError(str(exc), field="worker", source=SOURCE) from None
