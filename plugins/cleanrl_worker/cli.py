"""``python -m cleanrl_worker.cli`` and ``cleanrl-worker``: the same as ``mosaic run --worker
cleanrl`` (every flag, the same pipeline in :mod:`mosaic_core.pipeline`)."""

from __future__ import annotations

import sys

from mosaic_core import worker_main as pipeline_main

WORKER = "cleanrl"


def main(argv: list[str] | None = None, prog: str = "cleanrl-worker") -> int:
    return pipeline_main(WORKER, argv, prog)


if __name__ == "__main__":
    sys.exit(main(prog="python -m cleanrl_worker.cli"))
