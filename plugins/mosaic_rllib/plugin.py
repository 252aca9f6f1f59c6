"""The RLlib worker's plugin module: it provides the worker (its descriptor,
:data:`mosaic_rllib.metadata.METADATA`; discovery imports nothing else of the worker)."""

from __future__ import annotations

from mosaic_core import hookimpl


@hookimpl
def mosaic_workers():
    from mosaic_rllib.metadata import METADATA

    return [METADATA]
