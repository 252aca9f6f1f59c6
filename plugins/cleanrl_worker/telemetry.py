"""MOSAIC's documented ``LifecycleEmitter`` (``cleanrl_worker.telemetry``): lifecycle JSON lines
with ``event``, ``run_id``, ``timestamp`` and ``payload`` (plus our ``seq``), over the host's
:class:`mosaic_core.events.EventEmitter` (one implementation: redaction, one terminal event)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from mosaic_core import EventEmitter

__all__ = ["LifecycleEmitter"]


class LifecycleEmitter(EventEmitter):
    """``emit(event, payload)`` or one method per event; writes to ``stream`` (stdout by
    default) and, when given, appends to ``log_path`` (a run's ``events.jsonl``)."""

    def __init__(self, run_id: str, stream: IO[str] | None = None, log_path: str | Path | None = None):
        super().__init__(run_id, Path(log_path) if log_path else None, stream=stream)

    def run_started(self, payload: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return self.emit("run_started", payload)

    def heartbeat(self, payload: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return self.emit("heartbeat", payload)

    def run_completed(self, payload: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return self.emit("run_completed", payload)

    def run_failed(self, payload: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return self.emit("run_failed", payload)

    def run_cancelled(self, payload: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return self.emit("run_cancelled", payload)
