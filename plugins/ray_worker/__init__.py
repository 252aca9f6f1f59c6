"""MOSAIC's RLlib worker: Ray RLlib (PPO, APPO, IMPALA, DQN, SAC; new API stack) under the host's
supervision, with RLlib imported inside the training process (:mod:`ray_worker.train`).

The host imports only this package (:func:`get_worker_metadata`, its ``mosaic.workers`` entry point), :mod:`ray_worker.metadata`, :mod:`ray_worker.worker` and
:mod:`ray_worker.catalog` (no ray, torch or gymnasium 1.x): the training process runs in the
worker's own environment (``mosaic workers install rllib``)."""

from ray_worker.metadata import VERSION as __version__

__all__ = ["__version__", "get_worker_metadata"]


def get_worker_metadata():
    """This worker's metadata (its ``mosaic.workers`` entry point): import-light, as discovery needs."""
    from ray_worker.metadata import METADATA

    return METADATA
