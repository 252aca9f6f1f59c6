"""The bundled algorithms' stop that keeps the model: the core's
:class:`mosaic_core.contract.StopOnSignal` (SIGTERM, SIGUSR1, SIGINT)."""

from mosaic_core.contract import StopOnSignal

__all__ = ["StopOnSignal"]
