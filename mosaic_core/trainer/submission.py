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

from mosaic_core.capabilities import WorkerMetadata
from mosaic_core.config import WorkerConfig, build_config, unwrap_config
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


def gpu_request(extras: dict[str, Any]) -> str | None:
    """The extras key that asks for a GPU, or None."""
    params = extras.get("algo_params") if isinstance(extras.get("algo_params"), dict) else {}
    for where, values in (("extras", extras), ("extras.algo_params", params)):
        if values.get("cuda") is True:
            return f"{where}.cuda"
        device = values.get("device")
        if isinstance(device, str) and device.lower().startswith(("cuda", "gpu")):
            return f"{where}.device"
        for key in ("gpu", "gpus", "num_gpus", "requires_gpu"):
            value = values.get(key)
            if value is True or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
                return f"{where}.{key}"
    return None


def config_digest(worker: str, config: WorkerConfig) -> str:
    canonical = json.dumps({"worker": worker, **config.to_dict(redacted=False)}, sort_keys=True,
                           separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def parse_submission(config_json: str, run_id: str, workers: list[LoadedEntryPoint], gpus: int) -> Submission:
    """A validated submission, or ConfigError / PreconditionError naming the field."""
    try:
        data = json.loads(config_json)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                          field="config_json") from None
    raw = unwrap_config(data, SOURCE)
    worker = raw.pop("worker", None)
    if worker is None and isinstance(data, dict):
        worker = data.get("worker") if isinstance(data.get("worker"), str) else None
    worker = DEFAULT_WORKER if worker is None else worker
    if not isinstance(worker, str) or not worker:
        raise ConfigError(f"worker must be a worker name, got {worker!r}", field="worker", source=SOURCE)
    config = build_config(raw, source=SOURCE, overrides={"run_id": run_id or None}, generate_run_id=True)
    metadata = _find_worker(worker, workers)
    check_capabilities(worker, metadata, config, gpus)
    return Submission(worker=worker, config=config, digest=config_digest(worker, config))


def _find_worker(name: str, workers: list[LoadedEntryPoint]) -> WorkerMetadata:
    for item in workers:
        if item.name == name:
            if item.status != "active":
                raise PreconditionError(f"worker {name!r} is installed but {item.status}: {item.error}")
            return item.obj
    installed = ", ".join(i.name for i in workers if i.status == "active") or "none"
    raise ConfigError(f"unknown worker {name!r}; installed workers: {installed}", field="worker", source=SOURCE)


def check_capabilities(name: str, metadata: WorkerMetadata, config: WorkerConfig, gpus: int) -> None:
    caps, extras = metadata.capabilities, config.extras
    if caps.requires_gpu and gpus == 0:
        raise PreconditionError(f"worker {name!r} requires a GPU and this host has none")
    asked = gpu_request(extras)
    if asked and gpus == 0:
        raise PreconditionError(f"{asked} asks for a GPU and this host has none; set it to false "
                                "or submit to a daemon on a GPU host")
    if extras.get("supports_pause") is True and not caps.supports_pause_resume:
        raise PreconditionError(f"extras.supports_pause is true but worker {name!r} cannot pause")
    wants_checkpoint = extras.get("mode") == "resume_training" or extras.get("supports_checkpoint") is True
    if wants_checkpoint and not caps.supports_checkpointing:
        raise PreconditionError(f"the config needs checkpoints but worker {name!r} does not support them")
