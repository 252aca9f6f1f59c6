"""The CleanRL worker: runs CleanRL single-file algorithms, unmodified, under supervision.

Python facade (MOSAIC's documented names): :mod:`mosaic_cleanrl.config`,
:mod:`mosaic_cleanrl.runtime`, :mod:`mosaic_cleanrl.telemetry`, :mod:`mosaic_cleanrl.analytics`,
:mod:`mosaic_cleanrl.cli` and :func:`get_worker_metadata` here. Importing the package imports
nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mosaic_cleanrl.metadata import VERSION as __version__

__all__ = ["__version__", "get_worker_metadata"]

if TYPE_CHECKING:
    from mosaic_core import WorkerCapabilities, WorkerMetadata


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    """MOSAIC's shape: ``(WorkerMetadata, WorkerCapabilities)``. The host itself reads the
    one descriptor, :data:`mosaic_cleanrl.metadata.METADATA`, from the ``mosaic_workers`` hook
    of its plugin module (:mod:`mosaic_cleanrl.plugin`)."""
    from mosaic_cleanrl.metadata import METADATA

    return METADATA, METADATA.capabilities
