"""The original MOSAIC's lifecycle lines for the RLlib worker (``ray_worker.telemetry``):
``LifecycleEmitter`` writes ``event``, ``run_id``, ``timestamp`` and ``payload`` (plus our
``seq``), the host's :class:`mosaic_core.facade.LifecycleEmitter`: one implementation for every
worker. A run's own lines come from the host's supervisor; its metrics from the driver through
:func:`mosaic_core.child.report_scalar` (:mod:`ray_worker.report`)."""

from __future__ import annotations

from mosaic_core import LifecycleEmitter

__all__ = ["LifecycleEmitter"]
