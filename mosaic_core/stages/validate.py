"""Stage 2, validate: the resolved config checked by the host, the plugins and the worker. Every
problem is collected, then one ConfigError names them all (exit 2); a setting a plugin published
that the worker cannot honour, or an extras key inside a claimed prefix that its owner does not
know, is one of them."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from mosaic_core.config import WorkerConfig
from mosaic_core.contract import standard_key_problems
from mosaic_core.errors import ConfigError
from mosaic_core.plugins import PluginHost
from mosaic_core.stages.resolve import CORE_OWNER, Request, Resolved
from mosaic_core.types import ChildEvent, ExtrasKey
from mosaic_core.worker import declare


@dataclass(frozen=True)
class Validated:
    """A config every check passed: the extras nobody claims (the worker's own), the events the
    worker declares, and the settings plugins published for it (all honoured)."""

    config: WorkerConfig
    worker_extras: dict[str, Any]
    events: frozenset[str]
    settings: tuple[Any, ...]


def validate(request: Request, resolved: Resolved, host: PluginHost) -> Validated:
    """The problems the resolve stage found, the extras' owners', the plugins' and the worker's,
    as one ConfigError; then the settings check."""
    item, worker, config = request.worker_item, request.worker, resolved.config
    events = declare(item, "child_events()", worker.child_events, ChildEvent)
    worker_extras, unknown_keys = split_extras(resolved.claimed, config.extras)
    problems = [*resolved.problems, *unknown_keys, *standard_key_problems(config.extras, getattr(worker, "modes", ()))]
    problems += host.validate_config(config)
    problems += list(worker.validate(config, request.options) or [])
    if problems:
        where = f" in {config.source}" if config.source else ""
        raise ConfigError(f"invalid config{where}: " + "; ".join(problems))
    settings = honoured_settings(item.name, tuple(worker.honoured_settings() or ()), host, config)
    return Validated(config, worker_extras, frozenset(event.name for event in events), settings)


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


def honoured_settings(
    worker_name: str, honoured: tuple[type, ...], host: PluginHost, config: WorkerConfig
) -> tuple[Any, ...]:
    """The settings plugins published for this run; one the worker does not honour refuses
    the run in one line naming the setting, its plugin and the worker (exit 2)."""
    settings = host.run_settings(config)
    for plugin, setting in settings:
        if not isinstance(setting, honoured):
            asked = getattr(setting, "requested_by", None) or f"plugin {plugin!r}"
            raise ConfigError(
                f"{asked}: worker {worker_name!r} cannot honour {type(setting).__name__} "
                f"(published by plugin {plugin!r}); leave it out for this worker",
                field=asked if asked.startswith("extras.") else None,
                source=config.source,
            )
    return tuple(setting for _plugin, setting in settings)
