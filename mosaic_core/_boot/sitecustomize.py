"""Every Python process of a MOSAIC run imports this (the host puts this folder on the
training process's PYTHONPATH): it arms MOSAIC's patch points to install on the first import
of gymnasium or a TensorBoard writer (env processes started with ``spawn`` included), then
runs the ``sitecustomize`` this one shadows, if there is one."""

import os
import sys


def _arm() -> None:
    if not os.environ.get("MOSAIC_CHILD"):
        return
    try:
        from mosaic_core._patchpoints import install_lazily

        install_lazily()
    except Exception as exc:  # never stop a process of the run from starting
        print(f"mosaic: could not arm patch points: {type(exc).__name__}: {exc}", file=sys.stderr)


def _chain() -> None:
    """Run the next ``sitecustomize`` on sys.path (e.g. a distribution's or a venv's own)."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or os.path.abspath(spec.origin or "") == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_arm()
_chain()
