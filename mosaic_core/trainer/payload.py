"""The original MOSAIC's trainer payload (its ``TrainRunConfig``), read whole by SubmitRun.

A submission is a worker config (flat) or MOSAIC's payload, which nests it::

    {"run_name", "entry_point", "arguments", "environment", "resources", "artifacts", "schedule",
     "metadata": {"ui": {...}, "worker": {"module", "arguments", "config", "use_grpc", "grpc_target",
                                          "worker_id", "agent_id", ...}, "artifacts": {...}},
     "worker": NAME}   # ours: the worker, when the module does not say

Every field is honoured, recorded with the run, or refused in one line (docs/daemon.md has the
table); nothing is dropped. ``environment`` reaches the run's processes and never a file: it is
kept out of :attr:`Payload.recorded`, which holds everything else but the config, redacted.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from mosaic_core.config import redact
from mosaic_core.errors import ConfigError

SOURCE = "config_json"
TOP_LEVEL = ("run_name", "entry_point", "arguments", "environment", "resources", "artifacts", "schedule", "metadata")
WORKER_KEYS = (
    "module",
    "arguments",
    "config",
    "use_grpc",
    "grpc_target",
    "worker_id",
    "agent_id",
    "algorithm",
    "agent_type",
    "script",
    "bdi_enabled",
    "bdi_config",
)
MAX_ARGUMENTS = 256
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
MAX_ENV_VALUE = 32 * 1024
MAX_ENV_ITEMS = 256
# What the host sets for a run, or what chooses the code a process runs: never the payload's.
HOST_ENV_PREFIXES = ("MOSAIC_", "PYTHON", "LD_", "DYLD_")
HOST_ENV_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "IFS", "ENV", "BASH_ENV", "GCONV_PATH"})


@dataclass(frozen=True)
class Payload:
    """A submission taken apart: the worker config and what surrounds it."""

    config: dict[str, Any]
    worker: str | None = None  # our top-level "worker"
    modules: tuple[tuple[str, str], ...] = ()  # (field, module): metadata.worker.module, the top-level ["-m", M]
    arguments: tuple[str, ...] = ()  # metadata.worker.arguments: the worker's CLI flags
    environment: dict[str, str] = field(default_factory=dict)  # for the run's processes only
    grpc_target: str | None = None
    entry_point: str | None = None
    gpus_requested: int = 0  # resources.gpus.requested
    gpus_mandatory: bool = False  # resources.gpus.mandatory
    worker_id: str | None = None  # metadata.worker.worker_id, else metadata.ui.worker_id
    agent_id: str | None = None  # metadata.worker.agent_id, else metadata.ui.agent_id
    recorded: dict[str, Any] = field(default_factory=dict)  # kept with the run (redacted; no environment values)


def read_payload(data: Any) -> Payload:
    """``data`` (a parsed ``config_json``) as a :class:`Payload`; ConfigError naming the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"a worker config must be a JSON object, got {type(data).__name__}", source=SOURCE)
    metadata = data.get("metadata")
    if not (isinstance(metadata, dict) and "worker" in metadata):
        flat = dict(data)
        worker = flat.pop("worker", None)
        return Payload(config=flat, worker=worker)
    unknown = sorted(set(data) - {*TOP_LEVEL, "worker"})
    if unknown:
        raise ConfigError(
            f"unknown field(s) {', '.join(unknown)} in the trainer payload; MOSAIC's TrainRunConfig has "
            f"{', '.join(TOP_LEVEL)} (and ours, worker)",
            field=unknown[0],
            source=SOURCE,
        )
    described = _worker_section(metadata["worker"])
    ui = _object(metadata.get("ui"), "metadata.ui")
    resources = _object(data.get("resources"), "resources")
    gpus = _object(resources.get("gpus"), "resources.gpus")
    return Payload(
        config=dict(described["config"]),
        worker=data.get("worker"),
        modules=_modules(described.get("module"), data.get("arguments")),
        arguments=_strings(described.get("arguments", []), "metadata.worker.arguments"),
        environment=check_environment(data.get("environment", {})),
        grpc_target=_text(described.get("grpc_target"), "metadata.worker.grpc_target"),
        entry_point=_text(data.get("entry_point"), "entry_point"),
        gpus_requested=_whole(gpus.get("requested", 0), "resources.gpus.requested"),
        gpus_mandatory=gpus.get("mandatory") is True,
        worker_id=_text(described.get("worker_id") or ui.get("worker_id"), "metadata.ui.worker_id"),
        agent_id=_text(described.get("agent_id") or ui.get("agent_id"), "metadata.ui.agent_id"),
        recorded=_recorded(data),
    )


def _worker_section(value: Any) -> dict[str, Any]:
    described = _object(value, "metadata.worker")
    if not isinstance(described.get("config"), dict):
        raise ConfigError("metadata.worker.config must be an object", field="metadata.worker.config", source=SOURCE)
    unknown = sorted(set(described) - set(WORKER_KEYS))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)} in metadata.worker; MOSAIC's daemon read {', '.join(WORKER_KEYS)}",
            field=f"metadata.worker.{unknown[0]}",
            source=SOURCE,
        )
    if described.get("script") is not None:
        raise ConfigError(
            "metadata.worker.script: MOSAIC's daemon ran that executable; this daemon runs installed workers "
            "(metadata.worker.module), and an algorithm script only as config.algo under --allow-scripts",
            field="metadata.worker.script",
            source=SOURCE,
        )
    if described.get("bdi_enabled"):
        raise ConfigError(
            "metadata.worker.bdi_enabled: MOSAIC's daemon started a SPADE-BDI agent; this daemon has no BDI worker",
            field="metadata.worker.bdi_enabled",
            source=SOURCE,
        )
    use_grpc = described.get("use_grpc", True)
    if use_grpc is not True:
        raise ConfigError(
            f"metadata.worker.use_grpc is {use_grpc!r}: MOSAIC's daemon then started the worker without its "
            "RegisterWorker handshake; this daemon's runs always register with it (drop the key or set it true)",
            field="metadata.worker.use_grpc",
            source=SOURCE,
        )
    return described


def _modules(module: Any, top_arguments: Any) -> tuple[tuple[str, str], ...]:
    """``metadata.worker.module`` and the module of the top-level ``arguments``, which MOSAIC's
    launcher ran as ``entry_point -m MODULE``: nothing else may be there."""
    named = _text(module, "metadata.worker.module")
    given = _strings(top_arguments or [], "arguments")
    if given and (len(given) != 2 or given[0] != "-m"):
        raise ConfigError(
            f"arguments {list(given)!r}: MOSAIC ran entry_point with them; this daemon runs the worker's "
            'own command: give ["-m", "<the worker module>"] or nothing here, and the worker\'s flags in '
            "metadata.worker.arguments",
            field="arguments",
            source=SOURCE,
        )
    found = (("metadata.worker.module", named), ("arguments", given[1] if given else None))
    return tuple((where, value) for where, value in found if value)


def check_environment(value: Any) -> dict[str, str]:
    """``environment``: names a process environment can hold, string values, none of the host's own."""
    env = _object(value, "environment")
    if len(env) > MAX_ENV_ITEMS:
        raise ConfigError(f"environment has {len(env)} variables; at most {MAX_ENV_ITEMS}", field="environment")
    for name, text in env.items():
        where = f"environment.{name}"
        if not ENV_NAME.fullmatch(name):
            raise ConfigError(
                f"environment: {name!r} is not a variable name (letters, digits and _, not starting with a digit)",
                field="environment",
                source=SOURCE,
            )
        if not isinstance(text, str):
            raise ConfigError(
                f"{where} must be a string (MOSAIC's TrainRunConfig: string values), got {type(text).__name__}",
                field=where,
                source=SOURCE,
            )
        if len(text) > MAX_ENV_VALUE:
            raise ConfigError(f"{where} is {len(text):,} characters; at most {MAX_ENV_VALUE:,}", field=where)
        if name in HOST_ENV_NAMES or name.startswith(HOST_ENV_PREFIXES):
            raise ConfigError(
                f"{where}: MOSAIC exported it to the worker; this daemon refuses it, because the host sets it for "
                f"every run or it chooses the code that runs ({', '.join(HOST_ENV_PREFIXES)}*, "
                f"{', '.join(sorted(HOST_ENV_NAMES))})",
                field=where,
                source=SOURCE,
            )
    return dict(env)


def different_interpreter(entry_point: str | None) -> str | None:
    """A note when ``entry_point`` names another Python than the daemon's (MOSAIC ran it)."""
    if entry_point is None or entry_point == sys.executable:
        return None
    return (
        f"entry_point {entry_point}: MOSAIC ran the worker with that program; this daemon runs installed "
        f"workers with its own Python ({sys.executable}) or the worker's own environment"
    )


def _recorded(data: dict[str, Any]) -> dict[str, Any]:
    """The payload as the run's record keeps it: no config (recorded on its own), no arguments
    (their values may hold secrets: the flags passed on are recorded apart), no environment (its
    names are recorded apart, its values nowhere), every secret-named value redacted."""
    kept = {key: value for key, value in data.items() if key not in ("environment", "worker")}
    metadata = dict(kept["metadata"])
    metadata["worker"] = {key: value for key, value in metadata["worker"].items() if key not in ("config", "arguments")}
    kept["metadata"] = metadata
    recorded: dict[str, Any] = redact(kept)
    return recorded


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object, got {type(value).__name__}", field=where, source=SOURCE)
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where} must be a list of strings", field=where, source=SOURCE)
    if len(value) > MAX_ARGUMENTS:
        raise ConfigError(f"{where} has {len(value)} items; at most {MAX_ARGUMENTS}", field=where, source=SOURCE)
    return tuple(value)


def _text(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {type(value).__name__}", field=where, source=SOURCE)
    return value


def _whole(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where} must be a whole number, got {value!r}", field=where, source=SOURCE)
    return value
