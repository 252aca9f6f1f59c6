"""Which worker a submission runs through: its ``worker`` field, else the modules MOSAIC's
payload names (``metadata.worker.module``, and the top-level ``arguments: ["-m", MODULE]``
its launcher ran), else the choice ``mosaic run`` makes without ``--worker``
(:func:`mosaic_core.choice.choose_worker`).

A module is either a worker's CLI module, ``<package>.cli`` of the package its ``mosaic.workers``
entry point lives in (``cleanrl_worker.cli``), or an algorithm module one worker knows
(:meth:`mosaic_core.worker.Worker.algorithm_of_module`, e.g. ``cleanrl.ppo``), which must then
agree with ``config.algo``. Modules naming different workers, or anything else, are refused in
one line.
"""

from __future__ import annotations

from typing import Any

from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.errors import ConfigError, UsageError

SOURCE = "config_json"


def cli_module(item: LoadedEntryPoint) -> str:
    """The module ``python -m`` runs for a worker: ``cli`` in its entry point's top package."""
    return item.value.partition(":")[0].split(".")[0] + ".cli"


def choose(
    named: str | None, modules: list[tuple[str, str]], config: dict[str, Any], workers: list[LoadedEntryPoint]
) -> tuple[str, list[tuple[str, str, str]]]:
    """The worker's name, and ``(field, module, algo)`` for each of ``modules`` (``(field,
    module)`` pairs) that names an algorithm."""
    if not modules:
        return (named or _default(config, workers)), []
    active = [item for item in workers if item.status == "active"]
    found = [(where, module, *_resolve(named, where, module, active)) for where, module in modules]
    if len({worker for _, _, worker, _ in found}) > 1:
        said = "; ".join(f"{where} {module} is worker {worker!r}'s" for where, module, worker, _ in found)
        raise ConfigError(f"{said}: they must name one worker", field=modules[0][0], source=SOURCE)
    return found[0][2], [(where, module, algo) for where, module, _, algo in found if algo is not None]


def _resolve(named: str | None, where: str, module: str, active: list[LoadedEntryPoint]) -> tuple[str, str | None]:
    by_cli = [item.name for item in active if cli_module(item) == module]
    if by_cli:
        return _one_of(by_cli, named, where, module), None
    asked = [item for item in active if named is None or item.name == named]
    knowing = [(item.name, algo) for item in asked if (algo := _algorithm(item, module)) is not None]
    if len(knowing) == 1:
        return knowing[0]
    if not knowing:
        clis = ", ".join(dict.fromkeys(cli_module(item) for item in active))
        whose = f"of worker {named!r}" if named else "any installed worker knows"
        raise ConfigError(
            f"{where} {module!r} is neither a worker's CLI module ({clis}) nor an algorithm module {whose}",
            field=where,
            source=SOURCE,
        )
    raise ConfigError(
        f"{where} {module!r} is an algorithm module of workers {', '.join(name for name, _ in knowing)}; "
        'say which with "worker"',
        field=where,
        source=SOURCE,
    )


def _one_of(names: list[str], named: str | None, where: str, module: str) -> str:
    """The worker whose CLI ``module`` is: the only one, or the one ``worker`` names."""
    if named in names or (named is None and len(names) == 1):
        return named or names[0]
    if named is None:
        raise ConfigError(
            f'{where} {module} is the CLI of workers {", ".join(names)}; say which with "worker"',
            field=where,
            source=SOURCE,
        )
    raise ConfigError(
        f"{where} {module} is the CLI of worker {' or '.join(map(repr, names))}; the payload's worker is {named!r}",
        field=where,
        source=SOURCE,
    )


def check_algorithm(where: str, module: str, algo: str, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``algo`` (the one ``module`` names) when it has none; refused when it
    names another."""
    given = config.get("algo")
    if given in (None, ""):
        return {**config, "algo": algo}
    if not isinstance(given, str) or given.lower() != algo.lower():
        raise ConfigError(
            f"{where} {module} is algorithm {algo!r}; the config's algo is {given!r}", field=where, source=SOURCE
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
