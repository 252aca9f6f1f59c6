"""The CleanRL worker: runs CleanRL single-file algorithms, unmodified, under supervision.

Python facade (MOSAIC's documented names): :mod:`cleanrl_worker.config`,
:mod:`cleanrl_worker.runtime`, :mod:`cleanrl_worker.telemetry`, :mod:`cleanrl_worker.analytics`,
:mod:`cleanrl_worker.cli` and :func:`get_worker_metadata` here. Importing the package imports
nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from mosaic_core.capabilities import WorkerCapabilities, WorkerMetadata


def get_worker_metadata() -> tuple["WorkerMetadata", "WorkerCapabilities"]:
    """MOSAIC's shape: ``(WorkerMetadata, WorkerCapabilities)`` (the ``mosaic.workers`` entry
    point, :func:`cleanrl_worker.metadata.get_worker_metadata`, returns the metadata alone)."""
    from cleanrl_worker.metadata import get_worker_metadata as metadata

    found = metadata()
    return found, found.capabilities
