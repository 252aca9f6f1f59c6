"""SubmitRun's config: parse, pick the worker, validate against its capabilities and the host.

The config is a worker config (flat, or nested at ``metadata.worker.config``) with one more
optional key, ``worker`` (default ``cleanrl``). :class:`ConfigError` means the request is
malformed (INVALID_ARGUMENT); :class:`PreconditionError` means it is well formed but cannot
run here (FAILED_PRECONDITION), e.g. it asks for a GPU on a host without one.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from mosaic_core.config import WorkerConfig, build_config, parse_json, unwrap_config
from mosaic_core.entrypoints import LoadedEntryPoint
from mosaic_core.errors import ConfigError, MosaicError

DEFAULT_WORKER = "cleanrl"
SOURCE = "config_json"


class PreconditionError(MosaicError):
    """The config is valid but this daemon cannot run it."""


@dataclass(frozen=True)
class Submission:
    worker: str
    config: WorkerConfig
    digest: str

    @property
    def run_id(self) -> str:
        return self.config.run_id


def detect_gpus() -> int:
    """NVIDIA devices visible to this host (no torch import): ``/dev/nvidiaN``, narrowed by
    ``CUDA_VISIBLE_DEVICES``."""
    devices = len(glob.glob("/dev/nvidia[0-9]*"))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip() and not v.strip().startswith("-")]
        devices = min(devices, len(ids))
    return devices


def config_digest(worker: str, config: WorkerConfig) -> str:
    canonical = json.dumps({"worker": worker, **config.to_dict(redacted=False)}, sort_keys=True,
                           separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def parse_submission(config_json: str, run_id: str, workers: list[LoadedEntryPoint], gpus: int) -> Submission:
    """A validated submission, or ConfigError / PreconditionError naming the field."""
    data = parse_json(config_json, "config_json", SOURCE, field="config_json")
    raw = unwrap_config(data, SOURCE)
    worker = raw.pop("worker", None)
    if worker is None and isinstance(data, dict):
        worker = data.get("worker") if isinstance(data.get("worker"), str) else None
    worker = DEFAULT_WORKER if worker is None else worker
    if not isinstance(worker, str) or not worker:
        raise ConfigError(f"worker must be a worker name, got {worker!r}", field="worker", source=SOURCE)
    item = _find_worker(worker, workers)
    config = checked_config(item, raw, run_id)
    check_capabilities(item, config, gpus)
    return Submission(worker=worker, config=config, digest=config_digest(worker, config))


def checked_config(item: LoadedEntryPoint, raw: dict[str, Any], run_id: str) -> WorkerConfig:
    """The config with the worker's and plugins' defaults, validated by the host, the plugins
    and the worker (what ``mosaic run`` checks before it plans)."""
    from mosaic_core.pipeline import worker_option_defaults
    from mosaic_core.plugins import plugin_host
    from mosaic_core.worker import call_optional, load_worker

    worker, host = load_worker(item), plugin_host()
    options = worker_option_defaults(worker)

    def defaults(merged: dict[str, Any]) -> dict[str, Any]:
        return {**host.config_defaults(merged), **(call_optional(worker, "config_defaults", merged, options) or {})}

    config = build_config(raw, source=SOURCE, overrides={"run_id": run_id or None}, generate_run_id=True,
                          defaults=defaults)
    problems = host.validate_config(config) + list(call_optional(worker, "validate", config, options, default=[]) or [])
    if problems:
        raise ConfigError("invalid config: " + "; ".join(problems), source=SOURCE)
    return config


def _find_worker(name: str, workers: list[LoadedEntryPoint]) -> LoadedEntryPoint:
    for item in workers:
        if item.name == name:
            if item.status != "active":
                raise PreconditionError(f"worker {name!r} is installed but {item.status}: {item.error}")
            return item
    installed = ", ".join(i.name for i in workers if i.status == "active") or "none"
    raise ConfigError(f"unknown worker {name!r}; installed workers: {installed}", field="worker", source=SOURCE)


def check_capabilities(item: LoadedEntryPoint, config: WorkerConfig, gpus: int) -> None:
    """Refuse what this host cannot run, from the worker's declared capabilities (and the
    worker's ``gpu_request``, when it has one) and the host-owned trainer-protocol keys."""
    from mosaic_core.worker import call_optional, load_worker

    name, caps, extras = item.name, item.obj.capabilities, config.extras
    if caps.requires_gpu and gpus == 0:
        raise PreconditionError(f"worker {name!r} requires a GPU and this host has none")
    asked = call_optional(load_worker(item), "gpu_request", config)
    if asked and gpus == 0:
        raise PreconditionError(f"{asked} asks for a GPU and this host has none; set it to false "
                                "or submit to a daemon on a GPU host")
    if extras.get("supports_pause") is True and not caps.supports_pause_resume:
        raise PreconditionError(f"extras.supports_pause is true but worker {name!r} cannot pause")
    if extras.get("supports_checkpoint") is True and not caps.supports_checkpointing:
        raise PreconditionError(f"the config needs checkpoints but worker {name!r} does not support them")
