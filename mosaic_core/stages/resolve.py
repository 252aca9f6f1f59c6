"""Stage 1, resolve: what a run is asked to be (:class:`Request`: flags, a config file, a
recorded run repeated with ``--from``, an existing run continued) and its config, defaults
included (:class:`Resolved`). Nothing is checked here beyond what building the config needs."""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import resume as resuming
from mosaic_core.algonames import spelling, unknown_algorithm
from mosaic_core.config import (
    REDACTED,
    RUN_ID,
    SECRET_EXTRAS_ENV,
    WorkerConfig,
    build_config,
    parse_extras_json,
    raw_payload,
    read_config_file,
)
from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.errors import ConfigError, PluginError, UsageError
from mosaic_core.plugins import PluginHost
from mosaic_core.runs import default_runs_root, find_run_dir
from mosaic_core.stages import trust
from mosaic_core.stages.flags import RUN_FIELD_FLAGS, check_host_options
from mosaic_core.types import CodePath, ExtrasKey
from mosaic_core.worker import Worker, declare, declared_names

CORE_OWNER = "core (the run contract)"
CodeCheck = Callable[[list[CodePath]], None]


@dataclass(frozen=True)
class Request:
    """What a run is asked to be, nothing decided yet. ``data``: a config file's fields (``raw``:
    the whole payload they were read from); ``overrides``: flags; ``options``: the worker's own
    flags; ``dry_run``: ask the worker for its thorough checks too; ``check_code``: a daemon's
    script policy; ``existing``: ``"resume"`` or ``"restart"`` an existing run."""

    worker_item: LoadedEntryPoint
    worker: Worker
    data: dict[str, Any] | None = None
    raw: Any = None
    source: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    runs_dir: str | None = None
    quiet: bool = False
    dry_run: bool = True
    num_cpus: int | None = None
    check_code: CodeCheck | None = None
    existing: str | None = None


@dataclass(frozen=True)
class Resolved:
    """A run's config with every default in, the extras keys claimed (owner, key) and the problems
    found on the way (an algorithm the worker does not run)."""

    config: WorkerConfig
    claimed: list[tuple[str, ExtrasKey]]
    problems: list[str]


def request_from_flags(
    worker_item: LoadedEntryPoint,
    worker: Worker,
    ns: argparse.Namespace,
    options: dict[str, Any],
    config_data: dict[str, Any] | None = None,
) -> Request:
    """The run ``mosaic run``'s flags ask for (``config_data``: the ``--config`` file's contents
    when read already: a pipe reads once). An existing run's id continues it (or, with
    ``--restart``, starts it over); ``--from`` repeats a recorded run."""
    check_host_options(ns)
    if ns.config and ns.from_run:
        raise UsageError("give --config or --from, not both")
    source, existing, config_data = _source_of(ns, config_data)
    if source:  # a config that came with an imported run is someone else's: it runs once trusted
        trust.refuse_untrusted_source(source, f"--from {ns.from_run}" if ns.from_run else f"--config {source}")
    if source and (config_data is None or ns.from_run):
        config_data = read_config_file(source, run_file=bool(ns.from_run))
    data = recorded_config(config_data, worker_item.name, source, ns) if source and config_data is not None else None
    if existing and data is not None:
        resuming.check_recorded(data, {"algo": ns.algo, "env_id": ns.env_id}, ns.run_id)
    extras = parse_extras_json(ns.extras) if ns.extras else None
    if os.environ.get(SECRET_EXTRAS_ENV):
        extras = {**(extras or {}), **parse_extras_json(os.environ.pop(SECRET_EXTRAS_ENV))}
    return Request(
        worker_item,
        worker,
        data=data,
        raw=raw_payload(config_data) if data is not None else None,
        source=source,
        overrides={name: getattr(ns, name) for name in RUN_FIELD_FLAGS},
        extras=extras,
        options=options,
        runs_dir=ns.runs_dir,
        quiet=ns.quiet,
        dry_run=ns.dry_run,
        num_cpus=ns.num_cpus,
        existing=existing,
    )


def _source_of(
    ns: argparse.Namespace, config_data: dict[str, Any] | None
) -> tuple[str | None, str | None, dict[str, Any] | None]:
    """The config file the run comes from, whether it continues an existing run, and the file's
    contents when read already."""
    source, existing = ns.config, None
    valid_id = isinstance(ns.run_id, str) and RUN_ID.fullmatch(ns.run_id)  # else validation names what is wrong
    root = _runs_root(ns) if valid_id else None
    if root is not None and not ns.from_run and resuming.recorded(root / ns.run_id):  # the same command again
        existing = "restart" if ns.restart else "resume"  # continues the run (or starts it over)
        if not source:
            source, config_data = str(root / ns.run_id / "config.json"), None
    if ns.from_run:
        source = str(find_run_dir(_runs_root(ns), ns.from_run) / "config.json")
    return source, existing, config_data


def _runs_root(ns: argparse.Namespace) -> Path:
    return Path(ns.runs_dir).absolute() if ns.runs_dir else default_runs_root()


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
        if (_runs_root(ns) / run_id).exists():
            data.pop("run_id")  # repeating a recorded run: it gets an id of its own
    return data


def code_check(
    worker_item: LoadedEntryPoint, worker: Worker, policy: Callable[[list[CodePath]], None] | None
) -> Callable[[dict[str, Any]], list[CodePath]]:
    """The check of a config's code paths (the worker's ``code_paths``, declared well): each path
    goes to the trust stage once, held to a daemon's ``policy`` there, however often a config is
    checked (before its defaults, then as a whole)."""
    checked: set[CodePath] = set()

    def code(mapping: dict[str, Any]) -> list[CodePath]:
        paths = declare(worker_item, "code_paths(data)", functools.partial(worker.code_paths, mapping), CodePath)
        new = [path for path in paths if path not in checked]
        if new:
            trust.check_code(new, policy)
            checked.update(new)
        return paths

    return code


def resolve(request: Request, host: PluginHost) -> Resolved:
    """The request's config (:func:`resolve_config`), its code paths checked as a whole once more
    (the defaults may have added some)."""
    item, worker = request.worker_item, request.worker
    claimed = claimed_keys(item.name, worker, host)
    code = code_check(item, worker, request.check_code)
    config, problems = resolve_config(
        item,
        worker,
        host,
        data=request.data,
        raw=request.raw,
        source=request.source,
        overrides=request.overrides,
        extras=request.extras,
        options=request.options,
        claimed=claimed,
        code=code,
    )
    code(config.to_dict(redacted=False))
    return Resolved(config, claimed, problems)


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
    keys = claimed_keys(worker_item.name, worker, host) if claimed is None else claimed
    check = code or code_check(worker_item, worker, None)
    problems: list[str] = []

    def defaults(merged: dict[str, Any]) -> dict[str, Any]:
        paths = check(merged)  # before any default is computed: defaults may read the files
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
            extras_key=lambda name: any(key.matches(name) for _owner, key in keys),
            raw=raw,
        )
    except ConfigError:
        if not problems:
            raise
        raise ConfigError("; ".join(problems), field="algo", source=source) from None  # what else is missing follows
    return config, problems


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
