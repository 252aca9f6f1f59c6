"""MOSAIC's RLlib worker: Ray RLlib (PPO, APPO, IMPALA, DQN, SAC; new API stack) under the host's
supervision, with RLlib imported inside the training process (:mod:`mosaic_rllib.train`).

The host imports only :mod:`mosaic_rllib.plugin`, :mod:`mosaic_rllib.metadata`, :mod:`mosaic_rllib.worker` and
:mod:`mosaic_rllib.catalog` (no ray, torch or gymnasium 1.x): the training process runs in the
worker's own environment (``mosaic workers install rllib``)."""

__version__ = "0.1.0"
