"""Re-installs MOSAIC's patch points in spawned processes of a run (e.g. AsyncVectorEnv
workers started with ``spawn``). The host puts this folder on the child's PYTHONPATH."""

import os

if os.environ.get("MOSAIC_CHILD"):
    try:
        from mosaic_core.child import install

        install()
    except Exception as exc:  # never stop a worker process from starting
        import sys

        print(f"mosaic: could not install patch points: {exc}", file=sys.stderr)
