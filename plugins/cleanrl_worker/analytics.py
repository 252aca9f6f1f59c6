"""MOSAIC's documented ``build_manifest`` (``cleanrl_worker.analytics``): a run's
``manifest.json`` from its config (extras) and run directory, written by the same code as at
the end of every run (the plugins' ``mosaic_build_manifest`` sections under the host's header)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic_core import (
    HOST_SECTIONS,
    RunContext,
    RunDirectory,
    WorkerConfig,
    build_config,
    manifest_document,
    plugin_host,
)
from mosaic_core.files import write_json_atomic

__all__ = ["build_manifest"]


def build_manifest(
    run_dir: str | Path, config: WorkerConfig | dict[str, Any], status: str = "completed", worker: str = "cleanrl"
) -> dict[str, Any]:
    """Write and return ``<run_dir>/manifest.json``. ``config`` is the run's config (or its
    mapping); a bare extras mapping is accepted too, for a run directory made elsewhere."""
    run_dir = Path(run_dir).absolute()
    if not isinstance(config, WorkerConfig):
        data = dict(config)
        if not {"algo", "env_id", "total_timesteps"} & set(data):  # just the extras
            data = {"algo": "unknown", "env_id": "unknown", "total_timesteps": 1, "extras": data}
        config = build_config({"run_id": run_dir.name, **data})
    run = RunContext(config=config, directory=RunDirectory(run_dir.parent, run_dir.name), worker=worker)
    host = plugin_host()
    document = manifest_document(run, host, status, host.build_manifest(run, status, reserved=HOST_SECTIONS))
    write_json_atomic(run.directory.manifest, document)
    return document
