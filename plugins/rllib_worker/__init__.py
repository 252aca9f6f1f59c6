"""MOSAIC's RLlib worker: Ray RLlib (PPO, APPO, IMPALA, DQN, SAC; new API stack) under the host's
supervision, with RLlib imported inside the training process (:mod:`rllib_worker.train`).

The host imports only :mod:`rllib_worker.metadata`, :mod:`rllib_worker.worker` and
:mod:`rllib_worker.catalog` (no ray, torch or gymnasium 1.x): the training process runs in the
worker's own environment (``mosaic workers install rllib``)."""

__version__ = "0.1.0"
