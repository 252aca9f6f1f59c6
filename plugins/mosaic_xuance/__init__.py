"""MOSAIC's XuanCe worker: multi-agent training (MAPPO, QMIX, MADDPG, VDN, COMA, IPPO, IQL) on
PettingZoo, with XuanCe imported inside the training process (:mod:`mosaic_xuance.train`).

The host imports only :mod:`mosaic_xuance.plugin`, :mod:`mosaic_xuance.metadata`, :mod:`mosaic_xuance.worker` and
:mod:`mosaic_xuance.catalog` (no xuance, torch or pettingzoo): the training process runs in the
worker's own environment (``mosaic workers install xuance``)."""

__version__ = "0.1.0"
