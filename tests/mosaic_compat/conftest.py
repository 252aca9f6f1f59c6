"""The original MOSAIC's interface, item by item (``../shared/seeds/``, ``docs/coming-from-mosaic.md``):
each test uses what a user of the original types, imports, sends or reads, through the real path
(``python -m cleanrl_worker.cli`` as a subprocess, a daemon on loopback with the owner's token,
files read back from the run directory)."""
