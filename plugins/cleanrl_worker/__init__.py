"""The CleanRL worker: runs CleanRL single-file algorithms, unmodified, under supervision.

Python facade (MOSAIC's documented names): :mod:`cleanrl_worker.config`,
:mod:`cleanrl_worker.runtime`, :mod:`cleanrl_worker.telemetry`, :mod:`cleanrl_worker.analytics`,
:mod:`cleanrl_worker.cli` and :func:`get_worker_metadata` here. Importing the package imports
nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cleanrl_worker.metadata import VERSION as __version__

__all__ = ["__version__", "get_worker_metadata"]

if TYPE_CHECKING:
    from mosaic_core import WorkerCapabilities, WorkerMetadata


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    """MOSAIC's shape: ``(WorkerMetadata, WorkerCapabilities)``. The host itself reads the
    one descriptor, :data:`cleanrl_worker.metadata.METADATA`, from the ``mosaic_workers`` hook
    of its plugin module (:mod:`cleanrl_worker.plugin`)."""
    from cleanrl_worker.metadata import METADATA

    return METADATA, METADATA.capabilities
