"""``manifest.json``: the host's header (run id, worker, status, ``agent_id`` when given…), the ``plugins`` report
(which took part, which failed to load, every hook failure) and the sections plugins
contribute through ``mosaic_build_manifest``; redacted, written atomically at the end of every
run by :func:`record_run_end`, with the plugins' fields for the terminal event
(``mosaic_terminal_payload``)."""

from __future__ import annotations

import time
from typing import Any

from mosaic_core.config import redact, run_metadata
from mosaic_core.files import write_json_atomic
from mosaic_core.plugins import PluginHost
from mosaic_core.runs import MANIFEST_SCHEMA, OLD_MANIFEST_SCHEMAS, RunContext

__all__ = [
    "HOST_SECTIONS",
    "HOST_TERMINAL_FIELDS",
    "MANIFEST_SCHEMA",
    "OLD_MANIFEST_SCHEMAS",
    "manifest_document",
    "record_run_end",
]

HOST_SECTIONS = frozenset(
    {"schema", "run_id", "worker", "status", "algo", "env_id", "agent_id", "written_at", "plugins"}
)
# What the host itself may put in a terminal event's payload: no plugin sets these.
HOST_TERMINAL_FIELDS = frozenset(
    {
        "returncode",
        "logs",
        "error",
        "error_kind",
        "stderr_tail",
        "reason",
        "resumable",
        "from_step",
        "checkpoint",
        "manifest_error",
        "host_lost",
    }
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


def record_run_end(
    run: RunContext, host: PluginHost, status: str, payload: dict[str, Any], started: bool = True
) -> dict[str, Any]:
    """Put a run's end on disk, the same way whoever ends it (the supervisor, a launcher's caller,
    a facade): the plugins' manifest sections, ``mosaic_run_finished`` (``started``: for a run whose
    ``mosaic_run_started`` ran), the plugins' terminal fields, then ``manifest.json`` (its report
    names every failure of those hooks). Returns the terminal event's payload: the caller's
    ``payload`` with the plugins' fields beside it (a write error as ``manifest_error``)."""
    sections = host.build_manifest(run, status, reserved=HOST_SECTIONS)
    if started:
        host.run_finished(run, status)
    reserved = HOST_TERMINAL_FIELDS | set(payload)
    fields = host.terminal_payload(run, status, manifest_document(run, host, status, sections), reserved)
    ended = {**fields, **payload}
    try:
        write_json_atomic(run.directory.manifest, manifest_document(run, host, status, sections))
    except OSError as exc:
        ended.setdefault("manifest_error", str(exc))
    return ended
