"""The original MOSAIC's runtime of the RLlib worker (``ray_worker.runtime``):
``RayWorkerRuntime(config).run()``, through the host's one pipeline
(:class:`mosaic_core.facade.WorkerRuntime`): the same config checks, plan, supervision, events
and manifest as ``mosaic run --worker rllib``, the Ray driver in the worker's own environment (Ray
imported there, never here). ``run()`` returns ``status`` ("dry-run", "completed", "failed" or
"cancelled"), the resolved ``config`` and ``extras``, the ``run_dir`` and the plan (``launch``),
not RLlib's last result: that is in the run's events and TensorBoard files."""

from __future__ import annotations

from mosaic_core import WorkerRuntime

__all__ = ["RayWorkerRuntime"]


class RayWorkerRuntime(WorkerRuntime):
    worker = "rllib"
