"""``python -m xuance_worker.cli --config worker.json``, as the original MOSAIC's daemon spawns the
XuanCe worker: the same as ``mosaic run --worker xuance`` (every flag, ``--dry-run --emit-summary``
and ``--grpc`` included; the same pipeline, :mod:`mosaic_core.pipeline`). The training process
runs in the worker's own environment (``mosaic workers install xuance``)."""

from __future__ import annotations

import sys

from mosaic_core import worker_main as pipeline_main

WORKER = "xuance"


def main(argv: list[str] | None = None, prog: str = "python -m xuance_worker.cli") -> int:
    return pipeline_main(WORKER, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
