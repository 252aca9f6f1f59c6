"""MOSAIC's XuanCe worker: multi-agent training (MAPPO, QMIX, MADDPG, VDN, COMA, IPPO, IQL) on
PettingZoo, with XuanCe imported inside the training process (:mod:`xuance_worker.train`).

The host imports only :mod:`xuance_worker.metadata`, :mod:`xuance_worker.worker` and
:mod:`xuance_worker.catalog` (no xuance, torch or pettingzoo): the training process runs in the
worker's own environment (``mosaic workers install xuance``)."""

__version__ = "0.1.0"
