"""MOSAIC's XuanCe worker: multi-agent training (MAPPO, QMIX, MADDPG, VDN, COMA, IPPO, IQL) on
PettingZoo, with XuanCe imported inside the training process (:mod:`xuance_worker.train`).

The host imports only this package (:func:`get_worker_metadata`, its ``mosaic.workers`` entry point), :mod:`xuance_worker.metadata`, :mod:`xuance_worker.worker` and
:mod:`xuance_worker.catalog` (no xuance, torch or pettingzoo): the training process runs in the
worker's own environment (``mosaic workers install xuance``)."""

from xuance_worker.metadata import VERSION as __version__

__all__ = ["__version__", "get_worker_metadata"]


def get_worker_metadata():
    """This worker's metadata (its ``mosaic.workers`` entry point): import-light, as discovery needs."""
    from xuance_worker.metadata import METADATA

    return METADATA
