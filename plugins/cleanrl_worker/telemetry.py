"""MOSAIC's documented ``LifecycleEmitter`` (``cleanrl_worker.telemetry``): lifecycle JSON lines
with ``event``, ``run_id``, ``timestamp`` and ``payload`` (plus our ``seq``), over the host's
:class:`mosaic_core.events.EventEmitter` (one implementation: redaction, one terminal event).

Each method takes MOSAIC's ``(run_id, payload)`` — ``LifecycleEmitter().run_started(run_id,
{...})`` as MOSAIC's CLI calls it — or ``(payload)`` for an emitter made for one run. An emitter
writes one run's stream: a call naming another run is a ValueError.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from mosaic_core import EventEmitter

__all__ = ["LifecycleEmitter"]

Payload = dict[str, Any] | None


class LifecycleEmitter(EventEmitter):
    """``emit(event, payload)`` or one method per event; writes to ``stream`` (stdout by
    default) and, when given, appends to ``log_path`` (a run's ``events.jsonl``). ``run_id``
    may wait for the first call that names it."""

    def __init__(self, run_id: str | None = None, stream: IO[str] | None = None, log_path: str | Path | None = None):
        super().__init__(run_id or "", Path(log_path) if log_path else None, stream=stream)

    def _emit(self, event: str, run_id: str | Payload, payload: Payload) -> dict[str, Any] | None:
        if not isinstance(run_id, str):  # (payload): this emitter's run
            run_id, payload = None, run_id
        if run_id is not None:
            if self.run_id and run_id != self.run_id:
                raise ValueError(f"this LifecycleEmitter writes run {self.run_id}'s events, not {run_id}'s")
            self.run_id = run_id
        if not self.run_id:
            raise ValueError(f"{event}: name the run (LifecycleEmitter(run_id) or {event}(run_id, payload))")
        return self.emit(event, payload)

    def run_started(self, run_id: str | Payload = None, payload: Payload = None) -> dict[str, Any] | None:
        return self._emit("run_started", run_id, payload)

    def heartbeat(self, run_id: str | Payload = None, payload: Payload = None) -> dict[str, Any] | None:
        return self._emit("heartbeat", run_id, payload)

    def run_completed(self, run_id: str | Payload = None, payload: Payload = None) -> dict[str, Any] | None:
        return self._emit("run_completed", run_id, payload)

    def run_failed(self, run_id: str | Payload = None, payload: Payload = None) -> dict[str, Any] | None:
        return self._emit("run_failed", run_id, payload)

    def run_cancelled(self, run_id: str | Payload = None, payload: Payload = None) -> dict[str, Any] | None:
        return self._emit("run_cancelled", run_id, payload)
