"""The original MOSAIC's runtime of the XuanCe worker (``xuance_worker.runtime``):
``XuanCeWorkerRuntime(config, dry_run=...).run()`` returns a ``XuanCeRuntimeSummary``, through
the host's one pipeline (:class:`mosaic_core.facade.WorkerRuntime`): the same config checks,
plan, supervision, events and manifest as ``mosaic run --worker xuance``, the training process
in the worker's own environment (XuanCe imported there, never here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mosaic_core import Prepared, WorkerRuntime
from mosaic_core.toolkit import manifest_of
from xuance_worker.worker import mode_of

__all__ = ["XuanCeRuntimeSummary", "XuanCeWorkerRuntime"]


@dataclass(frozen=True)
class XuanCeRuntimeSummary:
    """The original's summary fields: ``status`` ("dry-run", "completed", "failed" or
    "cancelled"), ``method`` (the algorithm), ``env_id`` (``FAMILY/SCENARIO``), ``runner_type``
    (XuanCe's runner class), ``config`` (redacted), ``mode`` and ``analytics_manifest`` (the run's
    manifest once written)."""

    status: str
    method: str
    env_id: str
    runner_type: str
    config: dict[str, Any]
    mode: str | None = None
    analytics_manifest: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class XuanCeWorkerRuntime(WorkerRuntime):
    worker = "xuance"

    def summary(self, status: str, prepared: Prepared) -> XuanCeRuntimeSummary:
        planned = prepared.launch.summary.get("xuance", {})
        runner = planned.get("runner")
        manifest = manifest_of(prepared.run.run_dir)
        return XuanCeRuntimeSummary(
            status=status,
            method=prepared.config.algo,
            env_id=prepared.config.env_id,
            runner_type=f"Runner{runner}" if runner else "unknown",
            config=prepared.config.to_dict(),
            mode=mode_of(prepared.config.extras),
            analytics_manifest=str(manifest) if manifest.is_file() else None,
        )
