"""``manifest.json``: the host's header (run id, worker, status, ``agent_id`` when given…), the ``plugins`` report
(which took part, which failed to load, every hook failure) and the sections plugins
contribute through ``mosaic_build_manifest``; redacted, written atomically by the caller."""

from __future__ import annotations

import time
from typing import Any

from mosaic_core.config import redact, run_metadata
from mosaic_core.plugins import PluginHost
from mosaic_core.runs import MANIFEST_SCHEMA, OLD_MANIFEST_SCHEMAS, RunContext

__all__ = ["HOST_SECTIONS", "MANIFEST_SCHEMA", "OLD_MANIFEST_SCHEMAS", "manifest_document"]

HOST_SECTIONS = frozenset(
    {"schema", "run_id", "worker", "status", "algo", "env_id", "agent_id", "written_at", "plugins"}
)


def manifest_document(run: RunContext, host: PluginHost, status: str, sections: dict[str, Any]) -> dict[str, Any]:
    """``manifest.json``: the host's header, the plugins' report and their sections, redacted."""
    own = host.worker_hooks.get(run.worker)  # the run's worker's run hooks (worker:NAME), when it has some
    report = {
        "active": sorted(i.name for i in [*host.loaded, *([own] if own else [])] if i.status == "active"),
        "failed_to_load": [
            {"name": i.name, "distribution": i.distribution, "version": i.version, "error": i.error}
            for i in host.load_failures()
        ],
        "hook_failures": host.failure_records(),
    }
    manifest: dict[str, Any] = redact(
        {
            "schema": MANIFEST_SCHEMA,
            "run_id": run.run_id,
            "worker": run.worker,
            "status": status,
            "algo": run.config.algo,
            "env_id": run.config.env_id,
            **run_metadata(run.config),
            "written_at": time.time(),
            "plugins": report,
            **sections,
        }
    )
    return manifest
