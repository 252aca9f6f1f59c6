"""MOSAIC's documented ``LifecycleEmitter`` (``cleanrl_worker.telemetry``): lifecycle JSON lines
with ``event``, ``run_id``, ``timestamp`` and ``payload`` (plus our ``seq``): the host's
:class:`mosaic_core.facade.LifecycleEmitter`, one implementation for every worker (redaction,
one terminal event)."""

from __future__ import annotations

from mosaic_core import LifecycleEmitter

__all__ = ["LifecycleEmitter"]
